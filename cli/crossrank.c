/* SPDX-License-Identifier: MIT */
/* crossrank.c - see crossrank.h. Times of a rank are kept on its own wall clock (its windows' anchors)
 * and corrected by one offset per rank when ranks are compared; durations never need it. The
 * collectives of all ranks sit in one array sorted by (communicator, sequence, trace): a run of
 * equal keys is one collective. */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"
#include "format.h"
#include "commstats.h"
#include "crossrank_impl.h"

static int cmp_i64(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	return a < b ? -1 : a > b;
}

static int cmp_coll(const void *pa, const void *pb)
{
	const struct coll *a = pa, *b = pb;
	int d = sp_cmp_u64(a->comm, b->comm);
	d = d ? d : sp_cmp_u64(a->seq, b->seq);
	return d ? d : sp_cmp_u64(a->trace, b->trace);
}

/* |x|, INT64_MIN giving INT64_MAX. */
static int64_t mag(int64_t x)
{
	return x >= 0 ? x : x == INT64_MIN ? INT64_MAX : -x;
}

/* Median of v[0..n) (sorts v); 0 if n is 0. Can't fail. */
static int64_t median_i64(int64_t *v, size_t n)
{
	if (!n)
		return 0;
	sp_sort(v, n, sizeof(*v), cmp_i64);
	int64_t x = v[(n - 1) / 2], y = v[n / 2];
	return x / 2 + y / 2 + (x % 2 + y % 2) / 2;
}

void sp_xr_note(struct sp_xrank *a, const char *fmt, ...)
{
	va_list ap;
	if (a->nnotes == MAX_NOTES)
		return;
	va_start(ap, fmt);
	vsnprintf(a->notes[a->nnotes++], sizeof(a->notes[0]), fmt, ap);
	va_end(ap);
}

static int is_p2p(int op)
{
	return op == SP_NCCL_SEND || op == SP_NCCL_RECV;
}

/* CUDA calls that block the CPU until the GPU is done (a synchronous copy is how .item() and
 * .cpu() wait), matched with any suffix after '_' (_v2, _ptsz). */
static const char *const sync_calls[] = {
	"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
	"cudaMemcpy",            "cudaMemcpy2D",          "cuStreamSynchronize",  "cuCtxSynchronize",
	"cuEventSynchronize",    "cuMemcpyDtoH",          "cuMemcpy",
};

/* 1 if API record name id (strings of r) is a synchronising call, cached by id in k. */
static int is_sync_call(struct rk *k, struct sp_trace_reader *r, uint32_t id)
{
	k->syncname = sp_xgrow(k->syncname, &k->sncap, 1, id);
	if (!k->syncname[id]) {
		const char *name = sp_trace_string(r, id);
		k->syncname[id] = 1;
		for (size_t i = 0; name && i < sizeof(sync_calls) / sizeof(sync_calls[0]); i++) {
			size_t n = strlen(sync_calls[i]);
			if (!strncmp(name, sync_calls[i], n) && (!name[n] || name[n] == '_'))
				k->syncname[id] = 2;
		}
	}
	return k->syncname[id] == 2;
}

/* 1 if CPU record e is the CPU waiting for the GPU: a CUPTI sync record of an event, stream or
 * context synchronisation (not a stream's wait for an event: the GPU waits there), or a
 * synchronising API call. */
static int is_blocking(struct rk *k, struct sp_trace_reader *r, const struct sp_event *e)
{
	if (e->kind == SP_EV_SYNC)
		return e->sub == 1 || e->sub == 3 || e->sub == 4;
	return e->kind == SP_EV_API && e->name && is_sync_call(k, r, e->name);
}

/* What the passes over a window of a trace work with. */
struct pass {
	struct rk *k;
	struct sp_trace_reader *r;
	struct sp_windows *g;
	const struct sp_window *w;
	struct sp_nccl_win nccl;
	struct sp_steps_iv *span; /* kernels of its collectives and of earlier ones still running when
	                             it ended (wall clock), by start */
	size_t nspan;
	uint64_t end;             /* its end, wall clock */
	size_t at;                /* spans starting before the compute interval being merged */
	uint64_t reach;           /* the latest end among them */
	struct sp_steps_iv cur;   /* that interval (cur.e > cur.s: one is open) */
	size_t first;             /* index in k->st.st of its first step */
	uint64_t begin;           /* its start, wall clock */
	size_t blk0, blk_at;      /* its CPU waits in k->blk; those ending before the busy interval */
	struct sp_steps_iv busy;  /* the merged GPU interval being extended (busy.e > busy.s: one is open) */
};

