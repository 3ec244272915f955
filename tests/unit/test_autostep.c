/* SPDX-License-Identifier: MIT */
/* test_autostep.c - automatic step detection on synthetic launch streams: after locking, the
 * (anchor, every, count) it names must put every boundary exactly on an iteration start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "decide/autostep.h"

static const struct sp_det_tune *const T = &sp_det_tune_default;

/* An iteration: tokens with the CPU gap (ns) before each. The first token follows the loop's
 * wrap, which has the longest gap. */
struct iter {
	uint32_t tok[4096];
	uint64_t gap[4096];
	uint32_t n;
};

/* Adds a token; anything but a synchronisation is a kernel launch here. */
static void add(struct iter *it, uint32_t tok, uint64_t gap)
{
	it->tok[it->n] = tok & SP_AUTOSTEP_SYNC ? tok : tok | SP_AUTOSTEP_KERNEL;
	it->gap[it->n++] = gap;
}

/* Feeds `setup` random tokens, then iterations until the detector locks (at most max_iters),
 * then the rest of that iteration and 20 more, counting boundaries as the collector does: at an
 * anchor occurrence whose count is a multiple of `every`, before it (the iteration starts there)
 * or, if `after`, at its end (the iteration ended with it). Iterations 0 .. n_early-1 are `early`,
 * the later ones `late` (a program whose loop changes shape, as DDP's does after ten iterations).
 * Returns the number of boundaries NOT between two iterations (0 = perfect), or -1 if it never
 * locked. */
static int run_changing(const struct iter *early, int n_early, const struct iter *late, int setup, int max_iters,
			uint32_t *period)
{
	struct sp_autostep a;
	uint64_t t = 1000;
	int bad = 0, boundaries = 0;
	assert_int_equal(sp_autostep_init(&a, 1u << 16), 0);
	srand(7);
	for (int i = 0; i < setup; i++)
		sp_autostep_feed(&a, 5000 + (uint32_t)(rand() % 50), t += 3000);
	for (int k = 0; k < max_iters && !a.locked; k++) {
		const struct iter *it = k < n_early ? early : late;
		for (uint32_t i = 0; i < it->n && !a.locked; i++) {
			if (!sp_autostep_feed(&a, it->tok[i], t += it->gap[i]))
				continue;
			/* steps are numbered from the first iteration: this one is number k */
			assert_int_equal(a.lock.iterations, k + 1);
			uint64_t count = a.lock.count;
			for (int m = 0; m <= 20; m++) {
				const struct iter *c = k + m < n_early ? early : late;
				uint32_t first = a.lock.after ? c->n - 1 : 0; /* where a boundary belongs */
				for (uint32_t j = m ? 0 : i + 1; j < c->n; j++) /* from the rest of this one */
					if (c->tok[j] == a.lock.anchor && count++ % a.lock.every == 0)
						bad += j != first, boundaries++;
			}
		}
	}
	*period = a.lock.period;
	int locked = a.locked;
	sp_autostep_free(&a);
	if (!locked)
		return -1;
	if (!bad)
		assert_true(boundaries >= 20 && boundaries <= 21); /* one per iteration, none lost */
	return bad;
}

static int run(const struct iter *it, int setup, int max_iters, uint32_t *period)
{
	return run_changing(it, max_iters, it, setup, max_iters, period);
}

static void transformer_like(void **state)
{
	static struct iter it;
	uint32_t period;
	it.n = 0;
	add(&it, 1, 400000);                      /* embedding, after the loop wrap */
	for (int l = 0; l < 12; l++) {            /* 12 identical layers: a sub-period */
		add(&it, 10, 4000);
		add(&it, 11, 4000);
		add(&it, 12, 4000);
		add(&it, 13, 4000);
	}
	add(&it, 2, 4000);                        /* loss */
	for (int l = 0; l < 12; l++) {            /* backward */
		add(&it, 20, 4000);
		add(&it, 21, 4000);
		add(&it, 22, 4000);
	}
	add(&it, 30, 4000);
	add(&it, 31, 4000);   /* optimizer */
	add(&it, 40, 9000);                       /* not a synchronisation: only the gap shows the wrap */
	assert_int_equal(run(&it, 300, 100, &period), 0); /* so it must hold for 4096 tokens */
	assert_int_equal(period, it.n);
}

