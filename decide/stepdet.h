/* SPDX-License-Identifier: MIT */
/* stepdet.h - the step detector: tokens in, decisions out; markers (stepdet.c) and automatic detection by
 * stage (period.c, wrap.c, regime.c, stepcheck.c, stepdet_say.c, tunables.h). Pure, so the library and
 * `stepprof autostep` run the same code on the same tokens (docs/STEPS.md). */
#ifndef SP_STEPDET_H
#define SP_STEPDET_H

#include <stdint.h>
#include "autostep.h"
#include "pysteps.h"
#include "trace/tokens.h"

/* Which tokens the detector needs now (sp_stepdet_wants): the caller enables what delivers them
 * and may feed anything else too (it is ignored, as it would be if it had not been seen). */
#define SP_WANT_LAUNCH 0x01u   /* kernel launches */
#define SP_WANT_API 0x02u   /* auto-detection API calls (sync, copy, set) */
#define SP_WANT_GRAPH 0x04u   /* graph launches */
#define SP_WANT_NVTX 0x08u   /* NVTX push/pop/start/end */
#define SP_WANT_NCCL 0x10u   /* NCCL calls */
#define SP_WANT_ANCHOR 0x20u   /* the API call named by sp_stepdet_anchor_name */
#define SP_WANT_MARKER 0x40u   /* an explicit api / profiler_range marker's calls */

/* What one token decided (bits of sp_det_out.what). */
#define SP_DET_BOUNDARY 0x01u  /* step `step` begins (the previous one, if open, ends) */
#define SP_DET_AFTER 0x02u  /* ... at the end of this token's call, not at its start */
#define SP_DET_END 0x04u  /* the open step ends and none begins (range stop, unlock) */
#define SP_DET_LOCK \
	0x08u  /* automatic detection locked: step `step` is open from here,
				* unwatched from its start (it records nothing) */
#define SP_DET_RELOCK 0x10u  /* ... a lock after an unlock (with LOCK) */
#define SP_DET_UNLOCK 0x20u  /* the period stopped matching: learning again (with END) */
#define SP_DET_MISMATCH \
	0x40u  /* the step that ended differed from the period (`bad_step`): with
				* UNLOCK the regime ended; without, an established regime keeps its
				* lock through one irregular step and counts the next */
#define SP_DET_WANTS 0x80u  /* sp_stepdet_wants changed */
#define SP_DET_UNDECIDED \
	0x100u /* learning has gone on long without a lock (once per run):
				 * say so (sp_stepdet_undecided) */
#define SP_DET_PROVEN \
	0x400u   /* a deferred regime ran long enough: its steps count from here
				* (sp_stepdet_regime_note says so) */
#define SP_DET_PROBE \
	0x800u   /* the step that ended (`bad_step`), not counted, took probe_ratio times
				* more or less time than the counted ones: the next step is counted, the
				* detector wants launches again (the caller re-attaches if parked) */
#define SP_DET_MINOR \
	0x200u    /* BOUNDARY / LOCK: the step's regime is not the preferred one (an
				* evaluation pass, start-up work, or one not proven yet): its steps do
				* not count towards the schedule (docs/STEPS.md, "Regimes") */
/* The Python bridge's tokens (stepdet_py.c, docs/STEPS.md "PyTorch optimizer steps"). */
#define SP_DET_SWITCH \
	0x1000u   /* kind = auto takes the program's optimizer steps from here (the
				 * optimizer hook is in and fired before any window): the detector
				 * is an optimizer marker now, numbering from the hook's install */
#define SP_DET_NOSWITCH 0x2000u /* ... it did not, a window of automatic steps having begun (once) */
#define SP_DET_PYRULE 0x4000u   /* the optimizer steps' rule changed (sp_pysteps_say says the new one) */
#define SP_DET_UNSWITCH 0x8000u /* kind = auto gives the optimizer steps up: one was captured into a CUDA
				 * graph (its replays never call the hook) before any window; learning
				 * again, steps numbered afresh (once) */
#define SP_DET_CAPTURED 0x10000u /* kind = optimizer: a step was captured into a CUDA graph (once) */
#define SP_DET_HELD 0x20000u /* kind = auto: a regime without training evidence ran defer_steps, but the program
			      * made a torch optimizer that has not stepped: optim_defer_steps instead (once) */

/* The watched function whose PYCALL token says the program made a torch optimizer (its __init__ began). */
#define SP_STEPDET_OPTIM_MADE "torch.optim.optimizer:Optimizer.__init__"

