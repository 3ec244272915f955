/* SPDX-License-Identifier: MIT */
/* export_chrome.h - what the files of the Chrome (Kineto) JSON exporter share, and nothing else
 * includes: the exporter's state, the pid and tid numbering of its tracks, and the functions each
 * file gives the others. export_chrome.c: the file and the window's passes;
 * export_chrome_index.c: the window's indexes (its first pass); export_chrome_tracks.c: event
 * objects, processes, tracks and lanes; export_chrome_events.c: one writer per record kind. */
#ifndef SP_EXPORT_CHROME_H
#define SP_EXPORT_CHROME_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"
#include "config/schedule.h"
#include "commstats.h"
#include "crossrank.h"
#include "symbols.h"
#include "opattr.h"

#define GPU_PID_BASE 1000000000ll  /* merged view: GPU pid = base + key * 100 + device */
#define NO_DEV_PID 65535           /* per-rank view: GPU work whose device is unknown */
#define CPU_PID_SHIFT 0x10000000ll /* per-rank view: an OS pid that would collide with a device ordinal */
#define SYNC_TID_BASE 1000000000ull /* sync track of stream s, lane l: base + s * 16 + l */
#define SPAN_TID_BASE 2000000000ull /* extra span track t, lane l: base + t * 16 + l */
#define OVER_TID_BASE 3000000000ull /* slices that would partly overlap one on track tid: base + tid * 16 + l */
#define LANES 16
#define NS_PER_DAY 86400000000000ull
#define PROGRESS_EVERY 65536

struct win_info {               /* what otherData says about a window written */
	struct sp_window w;
	uint64_t steps;
	size_t trace;           /* index in traces */
};

struct trace_info {             /* a trace whose windows are written (several with --merge-ranks) */
	struct sp_trace_reader *r;
	const struct sp_trace_header *hdr;
	const struct sp_windows *g;
	const char *source;
};

struct lane {     /* the last end of a lane of a track that gets lanes */
	int64_t pid;
	uint64_t tid;           /* the lane's tid */
	uint64_t end;
};

struct tstack {   /* the slices open on a track at the time being written */
	int64_t pid;
	uint64_t tid;
	int64_t *end;           /* their ends (ns), innermost last */
	size_t n, cap;
};

struct ctxdev {   /* CUDA context -> device, from the window's GPU records */
	uint32_t context;
	uint16_t device;
};

struct call_map {               /* correlation id -> the NCCL call that launched the kernel */
	uint32_t *key;          /* 0 = empty */
	const struct sp_event **call;
	size_t cap, n;
};

struct launch {                 /* a CUDA call made inside one of the window's NCCL calls */
	uint32_t corr, tid;
	uint64_t start;
};

/* A track or process the window's events name (a CPU thread; a GPU stream by device, or by context
 * when the record has no device; a GPU process an allocation names), with the first of those events
 * in the order they are written (start, longest first, file order). */
struct track_use {
	uint8_t kind;           /* USE_* */
	uint32_t a, b;          /* thread; device, stream; context, stream; device */
	uint64_t start, end, seq;
};
enum { USE_CPU, USE_GPU_DEV, USE_GPU_CTX, USE_PROCESS };

struct seq_step {               /* a step and its place among the window's events in file order */
	struct sp_event e;
	uint64_t seq;
};

enum { CORR_API = 1, CORR_GPU = 2, CORR_FLOW_S = 4, CORR_FLOW_F = 8 };

struct corrs {    /* per correlation id of the current window: CORR_* flags (which ends
                                   exist, which flow ends are written) */
	uint32_t lo;            /* the window's smallest id: flags[id - lo] */
	size_t n, cap;          /* ids covered; 0: the window's ids are too sparse, sets are used */
	uint8_t *flags;
	struct sp_idset set[4]; /* by flag bit, when sparse */
};

