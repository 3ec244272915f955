/* SPDX-License-Identifier: MIT */
/* malloc_mix.h - the allocation mix of the host-tracking benchmarks, one definition for both:
 * malloc_bench.c (through stepprof's malloc hooks, on the GPU machine) and host_track_bench.c
 * (the collector's host-tracking path called directly, without a GPU). Each operation frees one
 * block of a table of live blocks and allocates another (85% malloc, 5% calloc, 5% realloc, 5%
 * posix_memalign; ~95% 16 B .. 4 KiB, ~5% 64 .. 512 KiB), the same sequence in every run. The
 * share of large blocks, the ones a profiler tracks by default, is MIX_LARGE_PERMILLE in the
 * environment (per mille, 0..1000, default 50): a sweep shows what tracking costs per tracked event.
 * A file that must see each release and allocation defines MIX_FREEING(p) and
 * MIX_ALLOCATED(p, n) before including this; by default they are nothing. */
#ifndef SP_MALLOC_MIX_H
#define SP_MALLOC_MIX_H

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MIX_FREEING
#define MIX_FREEING(p) ((void)0)
#endif
#ifndef MIX_ALLOCATED
#define MIX_ALLOCATED(p, n) ((void)0)
#endif

/* The allocator functions the mix calls: the program's own (through a preloaded profiler's hooks,
 * if any) unless a benchmark points them elsewhere (malloc_bench's paired mode: libc's, past the
 * hooks, every other block of steps). */
static struct mix_fns {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
} F = { malloc, calloc, realloc, free, posix_memalign };

#define LARGE_MIN (64u << 10)  /* stepprof's default host_malloc_min */
#define LARGE_SPAN (448u << 10)

static struct {
	void **slot;           /* live blocks (they escape here, so no allocation is optimised away) */
	unsigned nslots;
	uint64_t rng;          /* xorshift64 state: the same sequence in every run */
	unsigned large;        /* per mille of blocks >= LARGE_MIN (mix_read_settings) */
} B = { .rng = 0x9e3779b97f4a7c15ull, .large = 50 };

/* Reads MIX_LARGE_PERMILLE (0..1000) into B.large; exits 2 naming a bad value. */
static void mix_read_settings(void)
{
	const char *v = getenv("MIX_LARGE_PERMILLE");
	if (!v || !*v)
		return;
	char *end;
	unsigned long n = strtoul(v, &end, 10);
	if (*end || n > 1000) {
		fprintf(stderr, "MIX_LARGE_PERMILLE=%s: not an integer 0..1000\n", v);
		exit(2);
	}
	B.large = (unsigned)n;
}

static uint64_t next_rand(void)
{
	B.rng ^= B.rng << 13;
	B.rng ^= B.rng >> 7;
	B.rng ^= B.rng << 17;
	return B.rng;
}

/* Fixed allocator parameters: glibc moves its mmap and trim thresholds after every free of an
 * mmap'ed block, so a profiler's own large buffers (or their absence) would change which sizes
 * here cost an mmap/munmap pair. Fixed, every configuration runs the same allocator. */
static void mix_fix_allocator(void)
{
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	mallopt(M_TOP_PAD, 16 << 20);
}

/* Grows the heap to where the mix's live blocks settle and faults its pages in (the trim
 * threshold keeps them): without this the first ~20 steps run 2-4x slower, page faults of a heap
 * still growing, and how fast it settles differs from run to run. Exits 1 without memory. */
static void mix_prefault_heap(void)
{
	enum { BLOCKS = 48, BYTES = 4 << 20 }; /* 192 MiB, under the mmap threshold: from the heap */
	static void *b[BLOCKS];
	for (int i = 0; i < BLOCKS; i++)
		if (!(b[i] = malloc(BYTES))) {
			fprintf(stderr, "no memory to prefault the heap\n");
			exit(1);
		}
	for (int i = 0; i < BLOCKS; i++)
		memset(b[i], 1, BYTES);
	for (int i = 0; i < BLOCKS; i++)
		free(b[i]);
}

/* 16 B .. 4 KiB (log-uniform-ish), or B.large per mille 64 KiB .. 512 KiB. */
static size_t pick_size(void)
{
	uint64_t r = next_rand();
	if (r % 1000 < B.large)
		return LARGE_MIN + (size_t)((r >> 8) % LARGE_SPAN);
	return ((size_t)16 << ((r >> 8) % 8)) + (size_t)((r >> 16) % 64);
}

/* posix_memalign with 64-byte alignment; NULL if it fails. */
static void *aligned(size_t n)
{
	void *p;
	return F.posix_memalign(&p, 64, n) ? NULL : p;
}

/* One operation on a random slot of B.slot[0..B.nslots): the old block goes (free, or realloc's
 * move), a new one comes. Exits 1 if an allocation fails. */
static void operate(void)
{
	uint64_t r = next_rand();
	unsigned i = (unsigned)(r % B.nslots), how = (unsigned)((r >> 32) % 100);
	size_t n = pick_size();
	void *p;
	MIX_FREEING(B.slot[i]);
	if (how < 5 && B.slot[i]) {
		p = F.realloc(B.slot[i], n);
	} else {
		F.free(B.slot[i]);
		B.slot[i] = NULL;
		if (how < 10)
			p = F.calloc(1, n);
		else if (how < 15)
			p = aligned(n);
		else
			p = F.malloc(n);
	}
	if (!p) {
		fprintf(stderr, "allocation of %zu bytes failed\n", n);
		exit(1);
	}
	MIX_ALLOCATED(p, n);
	unsigned char *c = p;
	c[0] = (unsigned char)r; /* touch both ends, as a user of the block would */
	c[n - 1] = (unsigned char)(r >> 8);
	B.slot[i] = p;
}

#endif
