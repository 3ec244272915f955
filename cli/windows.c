/* SPDX-License-Identifier: MIT */
/* windows.c - finds a trace's recorded windows while streaming and decides which events are
 * theirs (see windows.h). An event belongs to window W if its start lies in [W.t0, W.t1], or, for
 * GPU work, if its correlation id is that of a CUDA call of W. File order is only mostly time
 * order, so W's stretch runs from its BEGIN to the next BEGIN (or the end of the file) and is
 * settled then: events of it at or after the next window's start move to that window (held as
 * copies: a few), the rest count as outside. The stretch is read once to find W's bounds, steps
 * and drop records (scan) and once to collect its calls' correlation ids (settle); the events
 * themselves are read again by each pass (windows_pass.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "cli.h"
#include "config/schedule.h"
#include "windows_impl.h"

/* 1 if the window in g->out is one the caller asked for (sp_windows_set_phase). */
static int wanted(const struct sp_windows *g)
{
	return !g->phase || !strcasecmp(g->phase, g->out.phase);
}

uint64_t sp_window_wall(const struct sp_window *w, uint64_t mono)
{
	return mono - w->anchor_mono + w->anchor_real;
}

static void push(struct sp_event **a, size_t *n, size_t *cap, const struct sp_event *e)
{
	*a = sp_xgrow(*a, cap, sizeof(**a), *n);
	(*a)[(*n)++] = *e;
}

static int in_window(uint64_t t0, uint64_t t1, const struct corrset *corr, const struct sp_event *e)
{
	if (e->start >= t0 && e->start <= t1)
		return 1;
	return sp_ev_is_gpu(e) && e->corr && sp_corrset_has(corr, e->corr);
}

static int okey_less(const struct okey *a, const struct okey *b)
{
	return a->start != b->start ? a->start < b->start : a->end > b->end;
}

/* ---- scan: the stretch's bounds, lists and reorder bound ---- */

/* Candidate e (the i-th) comes after `after` candidates that sort after it: the heap of the passes
 * by start must be that deep, or e must be held aside (late). Exits if memory runs out. */
static void place_candidate(struct region *g, const struct sp_event *e, uint64_t i, uint64_t after)
{
	if (!g->late_after)
		g->late_after = LATE_AFTER;
	if (after <= g->late_after) {
		g->reorder = after > g->reorder ? after : g->reorder;
		return;
	}
	g->late = sp_xgrow(g->late, &g->late_cap, sizeof(*g->late), g->nlate);
	g->late[g->nlate++] = (struct late){ *e, i, after };
	while (g->nlate > LATE_MAX) { /* too many held aside: a deeper heap holds the least late */
		size_t kept = 0;
		g->late_after *= 2;
		for (size_t k = 0; k < g->nlate; k++)
			if (g->late[k].after > g->late_after)
				g->late[kept++] = g->late[k];
			else if (g->late[k].after > g->reorder)
				g->reorder = g->late[k].after;
		g->nlate = kept;
	}
}

/* Counts candidate e of the stretch being scanned: its place in the reorder bound (how many
 * candidates before it sort after it, at most, to CP_EVERY), the lists of few records, the range
 * of call ids. Exits if memory runs out. */
