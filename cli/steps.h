/* SPDX-License-Identifier: MIT */
/* steps.h - per-step statistics of a trace's recorded windows, for `stepprof report` (one trace)
 * and `stepprof steps` (several ranks side by side): the GPU work launched in each step (a GPU
 * operation counts in the step whose CPU call, found by correlation id, lies in the step) and how
 * busy the GPU was inside the step's span. Memory: the steps; never a window's events. */
#ifndef SP_STEPS_H
#define SP_STEPS_H

#include <stdint.h>
#include <stdio.h>
#include "windows.h"

#define SP_STEPS_ROWS 200 /* per-step rows printed at most */

struct sp_step_stat {
	int64_t number;
	uint32_t window;
	uint64_t start, end;    /* CPU boundaries, ns */
	uint64_t kernels, kernel_ns, nccl_ns, copy_ns; /* GPU work launched from the step */
	uint64_t busy, idle;    /* ns of the step's span with GPU work running; its longest gap */
	uint64_t gpu_end;       /* last end of the GPU work launched from the step, 0 if none */
	uint64_t stall;         /* host stall: ns with no GPU work running between the end of the
	                           previous step's GPU work (the first step of a window: its start)
	                           and gpu_end: the GPU waited for this rank's CPU */
	uint64_t train_kernels; /* kernels whose names say backward or optimizer (decide/kclass.h) */
	uint64_t plain_run;     /* the longest run of its kernels, in the window's order, with none of
	                           those: a forward pass (an evaluation pass is one) */
	uint64_t cur_run;       /* (the run in progress while the window is read) */
	struct sp_ev_step how;  /* the STEP record: how the step was found (format version 4) */
	uint32_t marker;        /* its marker pattern or anchor (string id), 0 unknown */
};

struct sp_steps {
	struct sp_step_stat *st; /* recorded steps, window after window */
	size_t n, cap;
	/* the window being added (sp_steps_begin .. sp_steps_end) */
	size_t first;           /* index in st of its first step */
	uint64_t t0, t1;        /* its span: GPU intervals are cut to it */
	int sweeping;           /* sp_steps_sweep was called */
	uint64_t busy;          /* ns covered by the GPU intervals swept so far */
	struct sp_steps_iv {
		uint64_t s, e;
	} cur;                  /* the merged GPU interval being extended (cur.e > cur.s: one is open) */
	size_t next;            /* its next step (index from first) the sweep has not reached */
	uint64_t reach;         /* the latest start among the steps reached */
	size_t *active;         /* steps reached whose span the sweep may still meet (index from first) */
	size_t nactive, active_cap;
	uint64_t *upto;         /* per step: where its span's covered part so far ends */
	size_t upto_cap;
	struct sp_steps_q {
		uint64_t t;     /* a time whose covered ns (from the window's start) a host stall needs */
		size_t slot;    /* where it goes in cov */
	} *q;
	size_t nq, qat, q_cap;
	uint64_t *cov;          /* per query slot: ns covered before its time */
	size_t cov_cap;
	uint64_t cum;           /* ns covered before the end of the intervals swept so far */
	uint8_t *nccl;          /* by name id: 0 unknown, else 1 | 2 (an NCCL kernel) | 4 (a training
	                           kernel, decide/kclass.h) */
	size_t ncap;
};

/* The step among st[0..n) (sorted by start, not overlapping) whose span holds t, or NULL. */
struct sp_step_stat *sp_steps_at(struct sp_step_stat *st, size_t n, uint64_t t);
/* 1 if kernel name id (strings of r) is an NCCL kernel, cached by id in s. Exits if memory runs out. */
int sp_steps_is_nccl(struct sp_steps *s, struct sp_trace_reader *r, uint32_t id);
/* 1 if its name says backward or optimizer (decide/kclass.h), cached the same way. */
int sp_steps_trains(struct sp_steps *s, struct sp_trace_reader *r, uint32_t id);
/* Sorts iv[0..n) by start and merges it in place into disjoint intervals; returns their number. */
size_t sp_steps_merge(struct sp_steps_iv *iv, size_t n);
/* ns of [lo, hi) covered by the disjoint sorted intervals iv[0..m). Can't fail. */
uint64_t sp_steps_covered(const struct sp_steps_iv *iv, size_t m, uint64_t lo, uint64_t hi);

/* Adds the steps of window w to s, streaming, in three stages: sp_steps_begin (its steps, from
 * w->steps), sp_steps_event for each of its events in file order (GPU work counts in the step its
 * anchor lies in: sp_windows_anchor, the start of the call that launched it; a step's runs of
 * kernels without training ones are counted in that order), sp_steps_sweep for
 * its GPU events by start (sp_windows_sorted: busy and idle time), then sp_steps_end, which returns
 * the ns of [w->t0, w->t1] during which any GPU work ran. Memory: a few words per step. Kernel
 * names are read through r. Each exits the CLI if memory runs out; otherwise they can't fail. */
void sp_steps_begin(struct sp_steps *s, const struct sp_window *w);
void sp_steps_event(struct sp_steps *s, struct sp_trace_reader *r, const struct sp_event *e, uint64_t anchor);
void sp_steps_sweep(struct sp_steps *s, const struct sp_event *e);
uint64_t sp_steps_end(struct sp_steps *s);
/* All of it for the window g handed out last (w): two passes over its events. */
uint64_t sp_steps_add_window(struct sp_steps *s, struct sp_trace_reader *r, struct sp_windows *g,
			     const struct sp_window *w);
/* Frees what s keeps for adding a window (its steps stay). Can't fail. */
void sp_steps_free_scratch(struct sp_steps *s);
/* The per-step table of s (at most SP_STEPS_ROWS rows); nothing if s has no step. Can't fail. */
void sp_steps_print(const struct sp_steps *s, FILE *out);
/* Several ranks' steps side by side: per step number, the spread of step times and the slowest
 * rank (the per-rank breakdown and the straggler are ranks.h's). rank[i] names s[i] (-1: unknown,
 * printed as the index). Can't fail. */
void sp_steps_compare(const struct sp_steps *s, const int *rank, size_t n, FILE *out);
void sp_steps_free(struct sp_steps *s);
/* The label of trace i of n whose header ranks are rank[]: its rank, or "#i" if it has none or
 * shares it with another trace, into buf (24 bytes suffice). Returns buf. Can't fail. */
const char *sp_rank_label(char *buf, size_t len, const int *rank, size_t n, size_t i);
/* A step's CPU duration (marker to marker), ns. */
static inline uint64_t sp_step_ns(const struct sp_step_stat *x)
{
	return x->end > x->start ? x->end - x->start : 0;
}
/* Median of v[0..n) (sorts v); 0 if n is 0. Can't fail. */
uint64_t sp_median_u64(uint64_t *v, size_t n);
/* Median step duration of s, ns; 0 without steps. Exits if memory runs out. */
uint64_t sp_steps_median_ns(const struct sp_steps *s);

#endif
