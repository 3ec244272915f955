/* SPDX-License-Identifier: MIT */
/* test_pysteps.c - PyTorch optimizer steps to iteration ends (decide/pysteps.h): one optimizer,
 * gradient accumulation, a GradScaler loop with skipped steps, a GAN, per-module optimizers, a
 * WGAN (5 critic steps per generator step), a cycle that changes mid-run, a scaler that stops
 * being used, two scalers. Each run is a string of events: an upper-case letter is an optimizer's
 * step() returning (each letter its own optimizer object), a lower-case one a GradScaler's
 * update() beginning, '|' an iteration's end (for counting, not an event). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "decide/pysteps.h"

#define MAX_ITERS 256

struct run {
	unsigned ends[MAX_ITERS]; /* step ends per iteration */
	unsigned iters;           /* iterations ('|' seen) */
	unsigned bits;            /* every SP_PYSTEPS_* bit returned */
	unsigned broken, rules;   /* events that broke the cycle, that changed the rule */
	char last_end;            /* the event of the last end */
};

static struct sp_pysteps P;

/* Feeds events (see above) to P (not reset) and counts the ends of each iteration in r. */
static void feed(struct run *r, const char *events)
{
	for (const char *c = events; *c; c++) {
		unsigned b = 0;
		if (*c == '|') {
			r->iters++;
			continue;
		}
		if (*c >= 'A' && *c <= 'Z')
			b = sp_pysteps_optim(&P, (uint32_t)*c);
		else if (*c >= 'a' && *c <= 'z')
			b = sp_pysteps_scaler(&P, (uint32_t)*c);
		else
			continue;
		r->bits |= b;
		r->broken += (b & SP_PYSTEPS_BROKEN) != 0;
		r->rules += (b & SP_PYSTEPS_RULE) != 0;
		if (b & SP_PYSTEPS_END) {
			assert_true(r->iters < MAX_ITERS);
			r->ends[r->iters]++;
			r->last_end = *c;
		}
	}
}

/* Feeds `iter` (one iteration, ending in '|') n times. */
static void repeat(struct run *r, const char *iter, int n)
{
	for (int i = 0; i < n; i++)
		feed(r, iter);
}

/* Every iteration from `from` to `to` (exclusive) ended exactly one step. */
static void one_each(const struct run *r, unsigned from, unsigned to)
{
	for (unsigned i = from; i < to; i++) {
		if (r->ends[i] != 1)
			fail_msg("iteration %u ended %u steps", i, r->ends[i]);
	}
}

static unsigned total(const struct run *r)
{
	unsigned n = 0;
	for (unsigned i = 0; i < r->iters; i++)
		n += r->ends[i];
	return n;
}

static void test_one_optimizer(void **state)
{
	(void)state;
	struct run r = { 0 };
	sp_pysteps_init(&P);
	repeat(&r, "A|", 40);
	one_each(&r, 0, 40);
	assert_int_equal(P.how.rule, SP_PYRULE_CYCLE);
	assert_int_equal(P.how.period, 1);
	assert_int_equal(P.how.optimizers, 1);
	assert_int_equal(P.how.end, 'A');
	assert_int_equal(r.rules, 1); /* confirmed once, with no step of its own */
	assert_int_equal(r.broken, 0);
}

/* Gradient accumulation: the hook fires only on the optimizer step that follows the last
 * micro-batch, with or without a GradScaler (whose update comes with that step only). */
static void test_accumulation(void **state)
{
	(void)state;
	struct run r = { 0 };
	sp_pysteps_init(&P);
	repeat(&r, "A|", 30);
	one_each(&r, 0, 30);
	memset(&r, 0, sizeof r);
	sp_pysteps_init(&P);
	repeat(&r, "As|", 30);
	one_each(&r, 0, 30);
	assert_int_equal(P.how.rule, SP_PYRULE_SCALER);
}

/* A GradScaler loop: some iterations skip the optimizer step (inf/nan) and only update; the first
 * one's optimizer step and update make one end (merged), and an iteration that skips its step still
 * ends one. */
static void test_scaler_skipped(void **state)
{
	(void)state;
	struct run r = { 0 };
	sp_pysteps_init(&P);
	feed(&r, "As|s|s|As|As|s|As|As|As|s|");
	repeat(&r, "As|", 20);
	feed(&r, "s|s|s|");
	one_each(&r, 0, r.iters);
	assert_int_equal(total(&r), r.iters);
	assert_true(r.bits & SP_PYSTEPS_MERGED);
	assert_int_equal(P.how.rule, SP_PYRULE_SCALER);
	assert_int_equal(P.how.end, 's');
	assert_int_equal(r.last_end, 's');
	/* the first iterations skip their steps (a scale too high at the start): each update ends one */
	memset(&r, 0, sizeof r);
	sp_pysteps_init(&P);
	feed(&r, "s|s|s|s|");
	repeat(&r, "As|", 20);
	one_each(&r, 0, r.iters);
}

/* A GAN: the discriminator's and the generator's optimizers each step once per iteration. */
static void test_gan(void **state)
{
	(void)state;
	struct run r = { 0 };
	sp_pysteps_init(&P);
	repeat(&r, "DG|", 40);
	one_each(&r, 0, 40);
	assert_int_equal(P.how.rule, SP_PYRULE_CYCLE);
	assert_int_equal(P.how.period, 2);
	assert_int_equal(P.how.optimizers, 2);
	assert_int_equal(P.how.end, 'G'); /* among equals the last one */
	assert_int_equal(r.last_end, 'G');
	assert_true(r.bits & SP_PYSTEPS_MERGED);
	/* with a GradScaler for both: its update ends the iteration */
	memset(&r, 0, sizeof r);
	sp_pysteps_init(&P);
	repeat(&r, "DGs|", 40);
	one_each(&r, 0, 40);
	assert_int_equal(r.last_end, 's');
}