static void scan_candidate(struct region *g, const struct sp_event *e)
{
	struct okey k = { e->start, e->end };
	uint64_t i = g->ncand++;

	if (!i || !okey_less(&k, &g->runmax)) {
		g->runmax = k;
	} else { /* the first checkpoint past k: candidates before its stretch all sort before e */
		size_t lo = 0, hi = g->ncp;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (okey_less(&k, &g->cp[mid]))
				hi = mid;
			else
				lo = mid + 1;
		}
		place_candidate(g, e, i, i - (uint64_t)lo * CP_EVERY);
	}
	if ((i + 1) % CP_EVERY == 0) {
		g->cp = sp_xgrow(g->cp, &g->cp_cap, sizeof(*g->cp), g->ncp);
		g->cp[g->ncp++] = g->runmax;
	}
	if (e->kind == SP_EV_STEP)
		push(&g->steps, &g->nsteps, &g->steps_cap, e);
	else if (e->kind == SP_EV_NCCL)
		push(&g->nccl, &g->nnccl, &g->nccl_cap, e);
	else if (e->kind == SP_EV_DROPPED)
		push(&g->dropped, &g->ndropped, &g->dropped_cap, e);
	if (e->kind == SP_EV_API && e->corr) {
		g->api_lo = !g->napi || e->corr < g->api_lo ? e->corr : g->api_lo;
		g->api_hi = !g->napi || e->corr > g->api_hi ? e->corr : g->api_hi;
		g->napi++;
	}
	if (e->corr) {
		g->corr_lo = !g->ncorr || e->corr < g->corr_lo ? e->corr : g->corr_lo;
		g->corr_hi = !g->ncorr || e->corr > g->corr_hi ? e->corr : g->corr_hi;
		g->ncorr++;
	}
}

