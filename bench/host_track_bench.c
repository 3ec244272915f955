/* SPDX-License-Identifier: MIT */
/* host_track_bench.c - what host-allocation tracking costs a malloc-heavy program, without a GPU:
 * bench/malloc_bench.c's operation mix (malloc_mix.h: 20,000 frees and allocations per step, ~5%
 * of 64-512 KiB), with the collector's host-tracking path called the way preload/malloc.c calls
 * it (the free filter on every free; the live-block table for blocks >= 64 KiB; their events
 * pushed to the ring) and the real writer thread draining and compressing the ring into a trace
 * file. On the
 * GPU machine the collector only starts with CUDA, so this is where the cost can be taken apart.
 * Build and run after `make` (modes: 0 no tracking, 1 table only, 2 table and recording, 3 all three
 * in one process):
 *   gcc -O2 -I. bench/host_track_bench.c build/libspcore.a -lzstd -lunwind -lpthread -o /tmp/htb
 *   for i in 1 2 3 4 5 6; do for m in 0 1 2; do /tmp/htb $m 60 /tmp/htb.sptrace; done; done
 *   /tmp/htb 3 600 /tmp/htb.sptrace
 * A fourth argument sets the ring's slots (default 262144, as malloc_bench's ring_events).
 * Prints "mode M median_us X dropped D" (median step, steps 6..STEPS; ring drops). Mode 3 runs
 * modes 0, 1, 2 in turn, BLOCK steps each, and prints that line for each mode (the median of its
 * steps, the first of each block left out) and "ratio M R" to mode 0: a paired measure that a
 * machine whose speed drifts from one second (or process) to the next cannot blur. Frees of blocks
 * that a mode-0 step allocated are looked up in vain, and blocks that it frees stay in the table
 * until their address comes back: both as in a process whose tracking started late. Exits 1 if
 * the writer cannot start. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "collector/base/clock.h"
#include "trace/event.h"
#include "collector/mem/memory.h"
#include "collector/out/ring.h"
#include "collector/out/writer.h"

#define OPS 20000
#define SLOTS 4096
#define MAX_STEPS 1000
#define MIN_BYTES 65536u /* the default host_malloc_min */
#define BLOCK 6          /* mode 3: steps per mode in turn */

static int mode; /* 0 none, 1 table, 2 table and recording */

/* What the free hook does with glibc (the inlined filter on the chunk size before the block, then
 * sp_collector_host_free). */
static void tracked_free(void *p)
{
	if (mode && p && (((const size_t *)p)[-1] & ~(size_t)7) >= MIN_BYTES)
		sp_mem_free(SP_MEM_HOST, (uint64_t)(uintptr_t)p, mode == 2 ? sp_fast_ns() : 0, mode == 2);
}

/* What the malloc hook does for a block of n bytes (sp_collector_host_alloc). */
static void tracked_alloc(void *p, size_t n)
{
	if (mode && n >= MIN_BYTES)
		sp_mem_alloc(SP_MEM_HOST, -1, (uint64_t)(uintptr_t)p, n, 0, mode == 2 ? sp_fast_ns() : sp_coarse_ns(),
			     mode == 2);
}

#define MIX_FREEING(p) tracked_free(p)
#define MIX_ALLOCATED(p, n) tracked_alloc(p, n)
#include "malloc_mix.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static double step_us[MAX_STEPS];
	static void *slot[SLOTS];
	int steps = argc > 2 ? atoi(argv[2]) : 60;
	mode = argc > 1 ? atoi(argv[1]) : 0;
	B.slot = slot;
	B.nslots = SLOTS;
	if (steps < 10 || steps > MAX_STEPS)
		steps = 60;
	mix_read_settings();
	mix_fix_allocator();
	mix_prefault_heap();
	sp_ring_configure(argc > 4 ? (uint32_t)atoi(argv[4]) : 1u << 18); /* malloc_bench's ring_events */
	struct sp_trace_meta m = { .pid = 1, .rank = 0, .world_size = 1, .local_rank = 0 };
	if (sp_writer_start(argc > 3 ? argv[3] : "/tmp/host_track_bench.sptrace", &m, 0) < 0)
		return 1;
	struct sp_event w = { .kind = SP_EV_WINDOW_BEGIN, .device = SP_NO_DEVICE };
	sp_ring_push(&w);
	int alternate = mode == 3;
	static int mode_of[MAX_STEPS];
	for (int s = 0; s < steps; s++) {
		mode = mode_of[s] = alternate ? s / BLOCK % 3 : mode;
		uint64_t t0 = sp_now_ns();
		for (int k = 0; k < OPS; k++)
			operate();
		step_us[s] = (double)(sp_now_ns() - t0) / 1e3;
	}
	sp_writer_stop();
	double median[3] = { 0 };
	for (int m = 0; m < 3; m++) {
		static double t[MAX_STEPS];
		int n = 0;
		for (int s = 5; s < steps; s++)
			if (mode_of[s] == m && (!alternate || s % BLOCK))
				t[n++] = step_us[s];
		if (!n)
			continue;
		qsort(t, (size_t)n, sizeof(double), cmp_double);
		median[m] = t[n / 2];
		printf("mode %d median_us %.0f dropped %llu\n", m, median[m], (unsigned long long)sp_ring_dropped());
	}
	for (int m = 1; alternate && m < 3; m++)
		printf("ratio %d %.3f\n", m, median[m] / median[0]);
	return 0;
}
