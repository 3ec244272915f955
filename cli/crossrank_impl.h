/* SPDX-License-Identifier: MIT */
/* crossrank_impl.h - inside the cross-rank analysis only (crossrank.c analyses, crossrank_out.c
 * prints and answers queries): its tunables, the per-trace and per-collective records and the
 * analysis state, with the few small helpers both halves use. Never include it elsewhere. */
#ifndef SP_CROSSRANK_IMPL_H
#define SP_CROSSRANK_IMPL_H

#include <stdint.h>
#include "crossrank.h"
#include "format.h"
#include "util.h"

#define TIE_NS 10000           /* arrivals closer than this (or 1% of the median step) are a tie */
#define CLOCK_TOL_NS 200000    /* same-host anchors that disagree with the collectives by more are not used */
#define MIN_COLLS 3            /* collectives needed to estimate a rank's clock offset */
#define LATE_SHARE 0.5         /* a straggler arrives last in at least this share of its collectives */
#define LATE_RATIO 1.5         /* ... and this many times as often as the next rank */
#define WAIT_FRAC 0.10         /* ... and the others wait for it this share of a step ... */
#define WAIT_MIN_NS 100000     /* ... and at least this long */
#define CLEAR_MARGIN 1.5       /* a straggler whose wait is under this many times both bars is marginal */
#define MAX_ROWS 32            /* per-rank rows printed at most */
#define MAX_NOTES 12
#define SURE_SHARE 0.8         /* a straggler last in at least this share of its collectives is clear */
#define SURE_STEPS 5           /* fewer steps per rank than this: at most medium confidence */
#define FEW_STEPS 3            /* ... than this: low */

enum { CLK_ANCHORS, CLK_COLLECTIVES, CLK_NONE };
enum { M_STEP, M_COMPUTE, M_EXPOSED, M_WAIT, M_STALL, M_COPY, M_XFER, M_NCCL, M_CPUWAIT, M__N };
enum { CONF_LOW, CONF_MEDIUM, CONF_HIGH };
static const char *const conf_names[] = { "low", "medium", "high" };
enum { CAUSE_HOST, CAUSE_COMPUTE, CAUSE_COMM };
static const char *const cause_names[] = { "host", "compute", "communication" };

struct coll {     /* one collective call of a trace, with its kernels */
	uint64_t comm, seq;
	uint64_t cpu;           /* the call's start, the trace's wall clock */
	uint64_t ks, ke;        /* its kernels' first start and last end, wall clock (0: none linked, or
	                           CUPTI gave them no times) */
	uint64_t ks_mono;       /* ks on the trace clock */
	uint32_t trace;         /* index in a->r */
	int32_t step;           /* index in the trace's steps, -1 outside every step */
	int32_t comm_size;
	uint8_t op;             /* enum sp_nccl_op */
	uint8_t paired;         /* its kernels were paired with another trace's (after the analysis) */
	uint8_t untimed;        /* its kernels were recorded without times */
	uint64_t wait;          /* its wait for the last arrival, ns (after the analysis) */
	int64_t inferred;       /* no kernel times: when it had surely arrived (common clock), from its CPU
	                           blocked in a synchronising call with its GPU idle; 0 unknown */
};

struct rk {       /* one trace */
	char *path;
	int rank;               /* header rank, -1 unknown */
	int32_t pid, world;
	char host[64];
	struct sp_steps st;     /* its steps */
	struct sp_steps_iv *comp; /* compute (non-NCCL kernel) intervals, wall clock, merged per window */
	size_t ncomp, compcap;
	struct sp_steps_iv *busy; /* all timed GPU work, wall clock, merged per window */
	size_t nbusy, busycap;
	struct sp_steps_iv *blk;  /* CPU blocked in a synchronising call (stream, device or event sync,
	                             a synchronous copy: .item()), wall clock, merged per window */
	size_t nblk, blkcap;
	uint32_t *untimed_gpu;  /* per step: its GPU records without times other than NCCL kernels */
	size_t utcap;
	uint8_t *syncname;      /* by name id: 0 unknown, 1 not a synchronising call, 2 one (load only) */
	size_t sncap;
	uint64_t untimed_nccl, untimed_other; /* GPU records without times: NCCL kernels, the others */
	int clock;              /* CLK_* */
	int64_t off;            /* subtracted from its wall times to put it on the common clock */
	int64_t est, spread;    /* the collectives' estimate of its offset and its median deviation */
	size_t nest;            /* collectives behind est */
	uint64_t ncoll, unlinked; /* its collectives; those without a kernel */
	int cut;                /* a window without its WINDOW_END, or the file ends inside a chunk */
	uint32_t cut_window;    /* the last window without its end, and the last step it holds */
	int64_t cut_step;       /* (cut_window and cut_step mean nothing if only the file is torn) */
	int cut_has_window;
	uint64_t decisive, last_gpu, last_cpu, cpu_decisive; /* collectives with a clear last arrival; its */
	uint64_t *wait, *xfer, *exposed; /* per step (index of st.st) */
	uint64_t *cpuwait;      /* per step: CPU blocked in a synchronising call while a peer had not arrived */
	uint64_t *peeridle;     /* per step: of that, with its GPU idle (not host stall: waiting for peers) */
	uint64_t inferred;      /* its arrivals inferred from CPU waits (no kernel times) */
	uint64_t infer_upto;    /* the end of its last inferred wait (own wall clock): waits never overlap */
	uint64_t med[M__N];     /* medians over its steps */
};