/* Appends [s, e) (trace clock of w) to the interval list *v as wall clock. Exits on OOM. */
static void add_iv(struct sp_steps_iv **v, size_t *n, size_t *cap, const struct sp_window *w, uint64_t s, uint64_t e)
{
	*v = sp_xgrow(*v, cap, sizeof(**v), *n);
	(*v)[(*n)++] = (struct sp_steps_iv){ sp_window_wall(w, s), sp_window_wall(w, e) };
}

/* A window's event in file order: its steps and collectives, the CPU's blocking calls, and the GPU
 * records CUPTI gave no times (per step for those that are not NCCL kernels). Exits on OOM. */
static void pass_event(void *ctx, const struct sp_event *e)
{
	struct pass *p = ctx;
	struct rk *k = p->k;
	uint64_t anchor = sp_windows_anchor(p->g, e);
	size_t nst = k->st.n - p->first;

	sp_steps_event(&k->st, p->r, e, anchor);
	sp_nccl_win_event(&p->nccl, p->r, e);
	if (is_blocking(k, p->r, e) && e->end > e->start)
		add_iv(&k->blk, &k->nblk, &k->blkcap, p->w, e->start, e->end);
	if (!sp_ev_is_gpu(e) || (e->start && e->end >= e->start))
		return;
	int nccl = e->kind == SP_EV_KERNEL && sp_steps_is_nccl(&k->st, p->r, e->name);
	struct sp_step_stat *in = nst ? sp_steps_at(k->st.st + p->first, nst, anchor) : NULL;
	k->untimed_nccl += nccl;
	k->untimed_other += !nccl;
	if (in && !nccl)
		k->untimed_gpu[in - k->st.st]++;
}

/* Keeps the merged GPU interval p->busy if one of the window's CPU waits overlaps it or it runs
 * outside the window (another window's may): the waits read GPU work only inside them. */
static void busy_keep(struct pass *p)
{
	struct rk *k = p->k;
	for (; p->blk_at < k->nblk && k->blk[p->blk_at].e <= p->busy.s; p->blk_at++)
		;
	if ((p->blk_at == k->nblk || k->blk[p->blk_at].s >= p->busy.e) && p->busy.s >= p->begin && p->busy.e <= p->end)
		return;
	k->busy = sp_xgrow(k->busy, &k->busycap, sizeof(*k->busy), k->nbusy);
	k->busy[k->nbusy++] = p->busy;
}

/* Timed GPU work by start, merged into intervals for busy_keep. */
static void busy_add(struct pass *p, const struct sp_event *e)
{
	if (!e->start || e->end <= e->start)
		return;
	struct sp_steps_iv v = { sp_window_wall(p->w, e->start), sp_window_wall(p->w, e->end) };
	if (p->busy.e > p->busy.s && v.s <= p->busy.e) {
		p->busy.e = v.e > p->busy.e ? v.e : p->busy.e;
		return;
	}
	if (p->busy.e > p->busy.s)
		busy_keep(p);
	p->busy = v;
}

/* Keeps the merged compute interval p->cur if a collective's kernels overlap it, or if it runs past
 * the window's end (a later window's may): the exposed transfer of a collective reads compute only
 * inside its kernels' span. Exits if memory runs out. */
static void comp_keep(struct pass *p)
{
	struct rk *k = p->k;
	for (; p->at < p->nspan && p->span[p->at].s < p->cur.e; p->at++)
		p->reach = p->span[p->at].e > p->reach ? p->span[p->at].e : p->reach;
	if (p->reach <= p->cur.s && p->cur.e <= p->end)
		return;
	k->comp = sp_xgrow(k->comp, &k->compcap, sizeof(*k->comp), k->ncomp);
	k->comp[k->ncomp++] = p->cur;
}

/* GPU work by start: the steps' busy time, and compute (non-NCCL) kernels merged into intervals. */
static void pass_gpu(void *ctx, const struct sp_event *e)
{
	struct pass *p = ctx;
	sp_steps_sweep(&p->k->st, e);
	busy_add(p, e);
	if (e->kind != SP_EV_KERNEL || !e->start || e->end <= e->start || sp_steps_is_nccl(&p->k->st, p->r, e->name))
		return;
	struct sp_steps_iv v = { sp_window_wall(p->w, e->start), sp_window_wall(p->w, e->end) };
	if (p->cur.e > p->cur.s && v.s <= p->cur.e) {
		p->cur.e = v.e > p->cur.e ? v.e : p->cur.e;
		return;
	}
	if (p->cur.e > p->cur.s)
		comp_keep(p);
	p->cur = v;
}

