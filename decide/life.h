/* SPDX-License-Identifier: MIT */
/* life.h - when stepprof lets go of CUPTI, as pure functions host tests cover (collector/hold/cupti_life.h
 * does what they decide): detach for good after the last window, maybe between windows ([cupti]
 * detach_between), never after the program made a CUDA graph. Never touches CUPTI. */
#ifndef SP_LIFE_H
#define SP_LIFE_H

#include <stdbool.h>
#include <stdint.h>
#include "config/config.h"

/* What to do with CUPTI now. */
enum sp_life_act {
	SP_LIFE_STAY = 0,       /* keep things as they are */
	SP_LIFE_CYCLE,          /* detach (cuptiFinalize) and re-attach at once with marker callbacks only */
	SP_LIFE_DETACH,         /* detach for good: nothing more will be recorded */
	SP_LIFE_PARK,           /* detach until the next window; the preload's hooks count marker calls */
	SP_LIFE_UNPARK,         /* parked, the next window is near: re-attach */
};

/* Steps at least this far from the next window's first (WARMUP or RECORD) step justify a cycle. */
#define SP_LIFE_MIN_GAP 3
/* Parking needs this many steps more than a cycle; a parked stepprof re-attaches once the next
 * window is fewer than SP_LIFE_UNPARK_AT steps away (a marker call that would begin the window
 * before the re-attach ended waits for it, markhook.c; its cost: docs/STEPS.md). */
#define SP_LIFE_PARK_MARGIN 2
#define SP_LIFE_UNPARK_AT 2
/* Before the first window an application thread parks and re-attaches itself (no writer thread yet:
 * sp_act_early_tick), paying the detach and the re-attach: only for a window at least this many
 * steps away. */
#define SP_LIFE_EARLY_GAP 20

/* What the collector knows when its writer thread asks (all under the collector's lock). */
struct sp_life_view {
	enum sp_detach_policy policy; /* [cupti] detach_between */
	enum sp_marker_kind marker;   /* NVTX markers reach CUPTI through an injection we cannot re-arm */
	bool done;              /* the schedule can record nothing more */
	bool busy;              /* collecting, or a window open or not yet written, or activity kinds on */
	bool closing;           /* ... busy only because the last window is still being written */
	bool dirty;             /* activity kinds were enabled since CUPTI was last initialised */
	bool graphs;            /* the process created a CUDA graph */
	bool stopped;           /* an earlier cycle failed or was unsafe: no more cycles */
	bool fresh_step;        /* no marker call in progress, and the last one ended just now (quiet_fresh) */
	bool hook_ok;           /* every marker call comes through the preload's hooks (markhook.h) */
	bool parked;            /* detached until the next window, the hooks counting marker calls */
	bool det_busy;          /* automatic detection needs every launch now (stepdet.h: not sparse_quiet) */
	bool hook_learn;        /* ... and the preload's hooks give it every launch (hooklearn.h) */
	bool early;             /* an application thread asks, before the first window (SP_LIFE_EARLY_GAP) */
	int64_t steps_to_window;/* steps until the next WARMUP or RECORD step; INT64_MAX if none */
};

/* The decision; see the rules in life.c. This function can't fail. */
enum sp_life_act sp_life_decide(const struct sp_life_view *v);
/* Why sp_life_decide says stay although CUPTI is dirty and idle between windows (the rule that
 * held it back, in words), or NULL when there is nothing to remove or it did not say stay.
 * This function can't fail. */
const char *sp_life_stay_reason(const struct sp_life_view *v);
/* The reasons that change from one tick to the next (sp_life_stay_reason returns these pointers). */
extern const char sp_life_not_fresh[], sp_life_too_close[], sp_life_det_busy[], sp_life_closing[];
/* The reason that holds CUPTI for the rest of the run once the program made a CUDA graph. */
extern const char sp_life_graphs[];
/* "stay", "cycle", "detach"; "?" for another value. This function can't fail. */
const char *sp_life_act_name(unsigned act);
/* Steps after `step` before the next one whose action is not NONE (0: the next step records or
 * warms up); INT64_MAX if the schedule is done or none comes within `horizon` steps.
 * This function can't fail. */
int64_t sp_life_steps_to_window(const struct sp_schedule *s, int64_t step, int64_t horizon);

/* How long a detach may last, bounded by the shortest quiet time between marker calls (a call while detached
 * is lost). fresh: early enough in it to start; fits: a detach ended in its first three quarters. Both 0 under
 * two samples. These functions can't fail. */
int sp_life_quiet_fresh(uint64_t shortest, unsigned seen, uint64_t since);
int sp_life_quiet_fits(uint64_t shortest, unsigned seen, uint64_t since, uint64_t gap);

#endif
