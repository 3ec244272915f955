/* SPDX-License-Identifier: MIT */
/* test_tunables.c - the detector's tunables table (decide/tunables.h): it covers every field of
 * struct sp_det_tune once, its defaults lie in their ranges and are what the library runs, the
 * setter takes NAME=VALUE and refuses the rest, and a learner run with other values decides
 * otherwise (the table is what the code reads). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "decide/autostep.h"
#include "decide/stepdet.h"

static void table_covers_every_field(void **state)
{
	uint8_t seen[sizeof(struct sp_det_tune)] = { 0 };
	assert_int_equal(sp_det_ntunables * sizeof(uint64_t), sizeof(struct sp_det_tune));
	for (size_t i = 0; i < sp_det_ntunables; i++) {
		const struct sp_det_tunable *u = &sp_det_tunables[i];
		uint64_t v;
		assert_true(u->off % sizeof(uint64_t) == 0 && u->off < sizeof seen);
		assert_int_equal(seen[u->off], 0);
		seen[u->off] = 1;
		memcpy(&v, (const char *)&sp_det_tune_default + u->off, sizeof v);
		assert_int_equal(v, u->def);
		assert_true(u->min <= u->def && u->def <= u->max);
		assert_true(strlen(u->why) > 10 && strlen(u->test) > 5 && u->stage[0]);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(u->name, sp_det_tunables[j].name);
	}
}

static void set_by_name(void **state)
{
	struct sp_det_tune t = sp_det_tune_default;
	char err[4096];
	assert_int_equal(sp_det_tune_set(&t, "nosync_repeats=5", err, sizeof err), 0);
	assert_int_equal(t.nosync_repeats, 5);
	assert_int_equal(sp_det_tune_set(&t, "defer_steps=12", err, sizeof err), 0);
	assert_int_equal(t.defer_steps, 12);
	struct sp_det_tune before = t;
	static const char *const bad[] = { "nosync_repeats",   "nosync_repeats=",  "nosync_repeats=x",
					   "nosync_repeats=0", "nosync_repeats=-1", "nosync_repeats=4 ",
					   "nosync=4",         "=4",               "min_repeats=99999999999999999999" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		assert_int_equal(sp_det_tune_set(&t, bad[i], err, sizeof err), -1);
		assert_memory_equal(&t, &before, sizeof t); /* unchanged on error */
	}
	assert_int_equal(sp_det_tune_set(&t, "nosync=4", err, sizeof err), -1);
	assert_non_null(strstr(err, "unknown tunable 'nosync'"));
	assert_non_null(strstr(err, "known: ring_tokens, "));
	assert_non_null(strstr(err, "defer_steps"));
	assert_int_equal(sp_det_tune_set(&t, "nosync_repeats=0", err, sizeof err), -1);
	assert_non_null(strstr(err, "from 1 to 1024 (default 8)"));
}

/* A loop without a host synchronisation whose wrap is a CPU gap: the learner locks once
 * nosync_repeats copies and the confirmation are in; fewer asked, it locks sooner. Returns the
 * iteration it locked in, or -1. */
static int lock_iteration(const struct sp_det_tune *t)
{
	struct sp_autostep a;
	uint64_t ts = 1000000;
	int k;
	assert_int_equal(sp_autostep_init_tuned(&a, t), 0);
	for (k = 0; k < 100 && !a.locked; k++)
		for (uint32_t i = 0; i < 20 && !a.locked; i++)
			sp_autostep_feed(&a, (100 + i) | SP_AUTOSTEP_KERNEL, ts += i ? 5000 : 300000);
	int locked = a.locked ? k : -1;
	sp_autostep_free(&a);
	return locked;
}

static void the_learner_reads_the_table(void **state)
{
	struct sp_det_tune t = sp_det_tune_default;
	char err[256];
	int by_default = lock_iteration(&t);
	assert_true(by_default > (int)t.nosync_repeats);
	assert_int_equal(sp_det_tune_set(&t, "nosync_repeats=3", err, sizeof err), 0);
	int sooner = lock_iteration(&t);
	assert_true(sooner > 0 && sooner < by_default);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table_covers_every_field),
		cmocka_unit_test(set_by_name),
		cmocka_unit_test(the_learner_reads_the_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