static int cmp_iv(const void *a, const void *b)
{
	return sp_cmp_u64(((const struct sp_steps_iv *)a)->s, ((const struct sp_steps_iv *)b)->s);
}

/* Folds window w of trace k (index ti), the one g handed out last, into a: two passes over its
 * events. *carry holds the kernels of the trace's collectives still running at the end of the
 * window before (in, then out for the next). Exits if memory runs out. */
static void add_window(struct sp_xrank *a, struct rk *k, uint32_t ti, struct sp_trace_reader *r,
		       struct sp_windows *g, const struct sp_window *w, struct sp_steps_iv **carry, size_t *ncarry)
{
	size_t first = k->st.n, nl, cap = *ncarry;
	struct sp_nccl_link *l;
	struct pass p = { .k = k, .r = r, .g = g, .w = w, .span = *carry, .nspan = *ncarry, .first = first };

	p.begin = sp_window_wall(w, w->t0), p.end = sp_window_wall(w, w->t1);
	p.blk0 = p.blk_at = k->nblk;
	sp_steps_begin(&k->st, w);
	k->untimed_gpu = sp_xgrow(k->untimed_gpu, &k->utcap, sizeof(*k->untimed_gpu), k->st.n);
	sp_nccl_win_begin(&p.nccl, w);
	sp_windows_each(g, pass_event, &p);
	if (k->nblk > p.blk0) /* k->blk is NULL while empty: no NULL + 0 */
		k->nblk = p.blk0 + sp_steps_merge(k->blk + p.blk0, k->nblk - p.blk0);
	nl = sp_nccl_links(r, &p.nccl, &l);
	for (size_t i = 0; i < nl; i++) {
		const struct sp_event *e = l[i].e;
		if (!e->u.nccl.comm || is_p2p(e->sub) || l[i].shared)
			continue; /* p2p pairs by peer, not by sequence; group members share their first's kernels */
		struct sp_step_stat *in =
			k->st.n > first ? sp_steps_at(k->st.st + first, k->st.n - first, e->start) : NULL;
		int untimed = l[i].kernels && (!l[i].ks || l[i].ke < l[i].ks); /* a kernel without times */
		int timed = l[i].kernels && !untimed;
		a->c = sp_xgrow(a->c, &a->ccap, sizeof(*a->c), a->nc);
		a->c[a->nc++] = (struct coll){ .comm = e->u.nccl.comm,
					       .seq = e->u.nccl.seq,
					       .cpu = sp_window_wall(w, e->start),
					       .ks = timed ? sp_window_wall(w, l[i].ks) : 0,
					       .ke = timed ? sp_window_wall(w, l[i].ke) : 0,
					       .ks_mono = l[i].ks,
					       .trace = ti,
					       .step = in ? (int32_t)(in - k->st.st) : -1,
					       .comm_size = e->u.nccl.comm_size,
					       .op = e->sub,
					       .untimed = (uint8_t)untimed };
		k->ncoll++;
		k->unlinked += !l[i].kernels;
		if (e->u.nccl.comm_size > a->world)
			a->world = e->u.nccl.comm_size;
		if (l[i].kernels) {
			p.span = sp_xgrow(p.span, &cap, sizeof(*p.span), p.nspan);
			p.span[p.nspan++] = (struct sp_steps_iv){ a->c[a->nc - 1].ks, a->c[a->nc - 1].ke };
		}
	}
	free(l);
	sp_sort(p.span, p.nspan, sizeof(*p.span), cmp_iv);
	sp_windows_sorted(g, sp_ev_is_gpu, pass_gpu, &p);
	if (p.cur.e > p.cur.s)
		comp_keep(&p);
	if (p.busy.e > p.busy.s)
		busy_keep(&p);
	sp_steps_end(&k->st);
	sp_nccl_win_free(&p.nccl);
	*ncarry = 0;
	for (size_t i = 0; i < p.nspan; i++)
		if (p.span[i].e > p.end)
			p.span[(*ncarry)++] = p.span[i];
	*carry = p.span;
}

