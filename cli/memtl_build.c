/* SPDX-License-Identifier: MIT */
/* memtl_build.c - a window's memory timeline from two passes over its allocations and frees by
 * start (memtl.c): first the levels, the counts and the points (thinned past SP_MEMTL_MAX_POINTS
 * as the page shows them: each of SP_MEMTL_MAX_POINTS / 2 buckets of the window keeps its highest
 * point and its last) and the peaks; then the live set through the window, what is alive at each
 * series' peak (kept as it ends) and the SP_MEMTL_MAX_ALLOCS largest allocations (a heap). Memory:
 * the live set, the points kept, those allocations. */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "memtl_impl.h"

/* ---- building the window handed out ---- */

/* The series of device in out, created (in device order, host last) on first use; returns its
 * index (its thinning state sits at the same index). Exits if memory runs out. */
static size_t series_of(struct sp_memtl_reader *m, uint16_t device)
{
	struct sp_memtl *o = &m->out;
	size_t i = 0;
	while (i < o->ns && o->s[i].device < device)
		i++;
	if (i < o->ns && o->s[i].device == device)
		return i;
	o->s = sp_xrealloc(o->s, (o->ns + 1) * sizeof(*o->s));
	memmove(&o->s[i + 1], &o->s[i], (o->ns - i) * sizeof(*o->s));
	m->thin = sp_xgrow(m->thin, &m->thin_cap, sizeof(*m->thin), o->ns + 1);
	memmove(&m->thin[i + 1], &m->thin[i], (o->ns - i) * sizeof(*m->thin));
	memset(&m->thin[i], 0, sizeof(*m->thin));
	o->ns++;
	struct sp_memtl_series *s = memset(&o->s[i], 0, sizeof(*o->s));
	s->device = device;
	if (device == SP_NO_DEVICE)
		snprintf(s->label, sizeof(s->label), "host");
	else if (device < MAX_DEVICES && m->devname[device])
		snprintf(s->label, sizeof(s->label), "GPU %u (%s)", device, sp_trace_string(m->r, m->devname[device]));
	else
		snprintf(s->label, sizeof(s->label), "GPU %u", device);
	return i;
}

/* Accounting slot of a device: its ordinal, or MAX_DEVICES for the host (and unknown ordinals). */
static unsigned slot_of(uint16_t device)
{
	return device < MAX_DEVICES ? device : MAX_DEVICES;
}

/* The bucket (0..nb-1) of time t among nb equal parts of [t0, t0 + dur]. */
static uint64_t bucket(uint64_t t, uint64_t t0, uint64_t dur, uint64_t nb)
{
	uint64_t b = (uint64_t)((double)(t - t0) / (double)dur * (double)nb);
	return b < nb ? b : nb - 1;
}

/* Keeps point p of series k. Exits if memory runs out. */
static void keep_point(struct sp_memtl_reader *m, size_t k, struct sp_memtl_point p)
{
	struct sp_memtl_series *s = &m->out.s[k];
	s->pt = sp_xgrow(s->pt, &m->thin[k].cap, sizeof(*s->pt), s->n);
	s->pt[s->n++] = p;
}

/* Point p, the i-th of series k (i >= 1), is known to end its bucket or not (last). */
static void thin_decide(struct sp_memtl_reader *m, size_t k, struct sp_memtl_point p, size_t i, int last)
{
	struct thin *th = &m->thin[k];
	if (!th->hi_i || p.live > th->hi.live)
		th->hi = p, th->hi_i = i;
	if (last) {
		if (th->hi_i != i)
			keep_point(m, k, th->hi);
		keep_point(m, k, p);
		th->hi_i = 0;
	}
}

/* The i-th point of series k (i >= 1) while thinning: its predecessor is decided now. */
static void thin_feed(struct sp_memtl_reader *m, size_t k, struct sp_memtl_point p, size_t i)
{
	struct thin *th = &m->thin[k];
	const struct sp_memtl *o = &m->out;
	uint64_t dur = o->t1 > o->t0 ? o->t1 - o->t0 : 1, nb = SP_MEMTL_MAX_POINTS / 2;
	if (th->pend_i)
		thin_decide(m, k, th->pend, th->pend_i,
			    bucket(p.t, o->t0, dur, nb) != bucket(th->pend.t, o->t0, dur, nb));
	th->pend = p, th->pend_i = i;
}

