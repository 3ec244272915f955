/* SPDX-License-Identifier: MIT */
/* windows.h - streaming grouping of a trace's events into its recorded windows, shared by the
 * commands that read windows. Reads each window's stretch of the file a few times instead of
 * holding its events: once to find its bounds, steps and drop records, once to link its CUDA calls
 * (correlation ids) to its steps, then once per pass its reader asks for (file order, or by start
 * time). Memory: the window's steps and NCCL calls, a bit per correlation id, and the reordering
 * the file needs, bounded (sp_windows_sorted; docs/OUTPUTS.md, "Reading a trace"); never the
 * window's records.
 * Also the small per-file tables (thread names, devices, clock anchor). Never formats output. */
#ifndef SP_WINDOWS_H
#define SP_WINDOWS_H

#include <stddef.h>
#include <stdint.h>
#include "trace/trace.h"
#include "util.h" /* sp_oom, sp_xgrow, sp_sort, sp_idset: most users of windows.h use them */

#define SP_DROP__COUNT (SP_DROP_MISSING + 1) /* size of a by-source array indexed by enum sp_drop_source */
#define SP_WIN_MAX_DEVICES 64             /* devices whose SP_EV_DEVICE record is kept */

/* One recorded window as handed out by sp_windows_next. */
struct sp_window {
	uint32_t id;            /* from WINDOW_BEGIN */
	char phase[32];         /* its phase ([phase.NAME]; WINDOW_BEGIN's name), "" without phases */
	int complete;           /* 1 if its WINDOW_END was read; 0 if the file ended or the next began first */
	int capped;             /* WINDOW_END says the byte cap cut it */
	int inferred;           /* its WINDOW_BEGIN is not in the file: found from its steps (windows.c) */
	int64_t first_step;     /* from WINDOW_BEGIN */
	uint8_t origin;         /* WINDOW_BEGIN's sub: SP_WIN_* of trace/event.h, with SP_WIN_UNCOUNTED */
	int64_t last_step;      /* from WINDOW_END; if incomplete, the last step it holds ("cut at step
	                           last_step"; first_step if it holds none) */
	uint64_t t0, t1;        /* ns; t1 from WINDOW_END, else the last end time of its events */
	uint64_t bytes;         /* encoded bytes of the window (WINDOW_END) */
	uint64_t dropped_total; /* records lost, all sources, as WINDOW_END counts them */
	uint64_t dropped[SP_DROP__COUNT]; /* by source: its DROPPED records, plus late GPU records met here */
	uint64_t anchor_mono, anchor_real; /* clock anchor for wall time, the nearest to the window: the
	                                      SP_EV_CLOCK written at its end, else the last one before it,
	                                      else the header's */
	const struct sp_event *steps; /* its STEP records, file order (valid until the next window) */
	size_t nsteps;
	const struct sp_event *nccl;  /* its NCCL call records, file order */
	size_t nnccl;
	uint64_t events;        /* its events (records other than BEGIN/END and metadata) */
};

struct sp_windows;

/* Starts grouping the events of r (which stays the caller's; read from its current position).
 * Exits the CLI if memory runs out; otherwise can't fail. */
struct sp_windows *sp_windows_open(struct sp_trace_reader *r);
/* Reads on until the next window is complete (its END read and the next BEGIN or the end of the
 * file reached) and points *w at it; *w stays valid until the next call. Returns 1 with a window,
 * 0 at the end, -1 after a corrupt chunk (sp_trace_error says why; the window cut by it was
 * handed out first, marked incomplete). */
int sp_windows_next(struct sp_windows *g, const struct sp_window **w);
/* A pass over the events of the window last handed out: fn(ctx, e) for each, in file order (e is
 * valid during the call only). Can be called any number of times until the next sp_windows_next.
 * Exits if memory runs out. */
typedef void (*sp_window_fn)(void *ctx, const struct sp_event *e);
void sp_windows_each(struct sp_windows *g, sp_window_fn fn, void *ctx);
/* The same for the events keep accepts (NULL: all), by start time, the longest first at equal
 * starts, then in file order (the order the exporters and the GPU-busy sweep need). Holds as many
 * events as the file is out of that order (measured when the window was read), at most 65536 or
 * so: those further out of order (a step, a long range: written at their end) were kept aside
 * when the window was read, unless there are more than 4096 of them, then the bound doubles
 * until there are not (docs/OUTPUTS.md, "Reading a trace"). */
void sp_windows_sorted(struct sp_windows *g, int (*keep)(const struct sp_event *e), sp_window_fn fn, void *ctx);
/* Where GPU record e of the window counts among its steps (sp_calls_anchor's rule, steps.h): a
 * time equivalent to the start of the CUDA call of the window with its correlation id against
 * every step boundary of the window, else e's own start. Can't fail. */
uint64_t sp_windows_anchor(const struct sp_windows *g, const struct sp_event *e);
/* Limits the passes over the window last handed out to the events keep(ctx, e) accepts (a part of
 * it: `convert --steps`); keep NULL lifts the limit, as sp_windows_next does. Can't fail. */
void sp_windows_restrict(struct sp_windows *g, int (*keep)(void *ctx, const struct sp_event *e), void *ctx);
/* The range lo..hi of the correlation ids its records carry (records of the window's stretch of
 * the file: a superset of the window's); returns how many records carry one (0: none, lo and hi
 * unset). Can't fail. */
uint64_t sp_windows_corr_range(const struct sp_windows *g, uint32_t *lo, uint32_t *hi);
/* Hands out only the windows of phase (compared without case; NULL: every window). Call before
 * the first sp_windows_next. This function can't fail. */
void sp_windows_set_phase(struct sp_windows *g, const char *phase);
/* Windows passed over so far because they belong to another phase. Can't fail. */
uint64_t sp_windows_other_phase(const struct sp_windows *g);
/* Name of CPU thread tid from its SP_EV_THREAD record, or NULL if none was read yet. */
const char *sp_windows_thread_name(const struct sp_windows *g, uint32_t tid);
/* The SP_EV_DEVICE record of device, or NULL if none was read yet. */
const struct sp_event *sp_windows_device(const struct sp_windows *g, unsigned device);
/* Records read so far that belong to no window (they are skipped). */
uint64_t sp_windows_outside(const struct sp_windows *g);
/* Frees g (NULL is fine); the reader stays open. This function can't fail. */
void sp_windows_close(struct sp_windows *g);

/* Wall-clock ns (CLOCK_REALTIME) of trace time mono, with the window's anchor. Can't fail. */
uint64_t sp_window_wall(const struct sp_window *w, uint64_t mono);

#endif