static void tiny_kernels_with_sync(void **state)
{
	static struct iter it;
	uint32_t period;
	it.n = 0;
	for (int i = 0; i < 2000; i++)
		add(&it, 7, i == 0 ? 300000 : 5000); /* one kernel 2000 times, long gap at the wrap */
	add(&it, 8 | SP_AUTOSTEP_SYNC, 5000);      /* cuCtxSynchronize */
	assert_int_equal(run(&it, 50, 20, &period), 0);
	assert_int_equal(period, 2001);
}

/* Seen on the GPU machine: in a run of identical launches the driver stalls every 31 launches
 * (its launch queue), so a 31-launch stretch looked like an iteration with a clear wrap before
 * four copies of the real 2001-token iteration were in the ring, and steps came out 31 kernels
 * long. A period that a shorter one explains is not the loop. */
static void periodic_driver_stalls_are_not_the_loop(void **state)
{
	static struct iter it;
	uint32_t period;
	it.n = 0;
	for (int i = 0; i < 2000; i++)
		add(&it, 7, i == 0 ? 300000 : i % 31 == 0 ? 60000 : 5000);
	add(&it, 8 | SP_AUTOSTEP_SYNC, 5000);
	assert_int_equal(run(&it, 50, 20, &period), 0);
	assert_int_equal(period, 2001);
}

/* Python's per-module overhead puts a gap before every layer: identical layers then look like
 * short iterations with a clear wrap. Seen on the GPU machine with the MLP (steps of ~12
 * kernels, once in a few runs): a period without a synchronisation needs a long run. */
static void layer_gaps_are_not_the_wrap(void **state)
{
	static struct iter it;
	uint32_t period;
	it.n = 0;
	add(&it, 1, 300000);                        /* input copy after the loop's wrap */
	for (int l = 0; l < 8; l++) {               /* forward: gemm, bias, relu */
		add(&it, 10, 40000);
		add(&it, 11, 5000);
		add(&it, 12, 5000);
	}
	add(&it, 2, 30000);                         /* loss */
	for (int l = 0; l < 8; l++) {               /* backward */
		add(&it, 20, 35000);
		add(&it, 21, 5000);
		add(&it, 22, 5000);
		add(&it, 23, 5000);
	}
	add(&it, 30, 30000);
	add(&it, 31, 5000);    /* optimizer */
	add(&it, 40 | SP_AUTOSTEP_SYNC, 5000);      /* loss.item() */
	assert_int_equal(run(&it, 10, 30, &period), 0);
	assert_int_equal(period, it.n);
}

/* DDP: eight per-bucket event waits (which vanish when the GPU is ahead) and the loop's own
 * device synchronisation: the boundary goes after the one that happens once per iteration. */
static void once_per_iteration_sync_is_the_anchor(void **state)
{
	static struct iter it;
	uint32_t period;
	it.n = 0;
	for (int b = 0; b < 8; b++) {
		add(&it, 10 + b, 5000);
		add(&it, 20, 5000);   /* backward, an allreduce */
		add(&it, 30 | SP_AUTOSTEP_SYNC, 5000);        /* cudaEventSynchronize */
	}
	add(&it, 40, 5000);
	add(&it, 41, 5000);            /* optimizer */
	add(&it, 50 | SP_AUTOSTEP_SYNC, 5000);             /* cudaDeviceSynchronize */
	for (int s = 0; s < 40; s++) {                     /* run() checks boundaries on every place */
		assert_int_equal(run(&it, 13 + s, 40, &period), 0);
		assert_int_equal(period, it.n);
	}
}

/* DDP as measured on the GPU machine (torch 2.11): the loop's torch.cuda.synchronize() is
 * followed at once by eight cudaEventSynchronize of DDP's runtime statistics, which it takes in
 * its first ten iterations only. The run of synchronisations ends in an event wait, but the
 * boundary must go after the device synchronisation, or boundaries stop after iteration ten. */