/* A point of series k, in time order: the peak (the first time the highest level is reached),
 * then the point itself, kept while the series has at most SP_MEMTL_MAX_POINTS, else thinned (each
 * of SP_MEMTL_MAX_POINTS / 2 buckets of the window keeps its highest point and its last). Exits if
 * memory runs out. */
static void add_point(struct sp_memtl_reader *m, size_t k, uint64_t t, uint64_t live, uint64_t seq)
{
	struct sp_memtl_series *s = &m->out.s[k];
	struct thin *th = &m->thin[k];
	struct sp_memtl_point p = { t, live, seq };
	size_t i = s->n_all++;

	if (!i)
		s->peak = live, s->peak_t = m->out.t0, s->peak_seq = 0;
	else if (live > s->peak)
		s->peak = live, s->peak_t = t, s->peak_seq = seq;
	if (!th->on && s->n < SP_MEMTL_MAX_POINTS) {
		keep_point(m, k, p);
		return;
	}
	if (!th->on) { /* past SP_MEMTL_MAX_POINTS: thinned from here, the points so far first */
		struct sp_memtl_point *old = s->pt;
		size_t n = s->n;
		th->on = 1;
		s->pt = NULL, s->n = 0, th->cap = 0;
		keep_point(m, k, old[0]);
		for (size_t j = 1; j < n; j++)
			thin_feed(m, k, old[j], j);
		free(old);
	}
	thin_feed(m, k, p, i);
}

/* What the passes of build work with. */
struct build {
	uint64_t seq;           /* changes (allocations and frees) met so far, by start */
	uint64_t start_level[MAX_DEVICES + 1]; /* level at t0 from the snapshots, per slot_of */
	int has_start[MAX_DEVICES + 1];
};

/* The first pass: levels and points, counts. */
static void level_one(struct sp_memtl_reader *m, void *ctx, const struct sp_event *e)
{
	struct build *b = ctx;
	size_t k = series_of(m, e->device);
	struct sp_memtl_series *s = &m->out.s[k];

	b->seq++;
	if (!s->n_all) { /* level at t0: what the snapshots say, else worked back from this change */
		const struct sp_ev_mem *em = &e->u.mem;
		uint64_t before = e->kind == SP_EV_FREE ? em->live + em->size
				  : em->live > em->size ? em->live - em->size
							: 0;
		unsigned slot = slot_of(e->device);
		add_point(m, k, m->out.t0, b->has_start[slot] ? b->start_level[slot] : before, 0);
	}
	s = &m->out.s[k];
	if (e->kind == SP_EV_ALLOC)
		s->allocs++;
	else
		s->frees++;
	add_point(m, k, e->start, e->u.mem.live, b->seq);
}

/* 1 if allocation a should be shown before b among the largest: bigger, else made first. */
static int bigger(const struct kept *a, const struct kept *b)
{
	return a->a.size != b->a.size ? a->a.size > b->a.size : a->index < b->index;
}

/* Offers allocation x (ended, or alive at the end) to the SP_MEMTL_MAX_ALLOCS largest: a heap with
 * the least of them on top. Exits if memory runs out. */
