/* SPDX-License-Identifier: MIT */
/* memtl.h - the memory timeline behind `stepprof memory`: per recorded window, the live bytes of
 * each GPU (and of the host) over the window, its steps, its peak and the allocations alive at
 * the peak. The live set at time t is the window's SNAPSHOT allocations plus its ALLOCs minus its
 * FREEs (matched by device and address); levels are the records' absolute `live` values. Reads
 * a window's allocations and frees again in passes instead of holding them: memory is the live
 * set, the points kept and the allocations kept; never formats output (memtl_html.c does). */
#ifndef SP_MEMTL_H
#define SP_MEMTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "trace/trace.h"
#include "symbols.h"

#define SP_MEMTL_NEVER UINT64_MAX /* freed / died of an allocation still alive at the window's end */
#define SP_MEMTL_MAX_POINTS 4000  /* points of a series before it is thinned */
#define SP_MEMTL_MAX_ALLOCS 20000 /* the largest allocations of a window kept (and embedded in the page) */

/* One allocation of the window (made in it, or alive when it opened). */
struct sp_memtl_alloc {
	uint64_t addr, size;
	uint64_t made;          /* ns, trace clock; before t0 for snapshot allocations */
	uint64_t freed;         /* ns, SP_MEMTL_NEVER if alive at the window's end */
	uint64_t born, died;    /* place among the window's changes: 0 = alive at t0, k = the k-th
	                           ALLOC/FREE in time order; died SP_MEMTL_NEVER if never freed */
	uint32_t stack;         /* call-stack id, 0 none */
	uint16_t device;        /* GPU ordinal, SP_NO_DEVICE for host memory */
	uint8_t kind;           /* enum sp_mem_kind */
	uint8_t snapshot;       /* 1 if alive when the window opened */
};

struct sp_memtl_point {
	uint64_t t, live;       /* ns; bytes live from t on */
	uint64_t seq;           /* the change that set it (as sp_memtl_alloc.born; 0 for the level at t0) */
};

/* The level of one GPU, or of the host, over the window. */
struct sp_memtl_series {
	uint16_t device;        /* GPU ordinal, or SP_NO_DEVICE: host memory (malloc family and pinned) */
	char label[96];         /* "GPU 0 (NVIDIA H100 80GB HBM3)", "GPU 1", "host" */
	struct sp_memtl_point *pt; /* pt[0] = the level at t0, then one point per change, time order;
	                              past SP_MEMTL_MAX_POINTS, thinned: each of SP_MEMTL_MAX_POINTS / 2
	                              equal parts of the window keeps its highest point and its last */
	size_t n;
	size_t n_all;           /* points before thinning: the changes, and the level at t0 */
	uint64_t peak, peak_t;  /* highest level in the window and when it was first reached */
	uint64_t peak_seq;      /* the change that reached it (0: the level at t0) */
	uint64_t peak_ever;     /* highest level since process start (PEAK records), 0 if unknown */
	size_t *at_peak;        /* indexes into a of the window's allocations alive at the peak, biggest
	                           first (then made first) */
	size_t n_at_peak;
	uint64_t allocs, frees; /* ALLOC / FREE records in the window */
	struct sp_memtl_owned *owned; /* per owner, counted over every allocation as the reader passes
	                                 (NULL if it was opened without sym) */
};

struct sp_memtl_step {
	int64_t number;
	uint64_t start, end;
};

/* One window's timeline, as sp_memtl_next hands it out. */
struct sp_memtl {
	uint32_t id;
	int complete;           /* its WINDOW_END was read */
	int64_t first_step, last_step;
	uint64_t t0, t1;
	struct sp_memtl_alloc *a; /* those alive at a peak and the SP_MEMTL_MAX_ALLOCS largest (all
	                             if there are no more), snapshot allocations first, then in the order
	                             they were made */
	size_t na;
	size_t na_all;          /* allocations of the window (snapshots and made in it) */
	struct sp_memtl_series *s; /* GPUs by ordinal, the host last */
	size_t ns;
	struct sp_memtl_step *step; /* by start */
	size_t nstep;
	uint64_t anchor_mono, anchor_real; /* CLOCK_MONOTONIC / CLOCK_REALTIME pair nearest the window
	                                      (its CLOCK record, else the file header's); 0 0 none */
};

