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

static void note(struct sp_xrank *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct sp_xrank *a, const char *fmt, ...)
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

/* Folds window w of trace k (index ti) into a. Exits if memory runs out. */
static void add_window(struct sp_xrank *a, struct rk *k, uint32_t ti, struct sp_trace_reader *r,
		       const struct sp_window *w)
{
	size_t first = k->st.n, nl, c0 = k->ncomp;
	struct sp_nccl_link *l;

	sp_steps_add_window(&k->st, r, w);
	nl = sp_nccl_links(r, w, &l);
	for (size_t i = 0; i < nl; i++) {
		const struct sp_event *e = l[i].e;
		if (!e->u.nccl.comm || is_p2p(e->sub) || l[i].shared)
			continue; /* p2p pairs by peer, not by sequence; group members share their first's kernels */
		struct sp_step_stat *in =
			k->st.n > first ? sp_steps_at(k->st.st + first, k->st.n - first, e->start) : NULL;
		a->c = sp_xgrow(a->c, &a->ccap, sizeof(*a->c), a->nc);
		a->c[a->nc++] = (struct coll){ .comm = e->u.nccl.comm,
					       .seq = e->u.nccl.seq,
					       .cpu = sp_window_wall(w, e->start),
					       .ks = l[i].kernels ? sp_window_wall(w, l[i].ks) : 0,
					       .ke = l[i].kernels ? sp_window_wall(w, l[i].ke) : 0,
					       .ks_mono = l[i].ks,
					       .trace = ti,
					       .step = in ? (int32_t)(in - k->st.st) : -1,
					       .comm_size = e->u.nccl.comm_size,
					       .op = e->sub };
		k->ncoll++;
		k->unlinked += !l[i].kernels;
		if (e->u.nccl.comm_size > a->world)
			a->world = e->u.nccl.comm_size;
	}
	free(l);
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = &w->ev[i];
		if (e->kind != SP_EV_KERNEL || e->end <= e->start || sp_steps_is_nccl(&k->st, r, e->name))
			continue;
		k->comp = sp_xgrow(k->comp, &k->compcap, sizeof(*k->comp), k->ncomp);
		k->comp[k->ncomp++] = (struct sp_steps_iv){ sp_window_wall(w, e->start), sp_window_wall(w, e->end) };
	}
	if (k->ncomp > c0) /* k->comp is NULL while empty: no NULL + 0 */
		k->ncomp = c0 + sp_steps_merge(k->comp + c0, k->ncomp - c0);
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
	sp_windows_set_phase(g, a->phase);
	while ((rc = sp_windows_next(g, &w)) == 1) {
		if (!a->nc && !a->first_phase[0] && !a->phases_mixed)
			snprintf(a->first_phase, sizeof a->first_phase, "%s", w->phase);
		a->phases_mixed |= strcmp(a->first_phase, w->phase) != 0;
		add_window(a, k, (uint32_t)a->n, r, w);
	}
	if (rc < 0)
		snprintf(err, errlen, "%s: %s", path, sp_trace_error(r));
	sp_windows_close(g);
	sp_trace_close_reader(r);
	/* the steps' scratch is per window: only the steps stay */
	free(k->st.iv);
	sp_calls_free(&k->st.calls);
	k->st.iv = NULL;
	k->st.ivcap = 0;
	if (rc < 0 || !k->st.n) {
		sp_steps_free(&k->st);
		free(k->comp);
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

/* Arrivals, waits and transfers of one collective, its calls c[0..n) (one per trace), added to
 * its traces' steps. Exits if memory runs out. */
static void arrivals(struct sp_xrank *a, struct coll *c, size_t n)
{
	size_t last = 0, cpu_last = 0;
	int64_t sks = 0, scpu = 0, lks = 0, lcpu = 0;
	size_t ncpu = latest(a, c, n, 0, &cpu_last, &lcpu, &scpu), linked = latest(a, c, n, 1, &last, &lks, &sks);

	a->groups++;
	if (ncpu > 1) {
		for (size_t k = 0; k < n; k++)
			a->r[c[k].trace].cpu_decisive += sub(lcpu, scpu) > a->tie;
		a->r[c[cpu_last].trace].last_cpu += sub(lcpu, scpu) > a->tie;
	}
	if (c[0].comm_size > 0 && (size_t)c[0].comm_size == n)
		a->complete++;
	if (linked >= 2) {
		a->paired++;
		a->decisive += sub(lks, sks) > a->tie;
	}
	for (size_t k = 0; k < n; k++) {
		struct rk *r = &a->r[c[k].trace];
		if (!c[k].ke)
			continue;
		uint64_t dur = c[k].ke > c[k].ks ? c[k].ke - c[k].ks : 0, wait = 0;
		if (linked >= 2) {
			int64_t d = sub(lks, sub((int64_t)c[k].ks, r->off));
			wait = d <= 0 ? 0 : (uint64_t)d > dur ? dur : (uint64_t)d;
			r->decisive += sub(lks, sks) > a->tie;
			r->last_gpu += k == last && sub(lks, sks) > a->tie;
			c[k].wait = wait;
			c[k].paired = 1;
			a->wl = sp_xgrow(a->wl, &a->wlcap, sizeof(*a->wl), a->nwl);
			a->wl[a->nwl++] = (struct wl){ r->rank >= 0 ? r->rank : r->pid, c[k].ks_mono, wait };
		}
		if (c[k].step < 0)
			continue;
		r->wait[c[k].step] += wait;
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
			uint64_t by[M__N] = { sp_step_ns(x), comp,       k->exposed[i], k->wait[i],
					      x->stall,      x->copy_ns, k->xfer[i],    x->nccl_ns };
			v[i] = by[q];
		}
		k->med[q] = sp_median_u64(v, k->st.n);
	}
	free(v);
}