struct chrome {
	int header;             /* the metadata before traceEvents is written */
	int first;              /* no event written yet (no comma before the next) */
	int base_set;
	uint64_t base;          /* wall-clock ns at ts 0 */
	int64_t key;            /* rank, or the OS pid if the trace has no rank */
	size_t trace;           /* index in traces of the trace being written */
	uint64_t next_progress; /* x->events at which progress is called next */
	struct sp_idset pids;   /* processes whose metadata is written */
	struct sp_idset tracks; /* (pid, tid) tracks whose name is written */
	struct corrs corrs;     /* flows only where both ends exist, one of each end per id */
	uint64_t seq;           /* events of the window met so far in a pass (file order) */
	uint64_t first_start;   /* the window's earliest start (no negative ts) */
	uint64_t used;          /* devices (< 64) of the window's GPU work */
	int has_nccl;           /* the window has NCCL calls */
	struct sp_event *steps; /* the window's steps by start, longest first, then file order */
	struct seq_step *steps_in; /* ... while collected, with their places in file order */
	size_t nsteps, steps_cap, steps_in_cap;
	size_t step_at;         /* the step being written (index in steps) */
	size_t step_seen;       /* steps met by the pass that writes */
	const struct sp_window *w; /* the window being written */
	struct sp_event *ncall_ev; /* the window's NCCL calls, file order */
	const struct sp_event **ncall; /* ... by (tid, start) */
	size_t nncall, ncall_cap, ncall_ev_cap;
	struct launch *launches; /* CUDA calls with an id inside an NCCL call of the window, file order */
	size_t nlaunches, launches_cap;
	const struct sp_event **wcall; /* the window's NCCL calls as grouped (sp_window nccl) by (tid, start) */
	uint64_t *wcall_end;    /* ... the latest end of its thread's calls up to each */
	size_t nwcall, wcall_cap, wcall_end_cap;
	struct call_map calls;
	struct track_use *uses; /* tracks and processes named by the window's events (open addressing) */
	size_t uses_cap, nuses, use_last;
	struct ctxdev *ctx;     /* contexts seen, few */
	size_t nctx, ctx_cap;
	int only_dev;           /* the one device of the window's GPU work, -1 none or several */
	struct lane *lanes;
	size_t nlanes, lanes_cap;
	struct tstack *ts;      /* per track, for fit() */
	size_t nts, ts_cap, ts_last;
	uint64_t overlaps;      /* slices moved off their track by fit() */
	uint64_t untimed;       /* records left out: they end before they start (CUPTI gave no times) */
	struct win_info *wins;
	size_t nwins;
	struct trace_info *traces;
	size_t ntraces;
	uint8_t *nccl_name;     /* by name id: 0 unknown, 1 not an NCCL kernel, 2 an NCCL kernel */
	size_t nccl_cap;
	struct name {
		const char *s;
		size_t n;
		int plain;
	} *names; /* by name id: display name, its
	                           length, 1 if JSON needs no escape in it (0: not looked up yet, -1: needs) */
	size_t names_cap;
	struct sp_opattr ops;   /* the window's torch ops and modules (opattr.h) */
	uint64_t op_next;       /* External ids given to ops in earlier windows */
	uint64_t *op_flow;      /* per op of the window: the id of its fwdbwd flow, 0 none */
	size_t op_flow_cap;
};

/* ---- CUDA facts the trace does not carry (per compute capability, CUDA occupancy tables) ---- */

struct arch {
	uint8_t major, minor;
	uint8_t max_warps;      /* resident warps per SM */
	uint8_t max_blocks;     /* resident blocks per SM */
	uint32_t smem_sm;       /* shared memory per SM, bytes */
	uint32_t smem_optin;    /* the most shared memory one block may opt in to */
	uint32_t smem_reserved; /* shared memory the system reserves per block */
};

/* ---- pids, ids and times ---- */

static inline int64_t cpu_pid(const struct sp_export *x)
{
	const struct chrome *c = x->priv;
	int64_t pid = x->hdr->meta.pid;

	if (x->merged)
		return c->key;
	return pid >= 0 && pid < SP_WIN_MAX_DEVICES ? pid + CPU_PID_SHIFT : pid;
}

/* device: an ordinal, or -1 (unknown) */
static inline int64_t gpu_pid(const struct sp_export *x, int device)
{
	const struct chrome *c = x->priv;

	if (x->merged)
		return GPU_PID_BASE + c->key * 100 + (device >= 0 && device < 99 ? device : 99);
	return device >= 0 ? device : NO_DEV_PID;
}

/* Correlation ids (and the ids of launch flows) as written: unique per rank in a merged file. */
static inline uint64_t corr_id(const struct sp_export *x, uint32_t corr)
{
	int32_t rank = x->hdr->meta.rank;
	return x->merged ? ((uint64_t)(rank >= 0 ? rank + 1 : 0) << 32) | corr : corr;
}

/* ts + d, saturated (times of a damaged trace may be anything). Can't fail. */
static inline int64_t add_ns(int64_t ts, uint64_t d)
{
	return d > (uint64_t)(INT64_MAX - (ts > 0 ? ts : 0)) ? INT64_MAX : ts + (int64_t)d;
}

static inline int64_t ts_wall(const struct sp_export *x, uint64_t wall)
{
	const struct chrome *c = x->priv;
	return (int64_t)(wall - c->base);
}

static inline int64_t ts_of(const struct sp_export *x, const struct sp_window *w, uint64_t mono)
{
	return ts_wall(x, sp_window_wall(w, mono));
}

/* ---- export_chrome_tracks.c: event objects and tracks (each exits the CLI if memory runs out;
 * nothing else fails) ---- */

/* Opens an event object: separator, "ph", "cat", "name" (string id name_id, else name), "pid",
 * "tid", "ts"; the caller adds the rest and closes it. */
void sp_chrome_ev_open_id(struct sp_export *x, const char *ph, const char *cat, uint32_t name_id, const char *name,
			  int64_t pid, uint64_t tid, int64_t ts);