struct sp_memtl_reader;

/* Starts reading the windows of r (which stays the caller's). MODULE records met on the way are
 * given to sym (may be NULL). Exits the CLI if memory runs out; otherwise can't fail. */
struct sp_memtl_reader *sp_memtl_open(struct sp_trace_reader *r, struct sp_sym *sym);
/* The next window's timeline in *w, valid until the next call. Returns 1, 0 at the end, or -1
 * after a corrupt chunk (sp_trace_error says why; the window it cut was handed out first). */
int sp_memtl_next(struct sp_memtl_reader *m, const struct sp_memtl **w);
/* Frees m (NULL is fine). This function can't fail. */
void sp_memtl_close(struct sp_memtl_reader *m);

/* Who made a device block (memtl_owner.c): the library of the innermost native frame of its
 * allocation stack outside the CUDA runtime and driver, CUPTI and stepprof. PyTorch's caching
 * allocator (libc10_cuda) holds what torch.cuda.memory_reserved() counts. */
enum {
	SP_OWNER_UNKNOWN,     /* no stack, no native frame, or no module for it */
	SP_OWNER_TORCH_CACHE, /* libc10_cuda: the caching allocator's segments */
	SP_OWNER_TORCH,       /* libtorch*, libc10, torch._C: PyTorch outside the caching allocator */
	SP_OWNER_NCCL,
	SP_OWNER_CUBLAS,      /* libcublas, libcublasLt (their own buffers, not torch's workspaces) */
	SP_OWNER_CUDNN,
	SP_OWNER_CUDA_LIB,    /* cuFFT, cuSPARSE, cuSOLVER, cuRAND, cuTENSOR, NVRTC, nvJitLink, NVSHMEM */
	SP_OWNER_OTHER,       /* any other module */
	SP_OWNER__N
};
/* The owner (SP_OWNER_*) of a block allocated with stack pcs (n frames, innermost first; 0: no
 * stack), modules named by sym; how it was told ("a frame in libc10_cuda.so") or why not in why
 * (len bytes). Can't fail. */
int sp_memtl_owner(struct sp_sym *sym, const uint64_t *pcs, uint32_t n, char *why, size_t len);
/* "PyTorch caching allocator", ... and the JSON key "torch_caching_allocator", ... of an owner. */
const char *sp_memtl_owner_label(int owner);
const char *sp_memtl_owner_key(int owner);
/* Per owner, of one series (a GPU) of window w: bytes and blocks alive at the series' peak, the
 * owner's own highest level in the window, and its blocks (made in it or alive when it opened). */
struct sp_memtl_owned {
	uint64_t at_peak[SP_OWNER__N], blocks_at_peak[SP_OWNER__N];
	uint64_t peak[SP_OWNER__N], blocks[SP_OWNER__N];
	char unknown_why[128];  /* why the first unknown block is unknown ("" if none) */
};
/* Fills o for series s of w: what the reader counted over all its allocations, or, for a reader
 * opened without sym, from w's allocations (all of them up to SP_MEMTL_MAX_ALLOCS; stacks read from
 * r, modules named by sym). Exits the CLI if memory runs out; otherwise can't fail. */
void sp_memtl_owners(const struct sp_memtl *w, const struct sp_memtl_series *s, const struct sp_trace_reader *r,
		     struct sp_sym *sym, struct sp_memtl_owned *o);

/* b bytes as "512B", "1.50KiB", "3.00MiB", "2.00GiB" in buf. Returns buf. Can't fail. */
const char *sp_memtl_bytes(char *buf, size_t n, uint64_t b);
/* PyTorch's caching allocator in a window (memtorch.c), from the summary the collector wrote
 * beside the trace ([activities] torch_memory; docs/OUTPUTS.md), read as hostile text. */
