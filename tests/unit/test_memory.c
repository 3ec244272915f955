/* SPDX-License-Identifier: MIT */
/* test_memory.c - live memory accounting: levels per device and host, peaks, frees of unknown
 * addresses, VMM handles kept apart from pointers, table growth, deletion against a reference, and
 * the SNAPSHOT / PEAK events a window gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "trace/event.h"
#include "collector/mem/memory.h"
#include "collector/out/ring.h"

static struct sp_event got[70000];
static int ngot;

static void collect(void *ctx, const struct sp_event *ev)
{
	if (ngot < (int)(sizeof got / sizeof *got))
		got[ngot++] = *ev;
}

static void drain(void)
{
	ngot = 0;
	sp_ring_drain(collect, NULL);
}

static void levels_and_events(void **state)
{
	uint64_t base0 = sp_mem_live(0), base1 = sp_mem_live(1);
	sp_mem_alloc(SP_MEM_DEVICE, 0, 0x1000, 100, 7, 10, 1);
	sp_mem_alloc(SP_MEM_DEVICE_ASYNC, 0, 0x2000, 50, 0, 11, 1);
	sp_mem_alloc(SP_MEM_DEVICE, 1, 0x3000, 30, 0, 12, 0);        /* accounted, not recorded */
	sp_mem_alloc(SP_MEM_VMM, 1, 0x1000, 1000, 0, 13, 1);          /* a handle equal to a pointer */
	assert_int_equal(sp_mem_live(0) - base0, 150);
	assert_int_equal(sp_mem_live(1) - base1, 1030);
	sp_mem_free(SP_MEM_DEVICE, 0x1000, 20, 1);                     /* the pointer, not the handle */
	sp_mem_free(SP_MEM_DEVICE, 0xdead, 21, 1);                     /* unknown: nothing */
	assert_int_equal(sp_mem_live(0) - base0, 50);
	assert_int_equal(sp_mem_live(1) - base1, 1030);
	sp_mem_free(SP_MEM_VMM, 0x1000, 22, 1);
	assert_int_equal(sp_mem_live(1) - base1, 30);
	drain();
	assert_int_equal(ngot, 5); /* 3 recorded allocs, 2 frees (the unknown one writes nothing) */
	assert_int_equal(got[0].kind, SP_EV_ALLOC);
	assert_int_equal(got[0].u.mem.size, 100);
	assert_int_equal(got[0].u.mem.live - base0, 100);
	assert_int_equal(got[0].u.mem.stack, 7);
	assert_int_equal(got[3].kind, SP_EV_FREE);
	assert_int_equal(got[3].u.mem.size, 100);
	assert_int_equal(got[3].u.mem.live - base0, 50);
	assert_int_equal(got[4].sub, SP_MEM_VMM);
	assert_int_equal(got[4].device, 1);
	/* the window's start sees what is alive; its end sees the peak */
	sp_mem_snapshot(30);
	drain();
	int snaps = 0;
	for (int i = 0; i < ngot; i++) {
		assert_true(got[i].u.mem.flags & SP_MEMF_SNAPSHOT);
		snaps += got[i].u.mem.addr == 0x2000 && got[i].start == 11;
		snaps += got[i].u.mem.addr == 0x3000 && got[i].start == 12;
	}
	assert_int_equal(snaps, 2);
	sp_mem_peaks(40);
	drain();
	int peak1 = 0;
	for (int i = 0; i < ngot; i++)
		if (got[i].device == 1 && (got[i].u.mem.flags & SP_MEMF_PEAK))
			peak1 = got[i].u.mem.live - base1 == 1030;
	assert_true(peak1);
	sp_mem_free(SP_MEM_DEVICE, 0x2000, 50, 0);
	sp_mem_free(SP_MEM_DEVICE, 0x3000, 50, 0);
}

static void host_bitmap_filters_frees(void **state)
{
	assert_false(sp_mem_host_maybe(0x7f0000123450)); /* never marked */
	sp_mem_host_mark(0x7f0000123450);
	assert_true(sp_mem_host_maybe(0x7f0000123450));
	sp_mem_host_mark(0x7f0000123450); /* marking twice changes nothing */
	assert_true(sp_mem_host_maybe(0x7f0000123450));
	assert_false(sp_mem_host_maybe(0x7f0000123460)); /* the next block's own bit */
	sp_mem_alloc(SP_MEM_HOST, -1, 0x7f0000999990, 1 << 20, 0, 1, 0); /* the table does not mark */
	assert_false(sp_mem_host_maybe(0x7f0000999990));
	sp_mem_free(SP_MEM_HOST, 0x7f0000999990, 2, 0);
}

