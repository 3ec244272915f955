/* SPDX-License-Identifier: MIT */
/* commstats.h - NCCL statistics of the offline CLI: which kernels are NCCL's and the algorithm and
 * protocol their names carry, the nccl-tests bus-bandwidth rules, the per-call statistics behind
 * `stepprof report`'s NCCL table (calls linked to their kernels, grouped calls sharing their
 * group's kernels), and the pairing of one collective's calls across ranks for
 * `stepprof convert --merge-ranks`. Works on windows (windows.h); never prints. */
#ifndef SP_COMMSTATS_H
#define SP_COMMSTATS_H

#include <stddef.h>
#include <stdint.h>
#include "windows.h"

#define SP_NCCL_ALGO_MIXED (-1)        /* the kernels of a row name different algorithms/protocols */
#define SP_NCCL_FLOW_BASE (1ull << 52) /* flow ids of cross-rank NCCL arrows: above every launch flow id */

/* One row of the NCCL table: the calls of one op, communicator size and message size. */
struct sp_nccl_row {
	uint8_t op;             /* enum sp_nccl_op */
	uint8_t cpu_timed;      /* no kernel linked to these calls: ns is their CPU call time */
	int16_t algo;           /* algorithm/protocol code of the linked kernels (sp_nccl_algo), 0 unknown */
	int32_t nranks;         /* communicator size, -1 unknown */
	uint64_t bytes;         /* one call's bytes as passed (count x datatype size) */
	uint64_t calls;
	uint64_t ns;            /* summed time: linked kernel time (shared within groups), or CPU time */
};

/* The NCCL table being built, window by window. Zero-initialise; free with sp_nccl_stats_free. */
struct sp_nccl_stats {
	struct sp_nccl_row *row; /* sorted by (op, nranks, bytes, cpu_timed) */
	size_t n;
	uint64_t orphan_kernels; /* NCCL kernels linked to no call of their window (e.g. CUDA graphs) */
	uint64_t orphan_ns;
};

/* 1 if name is an NCCL device kernel ("ncclDevKernel_..." or "ncclKernel_..."). Can't fail. */
int sp_nccl_is_kernel(const char *name);
/* The algorithm/protocol code of an NCCL kernel name, from its '_'-separated tokens (RING, TREE,
 * COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE, PAT; LL, LL128, SIMPLE); 0 if it names neither.
 * Can't fail. */
int sp_nccl_algo(const char *kernel);
/* code as text into buf: "RING/LL", "RING/-", "-" (0), "mixed" (SP_NCCL_ALGO_MIXED). Returns buf. */
const char *sp_nccl_algo_name(int code, char *buf, size_t n);
/* The size S of one call as nccl-tests counts it (doc/PERFORMANCE.md): AllGather, ReduceScatter and
 * AlltoAll move nranks x the per-rank bytes; the others their bytes. 0 if nranks is needed but unknown. */
uint64_t sp_nccl_size(int op, uint64_t bytes, int nranks);
/* busbw / algbw for op on nranks (nccl-tests): AllReduce 2(n-1)/n; AllGather, ReduceScatter,
 * AlltoAll (n-1)/n; Broadcast, Reduce, Send, Recv 1. Negative if unknown. */
double sp_nccl_bus_factor(int op, int nranks);

/* A window's NCCL calls being linked to the kernels they launched, streaming: sp_nccl_win_begin
 * (its calls, from w->nccl), sp_nccl_win_event for each of its events in any order, then
 * sp_nccl_stats_add or sp_nccl_links. Memory: its NCCL calls and kernels and the launches made
 * inside its NCCL calls. Zero-initialise; free with sp_nccl_win_free. */
struct sp_nccl_win {
	const struct sp_window *w;
	const struct sp_event **calls; /* w->nccl by (thread, start) */
	size_t ncalls, calls_cap;
	struct sp_nccl_kernel { /* an NCCL kernel of the window, file order */
		uint32_t corr, name;
		uint64_t start, end;
	} *k;
	size_t nk, k_cap;
	struct {                /* correlation id -> the call (index in calls) that made the first
	                           launch with that id found inside a call (open addressing; key 0 empty) */
		uint32_t *key, *call;
		size_t cap, n;
	} launch;
	uint8_t *is_nccl;       /* by kernel name index: 0 unknown, 1 not NCCL's, 2 NCCL's */
	size_t is_nccl_cap;
};
void sp_nccl_win_begin(struct sp_nccl_win *x, const struct sp_window *w);
void sp_nccl_win_event(struct sp_nccl_win *x, struct sp_trace_reader *r, const struct sp_event *e);
void sp_nccl_win_free(struct sp_nccl_win *x);

