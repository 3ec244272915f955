/* SPDX-License-Identifier: MIT */
/* test_life.c - the CUPTI life-cycle decision (decide/life.h): when stepprof detaches for good,
 * when it detaches and re-attaches between windows, and when it must stay; how far the next
 * window is; and the quiet-time bound that keeps a detach between two marker calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "decide/life.h"

/* A view in which a cycle is due: between windows, activity kinds used, far from the next one. */
static struct sp_life_view due(enum sp_detach_policy policy)
{
	struct sp_life_view v = { .policy = policy,
				  .marker = SP_MARK_API,
				  .dirty = true,
				  .fresh_step = true,
				  .steps_to_window = 10 };
	return v;
}

static void test_decide(void **state)
{
	(void)state;
	struct sp_life_view v = due(SP_DETACH_AUTO);
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY); /* auto cycles only by parking (test_park) */
	v = due(SP_DETACH_ALWAYS);
	assert_int_equal(sp_life_decide(&v), SP_LIFE_CYCLE);
	v = due(SP_DETACH_NEVER);
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);

	/* a window collecting or not yet written: never, whatever else holds */
	for (int p = SP_DETACH_AUTO; p <= SP_DETACH_NEVER; p++) {
		v = due((enum sp_detach_policy)p);
		v.busy = true;
		assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
		v.done = true;
		assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
		/* the schedule is done and every window written: detach for good, with any policy, even
		 * when clean, stopped, or not at a step start */
		v = (struct sp_life_view){ .policy = (enum sp_detach_policy)p,
					   .done = true,
					   .stopped = true,
					   .marker = SP_MARK_NVTX };
		assert_int_equal(sp_life_decide(&v), SP_LIFE_DETACH);
		assert_null(sp_life_stay_reason(&v));
		/* ... but never once the program made a CUDA graph (cuptiFinalize breaks its replays) */
		v.graphs = true;
		assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
		assert_ptr_equal(sp_life_stay_reason(&v), sp_life_graphs);
		v.busy = v.closing = true; /* the last window still being written: said once it is */
		assert_null(sp_life_stay_reason(&v));
	}

	/* nothing to remove: CUPTI was never dirtied since it was (re)initialised */
	v = due(SP_DETACH_ALWAYS);
	v.dirty = false;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	/* stopped after a failure or a possible missed boundary */
	v = due(SP_DETACH_ALWAYS);
	v.stopped = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	/* a CUDA graph keeps the subscription under every policy; auto keeps it for NVTX markers,
	 * always does not */
	for (int p = SP_DETACH_AUTO; p <= SP_DETACH_NEVER; p++) {
		v = due((enum sp_detach_policy)p);
		v.graphs = true;
		assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
		v.hook_ok = true;
		assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	}
	v = due(SP_DETACH_AUTO);
	v.marker = SP_MARK_NVTX;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.policy = SP_DETACH_ALWAYS;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_CYCLE);
	/* the next window too close, or not just after a boundary */
	v = due(SP_DETACH_ALWAYS);
	v.steps_to_window = SP_LIFE_MIN_GAP - 1;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.steps_to_window = SP_LIFE_MIN_GAP;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_CYCLE);
	v.fresh_step = false;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);

	assert_string_equal(sp_life_act_name(SP_LIFE_STAY), "stay");
	assert_string_equal(sp_life_act_name(SP_LIFE_CYCLE), "cycle");
	assert_string_equal(sp_life_act_name(SP_LIFE_DETACH), "detach");
	assert_string_equal(sp_life_act_name(7), "?");
}

/* Parking: only once the hooks are proven, far enough from the next window, under any policy but
 * never (and auto's rules about graphs and NVTX still hold); parked, re-attach when the window is
 * near or has begun, detach for good when the schedule is done. */
