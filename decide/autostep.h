/* SPDX-License-Identifier: MIT */
/* autostep.h - the learner of automatic step detection: finds the iteration period in the token stream
 * (period.c) and names a marker that falls on the same place of every iteration (wrap.c). Pure; the caller
 * serialises. Numbers in tunables.h, algorithm in docs/STEPS.md. */
#ifndef SP_AUTOSTEP_H
#define SP_AUTOSTEP_H

#include <stdint.h>
#include "tunables.h"

#define SP_AUTOSTEP_REFUTED 8 /* refuted periods remembered */

/* Where the boundaries go once locked: an ordinary marker (anchor, every) and how it was proven. */
struct sp_autostep_lock {
	uint32_t period;        /* tokens per iteration */
	uint32_t anchor;        /* token that begins an iteration, or ends it if `after` (flag bits included) */
	int after;              /* the boundary is at the end of the anchor (a synchronisation) */
	uint32_t every;         /* occurrences of anchor per iteration */
	uint32_t count;         /* anchor occurrences since the last boundary, at lock time */
	uint32_t iterations;    /* iterations begun in the periodic run, the current one included */
	uint32_t launches;      /* launch tokens (SP_AUTOSTEP_KERNEL) per period */
	uint32_t copies;        /* whole periods the run covered at the lock */
	uint64_t period_at;     /* ring position of one whole copy of the period */
};

struct sp_autostep {
	const struct sp_det_tune *tune; /* outlives the learner (sp_det_tune_default by default) */
	/* the ring of recent tokens */
	uint32_t *tok;          /* interned name ids with SP_AUTOSTEP_* flags */
	uint64_t *ts;           /* their CPU times (ns), never decreasing, the learner's own time taken out */
	uint32_t *counts;       /* occurrences of each token in the ring (ids folded into SP_AUTOSTEP_SLOTS) */
	uint32_t *prev;         /* per position: distance back to the previous token of its slot, 0 none */
	uint64_t *last;         /* per slot: position + 1 of its newest token, 0 none */
	uint32_t cap;           /* ring capacity (a power of two) */
	uint64_t n;             /* tokens fed since the reset */
	uint64_t same;          /* the newest tokens' run of one token */
	uint64_t graph_n;       /* position + 1 of the newest graph launch, 0 none */
	uint64_t t0;            /* the stored time of the first token since the reset */
	uint64_t credit;        /* ns of the learner's own work, taken out of later times */
	uint64_t *gaps;         /* scratch for the wrap search */
	struct {
		uint64_t next;  /* n at which the next attempt runs */
		uint64_t spent; /* ns the attempts since the reset took (sp_autostep_attempt_took) */
	} attempt;
	struct {                /* the period the last attempt proved, waiting to be confirmed */
		uint32_t period;
		uint64_t since; /* n when it was first proved */
		uint64_t run;   /* its run (tokens) at the last attempt */
	} found;
	struct {                /* the longest repeat seen, proven or not: for "undecided" */
		uint32_t period;
		uint64_t run;
		uint64_t end;   /* n at the attempt that saw it: the run is [end - run - period, end) */
	} cand;
	int locked;
	struct sp_autostep_lock lock; /* valid once locked */
	uint32_t blocks;        /* > 1: the synchronised period held this many iterations (a loss read every
				 * `blocks` iterations), and `lock` is on one of them */
	struct sp_autostep_lock whole; /* blocks > 1: the lock on the whole period */
	struct {
		uint32_t period, copies; /* a period the caller refuted, and the copies it must now show */
	} refuted[SP_AUTOSTEP_REFUTED];
};

/* Set in a token that blocks the host until the GPU catches up (a synchronisation): iterations
 * usually end with one, so the boundary goes after the period's last such token. */
#define SP_AUTOSTEP_SYNC 0x80000000u
/* Set in a token that is a kernel launch: an iteration launches at least one kernel. */
#define SP_AUTOSTEP_KERNEL 0x40000000u
/* Set (with SP_AUTOSTEP_KERNEL) in a CUDA graph launch: a loop of graph replays has no host sync
 * and often no CPU gap at its wrap; its graph launch is the place for the boundary. */
#define SP_AUTOSTEP_GRAPH 0x20000000u
#define SP_AUTOSTEP_FLAGS (SP_AUTOSTEP_SYNC | SP_AUTOSTEP_KERNEL | SP_AUTOSTEP_GRAPH)

/* Allocates a ring of cap tokens (rounded up to a power of two, 256 to 2^24) with the default
 * tunables. Returns 0 or -1 (no memory; a is then unusable). */
int sp_autostep_init(struct sp_autostep *a, uint32_t cap);
/* The same with the tunables t (which must outlive a) and their ring_tokens. Returns 0 or -1. */
int sp_autostep_init_tuned(struct sp_autostep *a, const struct sp_det_tune *t);
void sp_autostep_free(struct sp_autostep *a);
/* Forgets the stream (not the refuted periods): learning starts again. This function can't fail. */
void sp_autostep_reset(struct sp_autostep *a);
/* Feeds one token. Returns 1 when this call locked the learner (lock, blocks valid), else 0.
 * After locking it ignores further tokens. This function can't fail. */
int sp_autostep_feed(struct sp_autostep *a, uint32_t tok, uint64_t ts);
/* Tells the learner that ns of the time since the last token were its own work (an attempt), not
 * the program's, so it does not see its own pauses as the loop's wrap. Can't fail. */
void sp_autostep_credit(struct sp_autostep *a, uint64_t ns);
/* An attempt runs on the program's thread and took ns: attempts are held back while all of them
 * since the reset took more than the share the tunables attempt_* allow (docs/STEPS.md). Can't fail. */
void sp_autostep_attempt_took(struct sp_autostep *a, uint64_t ns);
/* 1 if feeding a token at time ts (a graph launch: graph) runs an attempt. Can't fail. */
int sp_autostep_due(const struct sp_autostep *a, int graph, uint64_t ts);
/* The n from which a graph launch runs an attempt before attempt.next. Can't fail. */
uint64_t sp_autostep_graph_try(const struct sp_autostep *a);
/* The lock on period was wrong (its steps stopped matching): from now on it must show
 * refute_factor times as many copies as before to lock again. This function can't fail. */
void sp_autostep_refute(struct sp_autostep *a, uint32_t period);
/* After a lock on one of a period's blocks (blocks > 1): locks on the whole period instead (the
 * caller found no training evidence in the block). This function can't fail. */
void sp_autostep_unblock(struct sp_autostep *a);
/* Occurrences of tok in the ring (ids folded into SP_AUTOSTEP_SLOTS slots, so an estimate).
 * This function can't fail. */
uint32_t sp_autostep_count(const struct sp_autostep *a, uint32_t tok);

#endif