static void sync_run_ending_in_transient_waits(void **state)
{
	static struct iter early, late;
	uint32_t period;
	early.n = late.n = 0;
	for (int e = 0; e < 8; e++)
		add(&early, 30 | SP_AUTOSTEP_SYNC, 5000);  /* cudaEventSynchronize x 8 */
	for (struct iter *it = &early; it; it = it == &early ? &late : NULL) {
		for (int b = 0; b < 20; b++)
			add(it, 10 + b % 5, 5000);         /* forward, backward, allreduces, optimizer */
		add(it, 50 | SP_AUTOSTEP_SYNC, 5000);      /* cudaDeviceSynchronize */
	}
	for (int s = 0; s < 29; s++) {                     /* every phase of the first iterations */
		assert_int_equal(run_changing(&early, 10, &late, 13 + s, 10, &period), 0);
		assert_int_equal(period, early.n);
	}
}

static void sync_ends_iteration_without_gaps(void **state)
{
	/* the workload of tests/gpu: uniform 5 us gaps everywhere; two syncs end the iteration */
	static struct iter it;
	uint32_t period;
	it.n = 0;
	uint32_t toks[] = { 1, 2, 3, 4, 5, 6 | SP_AUTOSTEP_SYNC, 7 | SP_AUTOSTEP_SYNC };
	for (unsigned i = 0; i < 7; i++)
		add(&it, toks[i], 5000);
	assert_int_equal(run(&it, 20, 40, &period), 0);
	assert_int_equal(period, 7);
}

static void anchor_inside_iteration(void **state)
{
	/* the longest gap is in the middle (a data-loader wait before token 3): the boundary goes there */
	static struct iter it;
	uint32_t period;
	it.n = 0;
	add(&it, 1, 5000);
	add(&it, 2, 5000);
	add(&it, 3, 900000);
	add(&it, 4, 5000);
	add(&it, 1, 5000);
	struct sp_autostep a;
	uint64_t t = 0;
	assert_int_equal(sp_autostep_init(&a, 4096), 0);
	int locked = 0;
	for (int k = 0; k < 2000 && !locked; k++) /* a wrap shown by a gap only: >= 4096 tokens */
		for (uint32_t i = 0; i < it.n && !locked; i++)
			locked = sp_autostep_feed(&a, it.tok[i], t += it.gap[i]);
	assert_true(locked);
	assert_int_equal(a.lock.period, 5);
	assert_int_equal(a.lock.anchor, 3 | SP_AUTOSTEP_KERNEL);
	assert_int_equal(a.lock.every, 1);
	sp_autostep_free(&a);
	(void)period;
}

static void own_pauses_are_credited(void **state)
{
	/* detection attempts pause the program every 32 tokens early on; the collector credits that
	 * time back, so the pauses must not look like the loop's wrap (they once did: period 32) */
	struct sp_autostep a;
	uint64_t t = 0;
	assert_int_equal(sp_autostep_init(&a, 1u << 16), 0);
	for (int k = 0; k < 20 && !a.locked; k++)
		for (int i = 0; i <= 2000 && !a.locked; i++) {
			uint64_t before = a.attempt.next;
			sp_autostep_feed(&a, i < 2000 ? 7 | SP_AUTOSTEP_KERNEL : 8 | SP_AUTOSTEP_SYNC,
					 t += i == 0 ? 300000 : 5000);
			if (a.attempt.next != before) { /* an attempt ran: 80 us of our own time */
				t += 80000;
				sp_autostep_credit(&a, 80000);
			}
		}
	assert_true(a.locked);
	assert_int_equal(a.lock.period, 2001);
	assert_true(a.lock.after);
	sp_autostep_free(&a);
}

