/* SPDX-License-Identifier: MIT */
/* life.h - when stepprof lets go of CUPTI: the life-cycle decision as pure functions (no CUPTI,
 * no clock, no lock), so that host tests cover it. collector/cupti_life.h does what they decide.
 * After the schedule's last window stepprof detaches for good; between two windows it may detach
 * and re-attach with only the marker's callbacks ([cupti] detach_between). Never touches CUPTI. */
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
};

/* Steps at least this far from the next window's first (WARMUP or RECORD) step justify a cycle. */
#define SP_LIFE_MIN_GAP 3

/* What the collector knows when its writer thread asks (all under the collector's lock). */
struct sp_life_view {
	enum sp_detach_policy policy; /* [cupti] detach_between */
	enum sp_marker_kind marker;   /* NVTX markers reach CUPTI through an injection we cannot re-arm */
	bool done;              /* the schedule can record nothing more */
	bool busy;              /* collecting, or a window open or not yet written, or activity kinds on */
	bool dirty;             /* activity kinds were enabled since CUPTI was last initialised */
	bool graphs;            /* the process created a CUDA graph */
	bool stopped;           /* an earlier cycle failed or was unsafe: no more cycles */
	bool fresh_step;        /* a step began a short time ago (a quarter of a step or less) */
	int64_t steps_to_window;/* steps until the next WARMUP or RECORD step; INT64_MAX if none */
};

/* The decision; see the rules in life.c. This function can't fail. */
enum sp_life_act sp_life_decide(const struct sp_life_view *v);
/* "stay", "cycle", "detach"; "?" for another value. This function can't fail. */
const char *sp_life_act_name(unsigned act);
/* Steps after `step` before the next one whose action is not NONE (0: the next step records or
 * warms up); INT64_MAX if the schedule is done or none comes within `horizon` steps.
 * This function can't fail. */
int64_t sp_life_steps_to_window(const struct sp_schedule *s, int64_t step, int64_t horizon);

/* The step length the writer thread sees from its ticks: it samples (step, step start) and keeps
 * the shortest recent step, which bounds how long a detach may last without missing a boundary. */
struct sp_life_pace {           /* start with SP_LIFE_PACE_INIT */
	int64_t step;           /* last step seen, -1 none */
	uint64_t start;         /* its start (trace clock, ns) */
	uint64_t shortest;      /* shortest step seen recently (ns), 0 unknown */
	unsigned seen;          /* steps measured */
};
#define SP_LIFE_PACE_INIT { .step = -1 }
/* Feeds one sample: the current step and when it began. This function can't fail. */
void sp_life_pace_note(struct sp_life_pace *p, int64_t step, uint64_t start);
/* 1 if a detach that begins `since` ns after the current step's start and lasts `gap` ns
 * certainly ends before the next boundary (with a margin: three quarters of the shortest step);
 * 0 if it may not or if the step length is not known yet. This function can't fail. */
int sp_life_pace_safe(const struct sp_life_pace *p, uint64_t since, uint64_t gap);

#endif
