/* SPDX-License-Identifier: MIT */
/* windows.h - streaming grouping of a trace's events into its recorded windows, shared by
 * `convert` and `report`. Reads the file once, in file order; holds one window's events at a
 * time (plus the few read between two windows) and the small per-file tables (thread names,
 * devices, clock anchor). Decides which window an event belongs to; never formats output. */
#ifndef SP_WINDOWS_H
#define SP_WINDOWS_H

#include <stddef.h>
#include <stdint.h>
#include "trace/trace.h"

#define SP_DROP__COUNT (SP_DROP_LATE + 1) /* size of a by-source array indexed by enum sp_drop_source */
#define SP_WIN_MAX_DEVICES 64             /* devices whose SP_EV_DEVICE record is kept */

/* One recorded window as handed out by sp_windows_next. */
struct sp_window {
	uint32_t id;            /* from WINDOW_BEGIN */
	int complete;           /* 1 if its WINDOW_END was read; 0 if the file ended or the next began first */
	int capped;             /* WINDOW_END says the byte cap cut it */
	int64_t first_step;     /* from WINDOW_BEGIN */
	uint8_t origin;         /* WINDOW_BEGIN's sub: SP_WIN_* of trace/event.h, with SP_WIN_UNCOUNTED */
	int64_t last_step;      /* from WINDOW_END; if incomplete, the last step recorded */
	uint64_t t0, t1;        /* ns; t1 from WINDOW_END, else the last end time of its events */
	uint64_t bytes;         /* encoded bytes of the window (WINDOW_END) */
	uint64_t dropped_total; /* records lost, all sources, as WINDOW_END counts them */
	uint64_t dropped[SP_DROP__COUNT]; /* by source: its DROPPED records, plus late GPU records met here */
	uint64_t anchor_mono, anchor_real; /* clock anchor for wall time, the nearest to the window: the
	                                      SP_EV_CLOCK written at its end, else the last one before it,
	                                      else the header's */
	struct sp_event *ev;    /* its events, file order; no BEGIN/END and no metadata records */
	size_t n;
};

struct sp_windows;

/* A set of ids (correlation ids, track keys), open addressing. */
struct sp_idset {
	uint64_t *slot;         /* 0 = empty; key 0 is kept in has_zero */
	size_t cap, n;
	int has_zero;
};
/* Adds key; exits the CLI if memory runs out. Returns 1 if it was new, 0 if already there. */
int sp_idset_add(struct sp_idset *s, uint64_t key);
/* 1 if key is in s. This function can't fail. */
int sp_idset_has(const struct sp_idset *s, uint64_t key);
/* Empties s (keeping its memory) / frees its memory. These functions can't fail. */
void sp_idset_clear(struct sp_idset *s);
void sp_idset_free(struct sp_idset *s);

/* For the offline CLI only: sp_oom prints "stepprof: out of memory" and exits 1; sp_xrealloc is
 * realloc that calls it on failure. */
void sp_oom(void) __attribute__((noreturn));
void *sp_xrealloc(void *p, size_t n);
/* Grows the zero-filled array p of *cap elements of elem bytes (doubling, from 256) until index i
 * fits; returns it and updates *cap. Exits the CLI if memory runs out. */
void *sp_xgrow(void *p, size_t *cap, size_t elem, size_t i);
/* qsort and qsort_r for arrays that may be empty and NULL (the C library's base must never be
 * NULL, even for no element). These functions can't fail. */
void sp_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
void sp_sort_r(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *), void *ctx);

/* Starts grouping the events of r (which stays the caller's; read from its current position).
 * Exits the CLI if memory runs out; otherwise can't fail. */
struct sp_windows *sp_windows_open(struct sp_trace_reader *r);
/* Reads on until the next window is complete (its END read and the next BEGIN or the end of the
 * file reached) and points *w at it; *w stays valid until the next call. Returns 1 with a window,
 * 0 at the end, -1 after a corrupt chunk (sp_trace_error says why; the window cut by it was
 * handed out first, marked incomplete). */
int sp_windows_next(struct sp_windows *g, const struct sp_window **w);
/* Name of CPU thread tid from its SP_EV_THREAD record, or NULL if none was read yet. */
const char *sp_windows_thread_name(const struct sp_windows *g, uint32_t tid);
/* The SP_EV_DEVICE record of device, or NULL if none was read yet. */
const struct sp_event *sp_windows_device(const struct sp_windows *g, unsigned device);
/* Records read so far that belong to no window (they are skipped). */
uint64_t sp_windows_outside(const struct sp_windows *g);
/* Frees g (NULL is fine); the reader stays open. This function can't fail. */
void sp_windows_close(struct sp_windows *g);

/* 1 for records of GPU work (kernel, memcpy, memset): these join a window by correlation id. */
int sp_ev_is_gpu(const struct sp_event *ev);
/* Wall-clock ns (CLOCK_REALTIME) of trace time mono, with the window's anchor. Can't fail. */
uint64_t sp_window_wall(const struct sp_window *w, uint64_t mono);

#endif