struct sp_det_out {
	unsigned what;
	int64_t step;          /* BOUNDARY / LOCK: the step that begins */
	int64_t bad_step;      /* MISMATCH: the step that differed */
	uint32_t regime;       /* the regime (1, 2, ...) the step belongs to */
};

/* How the current steps were found, for the trace and `stepprof report`. */
struct sp_det_how {
	int marker_kind;       /* enum sp_marker_kind */
	uint32_t regime;       /* auto: the current regime, 0 while learning */
	uint32_t period;       /* tokens per iteration */
	uint32_t launches;     /* kernel and graph launches per iteration */
	uint32_t anchor;       /* interned name of the anchor */
	int after;             /* boundary at the anchor call's end */
	uint32_t every;
	uint32_t relocks;      /* locks after the first */
	uint32_t mismatches;   /* counted steps that differed */
	uint32_t confidence;   /* copies of the period that proved the lock */
	uint32_t blocks;       /* auto: > 1 if the synchronised period held this many iterations */
	int train;             /* auto: the current regime has training evidence */
	int from_auto;         /* optimizer: kind = auto switched to the program's optimizer steps */
	/* optimizer steps keep anchor (the ending object's name), period (optimizer steps a cycle),
	 * launches (optimizers in it), confidence (enum sp_pysteps_rule), regime (1 + rule changes) */
	uint32_t late;         /* auto: the schedule started from a late lock, this many steps later */
};

#define SP_DET_MATCH_CACHE 65536u /* name id -> marker match verdict */
#define SP_DET_REGIMES 8u         /* regimes remembered for re-locks */

struct sp_det_regime {
	uint32_t anchor, every, period, launches;
	int after;
	int64_t last_step;     /* its last step number */
	uint64_t steps;        /* steps it has had */
	int train;             /* its period launches a backward or optimizer kernel (by name) */
	int proven;            /* no training evidence, but it ran defer_steps steps in a row */
	uint64_t run;          /* steps begun in a row: since its last lock, and those the learner saw */
	int64_t deferred_from; /* the step it locked on while unproven */
	int64_t shift;         /* step number - schedule step, once it counts */
	uint64_t sig;          /* its period's launches in their cyclic order (a hash): a regime that
				* differs only in API calls that come and go is the same loop */
	int continued;         /* numbered on at a lock from a regime that counted for the schedule */
	unsigned noted;        /* sp_stepdet_regime_note lines said for it (bit per kind) */
};

/* The regimes seen and the schedule's numbering across them (regime.c). */
struct sp_det_regimes {
	struct sp_det_regime r[SP_DET_REGIMES];
	uint32_t n;
	uint32_t cur;                 /* index + 1 of the current regime, 0 none */
	uint32_t train;               /* index + 1 of the first regime with training evidence, 0 none */
	uint32_t hand;                /* index + 1 of the regime whose steps last counted for the schedule */
	int64_t sched_hi;             /* the highest schedule step handed out (valid with hand) */
	const struct sp_schedule *sched; /* the schedule that counts the steps, or NULL */
	struct {                      /* the late start (regime.c), once: late.moved > 0 */
		int64_t moved;        /* schedule steps the schedule's numbering moved back */
		int64_t step;         /* the first step that counted: the schedule's step `first` */
		int64_t first;        /* the schedule's first step with an action */
		uint32_t regime;      /* index + 1 of the regime it started with */
	} late;
};

/* The per-step check while locked (stepcheck.c): launches counted per step, time probes. */
struct sp_det_check {
	int counting;                 /* launches are counted in this step (not in the locked one) */
	uint32_t counted;             /* ... so far */
	uint32_t sparse;              /* count launches in one step of this many (0, 1: every step) */
	const struct sp_schedule *sparse_sched; /* ... and in the steps before and of its windows */
	int blind;                    /* the caller sees no launch now (parked): no step is counted */
	int probe;                    /* a step's time stood out: count the next one */
	int64_t irr_step;             /* the last step kept as irregular (INT64_MIN none) */
	int step_opt;                 /* this counted step launched an optimizer kernel its period lacks */
	int period_opt;               /* the locked period launches an optimizer kernel */
	uint32_t proven_period;       /* the period the learner proved for this lock (a block's whole one) */
	int split;                    /* an anchor call came before this counted step had its launches */
	uint64_t ref_ns;              /* the counted steps' time (moving average) */
};

