/* SPDX-License-Identifier: MIT */
/* host_event_bench.c - what one recorded host allocation event costs inside stepprof, on any
 * machine (no GPU, no CUDA): the live-block table update, the clock read and the ring push of
 * sp_mem_alloc/sp_mem_free with record = 1, over 200,000 alloc/free pairs of 4,096 rotating
 * addresses, five repetitions (the first ones include the ring's first-touch page faults).
 * Build and run after `make`:
 *   gcc -O2 -I. bench/host_event_bench.c build/libspcore.a -lpthread -o /tmp/host_event_bench
 *   /tmp/host_event_bench */
#include <stdint.h>
#include <stdio.h>
#include "collector/base/clock.h"
#include "trace/event.h"
#include "collector/mem/memory.h"
#include "collector/out/ring.h"

#define PAIRS 200000u

static void discard(void *ctx, const struct sp_event *ev)
{
	(void)ctx, (void)ev;
}

int main(void)
{
	sp_ring_configure(1u << 20); /* room for one repetition's events between drains */
	for (int rep = 0; rep < 5; rep++) {
		uint64_t t0 = sp_now_ns();
		for (uint64_t i = 0; i < PAIRS; i++) {
			uint64_t addr = 0x7f0000000000ull + ((i * 2654435761u) % 4096) * (1u << 20);
			sp_mem_alloc(SP_MEM_HOST, -1, addr, 65536 + i % 1000, 0, sp_now_ns(), 1);
			sp_mem_free(SP_MEM_HOST, addr, sp_now_ns(), 1);
		}
		uint64_t t1 = sp_now_ns();
		sp_ring_drain(discard, NULL);
		printf("repetition %d: %.1f ns per recorded event (alloc or free, clock read included)\n", rep,
		       (double)(t1 - t0) / (2.0 * PAIRS));
	}
	return 0;
}
