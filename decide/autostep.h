/* SPDX-License-Identifier: MIT */
/* autostep.h - automatic step detection: finds the iteration period in the stream of launch
 * and synchronisation tokens and names a marker (a token and an every-N) that falls on the
 * same place of every iteration. Pure logic: no locks, no I/O, no CUDA; the caller serialises.
 * Algorithm and limits: docs/STEPS.md. */
#ifndef SP_AUTOSTEP_H
#define SP_AUTOSTEP_H

#include <stdint.h>

struct sp_autostep {
	uint32_t *tok;          /* ring of recent tokens (interned name ids) */
	uint64_t *ts;           /* their CPU timestamps (ns) */
	uint32_t *counts;       /* occurrences of each token (ids folded into 65,536 slots) in the ring */
	uint32_t *prev;         /* per ring position: distance back to the previous token of its slot, 0 none */
	uint64_t *last;         /* per slot: position + 1 of its newest token, 0 none */
	uint64_t *gaps;         /* scratch gaps for detection */
	uint32_t cap;           /* ring capacity (power of two) */
	uint64_t n;             /* tokens fed so far */
	uint64_t next_try;      /* n at which detection runs next */
	uint32_t last_period;   /* period found by the previous try (must hold a full period more to lock) */
	uint64_t first_found;   /* n when last_period was first found */
	int found_sync;         /* the period found last holds a synchronisation */
	uint64_t found_run;     /* ... and its run (tokens) */
	uint64_t credit;        /* ns spent in detection itself, taken out of later timestamps */
	uint64_t same;          /* the newest tokens' run of one token (run_length for a period of 1) */
	uint64_t graph_n;       /* position + 1 of the newest graph launch (SP_AUTOSTEP_GRAPH), 0 none */
	uint64_t spent;         /* ns the attempts since the reset took (sp_autostep_attempt_took) */
	uint64_t t0;            /* the stored time of the first token since the reset */
	/* result, valid once locked */
	int locked;
	uint32_t period;        /* tokens per iteration */
	uint32_t anchor;        /* token that begins an iteration, or ends it if `after` (flag bits included) */
	int after;              /* the boundary is at the end of the anchor (a synchronisation) */
	uint32_t every;         /* occurrences of anchor per iteration */
	uint32_t count;         /* anchor occurrences since the last boundary, at lock time */
	uint32_t iterations;    /* iterations begun in the periodic run, the current one included */
	uint32_t launches;      /* launch tokens (SP_AUTOSTEP_KERNEL) per period */
	uint32_t copies;        /* whole periods the run covered at the lock */
	uint64_t period_at;     /* ring position of one whole copy of the locked period (its launches) */
	uint32_t blocks;        /* > 1: the synchronised period found held this many iterations (a loss
				 * read every `blocks` iterations), and the lock is on one of them */
	struct sp_autostep_whole { /* blocks > 1: the lock on the whole period, as without blocks */
		uint32_t period, anchor, every, count, iterations, launches, copies;
		int after;
		uint64_t period_at;
	} whole;
	/* why it has not locked: the longest repeat of the last attempts, proven or not */
	uint32_t cand_period;
	uint64_t cand_run;
	/* periods the caller refuted after a lock, with the copies they must now show */
	struct {
		uint32_t period, copies;
	} refuted[8];
};
#define SP_AUTOSTEP_REFUTED 8

/* Set in a token that blocks the host until the GPU catches up (a synchronisation): iterations
 * usually end with one, so the boundary goes after the period's last such token. */
#define SP_AUTOSTEP_SYNC 0x80000000u
/* Set in a token that is a kernel launch: an iteration launches at least one kernel, which keeps
 * start-up regimes such as "copy a parameter, synchronise" x N from passing for the loop. */
#define SP_AUTOSTEP_KERNEL 0x40000000u
/* Set (with SP_AUTOSTEP_KERNEL) in a CUDA graph launch: a loop of graph replays has no host sync
 * and often no CPU gap at its wrap, but a graph launch in a period that repeats many times is the
 * iteration's own work, and a place to put the boundary. */
#define SP_AUTOSTEP_GRAPH 0x20000000u
#define SP_AUTOSTEP_FLAGS (SP_AUTOSTEP_SYNC | SP_AUTOSTEP_KERNEL | SP_AUTOSTEP_GRAPH)

/* After a lock on one of a period's blocks (blocks > 1): locks on the whole period instead (the
 * caller found no training evidence in the block: identical layers of an inference loop are not
 * iterations). This function can't fail. */
void sp_autostep_unblock(struct sp_autostep *a);

/* Allocates a ring of cap tokens (rounded up to a power of two, >= 256). Returns 0 or -1
 * (no memory; a is then unusable). */
int sp_autostep_init(struct sp_autostep *a, uint32_t cap);
void sp_autostep_free(struct sp_autostep *a);
/* Tells the detector that ns of the time since the last token were its own work (a detection
 * attempt), not the program's, so it does not see its own pauses as the loop's wrap. */
void sp_autostep_credit(struct sp_autostep *a, uint64_t ns);
/* A detection attempt runs on the program's thread, and took ns: attempts are held back while all
 * of them since the reset took more than SP_AUTOSTEP_BURST_NS plus 1/SP_AUTOSTEP_SHARE of the
 * program's first SP_AUTOSTEP_EAGER_NS since its first token (token times) plus 1/SP_AUTOSTEP_LATE
 * of its time after that, so that learning a long or irregular loop costs at most that share however
 * many attempts it needs (a stream that has not locked in its first seconds pays a quarter of it
 * from then on: the budget it did not spend, such as a compile's quiet seconds, stays), and the
 * first, cheap attempts on a short ring come as often as before. A replay that never reports
 * costs attempts as before. This function can't fail. */
#define SP_AUTOSTEP_SHARE 100u
#define SP_AUTOSTEP_LATE 400u
#define SP_AUTOSTEP_EAGER_NS 2000000000ull
#define SP_AUTOSTEP_BURST_NS 1000000u
void sp_autostep_attempt_took(struct sp_autostep *a, uint64_t ns);
/* 1 if feeding a token at time ts (a graph launch: graph) runs a detection attempt. Can't fail. */
int sp_autostep_due(const struct sp_autostep *a, int graph, uint64_t ts);
/* Forgets the stream (not the refuted periods): learning starts again. This function can't fail. */
void sp_autostep_reset(struct sp_autostep *a);
/* The lock on period was wrong (its steps stopped matching): from now on that period must show
 * twice as many copies as before to lock again. This function can't fail. */
void sp_autostep_refute(struct sp_autostep *a, uint32_t period);
/* Occurrences of tok in the ring (ids folded into 65,536 slots, so an estimate), from a histogram
 * rebuilt first if recount. This function can't fail. */
uint32_t sp_autostep_count(struct sp_autostep *a, uint32_t tok, int recount);
/* The n from which a graph launch runs a detection attempt before next_try (GRAPH_TRY tokens
 * after the last attempt). This function can't fail. */
uint64_t sp_autostep_graph_try(const struct sp_autostep *a);
/* Feeds one token. Returns 1 when this call locked the detector (result fields valid), else 0.
 * After locking it ignores further tokens. This function can't fail. */
int sp_autostep_feed(struct sp_autostep *a, uint32_t tok, uint64_t ts);

#endif
