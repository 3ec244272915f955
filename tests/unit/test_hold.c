/* SPDX-License-Identifier: MIT */
/* test_hold.c - the states of stepprof's hold on CUPTI (decide/hold.h): a move happens only if the
 * table has it and the state is the one expected; the table itself (every state reachable, the
 * final detach and the fork child covered); docs/ARCHITECTURE.md shows the same states and moves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Splits a Markdown table row "| a | b |" into at most max cells (in place). Returns the count,
 * 0 if the line is not a row. */
static int cells(char *line, char **cell, int max)
{
	size_t n = strcspn(line, "\n");
	line[n] = 0;
	if (strncmp(line, "| ", 2) || n < 4 || strcmp(line + n - 2, " |"))
		return 0;
	line[n - 2] = 0;
	int k = 0;
	for (char *p = line + 2; p && k < max; k++) {
		cell[k] = p;
		p = strstr(p, " | ");
		if (p)
			*p = 0, p += 3;
	}
	return k;
}

static int state_named(const char *name)
{
	for (int s = 0; s < SP_HOLD_NSTATES; s++)
		if (!strcmp(sp_hold_name(s), name))
			return s;
	return -1;
}

/* The doc's state and move tables, row by row, against the code's. */
static void test_doc(void **state)
{
	(void)state;
	const char *root = getenv("SP_ROOT");
	char path[4096], line[2048], *cell[5];
	snprintf(path, sizeof path, "%s/docs/ARCHITECTURE.md", root && *root ? root : ".");
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot read %s (set SP_ROOT to the source tree)", path);
	int nstates = 0;
	unsigned nmoves = 0;
	while (fgets(line, sizeof line, f)) {
		int k = cells(line, cell, 5);
		if (k < 2 || state_named(cell[0]) < 0)
			continue;
		if (k == 2) { /* | State | Meaning |, in the enum's order */
			assert_int_equal(state_named(cell[0]), nstates);
			nstates++;
			continue;
		}
		assert_int_equal(k, 4);
		if (nmoves >= sp_hold_nmoves)
			fail_msg("docs/ARCHITECTURE.md has a move the code lacks: %s -> %s", cell[0], cell[1]);
		const struct sp_hold_move *m = &sp_hold_moves[nmoves++];
		if (strcmp(cell[0], sp_hold_name(m->from)) || strcmp(cell[1], sp_hold_name(m->to)) ||
		    strcmp(cell[2], m->asker) || strcmp(cell[3], m->thread))
			fail_msg("docs/ARCHITECTURE.md's move %u reads '%s | %s | %s | %s', the code's '%s | %s | %s | %s'",
				 nmoves, cell[0], cell[1], cell[2], cell[3], sp_hold_name(m->from), sp_hold_name(m->to),
				 m->asker, m->thread);
	}
	fclose(f);
	assert_int_equal(nstates, SP_HOLD_NSTATES);
	assert_int_equal(nmoves, sp_hold_nmoves);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_doc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
