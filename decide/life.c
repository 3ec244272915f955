/* SPDX-License-Identifier: MIT */
/* life.c - the CUPTI life-cycle decision (see life.h): pure functions over what the collector
 * knows. Never calls CUPTI, reads a clock or takes a lock. */
#include <stddef.h>
#include "life.h"

/* Rules in order, reasons in docs/ARCHITECTURE.md ("What the tick decides"). Stay: 1 busy, 2 graphs,
 * 4 never/stopped/clean/NVTX, 6 clean, 7 auto without hooks, 8 near or not fresh; 3 done: detach;
 * 5 hooks proven and window far: park; 9 cycle. Parked: unpark when near or needed. */
enum sp_life_act sp_life_decide(const struct sp_life_view *v)
{
	if (v->parked)
		return v->done ? SP_LIFE_DETACH
		       : v->busy || (v->det_busy && !v->hook_learn) || v->steps_to_window < SP_LIFE_UNPARK_AT
			       ? SP_LIFE_UNPARK
			       : SP_LIFE_STAY;
	if (v->busy || v->graphs)
		return SP_LIFE_STAY;
	if (v->done)
		return SP_LIFE_DETACH;
	if (v->stopped || v->policy == SP_DETACH_NEVER || (!v->dirty && !v->early))
		return SP_LIFE_STAY;
	if (v->policy == SP_DETACH_AUTO && v->marker == SP_MARK_NVTX)
		return SP_LIFE_STAY;
	if (v->hook_ok)
		return !v->det_busy && v->steps_to_window >=
					       (v->early ? SP_LIFE_EARLY_GAP : SP_LIFE_MIN_GAP + SP_LIFE_PARK_MARGIN)
			       ? SP_LIFE_PARK
			       : SP_LIFE_STAY;
	if (!v->dirty || v->policy == SP_DETACH_AUTO)
		return SP_LIFE_STAY;
	if (v->steps_to_window < SP_LIFE_MIN_GAP || !v->fresh_step)
		return SP_LIFE_STAY;
	return SP_LIFE_CYCLE;
}

const char sp_life_not_fresh[] = "no marker call ended just now";
const char sp_life_det_busy[] = "automatic step detection needs every launch now (learning, or checking a step)";
const char sp_life_too_close[] = "the next window is too close";

const char sp_life_closing[] = "the last window was still being written when the next one came close (its steps are "
			       "shorter than a window takes to close: nothing to detach for)";

const char sp_life_graphs[] = "the program created a CUDA graph, and stepprof cannot keep its replays safe through a "
			      "cuptiFinalize (a graph launch came past its hooks, or none through them yet, or the "
			      "activity kinds went off with no detach following, or graph_detach = false): stepprof "
			      "stays subscribed, with nothing enabled outside windows, for the rest of the run";

const char *sp_life_stay_reason(const struct sp_life_view *v)
{
	if (v->parked || (v->busy && !v->closing))
		return NULL;
	if (v->graphs && !v->busy && (v->done || v->dirty))
		return sp_life_graphs;
	if (v->done || !v->dirty)
		return NULL;
	if (v->stopped)
		return "detaching between windows was stopped (see the warning above)";
	if (v->policy == SP_DETACH_NEVER)
		return "detach_between = never";
	if (v->policy == SP_DETACH_AUTO && v->marker == SP_MARK_NVTX)
		return "the marker is NVTX (detach_between = auto)";
	if (v->policy == SP_DETACH_AUTO && !v->hook_ok)
		return "not every marker call comes through stepprof's hooks on CUDA functions, so steps could not "
		       "all be counted while detached (detach_between = auto)";
	if (v->busy) /* closing: said only once the next window is too close to detach for */
		return v->steps_to_window < SP_LIFE_MIN_GAP + (v->hook_ok ? SP_LIFE_PARK_MARGIN : 0) ? sp_life_closing
												     : NULL;
	if (v->hook_ok && v->det_busy)
		return sp_life_det_busy;
	if (v->steps_to_window < SP_LIFE_MIN_GAP + (v->hook_ok ? SP_LIFE_PARK_MARGIN : 0))
		return sp_life_too_close;
	if (v->hook_ok)
		return NULL;
	if (!v->fresh_step)
		return sp_life_not_fresh;
	return NULL;
}

const char *sp_life_act_name(unsigned act)
{
	static const char *const names[] = { "stay", "cycle", "detach", "park", "unpark" };
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

int sp_life_quiet_fresh(uint64_t shortest, unsigned seen, uint64_t since)
{
	return seen >= 2 && shortest && since < shortest / 4;
}

int sp_life_quiet_fits(uint64_t shortest, unsigned seen, uint64_t since, uint64_t gap)
{
	return seen >= 2 && shortest && since + gap < shortest / 4 * 3;
}
