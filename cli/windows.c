/* SPDX-License-Identifier: MIT */
/* windows.c - groups a trace's events into recorded windows while streaming (see windows.h).
 * An event belongs to window W if its start lies in [W.t0, W.t1], or, for GPU work, if its
 * correlation id is that of an API call of W. File order is only mostly time order, so W is
 * held until the next BEGIN (or the end of the file) and settled then: events read around W's
 * edges move to the next window or count as outside. Memory: one window plus what lies between. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "cli.h"
#include "config/schedule.h"
#include "windows.h"

struct sp_windows {
	struct sp_trace_reader *r;      /* the file (not owned) */
	struct sp_window cur;           /* the window being filled; before the first BEGIN, a holding area */
	int have_cur;                   /* cur is a real window (a BEGIN was read) */
	size_t cur_cap;                 /* capacity of cur.ev */
	struct sp_window out;           /* the window last handed out */
	size_t out_cap;
	struct sp_idset corr;           /* API correlation ids of the window being settled */
	struct sp_idset prev_corr;      /* ... of the window last handed out: late GPU records */
	struct {
		uint32_t tid, name, used;
	} *threads; /* SP_EV_THREAD records by tid (open addressing;
							  cap a power of two), latest name wins */
	size_t nthreads, tcap;
	struct sp_event dev[SP_WIN_MAX_DEVICES]; /* SP_EV_DEVICE records; kind 0 = none */
	uint64_t anchor_mono, anchor_real;       /* latest clock anchor */
	uint64_t outside;               /* records of no window */
	int done;         /* the reader returned its last value, kept in rc */
	int at_bound;     /* a WINDOW_BEGIN (bound) or the end of the file was read, not yet settled */
	struct sp_window bound;         /* that BEGIN's window (at the end of the file: unused) */
	int rc;
	const char *phase;              /* hand out only this phase's windows; NULL: all */
	uint64_t other_phase;           /* windows passed over for another phase */
};

/* 1 if the window in g->out is one the caller asked for (sp_windows_set_phase). */
static int wanted(const struct sp_windows *g)
{
	return !g->phase || !strcasecmp(g->phase, g->out.phase);
}

/* ---- grouping ---- */

uint64_t sp_window_wall(const struct sp_window *w, uint64_t mono)
{
	return mono - w->anchor_mono + w->anchor_real;
}

static void push(struct sp_window *w, size_t *cap, const struct sp_event *ev)
{
	if (w->n == *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		w->ev = sp_xrealloc(w->ev, *cap * sizeof(*w->ev));
	}
	w->ev[w->n++] = *ev;
}

static int in_window(const struct sp_window *w, const struct sp_idset *corr, const struct sp_event *e)
{
	if (e->start >= w->t0 && e->start <= w->t1)
		return 1;
	return sp_ev_is_gpu(e) && e->corr && sp_idset_has(corr, e->corr);
}

/* Settles the held events: those of cur go to g->out (a real window is then ready to hand out),
 * those at or after next->t0 stay in the buffer as next's first events, the rest count as
 * outside. DROPPED records are never lost: they stay with cur, or go to next before the first
 * window. next is NULL at the end of the file. Then next (if any) becomes cur. */
static void settle(struct sp_windows *g, const struct sp_window *next)
{
	struct sp_window *w = &g->cur;
	size_t moved = 0;

	if (g->have_cur && !w->complete)
		w->t1 = next ? next->t0 - (next->t0 > w->t0) : UINT64_MAX;
	else if (g->have_cur && next && w->t1 >= next->t0) /* back to back: the instant is the next one's */
		w->t1 = next->t0 - (next->t0 > w->t0);
	sp_idset_clear(&g->corr);
	for (size_t i = 0; g->have_cur && i < w->n; i++)
		if (w->ev[i].kind == SP_EV_API && w->ev[i].corr && in_window(w, &g->corr, &w->ev[i]))
			sp_idset_add(&g->corr, w->ev[i].corr);

	g->out.n = 0;
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = &w->ev[i];
		if (g->have_cur && in_window(w, &g->corr, e))
			push(&g->out, &g->out_cap, e);
		else if (next && (e->start >= next->t0 || (e->kind == SP_EV_DROPPED && !g->have_cur)))
			w->ev[moved++] = *e;
		else if (e->kind == SP_EV_DROPPED && g->have_cur)
			push(&g->out, &g->out_cap, e);
		else if (!((e->kind == SP_EV_ALLOC) && (e->u.mem.flags & (SP_MEMF_SNAPSHOT | SP_MEMF_PEAK))))
			g->outside++; /* memory context records are not events of a window: not counted */
	}

	if (g->have_cur) {
		struct sp_event *keep = g->out.ev;
		size_t n = g->out.n;
		g->out = *w;
		g->out.ev = keep;
		g->out.n = n;
		for (size_t i = 0; i < n; i++) {
			const struct sp_event *e = &keep[i];
			if (e->kind == SP_EV_DROPPED && e->sub < SP_DROP__COUNT)
				g->out.dropped[e->sub] += e->u.dropped.count;
			if (!w->complete && e->kind == SP_EV_STEP && e->u.step.number > g->out.last_step)
				g->out.last_step = e->u.step.number;
		}
		if (!w->complete) {
			g->out.t1 = w->t0;
			for (size_t i = 0; i < n; i++)
				if (keep[i].end > g->out.t1)
					g->out.t1 = keep[i].end;
		}
		struct sp_idset t = g->prev_corr;
		g->prev_corr = g->corr;
		g->corr = t;
	}
	if (next) {
		struct sp_event *buf = w->ev;
		*w = *next;
		w->ev = buf;
		w->n = moved;
		g->have_cur = 1;
	} else {
		w->n = 0;
		g->have_cur = 0;
	}
}