/* Learning's bookkeeping besides the learner (stepdet.c). */
struct sp_det_learn {
	uint64_t tokens;              /* tokens fed to the learner since it last started */
	uint32_t launchers[SP_DET_LAUNCHERS]; /* threads that launched a kernel or graph (tid + 1; 0 free) */
	struct {
		uint32_t msg, tok;    /* NVTX message id -> its token ("step 17" -> "nvtx:step #") */
	} nvtx[SP_DET_NVTX_SLOTS];
	uint32_t nvtx_pop;            /* token id of a pop/end */
	uint64_t undecided_at;        /* tokens at which "undecided" was last reported */
	int reported;                 /* SP_DET_UNDECIDED was returned */
};

struct sp_stepdet {
	int kind;       /* enum sp_marker_kind */
	char pattern[256];
	uint32_t every;
	char *(*demangle)(const char *, char *, size_t *, int *); /* __cxa_demangle, or NULL */
	uint8_t match[SP_DET_MATCH_CACHE]; /* 0 unknown, 1 no, 2 yes (auto: regime.c KC_* flags) */
	const struct sp_det_tune *tune; /* outlives d */
	int64_t step;                 /* the current step, -1 before the first */
	int step_open;
	uint64_t step_t0;             /* time the current step began */
	uint64_t hits;                /* marker (or anchor) occurrences counted against every */
	uint64_t range_starts, range_stops;
	unsigned wants;
	struct sp_det_how how;
	/* automatic detection */
	int learning;                 /* not locked (or unlocked again) */
	int no_prefer;                /* replay only: every regime counts (no preference for training) */
	uint32_t probes;              /* steps whose time stood out (the collector reads it) */
	struct sp_autostep a;         /* the learner */
	struct sp_det_learn learn;
	struct sp_det_regimes regimes;
	struct sp_det_check check;
	/* the Python bridge's tokens (stepdet_py.c) */
	struct sp_pysteps py;         /* optimizer steps to iteration ends */
	int py_hooked;                /* auto: the optimizer hook is in (its PYHOOK token came) */
	int py_no_switch;             /* auto: a window has begun: no switch to optimizer steps */
	int py_said;                  /* auto: SP_DET_NOSWITCH returned */
	int py_captured;              /* an optimizer step ran inside a graph capture (said once) */
	int py_made;                  /* auto: the program made a torch optimizer (SP_STEPDET_OPTIM_MADE) */
	int py_held;                  /* auto: SP_DET_HELD returned */
};

/* Sets d up for marker kind (enum sp_marker_kind), pattern (glob; ignored for auto and
 * profiler_range) and every (>= 1), with the default tunables. Returns 0, or -1 (no memory for
 * automatic detection). demangle may be NULL. */
int sp_stepdet_init(struct sp_stepdet *d, int kind, const char *pattern, int every,
		    char *(*demangle)(const char *, char *, size_t *, int *));
/* The same with tunables t (NULL: the defaults), which must outlive d: `stepprof autostep --set`. */
int sp_stepdet_init_tuned(struct sp_stepdet *d, int kind, const char *pattern, int every,
			  char *(*demangle)(const char *, char *, size_t *, int *), const struct sp_det_tune *t);
void sp_stepdet_free(struct sp_stepdet *d);
/* Feeds one token (t->name an interned id; TRUTH tokens are ignored). Fills *out (what = 0: no
 * decision). This function can't fail. */
void sp_stepdet_feed(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out);
/* 1 if feeding t may run a detection attempt (the caller then times it, to credit the detector's
 * own time back: sp_stepdet_feed's token times must be the program's). Only t's kind is read: call
 * it before sp_stepdet_feed(d, t). This function can't fail. */
int sp_stepdet_may_try(const struct sp_stepdet *d, const struct sp_token *t);
/* The attempt that feeding the last token ran took ns of the program's thread (the detector
 * spaces the next one out: sp_autostep_attempt_took). This function can't fail. */
void sp_stepdet_attempt_took(struct sp_stepdet *d, uint64_t ns);
/* SP_WANT_* the detector needs now. */
unsigned sp_stepdet_wants(const struct sp_stepdet *d);
/* The interned name of the API call the boundaries hang on once locked on a call (0 if none). */
uint32_t sp_stepdet_anchor_name(const struct sp_stepdet *d);
/* The interned name of an NVTX message with its digit runs folded ("step 17" -> "step #"): what
 * the caller feeds for NVTX ranges outside an nvtx marker, so that counters in messages do not
 * grow the string table without bound. This function can't fail (0 if memory ran out). */
uint32_t sp_stepdet_nvtx_name(const char *msg);
/* 1 if name (interned) matches the marker pattern: the raw name, the demangled name, and the
 * demangled name without return type and arguments. Cached. */
int sp_stepdet_matches(struct sp_stepdet *d, uint32_t name);
/* The same for any glob pat, with the verdicts cached in cache[SP_DET_MATCH_CACHE] (0 unknown,
 * 1 no, 2 yes) and demangle (__cxa_demangle, or NULL). Any thread; a race only computes a verdict
 * twice. */