static void many_allocations_grow_the_table(void **state)
{
	uint64_t base = sp_mem_live(SP_MEM_HOST_SLOT);
	for (uint64_t i = 1; i <= 50000; i++)
		sp_mem_alloc(SP_MEM_HOST, -1, i * 64, 10, 0, i, 0);
	assert_int_equal(sp_mem_live(SP_MEM_HOST_SLOT) - base, 500000);
	for (uint64_t i = 1; i <= 50000; i += 2)
		sp_mem_free(SP_MEM_HOST, i * 64, i, 0);
	assert_int_equal(sp_mem_live(SP_MEM_HOST_SLOT) - base, 250000);
	for (uint64_t i = 2; i <= 50000; i += 2)
		sp_mem_free(SP_MEM_HOST, i * 64, i, 0);
	assert_int_equal(sp_mem_live(SP_MEM_HOST_SLOT), base);
	drain();
	assert_int_equal(ngot, 0);
}

/* Host churn (allocate, free, allocate elsewhere) leaves tombstones: the table must be rebuilt in
 * place, not doubled for every few thousand frees. */
static void churn_does_not_grow_the_table(void **state)
{
	uint64_t base = sp_mem_live(SP_MEM_HOST_SLOT);
	uint32_t cap0 = 0;
	for (uint64_t i = 1; i <= 1000000; i++) {
		sp_mem_alloc(SP_MEM_HOST, -1, 0x100000000ull + i * 4096, 100, 0, i, 0);
		if (i > 100)
			sp_mem_free(SP_MEM_HOST, 0x100000000ull + (i - 100) * 4096, i, 0);
		if (i == 1000)
			cap0 = sp_mem_table_slots();
	}
	assert_int_equal(sp_mem_live(SP_MEM_HOST_SLOT) - base, 100 * 100);
	assert_int_equal(sp_mem_table_slots(), cap0);
	for (uint64_t i = 1000000 - 99; i <= 1000000; i++)
		sp_mem_free(SP_MEM_HOST, 0x100000000ull + i * 4096, i, 0);
	assert_int_equal(sp_mem_live(SP_MEM_HOST_SLOT), base);
}

/* Random allocations and frees over a small set of addresses (long probe runs, deletions in the
 * middle of them, frees of addresses not alive) against a plain array: the level must match after
 * every operation, and every live block must still be found by its free. */
static void random_churn_matches_a_reference(void **state)
{
	enum { KEYS = 3000 };
	static uint64_t size_of[KEYS]; /* 0: not alive */
	uint64_t base = sp_mem_live(SP_MEM_HOST_SLOT), expect = 0, rng = 88172645463325252ull;
	for (int i = 0; i < 400000; i++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		unsigned k = (unsigned)(rng % KEYS);
		uint64_t addr = 0x200000000ull + (uint64_t)k * 16;
		if (size_of[k] || (rng >> 40) % 3 == 0) { /* free it (a no-op if not alive) */
			sp_mem_free(SP_MEM_HOST, addr, 0, 0);
			expect -= size_of[k];
			size_of[k] = 0;
		} else {
			size_of[k] = 1 + (rng >> 20) % 1000;
			sp_mem_alloc(SP_MEM_HOST, -1, addr, size_of[k], 0, 0, 0);
			expect += size_of[k];
		}
		if (sp_mem_live(SP_MEM_HOST_SLOT) - base != expect)
			fail_msg("level %llu after operation %d, expected %llu",
				 (unsigned long long)(sp_mem_live(SP_MEM_HOST_SLOT) - base), i,
				 (unsigned long long)expect);
	}
	for (unsigned k = 0; k < KEYS; k++)
		sp_mem_free(SP_MEM_HOST, 0x200000000ull + (uint64_t)k * 16, 0, 0);
	assert_int_equal(sp_mem_live(SP_MEM_HOST_SLOT), base);
	drain();
	assert_int_equal(ngot, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(levels_and_events),
		cmocka_unit_test(host_bitmap_filters_frees),
		cmocka_unit_test(many_allocations_grow_the_table),
		cmocka_unit_test(churn_does_not_grow_the_table),
		cmocka_unit_test(random_churn_matches_a_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