void sp_windows_set_phase(struct sp_windows *g, const char *phase)
{
	g->phase = phase;
}

uint64_t sp_windows_other_phase(const struct sp_windows *g)
{
	return g->other_phase;
}

struct sp_windows *sp_windows_open(struct sp_trace_reader *r)
{
	struct sp_windows *g = sp_xrealloc(NULL, sizeof(*g));
	const struct sp_trace_header *h = sp_trace_header(r);

	memset(g, 0, sizeof(*g));
	g->r = r;
	g->anchor_mono = h->meta.anchor_mono_ns;
	g->anchor_real = h->meta.anchor_real_ns;
	return g;
}

/* The slot of tid in g->threads (used for tid, or free). g->tcap must be > 0. Can't fail. */
static size_t thread_slot(const struct sp_windows *g, uint32_t tid)
{
	size_t h = (tid * 2654435761u) & (g->tcap - 1);
	while (g->threads[h].used && g->threads[h].tid != tid)
		h = (h + 1) & (g->tcap - 1);
	return h;
}

/* Records tid's name: constant time per record, so linear in thread records. Exits if memory
 * runs out; otherwise can't fail. */
static void set_thread(struct sp_windows *g, uint32_t tid, uint32_t name)
{
	if ((g->nthreads + 1) * 2 > g->tcap) {
		struct sp_windows old = *g;
		g->tcap = old.tcap ? old.tcap * 2 : 64;
		g->threads = sp_xrealloc(NULL, g->tcap * sizeof(*g->threads));
		memset(g->threads, 0, g->tcap * sizeof(*g->threads));
		for (size_t i = 0; i < old.tcap; i++)
			if (old.threads[i].used)
				g->threads[thread_slot(g, old.threads[i].tid)] = old.threads[i];
		free(old.threads);
	}
	size_t h = thread_slot(g, tid);
	g->nthreads += !g->threads[h].used;
	g->threads[h].tid = tid;
	g->threads[h].name = name;
	g->threads[h].used = 1;
}

/* 1 for a STEP record of a step the schedule recorded (RECORD or RECORD_AND_SAVE). */
static int recorded_step(const struct sp_event *e)
{
	return e->kind == SP_EV_STEP && (e->sub == SP_ACT_RECORD || e->sub == SP_ACT_RECORD_AND_SAVE);
}

/* A window the file lacks the WINDOW_BEGIN of, found from its steps: the writer holds a window's
 * BEGIN back until the END of the window before it, so a file cut before that END holds the
 * later windows' steps without their BEGIN. The held events (before `until`, the next BEGIN's
 * start) hold such a window if a recorded step starts after the open window's RECORD_AND_SAVE
 * step (the schedule closes a window with that step), or, with no window open, at all. Fills
 * *inf from the first such step (id one past the open window's) and returns 1, else 0. */
static int infer_window(const struct sp_windows *g, uint64_t until, struct sp_window *inf)
{
	const struct sp_window *w = &g->cur;
	const struct sp_event *save = NULL, *first = NULL;

	if (g->have_cur && w->complete)
		return 0;
	for (size_t i = 0; g->have_cur && i < w->n; i++) /* the step that closes the open window */
		if (w->ev[i].kind == SP_EV_STEP && w->ev[i].sub == SP_ACT_RECORD_AND_SAVE && w->ev[i].start >= w->t0 &&
		    (!save || w->ev[i].start < save->start))
			save = &w->ev[i];
	if (g->have_cur && !save)
		return 0;
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = &w->ev[i];
		if (recorded_step(e) && e->start < until && (!save || e->start >= save->end) &&
		    (!first || e->start < first->start))
			first = e;
	}
	if (!first)
		return 0;
	*inf = (struct sp_window){ .id = g->have_cur ? w->id + 1 : 0,
				   .inferred = 1,
				   .origin = g->have_cur ? w->origin & SP_WIN_ORIGIN_MASK : SP_WIN_SCHEDULE,
				   .t0 = first->start,
				   .t1 = UINT64_MAX,
				   .first_step = first->u.step.number,
				   .last_step = first->u.step.number,
				   .anchor_mono = g->anchor_mono,
				   .anchor_real = g->anchor_real };
	snprintf(inf->phase, sizeof inf->phase, "%s", g->have_cur ? w->phase : "");
	return 1;
}

