/* SPDX-License-Identifier: MIT */
/* test_schedule.c - config/schedule.c against torch: every case of tests/data/schedule_torch.txt
 * (computed by real torch 2.11 with tests/gpu/gen_schedule_tables.py; a missing file FAILS),
 * hand-written tables for the edges of torch's source, torch's asserts, profiling_frequency and
 * sp_schedule_done. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/schedule.h"

static const char *const names[] = { "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE" };

/* Schedule from the six numbers, frequency 0. */
static struct sp_schedule sched(int64_t skip_first, int64_t sfw, int64_t wait, int64_t warmup, int64_t active,
				int64_t repeat)
{
	return (struct sp_schedule){ skip_first, sfw, wait, warmup, active, repeat, 0 };
}

/* Asserts the actions of steps 0.. against a string of letters: N W R S (RECORD_AND_SAVE). */
static void expect_actions(const struct sp_schedule *s, const char *want)
{
	for (int64_t i = 0; want[i]; i++) {
		enum sp_action a = sp_schedule_action(s, i);
		if ("NWRS"[a] != want[i])
			fail_msg("step %lld: got %s, want %c (table %s)", (long long)i, names[a], want[i], want);
	}
}

/* The brute-force meaning of sp_schedule_done: nothing after step is ever non-NONE
 * (checked up to a horizon of several cycles). */
static int done_slow(const struct sp_schedule *s, int64_t step)
{
	int64_t cycle = s->wait + s->warmup + s->active;

	for (int64_t i = step + 1; i < step + 3 * cycle + s->skip_first + 3; i++)
		if (sp_schedule_action(s, i) != SP_ACT_NONE)
			return 0;
	return 1;
}

static void test_torch_reference_table(void **state)
{
	(void)state;
	char path[1024], line[8192];
	const char *root = getenv("SP_ROOT");
	int cases = 0, steps_checked = 0;

	snprintf(path, sizeof(path), "%s/tests/data/schedule_torch.txt", root ? root : ".");
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("%s is missing: generate it with tests/gpu/gen_schedule_tables.py on a machine "
			 "with torch",
			 path);
	while (fgets(line, sizeof(line), f)) {
		long long v[7];
		int off = 0;
		if (line[0] == '#')
			continue;
		if (sscanf(line,
			   "skip_first=%lld skip_first_wait=%lld wait=%lld warmup=%lld active=%lld "
			   "repeat=%lld steps=%lld:%n",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &off) != 7 ||
		    !off)
			fail_msg("%s: malformed line: %s", path, line);
		struct sp_schedule s = sched(v[0], v[1], v[2], v[3], v[4], v[5]);
		char err[256];
		assert_int_equal(sp_schedule_finish(&s, err, sizeof(err)), 0);
		char *save, *tok = strtok_r(line + off, " \n", &save);
		int64_t step = 0;
		for (; tok; tok = strtok_r(NULL, " \n", &save), step++) {
			enum sp_action a = sp_schedule_action(&s, step);
			if (strcmp(names[a], tok))
				fail_msg("case %s step %lld: got %s, torch says %s", line, (long long)step, names[a],
					 tok);
			/* done() agrees with the table: once done, only NONE follows */
			assert_int_equal(sp_schedule_done(&s, step), done_slow(&s, step));
			steps_checked++;
		}
		assert_int_equal(step, v[6]);
		cases++;
	}
	fclose(f);
	print_message("  %d torch cases, %d steps\n", cases, steps_checked);
	assert_true(cases >= 800); /* the generator writes 868 */
}