int sp_name_matches(uint32_t id, const char *pat, uint8_t *cache,
		    char *(*demangle)(const char *, char *, size_t *, int *));
/* When automatic detection has not locked: writes one line naming the best candidate and the
 * explicit marker it would suggest into buf. Returns 1 if undecided, else 0 (buf untouched). */
int sp_stepdet_undecided(struct sp_stepdet *d, char *buf, size_t n);
/* Why a run whose schedule records from its step `first` recorded no step, when automatic detection's
 * state says it (a regime still deferred or not preferred, or a schedule that counts later than the
 * program): one line into buf. Returns 1, or 0 if it says nothing (buf untouched). Can't fail. */
int sp_stepdet_why_none(const struct sp_stepdet *d, int64_t first, char *buf, size_t n);
/* The iteration automatic detection locks in at the earliest (plus one): with a host synchronisation
 * per iteration, and without (the defaults' min_repeats, nosync_repeats and a confirmation). */
#define SP_STEPDET_LOCK_SYNC 6
#define SP_STEPDET_LOCK_NOSYNC 18
struct sp_schedule;
/* For `stepprof check` and `stepprof schedule`: if the schedule (kind = auto) collects a step before a lock can
 * be, writes a note naming a skip_first that keeps the numbering. Returns 2 with a note, 0 if none. */
int sp_stepdet_schedule_warning(const struct sp_schedule *s, char *buf, size_t n);
/* The schedule's step for detector step `step`: -1 (no action) while the regime is not the
 * preferred one, else step minus its shift (the late start, deferred and unwatched steps:
 * docs/STEPS.md, "Regimes"); it never goes back. Explicit markers: step. Can't fail. */
int64_t sp_stepdet_sched_step(const struct sp_stepdet *d, int64_t step);
/* Writes one line into buf about the current regime (deferred, not preferred, proven, training found late,
 * late start), once per regime and kind. Returns 1, or 0 if nothing new: call it until it returns 0. */
int sp_stepdet_regime_note(struct sp_stepdet *d, char *buf, size_t n);
/* Counts launches in one step of `every` (0, 1: every step, the default) and in each step whose
 * own or next schedule step (sched, may be NULL) has an action; between them the detector wants
 * only its anchor (docs/STEPS.md item 5). From the next boundary. This function can't fail. */
void sp_stepdet_sparse(struct sp_stepdet *d, uint32_t every, const struct sp_schedule *sched);
/* The sparse check's rate the library uses for automatic detection (docs/STEPS.md). */
#define SP_STEPDET_SPARSE 16u
/* The caller sees no launch (on = 1: parked) or sees them again (0). While blind no step is
 * counted, each is checked by its time: one that stands out returns SP_DET_PROBE and wants
 * launches until the next step was counted. From the next boundary. This function can't fail. */
void sp_stepdet_blind(struct sp_stepdet *d, int on);
/* 1 if automatic detection is locked on the preferred regime with a sparse check and wants no
 * launch now (the step in progress is not counted): the caller may stop seeing launches, and
 * park on the anchor call if something else counts it. This function can't fail. */
int sp_stepdet_sparse_quiet(const struct sp_stepdet *d);
/* The schedule that counts d's steps (outlives d; NULL: none): the late start and the re-lock gap
 * rule read it. The collector and the replay must set the same. This function can't fail. */
void sp_stepdet_schedule(struct sp_stepdet *d, const struct sp_schedule *sched);
/* stepdet_py.c: the Python bridge's tokens (SP_TOK_PYHOOK to SP_TOK_PYCALL) for python and optimizer markers;
 * kind = auto switches to the optimizer marker at its first token unless sp_stepdet_no_switch. Can't fail. */
void sp_stepdet_py_feed(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out);
/* 1 if t is one of the Python bridge's tokens. */
static inline int sp_stepdet_py_token(const struct sp_token *t)
{
	return t->kind >= SP_TOK_PYHOOK && t->kind <= SP_TOK_PYCALL;
}
/* A window has begun (kind = auto): steps stay automatic, optimizer steps that come later are not
 * switched to (said once, SP_DET_NOSWITCH). This function can't fail. */
void sp_stepdet_no_switch(struct sp_stepdet *d);

/* 1 if the current regime has run long enough for its steps to be trusted as the program's loop
 * (auto), or always for explicit markers: the caller may then stop watching when the schedule is
 * done. */
int sp_stepdet_settled(const struct sp_stepdet *d);

#endif
