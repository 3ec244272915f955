/* SPDX-License-Identifier: MIT */
/* malloc.c - malloc family hooks: forward to the real function and report the result when host allocations
 * are wanted. Safe before main(), inside dlsym (a static pool free() ignores) and on any thread; sp_mem_self
 * keeps stepprof's own out. Off: one compare and a tail call (no frame pointers here for that). */
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
} real_alloc;

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
	real_alloc.resolving = 1;
	real_alloc.malloc = dlsym(RTLD_NEXT, "malloc");
	real_alloc.calloc = dlsym(RTLD_NEXT, "calloc");
	real_alloc.realloc = dlsym(RTLD_NEXT, "realloc");
	real_alloc.free = dlsym(RTLD_NEXT, "free");
	real_alloc.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	real_alloc.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	real_alloc.memalign = dlsym(RTLD_NEXT, "memalign");
	real_alloc.valloc = dlsym(RTLD_NEXT, "valloc");
#if defined(__x86_64__)
	/* glibc's free: the chunk size before each block is the free filter, decided by what the functions do
	 * (memory.h), not by name; other allocators keep the bitmap. 64-bit x86 only (aarch64 MTE tags memory). */
	size_t (*usable)(void *) = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
	real_alloc.glibc_sizes =
		sp_mem_glibc_object(real_alloc.malloc, real_alloc.free, usable) &&
			sp_mem_glibc_behaviour(real_alloc.malloc, real_alloc.free, usable);
#endif
	real_alloc.resolving = 0;
}

/* Reports an allocation of size >= sp_host_min_bytes (callers test that: one comparison for an
 * allocation below the threshold, or for any when tracking is off). Out of line, so that the
 * wrappers' usual path is a test and a tail call. */
static __attribute__((noinline)) void *report_big(void *p, size_t size)
{
	if (p && !sp_mem_self) {
		sp_mem_self = 1;
		if (!real_alloc.glibc_sizes)
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
	if (real_alloc.glibc_sizes)
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
	if (real_alloc.resolving)
		return pool_alloc(n);
	resolve();
	return report(real_alloc.malloc(n), n);
}

SP_EXPORT void *malloc(size_t n)
{
	if (__builtin_expect(!real_alloc.malloc, 0))
		return malloc_first(n);
	if (__builtin_expect(n < sp_host_min_bytes, 1))
		return real_alloc.malloc(n); /* a tail call */
	return report_big(real_alloc.malloc(n), n);
}

SP_EXPORT void *calloc(size_t k, size_t n)
{
	if (!real_alloc.calloc) {
		if (real_alloc.resolving)
			return k && n > SIZE_MAX / k ? NULL : pool_alloc(k * n);
		resolve();
	}
	return report(real_alloc.calloc(k, n), k * n);
}

SP_EXPORT void *realloc(void *p, size_t n)
{
	if (in_pool(p)) { /* grown out of the bootstrap pool: copy what the block holds to real memory */
		void *q = malloc(n);
		if (q)
			memcpy(q, p, n < pool_size(p) ? n : pool_size(p));
		return q;
	}
	if (!real_alloc.realloc)
		resolve();
	/* asked before the call (after it p's chunk may be gone), reported after it: a failed
	 * realloc leaves p allocated and the accounting unchanged; realloc(p, 0) returning NULL has
	 * released p (glibc) */
	int rec = free_needs_report(p);
	void *q = real_alloc.realloc(p, n);
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
	if (!real_alloc.free)
		resolve();
	report_free(p);
	real_alloc.free(p); /* free(NULL) is the real one's to ignore */
}

SP_EXPORT void free(void *p)
{
	/* tracking off: two loads, three comparisons and a tail call; on, for a block never recorded,
	 * the chunk size's load (glibc reads that line next anyway) and a comparison more */
	if (__builtin_expect(real_alloc.free && !in_pool(p) && !free_needs_report(p), 1))
		real_alloc.free(p);
	else
		free_slow(p);
}

SP_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (!real_alloc.posix_memalign)
		resolve();
	int r = real_alloc.posix_memalign(out, align, n);
	if (r == 0)
		report(*out, n);
	return r;
}

SP_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!real_alloc.aligned_alloc)
		resolve();
	return report(real_alloc.aligned_alloc(align, n), n);
}

SP_EXPORT void *memalign(size_t align, size_t n)
{
	if (!real_alloc.memalign)
		resolve();
	return report(real_alloc.memalign(align, n), n);
}

SP_EXPORT void *valloc(size_t n)
{
	if (!real_alloc.valloc)
		resolve();
	return report(real_alloc.valloc(n), n);
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
