/* SPDX-License-Identifier: MIT */
/* stepdet_int.h - inside the step detector (stepdet.h): what its stages ask of each other.
 * stepdet.c feeds tokens and keeps the steps, regime.c numbers them by regime, stepcheck.c checks
 * each step while locked. Internal to decide/. */
#ifndef SP_STEPDET_INT_H
#define SP_STEPDET_INT_H

#include "stepdet.h"

/* The current regime, or NULL while learning. */
static inline struct sp_det_regime *sp_det_cur(struct sp_stepdet *d)
{
	return d->regimes.cur ? &d->regimes.r[d->regimes.cur - 1] : NULL;
}

/* stepdet.c: a boundary at time ts: step d->step + 1 begins (flags: SP_DET_AFTER). */
void sp_det_boundary(struct sp_stepdet *d, uint64_t ts, unsigned flags, struct sp_det_out *out);
/* stepdet.c: learning starts (again). */
void sp_det_start_learning(struct sp_stepdet *d, struct sp_det_out *out);
/* stepdet.c: sets the wants to what a locked detector watches, flagging a change in out. */
void sp_det_watch(struct sp_stepdet *d, struct sp_det_out *out);

/* regime.c: 1 if the current regime's steps do not count towards the schedule. */
int sp_det_minor(const struct sp_stepdet *d);
/* Steps in a row a regime without training evidence runs before its steps count (regime.c). */
uint64_t sp_det_defer_steps(const struct sp_stepdet *d);
/* regime.c: the learner locked at token t: finds or opens the regime and numbers the open step. */
void sp_det_lock(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out);
/* regime.c: the locked regime's next step begins at ts (flags as for sp_det_boundary): it counts
 * towards the regime's proof (SP_DET_PROVEN) and its steps. */
void sp_det_regime_next(struct sp_stepdet *d, uint64_t ts, unsigned flags, struct sp_det_out *out);
/* regime.c: hands out the schedule step of the step that just began (never going back). */
void sp_det_hand_out(struct sp_stepdet *d);
/* regime.c: 1 if the kernel name (interned) says optimizer step. */
int sp_det_optimizer_kernel(struct sp_stepdet *d, uint32_t id);

/* advice.c: the explicit marker to suggest when undecided, checked on the learner's ring (once
 * in every copy of a candidate period, launches between), and what it would give, into buf.
 * Returns 1, or 0 if none qualifies (buf untouched). */
int sp_det_advice(struct sp_stepdet *d, char *buf, size_t n);

/* stepcheck.c: an anchor occurrence while locked (it may end the step, or refute it). */
void sp_det_anchor_hit(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out);
/* stepcheck.c: a kernel or graph launch while locked (counted in a counted step). */
void sp_det_launch(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out);

#endif
