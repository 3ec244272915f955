/* SPDX-License-Identifier: MIT */
/* malloc.c - malloc family hooks. Each wrapper forwards to the real function (resolved with
 * RTLD_NEXT on first use) and, when the collector wants host allocations, reports the result.
 * Safe before main(), inside dlsym (which calls calloc: served from a static pool that free()
 * recognises and ignores) and on every thread, CUPTI's included; the per-thread sp_mem_self keeps
 * stepprof's own allocations out (the collector's inside a report, the writer thread's, CUPTI
 * activity buffers). When host tracking is off a call costs one comparison and a
 * tail call to the real function (the file is built without frame pointers for that). */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include "collector/collector.h"

#define SP_EXPORT __attribute__((visibility("default")))

static struct {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	int resolving;               /* inside resolve(): dlsym's allocations come from the pool */
	int glibc_sizes;             /* the real free is glibc's: a block's chunk size precedes it */
} R;

static _Alignas(16) char pool[4096]; /* for dlsym's calloc during resolve() */
static size_t pool_used;

static int in_pool(const void *p)
{
	return (uintptr_t)p - (uintptr_t)pool < sizeof pool; /* one comparison */
}

/* A pool block: 16 bytes holding its size, then the block (16-byte aligned). NULL once spent. */
static void *pool_alloc(size_t n)
{
	size_t need = 16 + ((n + 15) & ~(size_t)15);
	if (n > sizeof pool || pool_used + need > sizeof pool)
		return NULL;
	char *p = pool + pool_used;
	pool_used += need;
	*(size_t *)p = n;
	return p + 16; /* the pool is zeroed static memory: fine for calloc */
}

/* The size a pool block was allocated with. This function can't fail. */
static size_t pool_size(const void *p)
{
	return *(const size_t *)((const char *)p - 16);
}

/* Resolves every real function at once. This function can't fail (a missing one stays NULL). */
static void resolve(void)
{
	R.resolving = 1;
	R.malloc = dlsym(RTLD_NEXT, "malloc");
	R.calloc = dlsym(RTLD_NEXT, "calloc");
	R.realloc = dlsym(RTLD_NEXT, "realloc");
	R.free = dlsym(RTLD_NEXT, "free");
	R.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	R.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	R.memalign = dlsym(RTLD_NEXT, "memalign");
	R.valloc = dlsym(RTLD_NEXT, "valloc");
#if defined(__x86_64__)
	/* glibc's free: the chunk size before each block is the free filter. Decided by what the
	 * functions are and do (memory.h), never by the __libc_free symbol, which tcmalloc exports at
	 * its own free; any other allocator (jemalloc, tcmalloc, mimalloc) keeps the bitmap filter.
	 * 64-bit x86 only: the layout is checked for 64-bit, and where glibc tags memory (aarch64
	 * MTE) the word before a block is not the block's to read. */
	size_t (*usable)(void *) = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
	R.glibc_sizes =
		sp_mem_glibc_object(R.malloc, R.free, usable) && sp_mem_glibc_behaviour(R.malloc, R.free, usable);
#endif
	R.resolving = 0;
}

/* Reports an allocation of size >= sp_host_min_bytes (callers test that: one comparison for an
 * allocation below the threshold, or for any when tracking is off). Out of line, so that the
 * wrappers' usual path is a test and a tail call. */
static __attribute__((noinline)) void *report_big(void *p, size_t size)
{
	if (p && !sp_mem_self) {
		sp_mem_self = 1;
		if (!R.glibc_sizes)
			sp_mem_host_mark((uint64_t)(uintptr_t)p); /* maybe_recorded's bitmap */
		sp_collector_host_alloc(p, size);
		sp_mem_self = 0;
	}
	return p;
}

/* report_big if size reaches the threshold; returns p. */
static inline void *report(void *p, size_t size)
{
	return __builtin_expect(size >= sp_host_min_bytes, 0) ? report_big(p, size) : p;
}

/* Hands a release that may have been recorded to the collector (unless stepprof itself releases
 * it). This function can't fail. */
static __attribute__((noinline)) void report_free_slow(void *p)
{
	if (!sp_mem_self) {
		sp_mem_self = 1;
		sp_collector_host_free(p);
		sp_mem_self = 0;
	}
}

/* 0 if p (not NULL) was certainly never recorded. With glibc, from the chunk size in the word
 * before the block (the line free() reads next anyway): a block smaller than the threshold was not
 * recorded, whatever its address. Else one bitmap test (memory.h). */
