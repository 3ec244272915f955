/* SPDX-License-Identifier: MIT */
/* steps.h - per-step statistics of a trace's recorded windows, for `stepprof report` (one trace)
 * and `stepprof steps` (several ranks side by side): the GPU work launched in each step (a GPU
 * operation counts in the step whose CPU call, found by correlation id, lies in the step) and how
 * busy the GPU was inside the step's span. Memory: the steps, plus one window's scratch. */
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

/* A window's CUDA calls by correlation id: what places its GPU work among its steps. */
struct sp_calls {
	struct sp_calls_one {
		uint32_t corr;
		uint64_t t;
	} *v; /* sorted by id, then start */
	size_t n, cap;
};

/* Indexes the CUDA API calls of window w (those with a correlation id) into c, replacing what
 * it held. Exits the CLI if memory runs out; otherwise can't fail. */
void sp_calls_index(struct sp_calls *c, const struct sp_window *w);
/* The CPU time that places GPU record e among steps: the start of the call that launched it
 * (same correlation id), or e's own start when that call is not in the window (no id, or its
 * record was lost). `report`, `steps` and `convert --steps` all count GPU work by this rule. */
uint64_t sp_calls_anchor(const struct sp_calls *c, const struct sp_event *e);
void sp_calls_free(struct sp_calls *c);

struct sp_steps {
	struct sp_step_stat *st; /* recorded steps, window after window */
	size_t n;
	/* scratch */
	struct sp_steps_iv {
		uint64_t s, e;
	} *iv;  /* GPU intervals of one window */
	size_t ivcap;
	struct sp_calls calls;  /* its CUDA calls */
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

/* Adds the steps of window w (read through r, for kernel names) to s. Returns the ns of
 * [w->t0, w->t1] during which any GPU work ran. Exits the CLI if memory runs out; otherwise
 * can't fail. */
uint64_t sp_steps_add_window(struct sp_steps *s, struct sp_trace_reader *r, const struct sp_window *w);
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
