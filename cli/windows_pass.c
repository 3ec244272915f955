/* SPDX-License-Identifier: MIT */
/* windows_pass.c - the passes over the window last handed out (windows.h): its stretch of the
 * file read again, its events handed out in file order or by start time (a heap as deep as the
 * file is out of order: measured when the stretch was scanned), and the small structures the
 * grouper keeps per correlation id (a bit per id; runs of ids per step boundary). */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "evheap.h"
#include "windows_impl.h"

#define RUNS_MAX 65536 /* runs of call ids before a map by id takes over (a hostile file) */

/* ---- correlation ids ---- */

void sp_corrset_reset(struct corrset *s, uint32_t lo, uint32_t hi, uint64_t n)
{
	free(s->bits);
	s->bits = NULL;
	s->nbits = 0;
	sp_idset_clear(&s->sparse);
	s->lo = lo;
	if (n && (uint64_t)hi - lo < 64 * n + 65536) { /* dense: at most 8 bytes per call */
		s->nbits = (uint64_t)hi - lo + 1;
		s->bits = calloc((size_t)((s->nbits + 63) / 64), sizeof(*s->bits));
		if (!s->bits)
			sp_oom();
	}
}

int sp_corrset_has(const struct corrset *s, uint32_t id)
{
	if (!s->nbits)
		return sp_idset_has(&s->sparse, id);
	uint64_t i = (uint64_t)id - s->lo;
	return id >= s->lo && i < s->nbits && (s->bits[i / 64] >> (i % 64) & 1);
}

void sp_corrset_add(struct corrset *s, uint32_t id)
{
	uint64_t i = (uint64_t)id - s->lo;
	if (!s->nbits)
		sp_idset_add(&s->sparse, id);
	else if (id >= s->lo && i < s->nbits)
		s->bits[i / 64] |= 1ull << (i % 64);
}

void sp_corrset_free(struct corrset *s)
{
	free(s->bits);
	sp_idset_free(&s->sparse);
	memset(s, 0, sizeof(*s));
}

/* ---- places of call ids among step boundaries ---- */

static size_t map_slot(const struct corrplace *p, uint32_t id)
{
	size_t h = (id * 2654435761u) & (p->map.cap - 1);
	while (p->map.key[h] && p->map.key[h] != id)
		h = (h + 1) & (p->map.cap - 1);
	return h;
}

/* Sets id's place to v in the map (ids are never 0). Exits if memory runs out. */
static void map_put(struct corrplace *p, uint32_t id, uint32_t v)
{
	if (2 * (p->map.n + 1) > p->map.cap) {
		struct corrplace old = *p;
		p->map.cap = old.map.cap ? 2 * old.map.cap : 1024;
		p->map.key = calloc(p->map.cap, sizeof(*p->map.key));
		p->map.val = calloc(p->map.cap, sizeof(*p->map.val));
		if (!p->map.key || !p->map.val)
			sp_oom();
		for (size_t i = 0; i < old.map.cap; i++)
			if (old.map.key[i]) {
				size_t h = map_slot(p, old.map.key[i]);
				p->map.key[h] = old.map.key[i];
				p->map.val[h] = old.map.val[i];
			}
		free(old.map.key);
		free(old.map.val);
	}
	size_t h = map_slot(p, id);
	p->map.n += !p->map.key[h];
	p->map.key[h] = id;
	p->map.val[h] = v;
}

void sp_corrplace_reset(struct corrplace *p)
{
	p->n = 0;
	if (p->map.cap)
		memset(p->map.key, 0, p->map.cap * sizeof(*p->map.key));
	p->map.n = 0;
}

