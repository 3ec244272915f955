/* SPDX-License-Identifier: MIT */
/* test_hold.c - the states of stepprof's hold on CUPTI (decide/hold.h): a move happens only if the
 * table has it and the state is the one expected; the table itself (every state reachable, the
 * final detach and the fork child covered). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "decide/hold.h"

static void test_step(void **state)
{
	(void)state;
	_Atomic int st = SP_HOLD_NONE;
	int seen = -1;
	assert_int_equal(sp_hold_step(&st, SP_HOLD_NONE, SP_HOLD_ATTACHED, &seen), 0);
	assert_int_equal(atomic_load(&st), SP_HOLD_ATTACHED);
	/* not from the state it is in: refused, and says what it was */
	assert_int_equal(sp_hold_step(&st, SP_HOLD_PARKED, SP_HOLD_ATTACHED, &seen), -2);
	assert_int_equal(seen, SP_HOLD_ATTACHED);
	assert_int_equal(atomic_load(&st), SP_HOLD_ATTACHED);
	/* not in the table: refused even from the right state (a detach always quiesces first) */
	assert_int_equal(sp_hold_step(&st, SP_HOLD_ATTACHED, SP_HOLD_DETACHING, &seen), -1);
	assert_int_equal(sp_hold_step(&st, SP_HOLD_ATTACHED, SP_HOLD_NONE, &seen), -1);
	assert_int_equal(sp_hold_step(&st, SP_HOLD_ATTACHED, SP_HOLD_PARKED, &seen), -1);
	assert_int_equal(atomic_load(&st), SP_HOLD_ATTACHED);
	/* a park: attached, quiescing, detaching, none, parked, then attached again */
	assert_int_equal(sp_hold_step(&st, SP_HOLD_ATTACHED, SP_HOLD_QUIESCING, NULL), 0);
	assert_int_equal(sp_hold_step(&st, SP_HOLD_QUIESCING, SP_HOLD_DETACHING, NULL), 0);
	assert_int_equal(sp_hold_step(&st, SP_HOLD_DETACHING, SP_HOLD_NONE, NULL), 0);
	assert_int_equal(sp_hold_step(&st, SP_HOLD_NONE, SP_HOLD_PARKED, NULL), 0);
	assert_int_equal(sp_hold_step(&st, SP_HOLD_PARKED, SP_HOLD_ATTACHED, NULL), 0);
	assert_int_equal(atomic_load(&st), SP_HOLD_ATTACHED);
}

static void test_table(void **state)
{
	(void)state;
	bool reached[SP_HOLD_NSTATES] = { [SP_HOLD_NONE] = true };
	for (unsigned i = 0; i < sp_hold_nmoves; i++) {
		const struct sp_hold_move *m = &sp_hold_moves[i];
		assert_true(m->from != m->to);
		assert_true(m->asker && *m->asker && m->thread && *m->thread);
		reached[m->to] = true;
		for (unsigned j = 0; j < i; j++) /* one row a move */
			assert_false(sp_hold_moves[j].from == m->from && sp_hold_moves[j].to == m->to);
	}
	for (int s = 0; s < SP_HOLD_NSTATES; s++) {
		assert_true(reached[s]);
		assert_string_not_equal(sp_hold_name(s), "?");
		/* a fork child leaves every state for GONE */
		assert_true(s == SP_HOLD_GONE || sp_hold_allowed((enum sp_hold)s, SP_HOLD_GONE));
	}
	assert_string_equal(sp_hold_name(SP_HOLD_NSTATES), "?");
	assert_string_equal(sp_hold_name(-1), "?");
	/* nothing leaves GONE but an on-demand re-attach */
	for (int s = 0; s < SP_HOLD_NSTATES; s++)
		assert_int_equal(sp_hold_allowed(SP_HOLD_GONE, (enum sp_hold)s), s == SP_HOLD_ATTACHED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step),
		cmocka_unit_test(test_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