#define SP_MEMTORCH_TOP 10          /* top and at_peak lines kept */
#define SP_MEMTORCH_MAX_POINTS 4096 /* series points kept (the collector writes about 1000) */
struct sp_memtorch_line {
	uint64_t bytes, blocks;
	char where[320];        /* FILE:LINE FUNCTION of the innermost frame outside torch, or '?' */
};
struct sp_memtorch_point {
	uint64_t t_us, allocated, reserved; /* unix-epoch us (torch's time_us), bytes from then on */
};
struct sp_memtorch {
	char path[4200];
	int version;            /* of the file: 1 or 2 */
	uint64_t allocated, reserved, segments, blocks; /* at the window's end */
	struct sp_memtorch_line top[SP_MEMTORCH_TOP]; /* largest live blocks at the end */
	int ntop;
	int history;            /* version 2 with a usable series, its start and its peak */
	uint64_t history_us;    /* when the collector turned the history on (unix-epoch us) */
	uint64_t series_us;     /* the series' start: history_us, or later when cut */
	uint64_t entries, skipped; /* trace entries read, and left out as malformed, by the collector */
	int cut;                /* events before series_us are lost: 1 the ring was full, 2 past the
	                           summary's bound (in the pickle still) */
	uint64_t peak_us, peak; /* the highest allocated level in the series and when first reached */
	struct sp_memtorch_line at_peak[SP_MEMTORCH_TOP]; /* live at the peak by line, largest first */
	int nat;
	struct sp_memtorch_point *pt; /* time order */
	size_t npt;
	size_t dropped;         /* point lines left out: past SP_MEMTORCH_MAX_POINTS or out of order */
	int mapped;             /* the window's clock pair puts the history inside the window */
	int64_t off_us;         /* the series' origin: the window's start (mapped) or history_us */
};
/* Reads summary path into t. Returns 0, or -1 (no such file, not a summary, or neither allocated nor
 * reserved in it; t empty). Exits the CLI if memory runs out. */
int sp_memtorch_load(const char *path, struct sp_memtorch *t);
/* The summary of window w beside trace into t, its times mapped to w's start through w's clock pair
 * where that is plausible. Returns 0, or -1 (none: t empty). Exits if memory runs out. */
int sp_memtorch_read(const struct sp_memtl *w, const char *trace, struct sp_memtorch *t);
/* Frees t's series (t keeps the rest). Can't fail. */
void sp_memtorch_free(struct sp_memtorch *t);
/* t as text under w's driver view (the gap between them named), as the "torch" member of w's
 * JSON object (t NULL: null), and as the page's data for w (nothing without a series). Can't fail. */
struct sp_out;
void sp_memtorch_text(const struct sp_memtl *w, const struct sp_memtorch *t, FILE *out);
void sp_memtorch_json(struct sp_out *x, const struct sp_memtl *w, const struct sp_memtorch *t);
void sp_memtorch_html(struct sp_out *o, const struct sp_memtl *w, const struct sp_memtorch *t);
/* s as a JavaScript string literal safe inside <script> (memtl_html.c). Can't fail. */
void sp_memtl_js_str(struct sp_out *o, const char *s);
/* The short text summary of w: per series the peak in the window, its time and step, the peak
 * since process start, and the top allocations alive at the peak (symbolised stack tops). Stack
 * ids are read from r. Can't fail (stdio errors are the caller's). */
void sp_memtl_summary(const struct sp_memtl *w, const struct sp_trace_reader *r, struct sp_sym *sym, int top,
		      FILE *out);

/* The page of `stepprof memory` (memtl_html.c), in three parts: begin (title, header and styles),
 * one section per window (its data; stack ids read from r, frames named by sym), end (the script
 * that draws). Write errors are kept by o and reported by sp_out_close. Exit the CLI if memory
 * runs out; otherwise can't fail. */
struct sp_out;
void sp_memtl_html_begin(struct sp_out *o, const char *trace, const struct sp_trace_header *h);
void sp_memtl_html_window(struct sp_out *o, const struct sp_memtl *w, const struct sp_trace_reader *r,
			  struct sp_sym *sym);
void sp_memtl_html_end(struct sp_out *o);

#endif