static inline int maybe_recorded(void *p, size_t min)
{
	if (R.glibc_sizes)
		return (((const size_t *)p)[-1] & ~(size_t)7) >= min; /* 7: glibc's flag bits */
	return sp_mem_host_maybe((uint64_t)(uintptr_t)p);
}

/* 0 if the release of p needs no report: tracking off, NULL, or a block never recorded. */
static inline int free_needs_report(void *p)
{
	size_t min = sp_host_min_bytes; /* volatile: one load */
	return __builtin_expect(min != SIZE_MAX, 0) && p && maybe_recorded(p, min);
}

/* Reports a release if the block may have been recorded: a load and a comparison when tracking
 * is off, and one more load and comparison for a block never recorded. */
static inline void report_free(void *p)
{
	if (free_needs_report(p))
		report_free_slow(p);
}

/* malloc before the real functions are known: from the pool inside resolve() (dlsym allocates;
 * NULL once the pool is spent), else resolves them and goes on as malloc. */
static __attribute__((noinline)) void *malloc_first(size_t n)
{
	if (R.resolving)
		return pool_alloc(n);
	resolve();
	return report(R.malloc(n), n);
}

SP_EXPORT void *malloc(size_t n)
{
	if (__builtin_expect(!R.malloc, 0))
		return malloc_first(n);
	if (__builtin_expect(n < sp_host_min_bytes, 1))
		return R.malloc(n); /* a tail call */
	return report_big(R.malloc(n), n);
}

SP_EXPORT void *calloc(size_t k, size_t n)
{
	if (!R.calloc) {
		if (R.resolving)
			return k && n > SIZE_MAX / k ? NULL : pool_alloc(k * n);
		resolve();
	}
	return report(R.calloc(k, n), k * n);
}

SP_EXPORT void *realloc(void *p, size_t n)
{
	if (in_pool(p)) { /* grown out of the bootstrap pool: copy what the block holds to real memory */
		void *q = malloc(n);
		if (q)
			memcpy(q, p, n < pool_size(p) ? n : pool_size(p));
		return q;
	}
	if (!R.realloc)
		resolve();
	/* asked before the call (after it p's chunk may be gone), reported after it: a failed
	 * realloc leaves p allocated and the accounting unchanged; realloc(p, 0) returning NULL has
	 * released p (glibc) */
	int rec = free_needs_report(p);
	void *q = R.realloc(p, n);
	if (rec && (q || !n))
		report_free_slow(p);
	return report(q, n);
}

/* free() of a block that may have been recorded, before the real functions are known, or of a
 * pool block. */
static __attribute__((noinline)) void free_slow(void *p)
{
	if (in_pool(p))
		return;
	if (!R.free)
		resolve();
	report_free(p);
	R.free(p); /* free(NULL) is the real one's to ignore */
}

SP_EXPORT void free(void *p)
{
	/* tracking off: two loads, three comparisons and a tail call; on, for a block never recorded,
	 * the chunk size's load (glibc reads that line next anyway) and a comparison more */
	if (__builtin_expect(R.free && !in_pool(p) && !free_needs_report(p), 1))
		R.free(p);
	else
		free_slow(p);
}

SP_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (!R.posix_memalign)
		resolve();
	int r = R.posix_memalign(out, align, n);
	if (r == 0)
		report(*out, n);
	return r;
}

SP_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!R.aligned_alloc)
		resolve();
	return report(R.aligned_alloc(align, n), n);
}

SP_EXPORT void *memalign(size_t align, size_t n)
{
	if (!R.memalign)
		resolve();
	return report(R.memalign(align, n), n);
}

SP_EXPORT void *valloc(size_t n)
{
	if (!R.valloc)
		resolve();
	return report(R.valloc(n), n);
}

/* Tells the collector the hooks are the process's allocator (host_malloc can work): they are only
 * when this library comes first (LD_PRELOAD); loaded with dlopen, or after another allocator that
 * the program links, they are never called. Runs at load, before cuInit can reach
 * sp_collector_inject. This function can't fail. */
__attribute__((constructor)) static void announce_hooks(void)
{
	void *(*volatile process_malloc)(size_t) = malloc; /* the first definition, not always this one */
	Dl_info theirs, ours;
	if (dladdr((void *)process_malloc, &theirs) && dladdr((void *)announce_hooks, &ours) &&
	    theirs.dli_fbase == ours.dli_fbase)
		sp_collector_malloc_hooks();
}
