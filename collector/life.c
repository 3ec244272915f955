/* SPDX-License-Identifier: MIT */
/* life.c - the CUPTI life-cycle decision (see life.h): pure functions over what the collector
 * knows. Never calls CUPTI, reads a clock or takes a lock. */
#include <stddef.h>
#include "life.h"

/* Rules, in order:
 * 1. busy (collecting, a window not yet written, activity kinds on): stay. Records still arrive.
 * 2. the schedule is done: detach for good (any policy: nothing will ever be recorded again).
 * 3. CUPTI is clean (no activity kind since it was last initialised): stay, nothing to remove.
 * 4. detach_between = never, or cycling was stopped: stay.
 * 5. detach_between = auto, and the program made a CUDA graph (kernels of graphs created before
 *    a re-attach may be invisible to the new CUPTI) or the marker is NVTX (its injection is
 *    CUPTI's and is not re-armed by a new subscription): stay.
 * 6. the next window is fewer than SP_LIFE_MIN_GAP steps away, or no step began just now (the
 *    detach must fall inside one step, not across a boundary the marker needs): stay.
 * 7. otherwise: cycle (detach, re-attach with the marker's callbacks only). */
enum sp_life_act sp_life_decide(const struct sp_life_view *v)
{
	if (v->busy)
		return SP_LIFE_STAY;
	if (v->done)
		return SP_LIFE_DETACH;
	if (!v->dirty || v->stopped || v->policy == SP_DETACH_NEVER)
		return SP_LIFE_STAY;
	if (v->policy == SP_DETACH_AUTO && (v->graphs || v->marker == SP_MARK_NVTX))
		return SP_LIFE_STAY;
	if (v->steps_to_window < SP_LIFE_MIN_GAP || !v->fresh_step)
		return SP_LIFE_STAY;
	return SP_LIFE_CYCLE;
}

const char *sp_life_act_name(unsigned act)
{
	static const char *const names[] = { "stay", "cycle", "detach" };
	return act < sizeof names / sizeof *names ? names[act] : "?";
}

int64_t sp_life_steps_to_window(const struct sp_schedule *s, int64_t step, int64_t horizon)
{
	if (sp_schedule_done(s, step))
		return INT64_MAX;
	for (int64_t k = 1; k <= horizon; k++)
		if (sp_schedule_action(s, step + k) != SP_ACT_NONE)
			return k - 1;
	return INT64_MAX;
}

void sp_life_pace_note(struct sp_life_pace *p, int64_t step, uint64_t start)
{
	if (step == p->step)
		return;
	if (p->seen < 1u << 30 && step > p->step && p->step >= 0 && start > p->start) {
		/* the ticks may skip boundaries: the average over the steps between two samples */
		uint64_t len = (start - p->start) / (uint64_t)(step - p->step);
		if (!p->shortest || len < p->shortest)
			p->shortest = len;
		p->seen++;
	}
	p->step = step;
	p->start = start;
}

int sp_life_pace_safe(const struct sp_life_pace *p, uint64_t since, uint64_t gap)
{
	if (p->seen < 2 || !p->shortest)
		return 0;
	return since + gap < p->shortest / 4 * 3;
}