/* Settles the held events at the bound read last (a BEGIN, or the end of the file): first into
 * the windows inferred from steps (infer_window), then into the bound. Points *w at the window
 * that is ready and returns 1, or returns 0 when the bound left none to hand out. */
static int settle_bound(struct sp_windows *g, const struct sp_window **w)
{
	while (g->at_bound) {
		struct sp_window inf;
		int had = g->have_cur;
		if (infer_window(g, g->done ? UINT64_MAX : g->bound.t0, &inf)) {
			settle(g, &inf);
		} else {
			g->at_bound = 0;
			settle(g, g->done ? NULL : &g->bound);
		}
		if (had && !wanted(g)) {
			g->other_phase++;
		} else if (had) {
			*w = &g->out;
			return 1;
		}
	}
	return 0;
}

int sp_windows_next(struct sp_windows *g, const struct sp_window **w)
{
	struct sp_event ev;

	if (settle_bound(g, w))
		return 1;
	while (!g->done) {
		int rc = sp_trace_next(g->r, &ev);
		sp_cli_progress(g->r);
		if (rc <= 0) {
			g->done = 1;
			g->rc = rc;
			g->at_bound = 1;
			if (settle_bound(g, w))
				return 1;
			break;
		}
		switch (ev.kind) {
		case SP_EV_THREAD:
			set_thread(g, ev.tid, ev.name);
			break;
		case SP_EV_DEVICE:
			if (ev.device < SP_WIN_MAX_DEVICES)
				g->dev[ev.device] = ev;
			break;
		case SP_EV_CLOCK:
			g->anchor_mono = ev.start;
			g->anchor_real = ev.u.clock.realtime_ns;
			if (g->have_cur && !g->cur.complete) { /* written at the window's end: its nearest */
				g->cur.anchor_mono = ev.start;
				g->cur.anchor_real = ev.u.clock.realtime_ns;
			}
			break;
		case SP_EV_WINDOW_BEGIN: {
			const char *ph = ev.name ? sp_trace_string(g->r, ev.name) : NULL;
			g->bound = (struct sp_window){
				.id = ev.u.window.id,
				.origin = ev.sub,
				.t0 = ev.start,
				.t1 = UINT64_MAX,
				.first_step = ev.u.window.first_step,
				.last_step = ev.u.window.first_step,
				.anchor_mono = g->anchor_mono,
				.anchor_real = g->anchor_real,
			};
			snprintf(g->bound.phase, sizeof g->bound.phase, "%s", ph ? ph : "");
			g->at_bound = 1;
			if (settle_bound(g, w))
				return 1;
			break;
		}
		case SP_EV_WINDOW_END:
			if (g->have_cur && !g->cur.complete && ev.u.window.id == g->cur.id) {
				g->cur.complete = 1;
				g->cur.t1 = ev.start;
				g->cur.last_step = ev.u.window.last_step;
				g->cur.bytes = ev.u.window.bytes;
				g->cur.dropped_total = ev.u.window.dropped;
				g->cur.capped = ev.u.window.capped != 0;
			} else {
				g->outside++;
			}
			break;
		case SP_EV_COMM:
		case SP_EV_MODULE:
		case SP_EV_NONE:
			break;
		default:
			if (sp_ev_is_gpu(&ev) && ev.corr && sp_idset_has(&g->prev_corr, ev.corr))
				g->cur.dropped[SP_DROP_LATE]++; /* its window was handed out already */
			else
				push(&g->cur, &g->cur_cap, &ev);
		}
	}
	return g->rc;
}

const char *sp_windows_thread_name(const struct sp_windows *g, uint32_t tid)
{
	size_t h = g->tcap ? thread_slot(g, tid) : 0;
	return g->tcap && g->threads[h].used ? sp_trace_string(g->r, g->threads[h].name) : NULL;
}

const struct sp_event *sp_windows_device(const struct sp_windows *g, unsigned device)
{
	return device < SP_WIN_MAX_DEVICES && g->dev[device].kind == SP_EV_DEVICE ? &g->dev[device] : NULL;
}

uint64_t sp_windows_outside(const struct sp_windows *g)
{
	return g->outside;
}

void sp_windows_close(struct sp_windows *g)
{
	if (!g)
		return;
	free(g->cur.ev);
	free(g->out.ev);
	free(g->threads);
	sp_idset_free(&g->corr);
	sp_idset_free(&g->prev_corr);
	free(g);
}