/* The median over the traces other than skip (-1: all) of their median q. */
static uint64_t others(const struct sp_xrank *a, int skip, int q)
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

static const char *ms(char *buf, int64_t ns)
{
	char t[32];
	if (ns < 0)
		snprintf(buf, 40, "-%s", sp_fmt_ns(t, sizeof(t), 0 - (uint64_t)ns));
	else
		snprintf(buf, 40, "%s", sp_fmt_ns(t, sizeof(t), (uint64_t)ns));
	return buf;
}

/* Names the straggler and its cause, or says why there is none, in a->verdict. */
static void judge(struct sp_xrank *a)
{
	char l[24], b[6][40];
	int subset = a->world > 0 && (size_t)a->world > a->n;

	for (size_t i = 0; i < a->n; i++) {
		double s = share(&a->r[i]);
		if (a->most < 0 || s > a->share || (s == a->share && a->r[i].last_gpu > a->r[a->most].last_gpu)) {
			a->most = (int)i;
			a->share = s;
		}
	}
	for (size_t i = 0; i < a->n; i++)
		if ((int)i != a->most && share(&a->r[i]) > a->second)
			a->second = share(&a->r[i]);
	if (a->n < 2) {
		snprintf(a->verdict, sizeof(a->verdict),
			 "One trace: a straggler needs two or more ranks' traces of one run.");
		return;
	}
	if (!a->paired) {
		snprintf(a->verdict, sizeof(a->verdict),
			 "No straggler can be named: no collective (same communicator "
			 "and sequence number, NCCL kernel recorded) is in two or more traces.");
		return;
	}
	struct rk *m = &a->r[a->most];
	a->wait_others = others(a, a->most, M_WAIT);
	a->wait_share = a->step_med ? (double)a->wait_others / (double)a->step_med : 0.0;
	label(a, (size_t)a->most, l, sizeof(l));
	int late = m->decisive && a->share >= LATE_SHARE && a->share >= LATE_RATIO * a->second;
	int costly = a->wait_others >= WAIT_MIN_NS && (double)a->wait_others >= WAIT_FRAC * (double)a->step_med;
	uint64_t xfer = others(a, -1, M_XFER);
	if (subset && (!late || !costly) && xfer >= WAIT_MIN_NS && (double)xfer >= WAIT_FRAC * (double)a->step_med) {
		a->untraced_later = 1;
		snprintf(a->verdict, sizeof(a->verdict),
			 "No straggler among the %zu traced ranks (of %d): they reach their collectives together, but "
			 "then spend a median %s per step inside NCCL kernels (%.0f%% of a %s step). Either the "
			 "transfers "
			 "are that slow or, more likely, they all wait for a rank that was not traced. Trace every "
			 "rank "
			 "(ranks = all) to tell.",
			 a->n, a->world, ms(b[0], (int64_t)xfer), 100.0 * (double)xfer / (double)a->step_med,
			 ms(b[1], (int64_t)a->step_med));
		return;
	}
	if (!a->decisive) {
		snprintf(a->verdict, sizeof(a->verdict),
			 "No straggler: in each of the %llu paired collectives the ranks arrive within %s of each "
			 "other.",
			 (unsigned long long)a->paired, ms(b[0], a->tie));
		return;
	}
	if (!late || !costly) {
		snprintf(a->verdict, sizeof(a->verdict),
			 "No straggler: %s (rank %s arrives last most often, in %.0f%% of its %llu collectives with a "
			 "clear "
			 "last arrival; the next rank in %.0f%%), and the other ranks wait a median %s per step for it "
			 "(%.1f%% of a %s step).",
			 !late ? "no rank arrives last consistently" : "the waiting is too short to matter", l,
			 100 * a->share, (unsigned long long)m->decisive, 100 * a->second,
			 ms(b[0], (int64_t)a->wait_others),
			 a->step_med ? 100.0 * (double)a->wait_others / (double)a->step_med : 0.0,
			 ms(b[1], (int64_t)a->step_med));
		if (subset)
			note(a,
			     "Only %zu of %d ranks were traced: a rank that was not traced may still be late; the "
			     "waits here are the traced ranks' waits for each other (lower bounds).",
			     a->n, a->world);
		return;
	}
	static const int q[3] = { M_STALL, M_COMPUTE, M_XFER };
	for (int i = 0; i < 3; i++) {
		a->peer[i] = others(a, a->most, q[i]);
		a->excess[i] = sub((int64_t)m->med[q[i]], (int64_t)a->peer[i]);
		if (!i || a->excess[i] > a->excess[a->cause])
			a->cause = i;
	}
	a->explained = a->excess[a->cause] > 0 && (uint64_t)a->excess[a->cause] * 4 >= a->wait_others;
	uint64_t peer_nccl = others(a, a->most, M_NCCL);
	if (subset && m->med[M_NCCL] * 2 >= peer_nccl) {
		/* its own NCCL kernels run as long as the others': it waits too, for someone not traced */
		a->untraced_later = 1;
		snprintf(a->verdict, sizeof(a->verdict),
			 "No straggler among the %zu traced ranks (of %d): rank %s arrives last of them in %.0f%% of "
			 "the "
			 "collectives, but its own NCCL kernels run about as long (median %s per step) as the others' "
			 "(%s): it waits too, most likely for a rank that was not traced. Trace every rank (ranks = "
			 "all) "
			 "to name it.",
			 a->n, a->world, l, 100 * a->share, ms(b[0], (int64_t)m->med[M_NCCL]),
			 ms(b[1], (int64_t)peer_nccl));
		return;
	}
	a->straggler = a->most;
	int n = snprintf(
		a->verdict, sizeof(a->verdict),
		"Straggler: rank %s. It arrives last in %.0f%% of its %llu collectives with a clear last arrival "
		"(the next rank in %.0f%%), and the other ranks wait for it a median %s per step (%.0f%% of a %s "
		"step). ",
		l, 100 * a->share, (unsigned long long)m->decisive, 100 * a->second, ms(b[0], (int64_t)a->wait_others),
		a->step_med ? 100.0 * (double)a->wait_others / (double)a->step_med : 0.0,
		ms(b[1], (int64_t)a->step_med));
	size_t o = n > 0 && (size_t)n < sizeof(a->verdict) ? (size_t)n : sizeof(a->verdict) - 1;
	switch (a->cause) {
	case CAUSE_HOST:
		snprintf(a->verdict + o, sizeof(a->verdict) - o,
			 "Cause: host. Its GPU sits idle a median %s per step waiting for its CPU to launch work (the "
			 "others: %s), while its compute and transfers per step are close to theirs (differences: "
			 "compute %s, transfers %s): look at what rank %s's CPU does before its steps (data loading, "
			 "Python, synchronisation, logging).",
			 ms(b[2], (int64_t)m->med[M_STALL]), ms(b[3], (int64_t)a->peer[0]), ms(b[4], a->excess[1]),
			 ms(b[5], a->excess[2]), l);
		break;
	case CAUSE_COMPUTE:
		snprintf(a->verdict + o, sizeof(a->verdict) - o,
			 "Cause: compute. Its GPU runs a median %s of non-NCCL kernels per step against the others' %s "
			 "(%s more): it has more work (a larger batch or shard, uneven layers) or a slower GPU.",
			 ms(b[2], (int64_t)m->med[M_COMPUTE]), ms(b[3], (int64_t)a->peer[1]), ms(b[4], a->excess[1]));
		break;
	default:
		snprintf(a->verdict + o, sizeof(a->verdict) - o,
			 "Cause: communication. Its own transfers take a median %s per step against the others' %s "
			 "(%s more): check its links (NVLink, PCIe, network) and NCCL settings.",
			 ms(b[2], (int64_t)m->med[M_XFER]), ms(b[3], (int64_t)a->peer[2]), ms(b[4], a->excess[2]));
	}
	a->marginal = (double)a->wait_others < CLEAR_MARGIN * WAIT_MIN_NS || a->wait_share < CLEAR_MARGIN * WAIT_FRAC;
	if (a->marginal)
		note(a,
		     "Marginal: the other ranks' wait for rank %s (%.1f%% of a step, %s) is close to what this verdict "
		     "needs (%.0f%% of a step and %s); ranks of one program differ this much when their hosts' CPUs "
		     "run at different speeds. Record more steps before acting on it.",
		     l, 100 * a->wait_share, ms(b[0], (int64_t)a->wait_others), 100 * WAIT_FRAC, ms(b[1], WAIT_MIN_NS));
	if (!a->explained)
		note(a,
		     "Unsure of the cause: rank %s's largest excess over the others (%s: %s per step) explains "
		     "less than a quarter of the wait it causes; its lateness may come from what this trace does not "
		     "record (CPU work inside kernels' launch path, another process on its GPU).",
		     l, cause_names[a->cause], ms(b[0], a->excess[a->cause]));
	if (subset)
		note(a,
		     "Only %zu of %d ranks were traced. Rank %s's own NCCL kernels are short (median %s per step "
		     "against the others' %s): it waits for no one traced and likely for no one at all, so it is "
		     "probably the last of all ranks; a rank that was not traced could still be as late.",
		     a->n, a->world, l, ms(b[0], (int64_t)m->med[M_NCCL]), ms(b[1], (int64_t)peer_nccl));
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

void sp_xrank_analyse(struct sp_xrank *a)
{
	char l[24], b[2][40];

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
		if (!k->wait || !k->xfer || !k->exposed)
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
	a->step_med = others(a, -1, M_STEP);
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
	size_t moved = 0, unplaced = 0;
	char ref[24];
	label(a, a->order[0], ref, sizeof(ref));
	for (size_t q = 0; q < a->n; q++) {
		size_t i = a->order[q];
		const struct rk *k = &a->r[i];
		moved += k->clock == CLK_COLLECTIVES;
		unplaced += k->clock == CLK_NONE && a->n > 1;
		if (k->clock == CLK_COLLECTIVES && moved <= 4)
			note(a,
			     "Clock: rank %s %s rank %s's (the reference): placed by its collectives' ends, moved "
			     "%s from its wall-clock anchors (median deviation %s over %zu collectives).",
			     label(a, i, l, sizeof(l)),
			     strcmp(k->host, a->r[a->order[0]].host) ? "is on another host than"
								     : "shares a host but its anchors disagree with",
			     ref, ms(b[0], -k->off), ms(b[1], k->spread), k->nest);
	}
	if (moved > 4)
		note(a, "Clock: %zu ranks in all were placed by their collectives' ends rather than their anchors.",
		     moved);
	if (unplaced)
		note(a,
		     "Clock: %zu traces share fewer than %d collectives with the others: their wall-clock anchors "
		     "are used as they are (arrivals are as good as the hosts' clock sync).",
		     unplaced, MIN_COLLS);
	uint64_t unlinked = 0;
	for (size_t i = 0; i < a->n; i++)
		unlinked += a->r[i].unlinked;
	if (unlinked)
		note(a,
		     "%llu NCCL calls had no kernel recorded (dropped records, or CUDA graphs): their arrivals are "
		     "not counted.",
		     (unsigned long long)unlinked);
	judge(a);
}

void sp_xrank_free(struct sp_xrank *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n; i++) {
		struct rk *k = &a->r[i];
		sp_steps_free(&k->st);
		free(k->comp);
		free(k->path);
		free(k->wait);
		free(k->xfer);
		free(k->exposed);
	}
	free(a->r);
	free(a->c);
	free(a->order);
	free(a->ranks);
	free(a->wl);
	free(a);
}