/* Per-module optimizers: three stepped each iteration (the cycle is confirmed mid-iteration). */
static void test_per_module(void **state)
{
	(void)state;
	struct run r = { 0 };
	sp_pysteps_init(&P);
	repeat(&r, "ABC|", 40);
	one_each(&r, 0, 40);
	assert_int_equal(P.how.period, 3);
	assert_int_equal(P.how.end, 'C');
}

/* A WGAN: the critic steps 5 times per generator step. Before the cycle is confirmed each critic
 * step ends a step (the first optimizer seen); once confirmed (its second copy), the generator's. */
static void test_wgan(void **state)
{
	(void)state;
	struct run r = { 0 };
	sp_pysteps_init(&P);
	repeat(&r, "DDDDDG|", 30);
	assert_int_equal(r.ends[0], 5);
	assert_int_equal(P.how.rule, SP_PYRULE_CYCLE);
	assert_int_equal(P.how.period, 6);
	assert_int_equal(P.how.optimizers, 2);
	assert_int_equal(P.how.end, 'G');
	one_each(&r, 2, 30);
	assert_int_equal(r.broken, 0); /* 5 critic steps are no confirmed cycle of one optimizer */
	/* 10 critic steps: taken for a cycle of one optimizer, then the generator's step breaks it and
	 * learning starts again: the generator anchors at once */
	memset(&r, 0, sizeof r);
	sp_pysteps_init(&P);
	repeat(&r, "DDDDDDDDDDG|", 20);
	assert_int_equal(r.broken, 1);
	assert_int_equal(P.how.end, 'G');
	one_each(&r, 1, 20);
}

/* The loop changes mid-run (a second optimizer joins): said (BROKEN), learned again, and one step
 * per iteration again once the new cycle is confirmed. */
static void test_cycle_changes(void **state)
{
	(void)state;
	struct run r = { 0 };
	sp_pysteps_init(&P);
	repeat(&r, "A|", 20);
	repeat(&r, "AB|", 30);
	one_each(&r, 0, 20);
	assert_int_equal(r.broken, 1);
	assert_int_equal(P.how.breaks, 1);
	assert_int_equal(P.how.period, 2);
	assert_int_equal(P.how.optimizers, 2);
	one_each(&r, 21, 50); /* the iteration of the change ends two: the old cycle's, then the anchor's */
	assert_int_equal(r.ends[20], 2);
	assert_int_equal(P.how.end, 'B'); /* among equals the anchor, that ends steps since the change */
	/* a new optimizer object each epoch (the old one dropped): the new one anchors at once */
	memset(&r, 0, sizeof r);
	sp_pysteps_init(&P);
	repeat(&r, "A|", 20);
	repeat(&r, "B|", 20);
	one_each(&r, 0, 40);
	assert_int_equal(P.how.end, 'B');
}

/* The program stops calling update (a second phase without a scaler): two optimizer ends without
 * one drop the scaler rule, and the optimizer's steps end steps again. */
static void test_scaler_dropped(void **state)
{
	(void)state;
	struct run r = { 0 };
	sp_pysteps_init(&P);
	repeat(&r, "As|", 20);
	feed(&r, "A|");
	repeat(&r, "A|", 20);
	one_each(&r, 0, 20);
	assert_int_equal(r.ends[20], 0); /* the first iteration without update: not known yet */
	assert_int_equal(r.ends[21], 1); /* the second: its step holds both iterations */
	one_each(&r, 22, 41);
	assert_int_equal(P.how.rule, SP_PYRULE_CYCLE);
	assert_int_equal(P.how.end, 'A');
}

/* Two GradScalers, each updated once per iteration: the first one's update ends steps. */
static void test_two_scalers(void **state)
{
	(void)state;
	struct run r = { 0 };
	sp_pysteps_init(&P);
	repeat(&r, "DsGt|", 30);
	one_each(&r, 0, 30);
	assert_int_equal(P.how.end, 's');
}

static void test_say(void **state)
{
	(void)state;
	char buf[300];
	struct sp_pysteps_how h = { .rule = SP_PYRULE_CYCLE, .period = 2, .optimizers = 2 };
	assert_non_null(strstr(sp_pysteps_say(&h, "Adam#2", buf, sizeof buf), "Adam#2's step() returns"));
	assert_non_null(strstr(buf, "a cycle of 2 optimizer steps of 2 optimizers"));
	h.rule = SP_PYRULE_SCALER;
	assert_non_null(strstr(sp_pysteps_say(&h, "GradScaler#1", buf, sizeof buf), "update() begins"));
	h = (struct sp_pysteps_how){ 0 };
	assert_non_null(strstr(sp_pysteps_say(&h, NULL, buf, sizeof buf), "no cycle"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_optimizer),  cmocka_unit_test(test_accumulation),
		cmocka_unit_test(test_scaler_skipped), cmocka_unit_test(test_gan),
		cmocka_unit_test(test_per_module),     cmocka_unit_test(test_wgan),
		cmocka_unit_test(test_cycle_changes),  cmocka_unit_test(test_scaler_dropped),
		cmocka_unit_test(test_two_scalers),    cmocka_unit_test(test_say),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