void sp_chrome_ev_open(struct sp_export *x, const char *ph, const char *cat, const char *name, int64_t pid,
		       uint64_t tid, int64_t ts);
/* ,"dur": of d ns / of e */
void sp_chrome_dur_ns(struct sp_export *x, uint64_t d);
void sp_chrome_dur(struct sp_export *x, const struct sp_event *e);
/* A flow arrow's start ('s') or end ('f', bound to the enclosing slice); cat is its name too. */
void sp_chrome_flow(struct sp_export *x, char ph, uint64_t id, const char *cat, int64_t pid, uint64_t tid, int64_t ts);
/* The display name of string id, or fallback for id 0. */
const char *sp_chrome_str(const struct sp_export *x, uint32_t id, const char *fallback);
/* 1 if the kernel name id is an NCCL kernel (cached by id). */
int sp_chrome_is_nccl_kernel(struct sp_export *x, uint32_t id);
/* The tid of the first free lane of the track with lanes at base (base .. base + LANES - 1). */
uint64_t sp_chrome_lane(struct sp_export *x, int64_t pid, uint64_t base, uint64_t start, uint64_t end);
/* The tid a slice [ts, ts + d) of track (pid, tid) goes on: its own, or an overlap lane. */
uint64_t sp_chrome_fit(struct sp_export *x, int64_t pid, uint64_t tid, int64_t ts, uint64_t d, int gpu);
/* Names a track (pid, tid) / a thread's or a stream's track / the process (pid, -1: the CPU's) /
 * the GPU process of device (-1: unknown), once each. */
void sp_chrome_name_track_as(struct sp_export *x, int64_t pid, uint64_t tid, const char *name, long long sort);
void sp_chrome_name_track(struct sp_export *x, int64_t pid, uint32_t tid, int gpu);
void sp_chrome_name_process(struct sp_export *x, int64_t pid, int device);
int64_t sp_chrome_gpu_process(struct sp_export *x, int device);

/* ---- export_chrome_index.c: the window's indexes (each exits the CLI if memory runs out;
 * nothing else fails) ---- */

/* Starts the indexes of window w (x->g handed it out): call, then sp_chrome_index_event for each
 * of its events in file order (sp_windows_each), then sp_chrome_index_end. */
void sp_chrome_index_begin(struct sp_export *x, const struct sp_window *w);
void sp_chrome_index_event(void *x, const struct sp_event *e);
void sp_chrome_index_end(struct sp_export *x);
/* Names the tracks and processes the window's events land on, in the order a pass by start meets
 * them (the tracks with lanes are named as they are used). */
void sp_chrome_name_tracks(struct sp_export *x);
/* Correlation id flags (CORR_*) of the window: has / sets (1 if newly set). */
int sp_chrome_corrs_has(const struct corrs *k, uint32_t id, unsigned bit);
int sp_chrome_corrs_add(struct corrs *k, uint32_t id, unsigned bit);
/* The device of a GPU or sync record (its own, its context's, the window's only one), or -1. */
int sp_chrome_device_of(const struct chrome *c, const struct sp_event *e);
/* The NCCL call that launched correlation id corr, or NULL. */
const struct sp_event *sp_chrome_call_map_get(const struct call_map *m, uint32_t corr);
/* Frees the indexes (with the exporter's state). */
void sp_chrome_index_free(struct chrome *c);

/* ---- export_chrome_events.c: the writers per record kind (each exits the CLI if memory runs
 * out; nothing else fails) ---- */

/* The occupancy rules of dev's compute capability, or NULL if unknown (or dev NULL). */
const struct arch *sp_chrome_arch_of(const struct sp_event *dev);
void sp_chrome_gpu_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e);
void sp_chrome_api_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e);
void sp_chrome_nccl_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e);
void sp_chrome_cpu_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e);
/* The caller's extra spans of the trace being written (sp_export_span), each on its track's lane. */
void sp_chrome_extra_spans(struct sp_export *x);

/* ---- export_chrome_ops.c: torch ops and modules as Kineto writes them (nothing fails but memory,
 * which exits the CLI) ---- */

/* Indexes window w's op and module ranges. */
void sp_chrome_ops_window(struct sp_export *x, const struct sp_window *w);
/* "External id" of a launching call on tid at t / of the GPU record of corr: the innermost op's
 * id, as Kineto ties runtime calls and kernels to their cpu_op; the correlation id without one. */
uint64_t sp_chrome_ext_of_call(const struct sp_export *x, uint32_t tid, uint64_t t, uint32_t corr);
uint64_t sp_chrome_ext_of_gpu(const struct sp_export *x, uint32_t corr);
/* Writes marker e if it is an op (cpu_op: External id, Sequence number, Input Dims) or a module
 * (python_function "nn.Module: PATH"), with its fwdbwd flow end; returns 0 for another marker. */
int sp_chrome_op_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e);
void sp_chrome_ops_free(struct sp_export *x);
#endif