/* Folds the NCCL calls of the window x read (strings from r) into s. A call's time is that of the
 * NCCL kernels it launched: the kernel whose correlation id the call carries, and any NCCL kernel
 * whose launch (an API record, by correlation id) lies inside the call on its thread. Calls inside
 * a group (group_depth > 0) that launched nothing share the kernel time of the group's outermost
 * GroupEnd on their thread, in proportion to their bytes (equally if all are 0). A call with no
 * kernel counts its CPU time, in a row marked cpu_timed. Exits the CLI if memory runs out;
 * otherwise can't fail. */
void sp_nccl_stats_add(struct sp_nccl_stats *s, struct sp_trace_reader *r, const struct sp_nccl_win *x);
/* One NCCL call of a window (GroupStart/GroupEnd left out) with its linked kernels, by the
 * rules of sp_nccl_stats_add. */
struct sp_nccl_link {
	const struct sp_event *e; /* the call (points into the window's nccl) */
	uint64_t ks, ke;        /* first start and last end of its kernels (for a group member: the
	                           group's); 0 when kernels is 0 */
	uint32_t kernels;       /* its kernels (a group member: the group's); 0 none linked */
	int shared;             /* 1: a group member after the first: the same kernels as that one */
};
/* The NCCL calls of the window x read (strings from r) with their kernels, in (thread, start)
 * order, into *out (malloc'ed, the caller frees; valid while the window is). Returns their number.
 * Exits the CLI if memory runs out; otherwise can't fail. */
size_t sp_nccl_links(struct sp_trace_reader *r, const struct sp_nccl_win *x, struct sp_nccl_link **out);
/* Frees the rows; s may be reused. Can't fail. */
void sp_nccl_stats_free(struct sp_nccl_stats *s);

/* ---- cross-rank pairing (convert --merge-ranks) ---- */

/* The NCCL calls of one round of windows (at most one window per trace), grouped by
 * (comm, seq): the calls of one collective on every rank. */
struct sp_nccl_match;

/* What the match knows about one call. */
struct sp_nccl_peer {
	uint64_t flow;          /* flow id of the arrow to member i: flow + i (i >= 1); 0: no arrows
	                           (more than 65536 calls) */
	uint32_t pos, n;        /* this call's place among the collective's calls (by rank, then comm rank:
	                           0 is the lowest rank's) and their number */
	uint64_t first_wall, last_wall; /* earliest and latest CPU start of the calls (wall-clock ns) */
	uint64_t wall;          /* this call's CPU start (wall-clock ns) */
	int64_t last_key;       /* rank (or pid) of the trace whose call started last */
};

/* A new, empty match. Exits the CLI if memory runs out. */
struct sp_nccl_match *sp_nccl_match_new(void);
/* Starts a round: forgets the calls added so far (collective numbers keep counting). Can't fail. */
void sp_nccl_match_reset(struct sp_nccl_match *m);
/* Adds the NCCL calls of window w of the trace of rank key (its pid if it has no rank; keys of a
 * round must differ). Calls without a communicator (GroupStart, GroupEnd) are skipped. Exits the
 * CLI if memory runs out. */
void sp_nccl_match_add(struct sp_nccl_match *m, int64_t key, const struct sp_window *w);
/* Groups the calls added since the reset; call before sp_nccl_match_find. Exits on out of memory. */
void sp_nccl_match_build(struct sp_nccl_match *m);
/* Fills *p for call e of the trace of key and returns 1, or returns 0 if the round has no such call. */
int sp_nccl_match_find(const struct sp_nccl_match *m, int64_t key, const struct sp_event *e, struct sp_nccl_peer *p);
/* Collectives found in two or more traces, all rounds so far. Can't fail. */
uint64_t sp_nccl_match_paired(const struct sp_nccl_match *m);
/* Frees m (NULL is fine). Can't fail. */
void sp_nccl_match_free(struct sp_nccl_match *m);

#endif