/* The index of the first run whose hi is >= id (p->n if none). */
static size_t run_at(const struct corrplace *p, uint32_t id)
{
	size_t lo = 0, hi = p->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (p->r[mid].hi < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Inserts run x at index i. Exits if memory runs out. */
static void run_insert(struct corrplace *p, size_t i, struct run x)
{
	p->r = sp_xgrow(p->r, &p->cap, sizeof(*p->r), p->n);
	memmove(&p->r[i + 1], &p->r[i], (p->n - i) * sizeof(*p->r));
	p->r[i] = x;
	p->n++;
}

/* id's place in the runs, 0 for none. */
static uint32_t runs_get(const struct corrplace *p, uint32_t id)
{
	size_t i = run_at(p, id);
	return i < p->n && p->r[i].lo <= id ? p->r[i].v : 0;
}

void sp_corrplace_put(struct corrplace *p, uint32_t id, uint32_t v, int had)
{
	if (p->map.n || p->n >= RUNS_MAX) { /* too many runs (a hostile file): the runs stay, ids go to the map */
		size_t h = p->map.cap ? map_slot(p, id) : 0;
		uint32_t old = p->map.cap && p->map.key[h] ? p->map.val[h] : runs_get(p, id);
		map_put(p, id, had && old < v ? old : v);
		return;
	}
	size_t i = run_at(p, id);
	if (i < p->n && p->r[i].lo <= id) { /* inside run i: the id is in the set already, or a gap of it */
		struct run r = p->r[i];
		uint32_t nv = had && r.v < v ? r.v : v;
		if (nv == r.v)
			return;
		p->r[i].hi = id - 1; /* split: [lo, id-1] r.v, [id] nv, [id+1, hi] r.v */
		size_t at = i + (r.lo < id);
		if (r.lo == id)
			p->r[i] = (struct run){ id, id, nv };
		else
			run_insert(p, at, (struct run){ id, id, nv });
		if (r.hi > id)
			run_insert(p, at + 1, (struct run){ id + 1, r.hi, r.v });
		return;
	}
	if (i > 0 && p->r[i - 1].v == v) /* between runs i-1 and i: no id of the set lies there */
		p->r[i - 1].hi = id;
	else if (i < p->n && p->r[i].v == v)
		p->r[i].lo = id;
	else
		run_insert(p, i, (struct run){ id, id, v });
}

uint32_t sp_corrplace_get(const struct corrplace *p, uint32_t id)
{
	if (p->map.n) {
		size_t h = map_slot(p, id);
		if (p->map.key[h])
			return p->map.val[h];
	}
	return runs_get(p, id);
}

void sp_corrplace_free(struct corrplace *p)
{
	free(p->r);
	free(p->map.key);
	free(p->map.val);
	memset(p, 0, sizeof(*p));
}

/* ---- reading a stretch again ---- */

int sp_region_replay(struct sp_windows *g, const struct region *reg, const struct corrset *prev, sp_window_fn fn,
		     void *ctx)
{
	struct sp_event ev;
	int rc = 1;

	for (size_t i = 0; i < reg->ncarried; i++)
		fn(ctx, &reg->carried[i]);
	if (reg->nrec && sp_trace_seek(g->r, &reg->pos) < 0)
		return -1;
	for (uint64_t k = 0; k < reg->nrec && (rc = sp_trace_next(g->r, &ev)) == 1; k++) {
		if (!sp_is_candidate(&ev))
			continue;
		if (sp_ev_is_gpu(&ev) && ev.corr && sp_corrset_has(prev, ev.corr))
			continue; /* late: counted when scanned */
		fn(ctx, &ev);
	}
	return rc;
}

uint64_t sp_windows_anchor(const struct sp_windows *g, const struct sp_event *e)
{
	if (!sp_ev_is_gpu(e) || !e->corr || !sp_corrset_has(&g->prev_corr, e->corr))
		return e->start;
	uint32_t v = sp_corrplace_get(&g->place, e->corr);
	if (!v) /* its call started at time 0: the rule takes the record's own start */
		return e->start;
	return v == 1 ? 0 : g->bound_t[v - 2]; /* the boundary at or before the call's start */
}

/* ---- passes ---- */

struct each {
	struct sp_windows *g;
	sp_window_fn fn;
	void *ctx;
};

/* 1 if e (a candidate of the stretch of the window handed out) is one of its events that the
 * passes hand out (sp_windows_restrict). */
static int passed(const struct sp_windows *g, const struct sp_event *e)
{
	return sp_windows_is_member(g, e) && (!g->keep || g->keep(g->keep_ctx, e));
}

static void each_event(void *ctx, const struct sp_event *e)
{
	struct each *x = ctx;
	if (passed(x->g, e))
		x->fn(x->ctx, e);
}

void sp_windows_each(struct sp_windows *g, sp_window_fn fn, void *ctx)
{
	struct each x = { g, fn, ctx };
	sp_region_replay(g, &g->out_reg, &g->out_prev, each_event, &x);
}


struct sorted {
	struct each x;
	int (*keep)(const struct sp_event *e);
	struct sp_hent *h;
	size_t n, cap, depth;
	uint64_t seq;           /* candidates met */
	const struct late *late; /* the stretch's late candidates, file order */
	size_t nlate, late_at;
	struct sp_hent *side;      /* the late ones the pass hands out, by start */
	size_t nside, side_at;
};

/* 1 if a comes before b: start ascending, end descending, then file order. */
static int hless(const struct sp_hent *a, const struct sp_hent *b)
{
	if (a->e.start != b->e.start)
		return a->e.start < b->e.start;
	if (a->e.end != b->e.end)
		return a->e.end > b->e.end;
	return a->seq < b->seq;
}

static int cmp_hent(const void *a, const void *b)
{
	return hless(a, b) ? -1 : hless(b, a);
}

/* Hands out e, after the late candidates that come before it. */
static void emit(struct sorted *s, const struct sp_hent *e)
{
	for (; s->side_at < s->nside && (!e || hless(&s->side[s->side_at], e)); s->side_at++)
		s->x.fn(s->x.ctx, &s->side[s->side_at].e);
	if (e)
		s->x.fn(s->x.ctx, &e->e);
}

/* Takes the first entry off the heap and hands it out. */
static void heap_pop(struct sorted *s)
{
	struct sp_hent top = sp_evheap_pop(s->h, &s->n, hless);
	emit(s, &top);
}

static void sorted_event(void *ctx, const struct sp_event *e)
{
	struct sorted *s = ctx;
	uint64_t seq = s->seq++;
	if (s->late_at < s->nlate && s->late[s->late_at].seq == seq) {
		s->late_at++; /* handed out from the side list */
		return;
	}
	if (!passed(s->x.g, e) || (s->keep && !s->keep(e)))
		return;
	if (s->n == s->cap) { /* doubling, but never past the depth */
		s->cap = s->cap ? (2 * s->cap < s->depth + 1 ? 2 * s->cap : s->depth + 1) : 256;
		s->h = sp_xrealloc(s->h, s->cap * sizeof(*s->h));
	}
	size_t i = s->n++;
	s->h[i] = (struct sp_hent){ *e, seq };
	sp_evheap_up(s->h, i, hless);
	if (s->n > s->depth) /* no event still to come sorts before the first one now (but the late ones) */
		heap_pop(s);
}

void sp_windows_sorted(struct sp_windows *g, int (*keep)(const struct sp_event *e), sp_window_fn fn, void *ctx)
{
	const struct region *reg = &g->out_reg;
	struct sorted s = { .x = { g, fn, ctx }, .keep = keep, .depth = reg->reorder + 1, .late = reg->late,
			    .nlate = reg->nlate };

	s.side = sp_xrealloc(NULL, (reg->nlate + 1) * sizeof(*s.side));
	for (size_t i = 0; i < reg->nlate; i++)
		if (passed(g, &reg->late[i].e) && (!keep || keep(&reg->late[i].e)))
			s.side[s.nside++] = (struct sp_hent){ reg->late[i].e, reg->late[i].seq };
	sp_sort(s.side, s.nside, sizeof(*s.side), cmp_hent);
	sp_region_replay(g, reg, &g->out_prev, sorted_event, &s);
	while (s.n)
		heap_pop(&s);
	emit(&s, NULL);
	free(s.h);
	free(s.side);
}
