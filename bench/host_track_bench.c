/* SPDX-License-Identifier: MIT */
/* host_track_bench.c - what host-allocation tracking costs a malloc-heavy program, without a GPU:
 * bench/malloc_bench.c's operation mix (20,000 frees and allocations per step, ~5% of 64-512 KiB),
 * with the collector's host-tracking path called the way preload/malloc.c calls it (the free
 * filter on every free; the live-block table for blocks >= 64 KiB; their events pushed to the
 * ring) and the real writer thread draining and compressing the ring into a trace file. On the
 * GPU machine the collector only starts with CUDA, so this is where the cost can be taken apart.
 * Build and run after `make` (modes: 0 no tracking, 1 table only, 2 table and recording):
 *   gcc -O2 -I. bench/host_track_bench.c build/libspcore.a -lzstd -lunwind -lpthread -o /tmp/htb
 *   for i in 1 2 3 4 5 6; do for m in 0 1 2; do /tmp/htb $m 60 /tmp/htb.sptrace; done; done
 * A fourth argument sets the ring's slots (default 262144, as malloc_bench's ring_events).
 * Prints "mode M median_us X dropped D" (median step, steps 6..STEPS; ring drops). Exits 1 if the
 * writer cannot start. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "collector/clock.h"
#include "collector/event.h"
#include "collector/memory.h"
#include "collector/ring.h"
#include "collector/writer.h"

#define OPS 20000
#define SLOTS 4096
#define MIN_BYTES 65536u /* the default host_malloc_min */
#define MAX_STEPS 1000

static struct {
	int mode;            /* 0 none, 1 table, 2 table and recording */
	uint64_t rng;        /* xorshift64: malloc_bench's sequence */
	void *slot[SLOTS];   /* live blocks */
} H = { .rng = 0x9e3779b97f4a7c15ull };

static uint64_t next_rand(void)
{
	H.rng ^= H.rng << 13;
	H.rng ^= H.rng >> 7;
	H.rng ^= H.rng << 17;
	return H.rng;
}

/* malloc_bench's sizes: ~95% 16 B .. 4 KiB, ~5% 64 KiB .. 512 KiB. */
static size_t pick_size(void)
{
	uint64_t r = next_rand();
	if (r % 100 < 5)
		return MIN_BYTES + (size_t)((r >> 8) % (448u << 10));
	return ((size_t)16 << ((r >> 8) % 8)) + (size_t)((r >> 16) % 64);
}

/* What the malloc hook does for a block of n bytes (sp_collector_host_alloc). */
static void tracked_alloc(void *p, size_t n)
{
	if (H.mode && n >= MIN_BYTES)
		sp_mem_alloc(SP_MEM_HOST, -1, (uint64_t)(uintptr_t)p, n, 0, sp_now_ns(), H.mode == 2);
}

/* What the free hook does (the inlined filter, then sp_collector_host_free). */
static void tracked_free(void *p)
{
	if (H.mode && p && sp_mem_host_maybe((uint64_t)(uintptr_t)p))
		sp_mem_free(SP_MEM_HOST, (uint64_t)(uintptr_t)p, sp_now_ns(), H.mode == 2);
}

/* One malloc_bench operation: the old block goes (free, or realloc's move), a new one comes. */
static void operate(void)
{
	uint64_t r = next_rand();
	unsigned i = (unsigned)(r % SLOTS), how = (unsigned)((r >> 32) % 100);
	size_t n = pick_size();
	void *p;
	if (how < 5 && H.slot[i]) {
		tracked_free(H.slot[i]);
		p = realloc(H.slot[i], n);
	} else {
		tracked_free(H.slot[i]);
		free(H.slot[i]);
		p = how < 10 ? calloc(1, n) : how < 15 ? aligned_alloc(64, (n + 63) & ~(size_t)63) : malloc(n);
	}
	if (!p) {
		fprintf(stderr, "host_track_bench: allocation of %zu bytes failed\n", n);
		exit(1);
	}
	tracked_alloc(p, n);
	unsigned char *c = p;
	c[0] = (unsigned char)r;
	c[n - 1] = (unsigned char)(r >> 8);
	H.slot[i] = p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static double step_us[MAX_STEPS];
	int steps = argc > 2 ? atoi(argv[2]) : 60;
	H.mode = argc > 1 ? atoi(argv[1]) : 0;
	if (steps < 10 || steps > MAX_STEPS)
		steps = 60;
	mallopt(M_MMAP_THRESHOLD, 1 << 30); /* as malloc_bench: fixed, not adaptive */
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	sp_ring_configure(argc > 4 ? (uint32_t)atoi(argv[4]) : 1u << 18); /* malloc_bench's ring_events */
	struct sp_trace_meta m = { .pid = 1, .rank = 0, .world_size = 1, .local_rank = 0 };
	if (sp_writer_start(argc > 3 ? argv[3] : "/tmp/host_track_bench.sptrace", &m, 0) < 0)
		return 1;
	struct sp_event w = { .kind = SP_EV_WINDOW_BEGIN, .device = SP_NO_DEVICE };
	sp_ring_push(&w);
	for (int s = 0; s < steps; s++) {
		uint64_t t0 = sp_now_ns();
		for (int k = 0; k < OPS; k++)
			operate();
		step_us[s] = (double)(sp_now_ns() - t0) / 1e3;
	}
	sp_writer_stop();
	qsort(step_us + 5, (size_t)steps - 5, sizeof(double), cmp_double);
	printf("mode %d median_us %.0f dropped %llu\n", H.mode, step_us[5 + (steps - 5) / 2],
	       (unsigned long long)sp_ring_dropped());
	return 0;
}