static void offer(struct sp_memtl_reader *m, const struct kept *x)
{
	size_t i;
	if (m->ntop < SP_MEMTL_MAX_ALLOCS) {
		m->top = sp_xgrow(m->top, &m->top_cap, sizeof(*m->top), m->ntop);
		i = m->ntop++;
		m->top[i] = *x;
		while (i && bigger(&m->top[(i - 1) / 2], &m->top[i])) {
			struct kept t = m->top[i];
			m->top[i] = m->top[(i - 1) / 2];
			m->top[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
		return;
	}
	if (!bigger(x, &m->top[0]))
		return;
	m->top[0] = *x;
	for (i = 0;;) {
		size_t l = 2 * i + 1, k = i;
		if (l < m->ntop && bigger(&m->top[k], &m->top[l]))
			k = l;
		if (l + 1 < m->ntop && bigger(&m->top[k], &m->top[l + 1]))
			k = l + 1;
		if (k == i)
			break;
		struct kept t = m->top[i];
		m->top[i] = m->top[k];
		m->top[k] = t;
		i = k;
	}
}

/* Live allocation x is done (freed, or alive at the window's end): kept if alive at its series'
 * peak, offered to the largest. Exits if memory runs out. */
static void ended(struct sp_memtl_reader *m, const struct live *x)
{
	struct kept k = { x->index, x->a };
	if (x->at_peak) {
		size_t at = series_of(m, x->a.device); /* first: it may move m->thin */
		struct thin *th = &m->thin[at];
		th->peak = sp_xgrow(th->peak, &th->peak_cap, sizeof(*th->peak), th->npeak);
		th->peak[th->npeak++] = k;
	}
	offer(m, &k);
}

/* A new allocation of the window (e: its ALLOC or SNAPSHOT record; seq its change, 0 for a
 * snapshot) into the live set. Exits if memory runs out. */
static void born(struct sp_memtl_reader *m, const struct sp_event *e, uint64_t seq)
{
	struct live *x = sp_memtl_lmap_put(&m->keys, sp_memtl_key_of(e));
	x->index = m->nalloc++;
	x->at_peak = 0;
	x->a = (struct sp_memtl_alloc){ .addr = e->u.mem.addr,
					.size = e->u.mem.size,
					.made = e->start,
					.freed = SP_MEMTL_NEVER,
					.born = seq,
					.died = SP_MEMTL_NEVER,
					.stack = e->u.mem.stack,
					.device = e->device,
					.kind = e->sub,
					.snapshot = seq == 0 };
	if (m->sym)
		sp_memtl_owner_born(m, x, series_of(m, e->device));
}

/* The live set is what is alive at series k's peak: marks its allocations of k's device. */
static void mark_peak(struct sp_memtl_reader *m, size_t k)
{
	for (size_t i = 0; i < m->keys.cap; i++)
		if (m->keys.slot[i].used && m->keys.slot[i].a.device == m->out.s[k].device) {
			m->keys.slot[i].at_peak = 1;
			if (m->sym)
				sp_memtl_owner_at_peak(m, &m->keys.slot[i], k);
		}
}

/* The second pass: the live set through the window, what is alive at each peak, the largest. */
static void live_one(struct sp_memtl_reader *m, void *ctx, const struct sp_event *e)
{
	struct build *b = ctx;
	struct live *x = sp_memtl_lmap_get(&m->keys, sp_memtl_key_of(e));

	b->seq++;
	if (x) { /* freed, or allocated again without a FREE we saw */
		x->a.freed = e->start;
		x->a.died = b->seq;
		ended(m, x);
		if (m->sym)
			sp_memtl_owner_freed(m, x, series_of(m, x->a.device));
		sp_memtl_lmap_del(&m->keys, x);
	}
	if (e->kind == SP_EV_ALLOC)
		born(m, e, b->seq);
	size_t k = series_of(m, e->device);
	if (m->out.s[k].peak_seq == b->seq)
		mark_peak(m, k);
}

static int cmp_index(const void *pa, const void *pb)
{
	const struct kept *a = pa, *b = pb;
	return a->index < b->index ? -1 : a->index > b->index;
}

/* The allocations alive at a peak: biggest first, then made first, then in the order made. */
static int cmp_at_peak(const void *pa, const void *pb, void *arg)
{
	const struct sp_memtl_alloc *al = arg;
	size_t i = *(const size_t *)pa, j = *(const size_t *)pb;
	const struct sp_memtl_alloc *x = &al[i], *y = &al[j];
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	if (x->made != y->made)
		return x->made < y->made ? -1 : 1;
	return i < j ? -1 : i > j;
}

/* out's allocations: those alive at a peak and the largest, in the order made; its series'
 * at_peak lists into them. Exits if memory runs out. */
static void assemble(struct sp_memtl_reader *m)
{
	struct sp_memtl *o = &m->out;
	struct kept *v = NULL;
	size_t n = 0, cap = 0, u = 0;

	for (size_t k = 0; k < o->ns; k++)
		for (size_t i = 0; i < m->thin[k].npeak; i++) {
			v = sp_xgrow(v, &cap, sizeof(*v), n);
			v[n++] = m->thin[k].peak[i];
		}
	for (size_t i = 0; i < m->ntop; i++) {
		v = sp_xgrow(v, &cap, sizeof(*v), n);
		v[n++] = m->top[i];
	}
	sp_sort(v, n, sizeof(*v), cmp_index);
	o->a = sp_xrealloc(NULL, (n + 1) * sizeof(*o->a));
	for (size_t i = 0; i < n; i++)
		if (!u || v[i].index != v[u - 1].index)
			v[u++] = v[i];
	for (size_t i = 0; i < u; i++)
		o->a[i] = v[i].a;
	o->na = u;
	o->na_all = m->nalloc;
	for (size_t k = 0; k < o->ns; k++) {
		struct sp_memtl_series *s = &o->s[k];
		struct thin *th = &m->thin[k];
		s->at_peak = sp_xrealloc(NULL, (th->npeak + 1) * sizeof(*s->at_peak));
		for (size_t i = 0; i < th->npeak; i++) {
			struct kept *at = bsearch(&th->peak[i], v, u, sizeof(*v), cmp_index);
			s->at_peak[s->n_at_peak++] = (size_t)(at - v);
		}
		sp_sort_r(s->at_peak, s->n_at_peak, sizeof(*s->at_peak), cmp_at_peak, o->a);
	}
	free(v);
}

/* Frees the window handed out before. */
void sp_memtl_out_free(struct sp_memtl_reader *m)
{
	for (size_t i = 0; i < m->out.ns; i++) {
		free(m->out.s[i].pt);
		free(m->out.s[i].at_peak);
		free(m->out.s[i].owned);
		free(m->thin[i].peak);
	}
	free(m->out.a);
	free(m->out.s);
	free(m->out.step);
	memset(&m->out, 0, sizeof(m->out));
}

/* Builds m->out from the settled window (held records settled; its allocations and frees read
 * again by two passes by start, the first also keeping next's). Exits if memory runs out. */
void sp_memtl_build(struct sp_memtl_reader *m, uint64_t t1, const struct sp_memtl *next)
{
	struct sp_memtl *o = &m->out;
	struct build b = { 0 };

	sp_memtl_out_free(m);
	*o = m->cur;
	o->a = NULL, o->s = NULL, o->step = NULL;
	o->na = o->ns = o->nstep = 0;
	for (size_t i = 0; i < m->nsnap; i++) { /* level at t0: what the snapshots say */
		const struct sp_event *e = &m->snap[i];
		series_of(m, e->device);
		b.start_level[slot_of(e->device)] = e->u.mem.live;
		b.has_start[slot_of(e->device)] = 1;
	}
	sp_memtl_pass(m, o->t0, t1, next, level_one, &b);
	o->step = sp_xrealloc(NULL, (m->nsteps + 1) * sizeof(*o->step));
	for (size_t i = 0; i < m->nsteps; i++) { /* by start, then file order */
		const struct sp_event *e = &m->steps[i];
		size_t j = o->nstep++;
		for (; j && o->step[j - 1].start > e->start; j--)
			o->step[j] = o->step[j - 1];
		o->step[j] = (struct sp_memtl_step){ e->u.step.number, e->start, e->end };
	}
	for (size_t i = 0; i < m->npeak; i++) {
		size_t k = series_of(m, m->peak[i].device); /* first: it may move o->s */
		struct sp_memtl_series *s = &o->s[k];
		if (m->peak[i].u.mem.live > s->peak_ever)
			s->peak_ever = m->peak[i].u.mem.live;
	}
	for (size_t k = 0; k < o->ns; k++) { /* the level at t0 if no change set it, the last points */
		struct sp_memtl_series *s = &o->s[k];
		if (!s->n_all)
			add_point(m, k, o->t0, b.has_start[slot_of(s->device)] ? b.start_level[slot_of(s->device)] : 0,
				  0);
		if (m->thin[k].on && m->thin[k].pend_i)
			thin_decide(m, k, m->thin[k].pend, m->thin[k].pend_i, 1);
		if (s->peak_ever && s->peak_ever < s->peak)
			s->peak_ever = s->peak;
	}
	/* the live set through the window: the snapshots first, then by start */
	sp_memtl_lmap_clear(&m->keys);
	m->ntop = m->nalloc = 0;
	if (m->owner_cap) /* owners by the modules known now */
		memset(m->owner_of, 0, m->owner_cap);
	b.seq = 0;
	for (size_t i = 0; i < m->nsnap; i++)
		born(m, &m->snap[i], 0);
	for (size_t k = 0; k < o->ns; k++)
		if (!o->s[k].peak_seq)
			mark_peak(m, k);
	sp_memtl_pass(m, o->t0, t1, NULL, live_one, &b);
	for (size_t i = 0; i < m->keys.cap; i++)
		if (m->keys.slot[i].used)
			ended(m, &m->keys.slot[i]);
	assemble(m);
}