/* Tables derived by hand from torch/profiler/profiler.py. */
static void test_hand_tables(void **state)
{
	(void)state;
	struct sp_schedule s;

	/* the docstring's example: wait=1, warmup=1, active=2, repeat=1 */
	s = sched(0, 0, 1, 1, 2, 1);
	expect_actions(&s, "NWRSNNNNNN");
	/* repeat = 0 cycles forever */
	s = sched(0, 0, 1, 1, 2, 0);
	expect_actions(&s, "NWRSNWRSNWRSNWRS");
	/* skip_first, then two cycles */
	s = sched(2, 0, 1, 1, 2, 2);
	expect_actions(&s, "NNNWRSNWRSNNNN");
	/* skip_first_wait: the first cycle starts with warmup; the docstring's numbers: skip_first 10,
	 * wait 20 waits 30 steps without it, 10 with it */
	s = sched(10, 0, 20, 1, 1, 2);
	assert_int_equal(sp_schedule_action(&s, 29), SP_ACT_NONE);
	assert_int_equal(sp_schedule_action(&s, 30), SP_ACT_WARMUP);
	s.skip_first_wait = 1;
	assert_int_equal(sp_schedule_action(&s, 9), SP_ACT_NONE);
	assert_int_equal(sp_schedule_action(&s, 10), SP_ACT_WARMUP);
	assert_int_equal(sp_schedule_action(&s, 11), SP_ACT_RECORD_AND_SAVE);
	assert_int_equal(sp_schedule_action(&s, 12), SP_ACT_NONE);
	assert_int_equal(sp_schedule_action(&s, 32), SP_ACT_WARMUP);
	assert_int_equal(sp_schedule_action(&s, 33), SP_ACT_RECORD_AND_SAVE);
	/* and the repeat count includes the skipped wait: 2 cycles, then nothing */
	for (int64_t i = 34; i < 200; i++)
		assert_int_equal(sp_schedule_action(&s, i), SP_ACT_NONE);
	/* skip_first_wait is torch's int flag: any nonzero value */
	s.skip_first_wait = 7;
	assert_int_equal(sp_schedule_action(&s, 10), SP_ACT_WARMUP);
	/* warmup = 0: straight from NONE to RECORD */
	s = sched(0, 0, 2, 0, 2, 1);
	expect_actions(&s, "NNRSNN");
	/* active = 1: every cycle's only recorded step is RECORD_AND_SAVE */
	s = sched(0, 0, 0, 0, 1, 3);
	expect_actions(&s, "SSSNNN");
	/* wait = 0 with warmup */
	s = sched(1, 1, 0, 1, 1, 0);
	expect_actions(&s, "NWSWSWS");
	/* a negative step (torch asserts) and an invalid schedule give NONE, never a crash */
	s = sched(0, 0, 0, 0, 1, 0);
	assert_int_equal(sp_schedule_action(&s, -1), SP_ACT_NONE);
	s = sched(0, 0, 0, 0, 0, 0);
	assert_int_equal(sp_schedule_action(&s, 5), SP_ACT_NONE);
	assert_int_equal(sp_schedule_done(&s, 0), 1);
	/* huge steps: no overflow, same cycle arithmetic */
	s = sched(1000000000, 1, 1000000000, 1000000000, 1000000000, 0);
	/* INT64_MAX - skip_first + wait = INT64_MAX; mod 3e9 = 1854775807: in the warmup */
	assert_int_equal(sp_schedule_action(&s, INT64_MAX), SP_ACT_WARMUP);
	int64_t step = 1000000000 + 3000000000LL * 1000000; /* skip_first + a whole number of cycles */
	assert_int_equal(sp_schedule_action(&s, step), SP_ACT_WARMUP); /* wait skipped: shift by wait */
	assert_int_equal(sp_schedule_action(&s, step + 999999999), SP_ACT_WARMUP);
	assert_int_equal(sp_schedule_action(&s, step + 1000000000), SP_ACT_RECORD);
	assert_int_equal(sp_schedule_action(&s, step + 1999999999), SP_ACT_RECORD_AND_SAVE);
	assert_int_equal(sp_schedule_action(&s, step + 2000000000), SP_ACT_NONE);
	assert_int_equal(sp_schedule_done(&s, INT64_MAX), 0); /* repeat = 0: never done */
}