/* Frees what trace k holds (k itself is the caller's). Can't fail. */
static void free_rk(struct rk *k)
{
	sp_steps_free(&k->st);
	free(k->comp);
	free(k->busy);
	free(k->blk);
	free(k->untimed_gpu);
	free(k->syncname);
	free(k->path);
	free(k->wait);
	free(k->xfer);
	free(k->exposed);
	free(k->cpuwait);
	free(k->peeridle);
}

int sp_xrank_phases_mixed(const struct sp_xrank *a)
{
	return a->phases_mixed;
}

void sp_xrank_set_phase(struct sp_xrank *a, const char *phase)
{
	a->phase = phase;
}

struct sp_xrank *sp_xrank_new(void)
{
	struct sp_xrank *a = sp_xrealloc(NULL, sizeof(*a));
	memset(a, 0, sizeof(*a));
	a->world = -1;
	a->straggler = a->most = -1;
	return a;
}

int sp_xrank_load(struct sp_xrank *a, const char *path, char *err, size_t errlen)
{
	const struct sp_window *w;
	struct sp_trace_reader *r = sp_trace_open(path, err, errlen);
	int rc;

	if (!r)
		return -1;
	a->r = sp_xgrow(a->r, &a->cap, sizeof(*a->r), a->n);
	struct rk *k = &a->r[a->n];
	const struct sp_trace_meta *m = &sp_trace_header(r)->meta;
	size_t c0 = a->nc;
	*k = (struct rk){ .rank = m->rank, .pid = m->pid, .world = m->world_size };
	snprintf(k->host, sizeof(k->host), "%s", m->host);
	if (m->world_size > a->world)
		a->world = m->world_size;
	struct sp_windows *g = sp_windows_open(r);
	struct sp_steps_iv *carry = NULL; /* kernels of collectives running past a window's end */
	size_t ncarry = 0;
	sp_windows_set_phase(g, a->phase);
	while ((rc = sp_windows_next(g, &w)) == 1) {
		if (!a->nc && !a->first_phase[0] && !a->phases_mixed)
			snprintf(a->first_phase, sizeof a->first_phase, "%s", w->phase);
		a->phases_mixed |= strcmp(a->first_phase, w->phase) != 0;
		add_window(a, k, (uint32_t)a->n, r, g, w, &carry, &ncarry);
		if (!w->complete)
			k->cut = k->cut_has_window = 1, k->cut_window = w->id, k->cut_step = w->last_step;
	}
	free(carry);
	k->cut |= sp_trace_truncated(r);
	if (rc < 0)
		snprintf(err, errlen, "%s: %s", path, sp_trace_error(r));
	sp_windows_close(g);
	sp_trace_close_reader(r);
	sp_steps_free_scratch(&k->st); /* per window: only the steps stay */
	free(k->syncname);
	k->syncname = NULL;
	if (rc < 0 || !k->st.n) {
		free_rk(k);
		a->nc = c0;
		return rc < 0 ? -1 : 0;
	}
	k->path = strdup(path);
	if (!k->path)
		sp_oom();
	a->n++;
	return 1;
}

size_t sp_xrank_count(const struct sp_xrank *a)
{
	return a->n;
}

const struct sp_steps *sp_xrank_steps(const struct sp_xrank *a, size_t i)
{
	return &a->r[i].st;
}

int sp_xrank_rank(const struct sp_xrank *a, size_t i)
{
	return a->r[i].rank;
}

int sp_xrank_cut(const struct sp_xrank *a, size_t i, uint32_t *window, int64_t *step)
{
	const struct rk *k = &a->r[i];
	*window = k->cut_window;
	*step = k->cut_step;
	return !k->cut ? 0 : k->cut_has_window ? 2 : 1;
}

const char *sp_xrank_path(const struct sp_xrank *a, size_t i)
{
	return a->r[i].path;
}

/* ---- clocks ---- */

struct diff {
	uint32_t trace;
	int64_t d;
};

static int cmp_diff(const void *pa, const void *pb)
{
	const struct diff *x = pa, *y = pb;
	return x->trace != y->trace ? (x->trace < y->trace ? -1 : 1) : cmp_i64(&x->d, &y->d);
}

/* Puts every trace on the clock of the first in rank order: a trace on another host is moved by
 * the median difference of its collectives' ends from the consensus of the traces already placed
 * (a blocking collective ends within microseconds on every rank); one on the same host keeps its
 * anchors unless they disagree with that estimate by more than CLOCK_TOL_NS. Exits on OOM. */