int sp_is_candidate(const struct sp_event *e)
{
	switch (e->kind) {
	case SP_EV_THREAD:
	case SP_EV_DEVICE:
	case SP_EV_CLOCK:
	case SP_EV_COMM:
	case SP_EV_MODULE:
	case SP_EV_NONE:
	case SP_EV_WINDOW_BEGIN:
	case SP_EV_WINDOW_END:
		return 0;
	}
	return 1;
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

/* Applies a record that is not a candidate (tables, the window's END). Returns 1 for a BEGIN
 * (g->bound then holds it), else 0. */
static int scan_other(struct sp_windows *g, const struct sp_event *ev)
{
	switch (ev->kind) {
	case SP_EV_THREAD:
		set_thread(g, ev->tid, ev->name);
		break;
	case SP_EV_DEVICE:
		if (ev->device < SP_WIN_MAX_DEVICES)
			g->dev[ev->device] = *ev;
		break;
	case SP_EV_CLOCK:
		g->anchor_mono = ev->start;
		g->anchor_real = ev->u.clock.realtime_ns;
		if (g->have_cur && !g->cur.complete) { /* written at the window's end: its nearest */
			g->cur.anchor_mono = ev->start;
			g->cur.anchor_real = ev->u.clock.realtime_ns;
		}
		break;
	case SP_EV_WINDOW_BEGIN: {
		const char *ph = ev->name ? sp_trace_string(g->r, ev->name) : NULL;
		g->bound = (struct sp_window){ .id = ev->u.window.id,
					       .origin = ev->sub,
					       .t0 = ev->start,
					       .t1 = UINT64_MAX,
					       .first_step = ev->u.window.first_step,
					       .last_step = ev->u.window.first_step,
					       .anchor_mono = g->anchor_mono,
					       .anchor_real = g->anchor_real };
		snprintf(g->bound.phase, sizeof g->bound.phase, "%s", ph ? ph : "");
		return 1;
	}
	case SP_EV_WINDOW_END:
		if (g->have_cur && !g->cur.complete && ev->u.window.id == g->cur.id) {
			g->cur.complete = 1;
			g->cur.t1 = ev->start;
			g->cur.last_step = ev->u.window.last_step;
			g->cur.bytes = ev->u.window.bytes;
			g->cur.dropped_total = ev->u.window.dropped;
			g->cur.capped = ev->u.window.capped != 0;
		} else {
			g->outside++;
		}
		break;
	}
	return 0;
}

/* Reads the current window's stretch from where reading goes on to the next BEGIN or the end of
 * the file, and sets at_bound. */
static void scan(struct sp_windows *g)
{
	struct region *reg = &g->reg;
	struct sp_event ev;

	sp_trace_seek(g->r, &g->next_pos);
	reg->pos = g->next_pos;
	for (size_t i = 0; i < reg->ncarried; i++)
		scan_candidate(reg, &reg->carried[i]);
	for (;;) {
		int rc = sp_trace_next(g->r, &ev);
		sp_cli_progress(g->r);
		if (rc <= 0) {
			g->done = 1;
			g->rc = rc;
			break;
		}
		if (!sp_is_candidate(&ev)) {
			if (scan_other(g, &ev)) {
				sp_trace_tell(g->r, &g->next_pos);
				break;
			}
		} else if (sp_ev_is_gpu(&ev) && ev.corr && sp_corrset_has(&g->prev_corr, ev.corr)) {
			g->cur.dropped[SP_DROP_LATE]++; /* its window was handed out already */
		} else {
			scan_candidate(reg, &ev);
		}
		reg->nrec++;
	}
	g->at_bound = 1;
}

/* ---- inference of windows whose BEGIN the file lacks ---- */

/* 1 for a STEP record of a step the schedule recorded (RECORD or RECORD_AND_SAVE). */
static int recorded_step(const struct sp_event *e)
{
	return e->kind == SP_EV_STEP && (e->sub == SP_ACT_RECORD || e->sub == SP_ACT_RECORD_AND_SAVE);
}

/* A window the file lacks the WINDOW_BEGIN of, found from its steps: the writer holds a window's
 * BEGIN back until the END of the window before it, so a file cut before that END holds the
 * later windows' steps without their BEGIN. The stretch holds such a window if a recorded step
 * (starting before `until`, the next BEGIN's start) starts after the open window's
 * RECORD_AND_SAVE step (the schedule closes a window with that step), or, with no window open,
 * at all. Fills *inf from the first such step (id one past the open window's) and returns 1. */
static int infer_window(const struct sp_windows *g, uint64_t until, struct sp_window *inf)
{
	const struct sp_window *w = &g->cur;
	const struct region *reg = &g->reg;
	const struct sp_event *save = NULL, *first = NULL;

	if (g->have_cur && w->complete)
		return 0;
	for (size_t i = 0; g->have_cur && i < reg->nsteps; i++) /* the step that closes the open window */
		if (reg->steps[i].sub == SP_ACT_RECORD_AND_SAVE && reg->steps[i].start >= w->t0 &&
		    (!save || reg->steps[i].start < save->start))
			save = &reg->steps[i];
	if (g->have_cur && !save)
		return 0;
	for (size_t i = 0; i < reg->nsteps; i++) {
		const struct sp_event *e = &reg->steps[i];
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

/* ---- settling a stretch ---- */

/* What settle's pass over the stretch works with. */
struct settle {
	struct sp_windows *g;
	const struct sp_window *next;   /* the window after (NULL at the end of the file) */
	struct region *to;              /* its stretch: events moved there */
	struct sp_event *defer;         /* GPU records out of the time span with a call id: decided last */
	size_t ndefer, defer_cap;
	uint64_t t1;                    /* incomplete window: the last end of its events */
	int64_t last_step;
};

/* The place of time t among the sorted boundaries b[0..n): 1 + how many are at or before it. */
static uint32_t place_of(const uint64_t *b, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (b[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (uint32_t)lo + 1;
}

/* e is an event of the window being settled. */
static void member(struct settle *s, const struct sp_event *e)
{
	struct sp_windows *g = s->g;
	g->cur.events++;
	if (e->kind == SP_EV_DROPPED && e->sub < SP_DROP__COUNT)
		g->cur.dropped[e->sub] += e->u.dropped.count;
	if (e->end > s->t1)
		s->t1 = e->end;
	if (e->kind == SP_EV_STEP && e->u.step.number > s->last_step)
		s->last_step = e->u.step.number;
}

/* e is not the window's: it moves to the next window, or counts as outside (memory context
 * records are not events of a window: not counted). */
static void not_member(struct settle *s, const struct sp_event *e)
{
	struct sp_windows *g = s->g;
	if (s->next && (e->start >= s->next->t0 || (e->kind == SP_EV_DROPPED && !g->have_cur)))
		push(&s->to->carried, &s->to->ncarried, &s->to->carried_cap, e);
	else if (e->kind == SP_EV_DROPPED && g->have_cur)
		member(s, e);
	else if (!(e->kind == SP_EV_ALLOC && (e->u.mem.flags & (SP_MEMF_SNAPSHOT | SP_MEMF_PEAK))))
		g->outside++;
}

/* settle's pass: the calls' ids and places first, every other event decided as it comes, but
 * GPU records out of the time span with an id (the call may come later). */
static void settle_event(void *ctx, const struct sp_event *e)
{
	struct settle *s = ctx;
	struct sp_windows *g = s->g;
	int timed = g->have_cur && e->start >= g->cur.t0 && e->start <= g->tw1;

	if (timed && e->kind == SP_EV_API && e->corr) {
		int had = sp_corrset_has(&g->corr, e->corr);
		sp_corrplace_put(&g->place, e->corr, e->start ? place_of(g->bound_t, g->nbound, e->start) : 0, had);
		sp_corrset_add(&g->corr, e->corr);
	}
	if (timed)
		member(s, e);
	else if (g->have_cur && sp_ev_is_gpu(e) && e->corr)
		push(&s->defer, &s->ndefer, &s->defer_cap, e);
	else
		not_member(s, e);
}

static int cmp_u64(const void *a, const void *b)
{
	return sp_cmp_u64(*(const uint64_t *)a, *(const uint64_t *)b);
}

/* The window's steps (its STEP records: time decides) and their boundaries, into out's lists. */
static void settle_steps(struct sp_windows *g)
{
	const struct region *reg = &g->reg;
	g->out_nsteps = g->out_nccl_n = g->nbound = 0;
	for (size_t i = 0; g->have_cur && i < reg->nsteps; i++) {
		const struct sp_event *e = &reg->steps[i];
		if (e->start < g->cur.t0 || e->start > g->tw1)
			continue;
		push(&g->out_steps, &g->out_nsteps, &g->out_steps_cap, e);
		g->bound_t = sp_xgrow(g->bound_t, &g->bound_cap, sizeof(*g->bound_t), g->nbound + 1);
		g->bound_t[g->nbound++] = e->start;
		g->bound_t[g->nbound++] = e->end;
	}
	for (size_t i = 0; g->have_cur && i < reg->nnccl; i++)
		if (reg->nccl[i].start >= g->cur.t0 && reg->nccl[i].start <= g->tw1)
			push(&g->out_nccl, &g->out_nccl_n, &g->out_nccl_cap, &reg->nccl[i]);
	if (g->nbound)
		sp_sort(g->bound_t, g->nbound, sizeof(*g->bound_t), cmp_u64);
	size_t m = 0;
	for (size_t i = 0; i < g->nbound; i++)
		if (!m || g->bound_t[i] != g->bound_t[m - 1])
			g->bound_t[m++] = g->bound_t[i];
	g->nbound = m;
}

static void region_free(struct region *r)
{
	free(r->late);
	free(r->carried);
	free(r->steps);
	free(r->nccl);
	free(r->dropped);
	free(r->cp);
	memset(r, 0, sizeof(*r));
}

/* Settles the current window's stretch against next (NULL at the end of the file): the window
 * goes to g->out (if there is one), its events that are next's move to next's stretch, the rest
 * count as outside. Then next (if any) is the current window. Exits if memory runs out. */
static void settle(struct sp_windows *g, const struct sp_window *next)
{
	struct sp_window *w = &g->cur;
	struct region to = { 0 };
	struct settle s = { .g = g, .next = next, .to = &to, .t1 = w->t0, .last_step = w->last_step };

	if (g->have_cur && (!w->complete || (next && w->t1 >= next->t0))) /* incomplete, or back to back */
		w->t1 = !w->complete && !next ? UINT64_MAX : next->t0 - (next->t0 > w->t0);
	g->tw1 = w->t1;
	settle_steps(g);
	sp_corrset_reset(&g->corr, g->reg.api_lo, g->reg.api_hi, g->reg.napi);
	sp_corrplace_reset(&g->place);
	sp_region_replay(g, &g->reg, &g->prev_corr, settle_event, &s);
	for (size_t i = 0; i < s.ndefer; i++)
		if (sp_corrset_has(&g->corr, s.defer[i].corr))
			member(&s, &s.defer[i]);
		else
			not_member(&s, &s.defer[i]);
	free(s.defer);
	if (g->have_cur) {
		if (!w->complete) {
			w->t1 = s.t1;
			w->last_step = s.last_step;
		}
		g->out = *w;
		g->out.steps = g->out_steps;
		g->out.nsteps = g->out_nsteps;
		g->out.nccl = g->out_nccl;
		g->out.nnccl = g->out_nccl_n;
		g->out_tw1 = g->tw1;
		region_free(&g->out_reg);
		g->out_reg = g->reg;
		struct corrset t = g->out_prev; /* out_prev: the late filter of out's stretch */
		g->out_prev = g->prev_corr;
		g->prev_corr = g->corr;
		g->corr = t;
	} else {
		region_free(&g->reg);
	}
	memset(&g->reg, 0, sizeof g->reg);
	g->reg.carried = to.carried, g->reg.ncarried = to.ncarried, g->reg.carried_cap = to.carried_cap;
	g->have_cur = next != NULL;
	if (next)
		*w = *next;
}

int sp_windows_is_member(const struct sp_windows *g, const struct sp_event *e)
{
	if (in_window(g->out.t0, g->out_tw1, &g->prev_corr, e))
		return 1;
	return e->kind == SP_EV_DROPPED && !(g->out_has_next && e->start >= g->out_next_t0);
}

/* Settles the stretch at the bound read last (a BEGIN, or the end of the file): first into the
 * windows inferred from steps (infer_window), then into the bound. Points *w at the window that
 * is ready and returns 1, or returns 0 when the bound left none to hand out. */
static int settle_bound(struct sp_windows *g, const struct sp_window **w)
{
	while (g->at_bound) {
		struct sp_window inf;
		int had = g->have_cur;
		const struct sp_window *next = g->done ? NULL : &g->bound;
		if (infer_window(g, g->done ? UINT64_MAX : g->bound.t0, &inf))
			next = &inf;
		else
			g->at_bound = 0;
		g->out_has_next = next != NULL;
		g->out_next_t0 = next ? next->t0 : 0;
		settle(g, next);
		if (next == &inf) /* its events are all in hand: its stretch in the file is empty */
			for (size_t i = 0; i < g->reg.ncarried; i++)
				scan_candidate(&g->reg, &g->reg.carried[i]);
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
	g->keep = NULL;
	if (settle_bound(g, w))
		return 1;
	while (!g->done) {
		scan(g);
		if (settle_bound(g, w))
			return 1;
	}
	return g->rc;
}

void sp_windows_set_phase(struct sp_windows *g, const char *phase)
{
	g->phase = phase;
}

uint64_t sp_windows_other_phase(const struct sp_windows *g)
{
	return g->other_phase;
}

void sp_windows_restrict(struct sp_windows *g, int (*keep)(void *ctx, const struct sp_event *e), void *ctx)
{
	g->keep = keep;
	g->keep_ctx = ctx;
}

uint64_t sp_windows_corr_range(const struct sp_windows *g, uint32_t *lo, uint32_t *hi)
{
	*lo = g->out_reg.corr_lo;
	*hi = g->out_reg.corr_hi;
	return g->out_reg.ncorr;
}

struct sp_windows *sp_windows_open(struct sp_trace_reader *r)
{
	struct sp_windows *g = sp_xrealloc(NULL, sizeof(*g));
	const struct sp_trace_header *h = sp_trace_header(r);

	memset(g, 0, sizeof(*g));
	g->r = r;
	g->anchor_mono = h->meta.anchor_mono_ns;
	g->anchor_real = h->meta.anchor_real_ns;
	sp_trace_tell(r, &g->next_pos);
	return g;
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
	region_free(&g->reg);
	region_free(&g->out_reg);
	free(g->out_steps);
	free(g->out_nccl);
	free(g->bound_t);
	free(g->threads);
	sp_corrset_free(&g->corr);
	sp_corrset_free(&g->prev_corr);
	sp_corrset_free(&g->out_prev);
	sp_corrplace_free(&g->place);
	free(g);
}