static void test_park(void **state)
{
	(void)state;
	struct sp_life_view v = due(SP_DETACH_AUTO);
	v.hook_ok = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_PARK);
	v.fresh_step = false; /* a parked stepprof misses no marker call: no timing needed */
	assert_int_equal(sp_life_decide(&v), SP_LIFE_PARK);
	v.steps_to_window = SP_LIFE_MIN_GAP + SP_LIFE_PARK_MARGIN - 1;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	assert_ptr_equal(sp_life_stay_reason(&v), sp_life_too_close);
	v = due(SP_DETACH_NEVER);
	v.hook_ok = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v = due(SP_DETACH_AUTO);
	v.hook_ok = v.graphs = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.policy = SP_DETACH_ALWAYS;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v = due(SP_DETACH_AUTO);
	v.hook_ok = true;
	v.busy = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v = due(SP_DETACH_AUTO);
	v.hook_ok = true;
	v.stopped = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);

	v = (struct sp_life_view){ .policy = SP_DETACH_AUTO, .parked = true, .steps_to_window = INT64_MAX };
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	assert_null(sp_life_stay_reason(&v));
	v.steps_to_window = SP_LIFE_UNPARK_AT;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.steps_to_window = SP_LIFE_UNPARK_AT - 1;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_UNPARK);
	v.steps_to_window = 100;
	v.busy = true; /* a window began while parked: re-attach at once */
	assert_int_equal(sp_life_decide(&v), SP_LIFE_UNPARK);
	v.done = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_DETACH);
	/* the automatic marker: parks only while its detector needs no launch (sparse, between counted
	 * steps); parked, a detector that wants launches again (a probe, learning) re-attaches at once */
	v = due(SP_DETACH_AUTO);
	v.marker = SP_MARK_AUTO;
	v.hook_ok = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_PARK);
	v.det_busy = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	assert_ptr_equal(sp_life_stay_reason(&v), sp_life_det_busy);
	v.policy = SP_DETACH_ALWAYS;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v = (struct sp_life_view){ .policy = SP_DETACH_AUTO,
				   .marker = SP_MARK_AUTO,
				   .parked = true,
				   .steps_to_window = INT64_MAX };
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.det_busy = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_UNPARK);
	/* learning from the hooks ([marker] learn = hooks): parked although learning, until a window
	 * comes near or begins */
	v.hook_learn = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.steps_to_window = SP_LIFE_UNPARK_AT - 1;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_UNPARK);
	v.steps_to_window = INT64_MAX;
	v.busy = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_UNPARK);
	v.busy = false;
	v.done = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_DETACH);
	assert_string_equal(sp_life_act_name(SP_LIFE_PARK), "park");
	assert_string_equal(sp_life_act_name(SP_LIFE_UNPARK), "unpark");
}

static void test_steps_to_window(void **state)
{
	(void)state;
	/* wait 20, warmup 1, active 20, repeat 0: steps 0-19 NONE, 20 WARMUP, 21-40 RECORD, 41-60 NONE... */
	struct sp_schedule s = { .wait = 20, .warmup = 1, .active = 20, .repeat = 0 };
	assert_int_equal(sp_life_steps_to_window(&s, -1, 1000), 20);
	assert_int_equal(sp_life_steps_to_window(&s, 0, 1000), 19);
	assert_int_equal(sp_life_steps_to_window(&s, 19, 1000), 0);
	assert_int_equal(sp_life_steps_to_window(&s, 40, 1000), 20); /* RECORD_AND_SAVE at 40; next WARMUP 61 */
	assert_int_equal(sp_life_steps_to_window(&s, 41, 1000), 19);
	/* beyond the horizon: as good as none */
	assert_true(sp_life_steps_to_window(&s, 41, 5) == INT64_MAX);
	/* one window, then done */
	struct sp_schedule one = { .wait = 100, .warmup = 0, .active = 20, .repeat = 1 };
	assert_int_equal(sp_life_steps_to_window(&one, 50, 1000), 49);
	assert_true(sp_life_steps_to_window(&one, 119, 1000) == INT64_MAX);
	assert_true(sp_life_steps_to_window(&one, 500, 1000) == INT64_MAX);
}

static void test_quiet(void **state)
{
	(void)state;
	/* fewer than two quiet times measured, or none: never */
	assert_int_equal(sp_life_quiet_fresh(8000000, 1, 0), 0);
	assert_int_equal(sp_life_quiet_fresh(0, 5, 0), 0);
	assert_int_equal(sp_life_quiet_fits(8000000, 1, 0, 0), 0);
	/* 8 ms between marker calls: start within 2 ms, end within 6 ms */
	assert_int_equal(sp_life_quiet_fresh(8000000, 2, 1999999), 1);
	assert_int_equal(sp_life_quiet_fresh(8000000, 2, 2000000), 0);
	assert_int_equal(sp_life_quiet_fits(8000000, 2, 1000000, 4999999), 1);
	assert_int_equal(sp_life_quiet_fits(8000000, 2, 1000000, 5000000), 0);
	assert_int_equal(sp_life_quiet_fits(8000000, 9, 0, 6000000), 0);
}