static void align(struct sp_xrank *a)
{
	char *done = calloc(a->n + 1, 1);
	int64_t *vals = sp_xrealloc(NULL, (a->n + 1) * sizeof(*vals));
	struct diff *dv = NULL;
	size_t dcap = 0, ref = a->order[0];
	int progress = 1;

	if (!done)
		sp_oom();
	done[ref] = 1;
	a->r[ref].clock = CLK_ANCHORS;
	while (progress) {
		size_t nd = 0;
		progress = 0;
		for (size_t i = 0; i < a->nc;) { /* each collective: consensus end of the placed traces */
			size_t j = i, nv = 0;
			while (j < a->nc && a->c[j].comm == a->c[i].comm && a->c[j].seq == a->c[i].seq)
				j++;
			for (size_t k = i; k < j; k++)
				if (a->c[k].ke && done[a->c[k].trace])
					vals[nv++] = sub((int64_t)a->c[k].ke, a->r[a->c[k].trace].off);
			if (nv) {
				int64_t cons = median_i64(vals, nv);
				for (size_t k = i; k < j; k++)
					if (a->c[k].ke && !done[a->c[k].trace]) {
						dv = sp_xgrow(dv, &dcap, sizeof(*dv), nd);
						dv[nd++] =
							(struct diff){ a->c[k].trace, sub((int64_t)a->c[k].ke, cons) };
					}
			}
			i = j;
		}
		sp_sort(dv, nd, sizeof(*dv), cmp_diff);
		for (size_t i = 0; i < nd;) {
			size_t j = i;
			while (j < nd && dv[j].trace == dv[i].trace)
				j++;
			struct rk *k = &a->r[dv[i].trace];
			if (j - i >= MIN_COLLS) {
				int64_t *d = sp_xrealloc(NULL, (j - i) * sizeof(*d));
				for (size_t q = i; q < j; q++)
					d[q - i] = dv[q].d;
				k->est = median_i64(d, j - i); /* d is sorted by cmp_diff already; median sorts again */
				for (size_t q = i; q < j; q++)
					d[q - i] = mag(sub(dv[q].d, k->est));
				k->spread = median_i64(d, j - i);
				free(d);
				k->nest = j - i;
				if (strcmp(k->host, a->r[ref].host) || mag(k->est) > CLOCK_TOL_NS) {
					k->clock = CLK_COLLECTIVES;
					k->off = k->est;
				} else {
					k->clock = CLK_ANCHORS;
				}
				done[dv[i].trace] = 1;
				progress = 1;
			}
			i = j;
		}
	}
	for (size_t i = 0; i < a->n; i++)
		if (!done[i])
			a->r[i].clock = CLK_NONE;
	free(done);
	free(vals);
	free(dv);
}

/* ---- arrivals ---- */

/* Among the calls c[0..n) of one collective: the latest arrival on the common clock (gpu: its
 * kernels' start, calls without kernels left out; else the call's CPU start) in *last (index) and
 * *lv, the next latest in *second. Returns how many calls counted. Can't fail. */
static size_t latest(const struct sp_xrank *a, const struct coll *c, size_t n, int gpu, size_t *last, int64_t *lv,
		     int64_t *second)
{
	size_t count = 0;
	for (size_t k = 0; k < n; k++) {
		if (gpu && !c[k].ke)
			continue;
		int64_t t = sub((int64_t)(gpu ? c[k].ks : c[k].cpu), a->r[c[k].trace].off);
		if (!count || t > *lv) {
			*second = count ? *lv : t;
			*lv = t;
			*last = k;
		} else if (count == 1 || t > *second) {
			*second = t;
		}
		count++;
	}
	return count;
}