struct sp_xrank {
	struct rk *r;
	size_t n, cap;
	struct coll *c;
	size_t nc, ccap;
	size_t *order;          /* traces by rank */
	int *ranks;             /* header rank of each trace */
	struct wl {
		int64_t key;
		uint64_t ks, wait;
	} *wl; /* waits of paired kernels, by (key, ks) */
	size_t nwl, wlcap;
	uint64_t groups, paired, complete, decisive;
	uint64_t inferred;      /* decisive collectives that needed an inferred arrival */
	int world;              /* the largest world or communicator size seen, -1 unknown */
	int straggler;          /* trace index, -1 none */
	const char *phase;      /* load only this phase's windows, NULL all */
	char first_phase[32];   /* the phase of the first window loaded ("" none) */
	int phases_mixed;       /* windows of two or more phases were loaded */
	int cause;
	int explained;          /* the cause's excess explains at least a quarter of the wait */
	int marginal;           /* a straggler named, its wait within CLEAR_MARGIN of the bars (near the edge) */
	double wait_share;      /* wait_others over the median step (0 without one) */
	int untraced_later;     /* a rank that was not traced is likely later still */
	double share, second;   /* the most frequent last arriver's share, the next one's */
	int most;               /* trace index of the most frequent last arriver, -1 none */
	uint64_t wait_others;   /* the others' median wait per step */
	uint64_t step_med;      /* median over the traces of their median step */
	int64_t tie;            /* arrivals closer than this are a tie: TIE_NS or 1% of step_med */
	int64_t excess[3];      /* the straggler's stall, compute and transfer over the others' medians */
	uint64_t peer[3];       /* the others' medians of those */
	int conf;               /* CONF_*: how sure the verdict is */
	char conf_why[4][160];  /* what lowered it */
	int nconf;
	char verdict[1024];
	char notes[MAX_NOTES][512];
	int nnotes;
};

/* Shared by crossrank.c and crossrank_judge.c: a note under the verdict (MAX_NOTES at most); the
 * median over the traces other than skip (-1: all) of their median q; ns as "1.234ms" in buf (40
 * bytes), negative values with a '-'; the verdict, its notes and confidence (crossrank_judge.c).
 * These functions can't fail (sp_xr_others exits if memory runs out). */
void sp_xr_note(struct sp_xrank *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t sp_xr_others(const struct sp_xrank *a, int skip, int q);
const char *sp_xr_ms(char *buf, int64_t ns);
void sp_xr_judge(struct sp_xrank *a);

/* a - b with wrap-around instead of overflow (times from a hostile file may be anything). */
static inline int64_t sub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* The label of trace i (sp_rank_label). */
static inline const char *label(const struct sp_xrank *a, size_t i, char *buf, size_t len)
{
	return sp_rank_label(buf, len, a->ranks, a->n, i);
}

/* The share of its decisive collectives that trace k reached last (0 if none). */
static inline double share(const struct rk *k)
{
	return k->decisive ? (double)k->last_gpu / (double)k->decisive : 0;
}

/* Orders the waits of paired kernels by (trace key, kernel start), for sorting and bsearch. */
static inline int cmp_wl(const void *pa, const void *pb)
{
	const struct wl *a = pa, *b = pb;
	return a->key != b->key ? (a->key < b->key ? -1 : 1) : sp_cmp_u64(a->ks, b->ks);
}

#endif