/* The reason said for staying, for each rule; none when nothing is held back. */
static void test_stay_reason(void **state)
{
	(void)state;
	struct sp_life_view v = due(SP_DETACH_ALWAYS);
	assert_null(sp_life_stay_reason(&v)); /* a cycle is due */
	v = due(SP_DETACH_AUTO);
	assert_non_null(strstr(sp_life_stay_reason(&v), "hooks")); /* auto: a park or nothing */
	v.hook_ok = true;
	assert_null(sp_life_stay_reason(&v));
	v.busy = true;
	assert_null(sp_life_stay_reason(&v));
	/* the last window still being written: said only once the next one is too close to detach for */
	v.closing = true;
	assert_null(sp_life_stay_reason(&v));
	v.steps_to_window = SP_LIFE_MIN_GAP + SP_LIFE_PARK_MARGIN - 1;
	assert_ptr_equal(sp_life_stay_reason(&v), sp_life_closing);
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.policy = SP_DETACH_NEVER;
	assert_non_null(strstr(sp_life_stay_reason(&v), "never")); /* the policy first */
	v = due(SP_DETACH_AUTO);
	v.dirty = false;
	assert_null(sp_life_stay_reason(&v)); /* nothing to remove */
	/* clean after a window (a re-attach for automatic detection's check): stays, though the hooks
	 * are proven (parking again would make the next step stand out again) */
	v.hook_ok = true;
	v.steps_to_window = INT64_MAX;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	/* clean before the first window (early: an application thread asks) but subscribed: parks once
	 * the hooks are proven, for a window far away, under auto and always but never under never */
	v.early = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_PARK);
	v.policy = SP_DETACH_ALWAYS;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_PARK);
	v.policy = SP_DETACH_NEVER;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.policy = SP_DETACH_AUTO;
	v.steps_to_window = SP_LIFE_EARLY_GAP - 1;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.steps_to_window = SP_LIFE_EARLY_GAP;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_PARK);
	v.steps_to_window = INT64_MAX; /* no window within the horizon */
	v.det_busy = true;           /* automatic detection counting a step's launches */
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.det_busy = false;
	v.graphs = true;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.graphs = false;
	v.hook_ok = false; /* clean, hooks not proven: nothing to remove, nothing a cycle could do */
	v.policy = SP_DETACH_ALWAYS;
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v = due(SP_DETACH_AUTO);
	v.graphs = true;
	assert_ptr_equal(sp_life_stay_reason(&v), sp_life_graphs);
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
	v.policy = SP_DETACH_ALWAYS;
	assert_ptr_equal(sp_life_stay_reason(&v), sp_life_graphs);
	v = due(SP_DETACH_AUTO);
	v.marker = SP_MARK_NVTX;
	assert_non_null(strstr(sp_life_stay_reason(&v), "NVTX"));
	v = due(SP_DETACH_NEVER);
	assert_non_null(strstr(sp_life_stay_reason(&v), "never"));
	v = due(SP_DETACH_ALWAYS);
	v.stopped = true;
	assert_non_null(strstr(sp_life_stay_reason(&v), "stopped"));
	v = due(SP_DETACH_ALWAYS);
	v.steps_to_window = SP_LIFE_MIN_GAP - 1;
	assert_ptr_equal(sp_life_stay_reason(&v), sp_life_too_close);
	v = due(SP_DETACH_ALWAYS);
	v.fresh_step = false;
	assert_ptr_equal(sp_life_stay_reason(&v), sp_life_not_fresh);
	assert_int_equal(sp_life_decide(&v), SP_LIFE_STAY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decide),          cmocka_unit_test(test_park),
		cmocka_unit_test(test_steps_to_window), cmocka_unit_test(test_quiet),
		cmocka_unit_test(test_stay_reason),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