/* Index of the first of the disjoint sorted intervals iv[0..n) that ends after t (n if none). */
static size_t first_after(const struct sp_steps_iv *iv, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (iv[mid].e <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ns of [lo, hi) (trace k's wall clock) in which k's CPU was blocked in a synchronising call;
 * with idle, only while no timed GPU work of k ran. Can't fail. */
static uint64_t blocked(const struct rk *k, uint64_t lo, uint64_t hi, int idle)
{
	uint64_t sum = 0;
	for (size_t i = first_after(k->blk, k->nblk, lo); i < k->nblk && k->blk[i].s < hi; i++) {
		uint64_t s = k->blk[i].s > lo ? k->blk[i].s : lo, e = k->blk[i].e < hi ? k->blk[i].e : hi;
		sum += e - s - (idle ? sp_steps_covered(k->busy, k->nbusy, s, e) : 0);
	}
	return sum;
}

/* If at t (k's wall clock) k's CPU was blocked in a synchronising call and its GPU ran no timed
 * work: the start of that stretch, no earlier than lo, in *since and 1; else 0. Can't fail. */
static int blocked_idle_since(const struct rk *k, uint64_t t, uint64_t lo, uint64_t *since)
{
	size_t i = first_after(k->blk, k->nblk, t), j = first_after(k->busy, k->nbusy, t);
	if (i == k->nblk || k->blk[i].s > t || (j < k->nbusy && k->busy[j].s <= t))
		return 0;
	uint64_t s = k->blk[i].s;
	if (j && k->busy[j - 1].e > s)
		s = k->busy[j - 1].e;
	*since = s > lo ? s : lo;
	return 1;
}

/* The calls of one collective whose NCCL kernels have no times: where a call's CPU was blocked in a
 * synchronising call with its GPU idle from some point until the last timed arrival lks, its kernel
 * had arrived by then (its step has no other GPU record without times that could have kept the GPU
 * busy unseen); that stretch is its wait for peers (CPU and GPU). Raises *second to the latest such
 * arrival. Returns how many arrivals it inferred. Can't fail. */
static size_t infer(struct sp_xrank *a, struct coll *c, size_t n, int64_t lks, int64_t *second)
{
	size_t got = 0;
	for (size_t k = 0; k < n; k++) {
		struct rk *r = &a->r[c[k].trace];
		uint64_t since, at = (uint64_t)lks + (uint64_t)r->off; /* the last arrival on r's own clock */
		if (!c[k].untimed || c[k].step < 0 || r->untimed_gpu[c[k].step] || at <= c[k].cpu + (uint64_t)a->tie ||
		    !blocked_idle_since(r, at - 1, c[k].cpu, &since))
			continue;
		if (since < r->infer_upto) /* its collectives run one after the other */
			since = r->infer_upto;
		if (since >= at)
			continue;
		r->infer_upto = at;
		int64_t t = sub((int64_t)since, r->off);
		c[k].inferred = t ? t : 1;
		c[k].wait = at - since;
		r->wait[c[k].step] += at - since;
		r->cpuwait[c[k].step] += at - since;
		r->peeridle[c[k].step] += at - since;
		if (t > *second)
			*second = t;
		got++;
	}
	return got;
}

/* Arrivals, waits and transfers of one collective, its calls c[0..n) (one per trace), added to
 * its traces' steps. Exits if memory runs out. */
static void arrivals(struct sp_xrank *a, struct coll *c, size_t n)
{
	size_t last = 0, cpu_last = 0;
	int64_t sks = 0, scpu = 0, lks = 0, lcpu = 0;
	size_t ncpu = latest(a, c, n, 0, &cpu_last, &lcpu, &scpu), linked = latest(a, c, n, 1, &last, &lks, &sks);

	if (linked < 2)
		sks = INT64_MIN;
	size_t known = linked + (linked ? infer(a, c, n, lks, &sks) : 0);
	int decisive = known >= 2 && sub(lks, sks) > a->tie;
	a->groups++;
	if (ncpu > 1) {
		for (size_t k = 0; k < n; k++)
			a->r[c[k].trace].cpu_decisive += sub(lcpu, scpu) > a->tie;
		a->r[c[cpu_last].trace].last_cpu += sub(lcpu, scpu) > a->tie;
	}
	if (c[0].comm_size > 0 && (size_t)c[0].comm_size == n)
		a->complete++;
	if (known >= 2) {
		a->paired++;
		a->decisive += decisive;
		a->inferred += decisive && known > linked;
	}
	for (size_t k = 0; k < n; k++) {
		struct rk *r = &a->r[c[k].trace];
		if (c[k].inferred) {
			r->decisive += decisive;
			r->inferred++;
		}
		if (!c[k].ke)
			continue;
		uint64_t dur = c[k].ke > c[k].ks ? c[k].ke - c[k].ks : 0, wait = 0;
		if (known >= 2) {
			int64_t d = sub(lks, sub((int64_t)c[k].ks, r->off));
			wait = d <= 0 ? 0 : (uint64_t)d > dur ? dur : (uint64_t)d;
			r->decisive += decisive;
			r->last_gpu += k == last && decisive;
			c[k].wait = wait;
			c[k].paired = 1;
			a->wl = sp_xgrow(a->wl, &a->wlcap, sizeof(*a->wl), a->nwl);
			a->wl[a->nwl++] = (struct wl){ r->rank >= 0 ? r->rank : r->pid, c[k].ks_mono, wait };
		}
		if (c[k].step < 0)
			continue;
		r->wait[c[k].step] += wait;
		/* .item(), a synchronisation: the CPU blocked meanwhile */
		r->cpuwait[c[k].step] += blocked(r, c[k].ks, c[k].ks + wait, 0);
		r->xfer[c[k].step] += dur - wait;
		uint64_t t0 = c[k].ks + wait; /* the transfer: not hidden where compute runs alongside */
		if (dur && c[k].ke > t0)
			r->exposed[c[k].step] += c[k].ke - t0 - sp_steps_covered(r->comp, r->ncomp, t0, c[k].ke);
	}
}

/* Per-rank medians over its steps. */
static void medians(struct rk *k)
{
	uint64_t *v = sp_xrealloc(NULL, (k->st.n + 1) * sizeof(*v));
	for (int q = 0; q < M__N; q++) {
		for (size_t i = 0; i < k->st.n; i++) {
			const struct sp_step_stat *x = &k->st.st[i];
			uint64_t comp = x->kernel_ns > x->nccl_ns ? x->kernel_ns - x->nccl_ns : 0;
			uint64_t stall = x->stall - (k->peeridle[i] < x->stall ? k->peeridle[i] : x->stall);
			uint64_t by[M__N] = { sp_step_ns(x), comp,       k->exposed[i], k->wait[i], stall,
					      x->copy_ns,    k->xfer[i], x->nccl_ns,    k->cpuwait[i] };
			v[i] = by[q];
		}
		k->med[q] = sp_median_u64(v, k->st.n);
	}
	free(v);
}

uint64_t sp_xr_others(const struct sp_xrank *a, int skip, int q)
{
	uint64_t *v = sp_xrealloc(NULL, (a->n + 1) * sizeof(*v)), m;
	size_t n = 0;
	for (size_t i = 0; i < a->n; i++)
		if ((int)i != skip)
			v[n++] = a->r[i].med[q];
	m = sp_median_u64(v, n);
	free(v);
	return m;
}

const char *sp_xr_ms(char *buf, int64_t ns)
{
	char t[32];
	if (ns < 0)
		snprintf(buf, 40, "-%s", sp_fmt_ns(t, sizeof(t), 0 - (uint64_t)ns));
	else
		snprintf(buf, 40, "%s", sp_fmt_ns(t, sizeof(t), (uint64_t)ns));
	return buf;
}

static int cmp_order(const void *pa, const void *pb, void *ctx)
{
	const struct sp_xrank *a = ctx;
	size_t x = *(const size_t *)pa, y = *(const size_t *)pb;
	int rx = a->r[x].rank, ry = a->r[y].rank;
	if (rx != ry)
		return rx < 0 ? 1 : ry < 0 ? -1 : rx < ry ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* The notes on how the traces were read: clocks moved or left unchecked, GPU records without
 * times, NCCL calls without kernels. */
static void analysis_notes(struct sp_xrank *a)
{
	char l[24], b[2][40];
	size_t moved = 0, unplaced = 0;
	char ref[24];
	label(a, a->order[0], ref, sizeof(ref));
	for (size_t q = 0; q < a->n; q++) {
		size_t i = a->order[q];
		const struct rk *k = &a->r[i];
		moved += k->clock == CLK_COLLECTIVES;
		unplaced += k->clock == CLK_NONE && a->n > 1;
		if (k->clock == CLK_COLLECTIVES && moved <= 4)
			sp_xr_note(a,
			     "Clock: rank %s %s rank %s's (the reference): placed by its collectives' ends, moved "
			     "%s from its wall-clock anchors (median deviation %s over %zu collectives).",
			     label(a, i, l, sizeof(l)),
			     strcmp(k->host, a->r[a->order[0]].host) ? "is on another host than"
								     : "shares a host but its anchors disagree with",
			     ref, sp_xr_ms(b[0], -k->off), sp_xr_ms(b[1], k->spread), k->nest);
	}
	if (moved > 4)
		sp_xr_note(a,
			   "Clock: %zu ranks in all were placed by their collectives' ends rather than their anchors.",
		     moved);
	if (unplaced)
		sp_xr_note(a,
		     "Clock: %zu traces share fewer than %d collectives with the others: their wall-clock anchors "
		     "are used as they are (arrivals are as good as the hosts' clock sync).",
		     unplaced, MIN_COLLS);
	uint64_t unlinked = 0, untimed[2] = { 0, 0 }, inferred = 0;
	for (size_t i = 0; i < a->n; i++) {
		unlinked += a->r[i].unlinked;
		untimed[0] += a->r[i].untimed_nccl;
		untimed[1] += a->r[i].untimed_other;
		inferred += a->r[i].inferred;
	}
	if (untimed[0] || untimed[1])
		sp_xr_note(a,
			   "%llu GPU records (%llu of them NCCL kernels) have no times (CUPTI gave none): where they "
			   "ran the GPU looks idle, so their steps' host stall may be overstated. NCCL kernels "
			   "without times are not counted as arrivals; %llu were placed by their rank's CPU blocked "
			   "in a synchronising call with its GPU idle until the last rank arrived.",
			   (unsigned long long)(untimed[0] + untimed[1]), (unsigned long long)untimed[0],
			   (unsigned long long)inferred);
	if (unlinked)
		sp_xr_note(a,
		     "%llu NCCL calls had no kernel recorded (dropped records, or CUDA graphs): their arrivals are "
		     "not counted.",
		     (unsigned long long)unlinked);
}

void sp_xrank_analyse(struct sp_xrank *a)
{
	a->order = sp_xrealloc(NULL, (a->n + 1) * sizeof(*a->order));
	a->ranks = sp_xrealloc(NULL, (a->n + 1) * sizeof(*a->ranks));
	for (size_t i = 0; i < a->n; i++) {
		a->order[i] = i;
		a->ranks[i] = a->r[i].rank;
	}
	sp_sort_r(a->order, a->n, sizeof(*a->order), cmp_order, a);
	if (!a->n)
		return; /* no trace with a step (convert --merge-ranks of such traces): nothing to analyse */
	sp_sort(a->c, a->nc, sizeof(*a->c), cmp_coll);
	size_t out = 0; /* one call per (collective, trace): the first */
	for (size_t i = 0; i < a->nc; i++)
		if (!out || cmp_coll(&a->c[out - 1], &a->c[i]))
			a->c[out++] = a->c[i];
	a->nc = out;
	for (size_t i = 0; i < a->n; i++) {
		struct rk *k = &a->r[i];
		k->wait = calloc(k->st.n + 1, sizeof(*k->wait));
		k->xfer = calloc(k->st.n + 1, sizeof(*k->xfer));
		k->exposed = calloc(k->st.n + 1, sizeof(*k->exposed));
		k->cpuwait = calloc(k->st.n + 1, sizeof(*k->cpuwait));
		k->peeridle = calloc(k->st.n + 1, sizeof(*k->peeridle));
		if (!k->wait || !k->xfer || !k->exposed || !k->cpuwait || !k->peeridle)
			sp_oom();
	}
	if (a->n)
		align(a);
	for (size_t i = 0; i < a->n; i++) { /* the step medians first: they set the tie */
		struct rk *k = &a->r[i];
		uint64_t *v = sp_xrealloc(NULL, (k->st.n + 1) * sizeof(*v));
		for (size_t j = 0; j < k->st.n; j++)
			v[j] = sp_step_ns(&k->st.st[j]);
		k->med[M_STEP] = sp_median_u64(v, k->st.n);
		free(v);
	}
	a->step_med = sp_xr_others(a, -1, M_STEP);
	a->tie = a->step_med / 100 > TIE_NS ? (int64_t)(a->step_med / 100) : TIE_NS;
	for (size_t i = 0; i < a->nc;) {
		size_t j = i;
		while (j < a->nc && a->c[j].comm == a->c[i].comm && a->c[j].seq == a->c[i].seq)
			j++;
		arrivals(a, a->c + i, j - i);
		i = j;
	}
	sp_sort(a->wl, a->nwl, sizeof(*a->wl), cmp_wl);
	for (size_t i = 0; i < a->n; i++)
		medians(&a->r[i]);
	analysis_notes(a);
	sp_xr_judge(a);
}

void sp_xrank_free(struct sp_xrank *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n; i++)
		free_rk(&a->r[i]);
	free(a->r);
	free(a->c);
	free(a->order);
	free(a->ranks);
	free(a->wl);
	free(a);
}
