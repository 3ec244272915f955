/* SPDX-License-Identifier: MIT */
/* windows_impl.h - inside the window grouper only (windows.c finds windows and decides which
 * events are theirs, windows_pass.c reads a window's events again for its passes): the grouper's
 * state and the helpers both use. Never include it elsewhere. */
#ifndef SP_WINDOWS_IMPL_H
#define SP_WINDOWS_IMPL_H

#include "windows.h"

#define CP_EVERY 1024 /* candidates per checkpoint of the running maximum (reorder bound) */
#define LATE_AFTER (1u << 16) /* a candidate that comes after more candidates than this that sort
                                 after it is held aside for the passes by start (a step or a long
                                 range is written at its end): their heap stays that deep ... */
#define LATE_MAX 4096         /* ... unless more than this many are: then the bound doubles */

/* The correlation ids of a window's CUDA calls: a bit per id over their range when they are dense
 * (they count up as the program runs), a hash set otherwise. */
struct corrset {
	uint32_t lo;            /* dense: bit i is id lo + i */
	uint64_t nbits;         /* dense: bits; 0: sparse */
	uint64_t *bits;
	struct sp_idset sparse;
};

/* The window of a correlation id's call among the window's step boundaries: runs of consecutive
 * ids with the same place (the place only grows with the id in a real program), or, past
 * RUNS_MAX runs (a hostile file), one entry per id. */
struct corrplace {
	struct run {
		uint32_t lo, hi;        /* ids lo..hi of the set have place v */
		uint32_t v;
	} *r;
	size_t n, cap;
	struct { uint32_t *key, *val; size_t cap, n; } map; /* after RUNS_MAX runs */
};

/* A key the reorder bound compares: start ascending, then end descending. */
struct okey {
	uint64_t start, end;
};

/* What a window's stretch of the file is, and what grouping found in it. */
struct region {
	struct sp_trace_pos pos;        /* the first record after its BEGIN (or the file's first) */
	uint64_t nrec;                  /* records read from pos up to the next BEGIN or the end */
	struct sp_event *carried;       /* events of earlier stretches that go to this window */
	size_t ncarried, carried_cap;
	struct sp_event *steps, *nccl, *dropped; /* candidates of those kinds, in order */
	size_t nsteps, nnccl, ndropped, steps_cap, nccl_cap, dropped_cap;
	uint64_t ncand;                 /* candidates (events that may be the window's) */
	struct okey runmax;             /* reorder bound: running maximum so far */
	struct okey *cp;                /* ... at the end of each CP_EVERY candidates */
	size_t ncp, cp_cap;
	uint64_t reorder;               /* the most candidates an event comes after that sort after it
	                                   (at most late_after: later ones are in late) */
	uint64_t late_after;            /* the bound (LATE_AFTER, doubled while late holds too many) */
	struct late {
		struct sp_event e;
		uint64_t seq;           /* its place among the stretch's candidates */
		uint64_t after;         /* candidates before it that sort after it (at most) */
	} *late;                        /* candidates that come after more than late_after sorting after them */
	size_t nlate, late_cap;
	uint32_t api_lo, api_hi;        /* range of the correlation ids of CUDA calls */
	uint64_t napi;
	uint32_t corr_lo, corr_hi;      /* range of the correlation ids of all candidates */
	uint64_t ncorr;
};

struct sp_windows {
	struct sp_trace_reader *r;      /* the file (not owned) */
	struct sp_window cur;           /* the window being read; before the first BEGIN, a holding area */
	int have_cur;                   /* cur is a real window (a BEGIN was read, or one inferred) */
	uint64_t tw1;                   /* cur's end for membership (set when it is settled) */
	struct region reg;              /* cur's stretch */
	struct sp_window out;           /* the window last handed out (with the lists below) */
	struct region out_reg;          /* its stretch */
	uint64_t out_tw1;
	int (*keep)(void *ctx, const struct sp_event *e); /* passes over out: only these (NULL: all) */
	void *keep_ctx;
	int out_has_next;               /* out was settled against a next window starting at out_next_t0 */
	uint64_t out_next_t0;
	struct sp_event *out_steps, *out_nccl; /* its STEP and NCCL records */
	size_t out_nsteps, out_nccl_n, out_steps_cap, out_nccl_cap;
	uint64_t *bound_t;              /* its step boundaries, sorted, distinct */
	size_t nbound, bound_cap;
	struct corrset corr;            /* correlation ids of the window being settled / handed out */
	struct corrset prev_corr;       /* ... of the window before: its late GPU records */
	struct corrset out_prev;        /* prev_corr as it was when out's stretch was read */
	struct corrplace place;         /* out's calls among its step boundaries */
	struct sp_trace_pos next_pos;   /* where reading goes on after the bound */
	struct {
		uint32_t tid, name, used;
	} *threads; /* SP_EV_THREAD records by tid (open addressing;
							  cap a power of two), latest name wins */
	size_t nthreads, tcap;
	struct sp_event dev[SP_WIN_MAX_DEVICES]; /* SP_EV_DEVICE records; kind 0 = none */
	uint64_t anchor_mono, anchor_real;       /* latest clock anchor */
	uint64_t outside;               /* records of no window */
	int done;         /* the reader returned its last value, kept in rc */
	int rc;
	int at_bound;     /* a WINDOW_BEGIN (bound) or the end of the file was read, not yet settled */
	struct sp_window bound;         /* that BEGIN's window (at the end of the file: unused) */
	const char *phase;              /* hand out only this phase's windows; NULL: all */
	uint64_t other_phase;           /* windows passed over for another phase */
};

/* ---- windows_pass.c ---- */
int sp_corrset_has(const struct corrset *s, uint32_t id);
/* Sets s up for ids in lo..hi (n of them expected). Exits if memory runs out. */
void sp_corrset_reset(struct corrset *s, uint32_t lo, uint32_t hi, uint64_t n);
void sp_corrset_add(struct corrset *s, uint32_t id);
void sp_corrset_free(struct corrset *s);
void sp_corrplace_reset(struct corrplace *p);
/* Gives id (in the set or not yet: had says which) place v, keeping the lowest. */
void sp_corrplace_put(struct corrplace *p, uint32_t id, uint32_t v, int had);
uint32_t sp_corrplace_get(const struct corrplace *p, uint32_t id);
void sp_corrplace_free(struct corrplace *p);
/* Reads the stretch reg again (its carried events, then its records), handing each candidate to
 * fn; late GPU records (their call's id in prev) and the metadata are left out. Returns the
 * reader's last result (1 when all nrec records were read). */
int sp_region_replay(struct sp_windows *g, const struct region *reg, const struct corrset *prev, sp_window_fn fn,
		     void *ctx);
/* 1 if e is a candidate of a stretch: not metadata, not a window bound. */
int sp_is_candidate(const struct sp_event *e);

/* ---- windows.c ---- */
/* 1 if e (a candidate of out's stretch) is an event of out. */
int sp_windows_is_member(const struct sp_windows *g, const struct sp_event *e);

#endif