/* torch's asserts, ours, and profiling_frequency. */
static void test_finish(void **state)
{
	(void)state;
	static const struct {
		struct sp_schedule s;
		const char *err;
	} bad[] = {
		{ { 0, 0, -1, 1, 1, 0, 0 }, "wait: out of range: -1 (allowed: integer 0..1000000000)" },
		{ { 0, 0, 0, -1, 1, 0, 0 }, "warmup: out of range: -1 (allowed: integer 0..1000000000)" },
		{ { 0, 0, 0, 0, 0, 0, 0 }, "active: out of range: 0 (allowed: integer 1..1000000000)" },
		{ { 0, 0, 0, 0, 1, -1, 0 }, "repeat: out of range: -1 (allowed: integer 0..1000000000)" },
		{ { -1, 0, 0, 0, 1, 0, 0 }, "skip_first: out of range: -1 (allowed: integer 0..1000000000)" },
		{ { 0, 0, 1000000001, 0, 1, 0, 0 }, "wait: out of range: 1000000001 (allowed: integer 0..1000000000)" },
		{ { 0, 0, 0, 0, 1, 0, -5 }, "profiling_frequency: out of range: -5 (allowed: integer 0..1000000000)" },
		{ { 0, 0, 5, 2, 1, 1, 10 },
		  "profiling_frequency: 10 is only allowed with repeat = 0, repeat is 1 "
		  "(allowed: 0 when repeat > 0)" },
		{ { 0, 0, 5, 2, 9, 0, 10 },
		  "profiling_frequency: 10 is less than warmup + active = 11 "
		  "(allowed: 0, or at least warmup + active)" },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sp_schedule s = bad[i].s;
		assert_int_equal(sp_schedule_finish(&s, err, sizeof(err)), -1);
		assert_string_equal(err, bad[i].err);
		assert_memory_equal(&s, &bad[i].s, sizeof(s)); /* unchanged */
	}
	/* the seed's example: frequency 10, warmup 2, active 1 -> wait 7; a 10-step cycle */
	struct sp_schedule s = { 0, 0, 99, 2, 1, 0, 10 };
	assert_int_equal(sp_schedule_finish(&s, err, sizeof(err)), 0);
	assert_int_equal(s.wait, 7);
	expect_actions(&s, "NNNNNNNWWSNNNNNNNWWS");
	assert_int_equal(sp_schedule_finish(&s, err, sizeof(err)), 0); /* idempotent */
	assert_int_equal(s.wait, 7);
	s = (struct sp_schedule){ 3, 0, 0, 2, 1, 0, 3 }; /* frequency == warmup + active */
	assert_int_equal(sp_schedule_finish(&s, err, sizeof(err)), 0);
	assert_int_equal(s.wait, 0);
	s = (struct sp_schedule){ 0, 0, 4, 0, 2, 3, 0 }; /* frequency 0: wait kept */
	assert_int_equal(sp_schedule_finish(&s, err, sizeof(err)), 0);
	assert_int_equal(s.wait, 4);
}

static void test_done(void **state)
{
	(void)state;
	struct sp_schedule s = sched(2, 0, 1, 1, 2, 2);

	for (int64_t i = 0; i < 9; i++)
		assert_int_equal(sp_schedule_done(&s, i), 0);
	assert_int_equal(sp_schedule_done(&s, 9), 1); /* step 9 is the last RECORD_AND_SAVE */
	s.skip_first_wait = 1;
	assert_int_equal(sp_schedule_done(&s, 7), 0);
	assert_int_equal(sp_schedule_done(&s, 8), 1);
	s.repeat = 0;
	assert_int_equal(sp_schedule_done(&s, 1000000), 0);
	for (int64_t sf = 0; sf < 3; sf++)
		for (int64_t w = 0; w < 4; w++)
			for (int64_t r = 1; r < 4; r++) {
				struct sp_schedule t = sched(sf, w & 1, w, 1, 2, r);
				for (int64_t i = 0; i < 40; i++)
					assert_int_equal(sp_schedule_done(&t, i), done_slow(&t, i));
			}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_torch_reference_table),
		cmocka_unit_test(test_hand_tables),
		cmocka_unit_test(test_finish),
		cmocka_unit_test(test_done),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
