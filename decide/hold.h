/* SPDX-License-Identifier: MIT */
/* hold.h - the states of stepprof's hold on CUPTI and the written table of moves between them.
 * collector/hold/ makes every move through sp_hold_step, a compare-and-swap from the state it
 * expects; no other code stores the state. docs/ARCHITECTURE.md shows the same table (a test
 * compares them). Pure: no CUPTI, no clock, no lock. */
#ifndef SP_HOLD_H
#define SP_HOLD_H

#include <stdatomic.h>
#include <stdbool.h>

enum sp_hold {
	SP_HOLD_NONE = 0,  /* not subscribed: before the first attach, inside a cycle, or an attach failed */
	SP_HOLD_PARKED,    /* not subscribed until the next window: the preload's hooks count marker calls */
	SP_HOLD_ATTACHED,  /* subscribed: CUPTI calls allowed */
	SP_HOLD_QUIESCING, /* a detach waits for callbacks in flight: new ones wait for its verdict */
	SP_HOLD_DETACHING, /* the writer thread is finalising: callbacks return at once */
	SP_HOLD_GONE,      /* detached for good: no CUPTI call, unless an on-demand window re-attaches */
	SP_HOLD_NSTATES
};

/* One allowed move: who asks for it, and on which thread (the words docs/ARCHITECTURE.md shows). */
struct sp_hold_move {
	enum sp_hold from, to;
	const char *asker;
	const char *thread;
};

extern const struct sp_hold_move sp_hold_moves[];
extern const unsigned sp_hold_nmoves;

/* The state's name as the table writes it ("ATTACHED"), or "?" out of range. Can't fail. */
const char *sp_hold_name(int state);
/* Whether the table has the move from -> to. Can't fail. */
bool sp_hold_allowed(enum sp_hold from, enum sp_hold to);
/* Moves *state from `from` to `to`: returns 0 if the table has the move and *state was `from`
 * (compare-and-swap); -1 if the table has no such move, -2 if *state was not `from` (*seen says
 * what it was); then nothing changed. */
int sp_hold_step(_Atomic int *state, enum sp_hold from, enum sp_hold to, int *seen);

#endif
