/* SPDX-License-Identifier: MIT */
/* hold.c - the table of moves of stepprof's hold on CUPTI (hold.h) and the one function that makes
 * a move. Never calls CUPTI, reads a clock or takes a lock. */
#include <stddef.h>
#include "hold.h"

#define INIT "the program's thread that initialises CUDA"
#define TICK "the tick" /* the writer after a pass, or an application thread before it exists */
#define APP "the tick or an application thread, under the park lock"

/* Every move the collector makes, in the order docs/ARCHITECTURE.md lists them; a fork child
 * (one thread, nothing to wait for) moves from any state to GONE. */
const struct sp_hold_move sp_hold_moves[] = {
	{ SP_HOLD_NONE, SP_HOLD_ATTACHED, "the first subscription; a cycle's re-attach", INIT "; " TICK },
	{ SP_HOLD_NONE, SP_HOLD_PARKED, "starting parked (hook learning, the Python bridge); a park, once detached",
	  INIT "; " TICK },
	{ SP_HOLD_NONE, SP_HOLD_GONE, "a cycle whose re-attach failed; a fork child", TICK "; the child" },
	{ SP_HOLD_PARKED, SP_HOLD_ATTACHED,
	  "an unpark: the tick before a window, or the hooks, hook learning, the Python bridge or the program's "
	  "profiler needing CUPTI (sp_cupti_life_attach_now)",
	  APP },
	{ SP_HOLD_PARKED, SP_HOLD_GONE, "the schedule is done while parked; an unpark whose attach failed; a fork child",
	  APP "; the child" },
	{ SP_HOLD_ATTACHED, SP_HOLD_QUIESCING, "a detach begins (a cycle, a park, the final detach)", TICK },
	{ SP_HOLD_ATTACHED, SP_HOLD_GONE, "a fork child", "the child" },
	{ SP_HOLD_QUIESCING, SP_HOLD_ATTACHED, "a detach called off: callbacks did not drain, or a marker call is in it",
	  TICK },
	{ SP_HOLD_QUIESCING, SP_HOLD_DETACHING, "callbacks drained and no marker call in progress", TICK },
	{ SP_HOLD_QUIESCING, SP_HOLD_GONE, "a fork child", "the child" },
	{ SP_HOLD_DETACHING, SP_HOLD_ATTACHED,
	  "a detach called off: calls did not drain, or a hooked CUDA call or a kernel launch is in progress",
	  TICK },
	{ SP_HOLD_DETACHING, SP_HOLD_NONE, "detached between windows (a cycle, a park)", TICK },
	{ SP_HOLD_DETACHING, SP_HOLD_GONE, "detached for good (the schedule is done); a fork child",
	  TICK "; the child" },
	{ SP_HOLD_GONE, SP_HOLD_ATTACHED, "an on-demand window after the final detach (sp_cupti_life_reattach)",
	  "the on-demand thread" },
};
const unsigned sp_hold_nmoves = sizeof sp_hold_moves / sizeof sp_hold_moves[0];

const char *sp_hold_name(int state)
{
	static const char *const names[SP_HOLD_NSTATES] = {
		[SP_HOLD_NONE] = "NONE",           [SP_HOLD_PARKED] = "PARKED",
		[SP_HOLD_ATTACHED] = "ATTACHED",   [SP_HOLD_QUIESCING] = "QUIESCING",
		[SP_HOLD_DETACHING] = "DETACHING", [SP_HOLD_GONE] = "GONE",
	};
	return state >= 0 && state < SP_HOLD_NSTATES ? names[state] : "?";
}

bool sp_hold_allowed(enum sp_hold from, enum sp_hold to)
{
	for (unsigned i = 0; i < sp_hold_nmoves; i++)
		if (sp_hold_moves[i].from == from && sp_hold_moves[i].to == to)
			return true;
	return false;
}

int sp_hold_step(_Atomic int *state, enum sp_hold from, enum sp_hold to, int *seen)
{
	int expect = (int)from;
	if (!sp_hold_allowed(from, to))
		return -1;
	if (atomic_compare_exchange_strong(state, &expect, (int)to))
		return 0;
	if (seen)
		*seen = expect;
	return -2;
}