static void attempts_keep_to_their_share(void **state)
{
	/* a stream that never repeats, 5 us a token for 3 s, each attempt taking 400 us of the program's
	 * thread (the collector reports it): the attempts' time stays within the burst plus 1% of the
	 * first 2 s and 0.25% of the last (without the share it would be 400 us every 256 tokens, 31%
	 * of it; with 1% throughout, 31 ms) */
	struct sp_autostep a;
	uint64_t t = 0, spent = 0, tries = 0;
	assert_int_equal(sp_autostep_init(&a, 1u << 16), 0);
	srand(11);
	for (int i = 0; i < 600000; i++) {
		int due = sp_autostep_due(&a, 0, t + 5000);
		uint64_t before = a.attempt.next;
		sp_autostep_feed(&a, ((uint32_t)rand() % 60000 + 1) | SP_AUTOSTEP_KERNEL, t += 5000);
		assert_int_equal(due, a.attempt.next != before); /* sp_autostep_due says what feed does */
		if (a.attempt.next != before) {
			tries++;
			spent += 400000;
			sp_autostep_attempt_took(&a, 400000);
		}
	}
	assert_false(a.locked);
	assert_true(tries > 10);
	assert_true(t > T->attempt_eager_ns); /* past the eager share: a quarter of it from then on */
	assert_true(spent <= T->attempt_burst_ns + 400000 + T->attempt_eager_ns / T->attempt_share +
				     (t - T->attempt_eager_ns) / T->attempt_late);
	assert_true(spent > T->attempt_eager_ns / T->attempt_share); /* not starved either */
	/* then a periodic loop still locks: its attempts are as rare, not gone */
	for (int k = 0; k < 400 && !a.locked; k++)
		for (int i = 0; i <= 2000 && !a.locked; i++) {
			uint64_t before = a.attempt.next;
			sp_autostep_feed(&a,
					 i < 2000 ? (70000 + (uint32_t)i % 7) | SP_AUTOSTEP_KERNEL
						  : 8 | SP_AUTOSTEP_SYNC,
					 t += i == 0 ? 300000 : 5000);
			if (a.attempt.next != before)
				sp_autostep_attempt_took(&a, 400000);
		}
	assert_true(a.locked);
	assert_int_equal(a.lock.period, 2001);
	sp_autostep_free(&a);
}

static void startup_copies_are_not_the_loop(void **state)
{
	/* model.to(device): copy + synchronise per parameter, no kernel - periodic, with a sync, but
	 * not the training loop; the loop that follows must be found */
	struct sp_autostep a;
	uint64_t t = 0;
	assert_int_equal(sp_autostep_init(&a, 1u << 16), 0);
	for (int i = 0; i < 200; i++) {
		assert_int_equal(sp_autostep_feed(&a, 50, t += 5000), 0);
		assert_int_equal(sp_autostep_feed(&a, 51 | SP_AUTOSTEP_SYNC, t += 5000), 0);
	}
	for (int k = 0; k < 40 && !a.locked; k++)
		for (uint32_t i = 0; i < 12 && !a.locked; i++)
			sp_autostep_feed(&a, i < 11 ? (60 + i) | SP_AUTOSTEP_KERNEL : 51 | SP_AUTOSTEP_SYNC, t += 5000);
	assert_true(a.locked);
	assert_int_equal(a.lock.period, 12);
	sp_autostep_free(&a);
}

static void aperiodic_never_locks(void **state)
{
	struct sp_autostep a;
	uint64_t t = 0;
	assert_int_equal(sp_autostep_init(&a, 4096), 0);
	srand(3);
	for (int i = 0; i < 100000; i++)
		assert_int_equal(sp_autostep_feed(&a, (uint32_t)(rand() % 40), t += 1000 + rand() % 5000), 0);
	assert_false(a.locked);
	sp_autostep_free(&a);
}

/* bench/outside.py's learn workload: 2000 + (8 i mod 21) - 10 launches of one kernel and a
 * synchronisation at step i. No two consecutive steps are alike and the counts cycle every 21
 * steps (~42000 tokens, past MAX_PERIOD), so it must learn all run long. (Its first version drew
 * the counts at random, and four equal ones in a row at steps 170-173 made it lock.) */
static void learn_workload_never_locks(void **state)
{
	struct sp_autostep a;
	uint64_t t = 0;
	(void)state;
	assert_int_equal(sp_autostep_init(&a, 1u << 16), 0);
	for (int i = 0; i < 120; i++) {
		int n = 2000 + (8 * i) % 21 - 10;
		for (int k = 0; k < n; k++)
			assert_int_equal(sp_autostep_feed(&a, 7 | SP_AUTOSTEP_KERNEL, t += k ? 5000 : 300000), 0);
		assert_int_equal(sp_autostep_feed(&a, 8 | SP_AUTOSTEP_SYNC, t += 5000), 0);
	}
	assert_false(a.locked);
	sp_autostep_free(&a);
}

/* A loop whose only synchronisation is a loss read every 5 iterations (a copy and a sync after the
 * 5th): the 5-iteration period is proven by its sync, and is 5 copies of a 40-launch block plus
 * the read: the lock is on the block, a boundary before its first launch. Gradient accumulation
 * (4 alike micro-steps, then an optimizer of 3 launches and a sync) stays one iteration: the
 * extras launch kernels. */
static void loss_read_every_few_iterations(void **state)
{
	for (int accum = 0; accum < 2; accum++) {
		struct sp_autostep a;
		uint64_t t = 1000;
		int k;
		assert_int_equal(sp_autostep_init(&a, 1u << 16), 0);
		for (k = 0; k < 200 && !a.locked; k++) {
			for (uint32_t i = 0; i < 40 && !a.locked; i++)
				sp_autostep_feed(&a, (100 + i) | SP_AUTOSTEP_KERNEL, t += i ? 5000 : 200000);
			if (k % 5 != 4 || a.locked)
				continue;
			for (uint32_t i = 0; accum && i < 3 && !a.locked; i++) /* the optimizer */
				sp_autostep_feed(&a, (300 + i) | SP_AUTOSTEP_KERNEL, t += 5000);
			if (!a.locked)
				sp_autostep_feed(&a, 200 | SP_AUTOSTEP_SYNC, t += 5000); /* the loss's copy */
			if (!a.locked)
				sp_autostep_feed(&a, 201 | SP_AUTOSTEP_SYNC, t += 5000); /* its sync */
		}
		assert_true(a.locked);
		k--; /* the iteration the lock came in (the loop's k++ ran once more) */
		if (!accum) /* numbered from the first iteration: the lock came in iteration k */
			assert_int_equal(a.lock.iterations, k + 1);
		if (accum) {
			assert_int_equal(a.lock.period, 5 * 40 + 5);
			assert_int_equal(a.blocks, 1);
			assert_true(a.lock.after);
		} else {
			assert_int_equal(a.lock.period, 40);
			assert_int_equal(a.blocks, 5);
			assert_false(a.lock.after);
			assert_int_equal(a.lock.anchor, 100 | SP_AUTOSTEP_KERNEL);
			assert_int_equal(a.lock.every, 1);
			assert_int_equal(a.lock.launches, 40);
		}
		sp_autostep_free(&a);
	}
}

/* The same with the read two thirds into every 5th iteration (a gradient norm read between
 * backward and the optimizer): the block's boundary goes at the loop's wrap (its 200 us CPU gap,
 * before kernel 0), not after the read (before kernel 27). */
static void read_mid_iteration_wraps_at_the_gap(void **state)
{
	struct sp_autostep a;
	uint64_t t = 1000;
	assert_int_equal(sp_autostep_init(&a, 1u << 16), 0);
	for (int k = 0; k < 200 && !a.locked; k++)
		for (uint32_t i = 0; i < 40 && !a.locked; i++) {
			sp_autostep_feed(&a, (100 + i) | SP_AUTOSTEP_KERNEL, t += i ? 5000 : 200000);
			if (i == 26 && k % 5 == 4 && !a.locked)
				sp_autostep_feed(&a, 200 | SP_AUTOSTEP_SYNC, t += 5000);
			if (i == 26 && k % 5 == 4 && !a.locked)
				sp_autostep_feed(&a, 201 | SP_AUTOSTEP_SYNC, t += 5000);
		}
	assert_true(a.locked);
	assert_int_equal(a.blocks, 5);
	assert_int_equal(a.lock.period, 40);
	assert_int_equal(a.lock.anchor, 100 | SP_AUTOSTEP_KERNEL);
	sp_autostep_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(transformer_like),
		cmocka_unit_test(tiny_kernels_with_sync),
		cmocka_unit_test(periodic_driver_stalls_are_not_the_loop),
		cmocka_unit_test(layer_gaps_are_not_the_wrap),
		cmocka_unit_test(once_per_iteration_sync_is_the_anchor),
		cmocka_unit_test(sync_run_ending_in_transient_waits),
		cmocka_unit_test(sync_ends_iteration_without_gaps),
		cmocka_unit_test(anchor_inside_iteration),
		cmocka_unit_test(own_pauses_are_credited),
		cmocka_unit_test(attempts_keep_to_their_share),
		cmocka_unit_test(startup_copies_are_not_the_loop),
		cmocka_unit_test(aperiodic_never_locks),
		cmocka_unit_test(learn_workload_never_locks),
		cmocka_unit_test(loss_read_every_few_iterations),
		cmocka_unit_test(read_mid_iteration_wraps_at_the_gap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
