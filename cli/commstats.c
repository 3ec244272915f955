/* SPDX-License-Identifier: MIT */
/* commstats.c - NCCL statistics of the offline CLI (see commstats.h): kernel names, bus bandwidth, the
 * call-to-kernel links and group sharing behind the report's NCCL table, and the cross-rank
 * pairing of collectives by (communicator, sequence number) for the merged timeline. Memory is
 * per window: scratch arrays for the window being folded in or matched, freed or reused after. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commstats.h"

struct call {     /* an NCCL call of the window being folded in */
	const struct sp_event *e;
	uint64_t ns;            /* linked kernel time */
	uint64_t ks, ke;        /* first start and last end of its linked kernels (its group's) */
	uint32_t kernels;       /* linked kernels */
	int algo;               /* code of its kernels, SP_NCCL_ALGO_MIXED if they differ */
	int shared;             /* 1: shares its group's kernels with an earlier member */
};

struct member {   /* one call of a round of the cross-rank match */
	uint64_t comm, seq;
	uint64_t start;         /* on its trace's clock */
	uint64_t wall;
	int64_t key;            /* rank (or pid) of its trace */
	int32_t comm_rank;
	uint32_t run;           /* index of its collective in runs (after build) */
};

struct run {      /* one collective of a round */
	uint32_t first, n;      /* members[first .. first + n) */
	uint64_t first_wall, last_wall;
	int64_t last_key;
	uint64_t number;        /* collectives numbered across rounds: flow ids stay unique */
};

struct sp_nccl_match {
	struct member *m;
	size_t n, cap;
	struct run *runs;
	size_t nruns, runs_cap;
	uint64_t numbered;      /* collectives numbered in earlier rounds */
	uint64_t paired;        /* collectives with two or more calls, all rounds */
};

static const char *const algos[] = {
	NULL, "RING", "TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"
};
static const char *const protos[] = { NULL, "LL", "LL128", "SIMPLE" };
#define NALGOS ((int)(sizeof(algos) / sizeof(algos[0])))
#define NPROTOS ((int)(sizeof(protos) / sizeof(protos[0])))

/* Index of the longest entry of t (1..n-1) spelled by the tokens at p, which end at end; 0 if none. */
static int match_token(const char *p, const char *end, const char *const *t, int n)
{
	int best = 0;
	size_t blen = 0;

	for (int i = 1; i < n; i++) {
		size_t l = strlen(t[i]);
		if (l > blen && (size_t)(end - p) >= l && !strncmp(p, t[i], l) && (p + l == end || p[l] == '_'))
			best = i, blen = l;
	}
	return best;
}

/* 1 for ncclGroupStart and ncclGroupEnd: markers, not transfers. */
static int is_group_call(const struct sp_event *e)
{
	return e->sub == SP_NCCL_GROUP_START || e->sub == SP_NCCL_GROUP_END;
}

/* The code of a call or row that had code have and gains a kernel of code (first: it had none). */
static int merge_algo(int have, int code, int first)
{
	return first || have == code ? code : SP_NCCL_ALGO_MIXED;
}

/* Calls by (thread, start), then file order (their place in the window's nccl list). */
static int cmp_call(const void *pa, const void *pb)
{
	const struct sp_event *a = *(const struct sp_event *const *)pa, *b = *(const struct sp_event *const *)pb;
	int d = sp_cmp_u64(a->tid, b->tid);
	d = d ? d : sp_cmp_u64(a->start, b->start);
	return d ? d : (a > b) - (a < b);
}

/* The index of the call of calls (sorted by thread, start) enclosing time t on thread tid, or -1. */
static long enclosing(const struct sp_event *const *calls, size_t n, uint32_t tid, uint64_t t)
{
	size_t lo = 0, hi = n; /* first call after (tid, t) */

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (calls[mid]->tid < tid || (calls[mid]->tid == tid && calls[mid]->start <= t))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || calls[lo - 1]->tid != tid || calls[lo - 1]->end < t)
		return -1;
	return (long)lo - 1;
}

static size_t launch_slot(const struct sp_nccl_win *x, uint32_t corr)
{
	size_t h = (corr * 2654435761u) & (x->launch.cap - 1);
	while (x->launch.key[h] && x->launch.key[h] != corr)
		h = (h + 1) & (x->launch.cap - 1);
	return h;
}

/* The index of the call that launched corr, or -1. Can't fail. */
static long launch_get(const struct sp_nccl_win *x, uint32_t corr)
{
	if (!x->launch.n)
		return -1;
	size_t h = launch_slot(x, corr);
	return x->launch.key[h] ? (long)x->launch.call[h] : -1;
}

/* Records that call (an index in calls) launched corr (not 0) unless one did already. Exits if
 * memory runs out. */
static void launch_put(struct sp_nccl_win *x, uint32_t corr, uint32_t call)
{
	if (2 * (x->launch.n + 1) > x->launch.cap) {
		struct sp_nccl_win old = *x;
		x->launch.cap = old.launch.cap ? 2 * old.launch.cap : 256;
		x->launch.key = calloc(x->launch.cap, sizeof(*x->launch.key));
		x->launch.call = calloc(x->launch.cap, sizeof(*x->launch.call));
		if (!x->launch.key || !x->launch.call)
			sp_oom();
		for (size_t i = 0; i < old.launch.cap; i++)
			if (old.launch.key[i]) {
				size_t h = launch_slot(x, old.launch.key[i]);
				x->launch.key[h] = old.launch.key[i];
				x->launch.call[h] = old.launch.call[i];
			}
		free(old.launch.key);
		free(old.launch.call);
	}
	size_t h = launch_slot(x, corr);
	if (x->launch.key[h])
		return;
	x->launch.key[h] = corr;
	x->launch.call[h] = call;
	x->launch.n++;
}

/* Shares the kernel time of group end g among the calls members[0..n) by bytes. Can't fail. */
static void share_group(const struct call *g, struct call **members, size_t n)
{
	uint64_t total = 0, given = 0;

	for (size_t i = 0; i < n; i++)
		total += members[i]->e->u.nccl.bytes;
	for (size_t i = 0; i < n; i++) {
		uint64_t part =
			total ? (uint64_t)((unsigned __int128)g->ns * members[i]->e->u.nccl.bytes / total) : g->ns / n;
		members[i]->ns = i + 1 == n ? g->ns - given : part; /* the last takes the rounding */
		members[i]->kernels = g->kernels;
		members[i]->algo = g->algo;
		members[i]->ks = g->ks;
		members[i]->ke = g->ke;
		members[i]->shared = i > 0;
		given += part;
	}
}

static int cmp_row(const struct sp_nccl_row *a, const struct sp_nccl_row *b)
{
	int d = (a->op > b->op) - (a->op < b->op);
	d = d ? d : (a->nranks > b->nranks) - (a->nranks < b->nranks);
	d = d ? d : sp_cmp_u64(a->bytes, b->bytes);
	return d ? d : a->cpu_timed - b->cpu_timed;
}

/* Adds one call to its row (inserted in key order if new). Exits if memory runs out. */
static void add_call(struct sp_nccl_stats *s, const struct call *c)
{
	const struct sp_event *e = c->e;
	struct sp_nccl_row key = { .op = e->sub,
				   .cpu_timed = !c->kernels,
				   .nranks = e->u.nccl.comm_size,
				   .bytes = e->u.nccl.bytes };
	size_t lo = 0, hi = s->n;
	struct sp_nccl_row *row;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cmp_row(&s->row[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == s->n || cmp_row(&s->row[lo], &key)) {
		s->row = sp_xrealloc(s->row, (s->n + 1) * sizeof(*s->row));
		memmove(&s->row[lo + 1], &s->row[lo], (s->n - lo) * sizeof(*s->row));
		s->row[lo] = key;
		s->n++;
	}
	row = &s->row[lo];
	row->algo = (int16_t)merge_algo(row->algo, c->kernels ? c->algo : 0, !row->calls);
	row->calls++;
	row->ns += c->kernels ? c->ns : e->end > e->start ? e->end - e->start : 0;
}

static int cmp_member(const void *pa, const void *pb)
{
	const struct member *a = pa, *b = pb;
	int d = sp_cmp_u64(a->comm, b->comm);
	d = d ? d : sp_cmp_u64(a->seq, b->seq);
	d = d ? d : (a->key > b->key) - (a->key < b->key);
	d = d ? d : (a->comm_rank > b->comm_rank) - (a->comm_rank < b->comm_rank);
	return d ? d : sp_cmp_u64(a->start, b->start);
}

/* ---- names and formulas ---- */

/* The plain function name inside an Itanium-mangled one ("_Z38ncclDevKernel_AllReduce_..." as
 * CUPTI reports NCCL's kernels), with its length in *len; other names are returned whole. */
static const char *plain_name(const char *name, size_t *len)
{
	char *digits_end;
	if (name[0] == '_' && name[1] == 'Z' && name[2] >= '1' && name[2] <= '9') {
		unsigned long n = strtoul(name + 2, &digits_end, 10);
		if (n && strlen(digits_end) >= n) {
			*len = n;
			return digits_end;
		}
	}
	*len = strcspn(name, "(<");
	return name;
}

int sp_nccl_is_kernel(const char *name)
{
	size_t n;
	const char *p = plain_name(name, &n);
	return (n >= 14 && !strncmp(p, "ncclDevKernel_", 14)) || (n >= 11 && !strncmp(p, "ncclKernel_", 11));
}

int sp_nccl_algo(const char *kernel)
{
	size_t len;
	const char *p = plain_name(kernel, &len), *end = p + len;
	int algo = 0, proto = 0;

	while (p < end) {
		algo = algo ? algo : match_token(p, end, algos, NALGOS);
		proto = proto ? proto : match_token(p, end, protos, NPROTOS);
		p = memchr(p, '_', (size_t)(end - p));
		if (!p)
			break;
		p++;
	}
	return algo * NPROTOS + proto;
}

const char *sp_nccl_algo_name(int code, char *buf, size_t n)
{
	if (code == SP_NCCL_ALGO_MIXED)
		snprintf(buf, n, "mixed");
	else if (code <= 0 || code >= NALGOS * NPROTOS)
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%s/%s", code / NPROTOS ? algos[code / NPROTOS] : "-",
			 code % NPROTOS ? protos[code % NPROTOS] : "-");
	return buf;
}

uint64_t sp_nccl_size(int op, uint64_t bytes, int nranks)
{
	if (op == SP_NCCL_ALLGATHER || op == SP_NCCL_REDUCESCATTER || op == SP_NCCL_ALLTOALL)
		return nranks > 0 ? bytes * (uint64_t)nranks : 0;
	return bytes;
}

double sp_nccl_bus_factor(int op, int nranks)
{
	switch (op) {
	case SP_NCCL_ALLREDUCE:
		return nranks > 0 ? 2.0 * (nranks - 1) / nranks : -1;
	case SP_NCCL_ALLGATHER:
	case SP_NCCL_REDUCESCATTER:
	case SP_NCCL_ALLTOALL:
		return nranks > 0 ? (double)(nranks - 1) / nranks : -1;
	case SP_NCCL_BROADCAST:
	case SP_NCCL_REDUCE:
	case SP_NCCL_SEND:
	case SP_NCCL_RECV:
		return 1;
	}
	return -1;
}

/* ---- the report's table ---- */

void sp_nccl_win_begin(struct sp_nccl_win *x, const struct sp_window *w)
{
	x->w = w;
	x->ncalls = x->nk = 0;
	if (x->launch.n)
		memset(x->launch.key, 0, x->launch.cap * sizeof(*x->launch.key));
	x->launch.n = 0;
	if (x->is_nccl_cap)
		memset(x->is_nccl, 0, x->is_nccl_cap);
	for (size_t i = 0; i < w->nnccl; i++) {
		x->calls = sp_xgrow(x->calls, &x->calls_cap, sizeof(*x->calls), x->ncalls);
		x->calls[x->ncalls++] = &w->nccl[i];
	}
	sp_sort(x->calls, x->ncalls, sizeof(*x->calls), cmp_call);
}

void sp_nccl_win_event(struct sp_nccl_win *x, struct sp_trace_reader *r, const struct sp_event *e)
{
	if ((e->kind == SP_EV_NCCL || e->kind == SP_EV_API) && e->corr) {
		long c = enclosing(x->calls, x->ncalls, e->tid, e->start);
		if (c >= 0)
			launch_put(x, e->corr, (uint32_t)c);
	} else if (e->kind == SP_EV_KERNEL) {
		uint32_t id = sp_trace_string_index(r, e->name); /* dense: the cache is as small as the file */
		x->is_nccl = sp_xgrow(x->is_nccl, &x->is_nccl_cap, 1, id);
		if (!x->is_nccl[id])
			x->is_nccl[id] = sp_nccl_is_kernel(sp_trace_string(r, e->name)) ? 2 : 1;
		if (x->is_nccl[id] == 2) {
			x->k = sp_xgrow(x->k, &x->k_cap, sizeof(*x->k), x->nk);
			x->k[x->nk++] = (struct sp_nccl_kernel){ e->corr, e->name, e->start, e->end };
		}
	}
}

void sp_nccl_win_free(struct sp_nccl_win *x)
{
	free(x->calls);
	free(x->k);
	free(x->launch.key);
	free(x->launch.call);
	free(x->is_nccl);
	memset(x, 0, sizeof(*x));
}

/* The NCCL calls of the window x read, sorted by (thread, start), each with its linked kernels
 * (see sp_nccl_stats_add); *n gets their number. Kernels linked to no call are added to *orphans
 * and *orphan_ns. Returns a malloc'ed array. Exits if memory runs out. */
static struct call *link_calls(struct sp_trace_reader *r, const struct sp_nccl_win *x, size_t *n, uint64_t *orphans,
			       uint64_t *orphan_ns)
{
	size_t nc = x->ncalls, np = 0;
	struct call *calls = sp_xrealloc(NULL, (nc + 1) * sizeof(*calls)), **pending;

	pending = sp_xrealloc(NULL, (nc + 1) * sizeof(*pending));
	for (size_t i = 0; i < nc; i++)
		calls[i] = (struct call){ .e = x->calls[i] };
	for (size_t i = 0; i < x->nk; i++) { /* each NCCL kernel to the call that launched it */
		const struct sp_nccl_kernel *k = &x->k[i];
		long at = k->corr ? launch_get(x, k->corr) : -1;
		uint64_t d = k->end > k->start ? k->end - k->start : 0;
		if (at < 0) {
			++*orphans;
			*orphan_ns += d;
			continue;
		}
		struct call *c = &calls[at];
		c->algo = merge_algo(c->algo, sp_nccl_algo(sp_trace_string(r, k->name)), !c->kernels);
		c->ks = !c->kernels || k->start < c->ks ? k->start : c->ks;
		c->ke = !c->kernels || k->end > c->ke ? k->end : c->ke;
		c->kernels++;
		c->ns += d;
	}

	for (size_t i = 0; i < nc; i++) { /* groups: per thread, members wait for the outermost GroupEnd */
		struct call *c = &calls[i];
		int depth = c->e->u.nccl.group_depth;
		if ((i && c->e->tid != calls[i - 1].e->tid) || (c->e->sub == SP_NCCL_GROUP_START && depth == 1))
			np = 0; /* a new thread, or a new outermost group: forget members whose end was not seen */
		if (c->e->sub == SP_NCCL_GROUP_END && !depth) {
			if (np)
				share_group(c, pending, np);
			else if (c->kernels) {
				*orphans += c->kernels;
				*orphan_ns += c->ns;
			}
			np = 0;
		} else if (!is_group_call(c->e) && depth && !c->kernels) {
			pending[np++] = c;
		}
	}
	free(pending);
	*n = nc;
	return calls;
}

void sp_nccl_stats_add(struct sp_nccl_stats *s, struct sp_trace_reader *r, const struct sp_nccl_win *x)
{
	size_t nc;
	struct call *calls = link_calls(r, x, &nc, &s->orphan_kernels, &s->orphan_ns);

	for (size_t i = 0; i < nc; i++)
		if (!is_group_call(calls[i].e))
			add_call(s, &calls[i]);
	free(calls);
}

size_t sp_nccl_links(struct sp_trace_reader *r, const struct sp_nccl_win *x, struct sp_nccl_link **out)
{
	size_t nc, n = 0;
	uint64_t orphans = 0, orphan_ns = 0;
	struct call *calls = link_calls(r, x, &nc, &orphans, &orphan_ns);
	struct sp_nccl_link *l = sp_xrealloc(NULL, (nc + 1) * sizeof(*l));

	for (size_t i = 0; i < nc; i++)
		if (!is_group_call(calls[i].e))
			l[n++] = (struct sp_nccl_link){ .e = calls[i].e,
							.ks = calls[i].ks,
							.ke = calls[i].ke,
							.kernels = calls[i].kernels,
							.shared = calls[i].shared };
	free(calls);
	*out = l;
	return n;
}

void sp_nccl_stats_free(struct sp_nccl_stats *s)
{
	free(s->row);
	memset(s, 0, sizeof(*s));
}

/* ---- cross-rank pairing ---- */

struct sp_nccl_match *sp_nccl_match_new(void)
{
	struct sp_nccl_match *m = sp_xrealloc(NULL, sizeof(*m));
	memset(m, 0, sizeof(*m));
	return m;
}

void sp_nccl_match_reset(struct sp_nccl_match *m)
{
	m->numbered += m->nruns;
	m->n = m->nruns = 0;
}

void sp_nccl_match_add(struct sp_nccl_match *m, int64_t key, const struct sp_window *w)
{
	for (size_t i = 0; i < w->nnccl; i++) {
		const struct sp_event *e = &w->nccl[i];
		if (e->kind != SP_EV_NCCL || !e->u.nccl.comm || is_group_call(e))
			continue;
		if (m->n == m->cap) {
			m->cap = m->cap ? m->cap * 2 : 256;
			m->m = sp_xrealloc(m->m, m->cap * sizeof(*m->m));
		}
		m->m[m->n++] = (struct member){ .comm = e->u.nccl.comm,
						.seq = e->u.nccl.seq,
						.start = e->start,
						.wall = sp_window_wall(w, e->start),
						.key = key,
						.comm_rank = e->u.nccl.comm_rank };
	}
}

void sp_nccl_match_build(struct sp_nccl_match *m)
{
	size_t out = 0;

	if (m->n)
		sp_sort(m->m, m->n, sizeof(*m->m), cmp_member);
	for (size_t i = 0; i < m->n; i++) { /* one call per (comm, seq, trace, comm rank): the first */
		const struct member *a = &m->m[i], *b = out ? &m->m[out - 1] : NULL;
		if (b && a->comm == b->comm && a->seq == b->seq && a->key == b->key && a->comm_rank == b->comm_rank)
			continue;
		m->m[out++] = m->m[i];
	}
	m->n = out;
	for (size_t i = 0; i < m->n; i++) {
		struct member *c = &m->m[i];
		struct run *r = m->nruns ? &m->runs[m->nruns - 1] : NULL;
		if (!r || c->comm != m->m[r->first].comm || c->seq != m->m[r->first].seq) {
			if (r && r->n > 1)
				m->paired++;
			if (m->nruns == m->runs_cap) {
				m->runs_cap = m->runs_cap ? m->runs_cap * 2 : 64;
				m->runs = sp_xrealloc(m->runs, m->runs_cap * sizeof(*m->runs));
			}
			r = &m->runs[m->nruns];
			*r = (struct run){ .first = (uint32_t)i,
					   .first_wall = c->wall,
					   .last_wall = c->wall,
					   .last_key = c->key,
					   .number = m->numbered + m->nruns };
			m->nruns++;
		} else if (c->wall > r->last_wall) {
			r->last_wall = c->wall;
			r->last_key = c->key;
		}
		if (c->wall < r->first_wall)
			r->first_wall = c->wall;
		r->n++;
		c->run = (uint32_t)(m->nruns - 1);
	}
	if (m->nruns && m->runs[m->nruns - 1].n > 1)
		m->paired++;
}

int sp_nccl_match_find(const struct sp_nccl_match *m, int64_t trace, const struct sp_event *e, struct sp_nccl_peer *p)
{
	struct member key = { .comm = e->u.nccl.comm,
			      .seq = e->u.nccl.seq,
			      .key = trace,
			      .comm_rank = e->u.nccl.comm_rank,
			      .start = e->start };
	const struct member *c = m->n ? bsearch(&key, m->m, m->n, sizeof(*m->m), cmp_member) : NULL;
	const struct run *r;

	if (!c || e->kind != SP_EV_NCCL)
		return 0;
	r = &m->runs[c->run];
	*p = (struct sp_nccl_peer){ .flow = r->n <= 1u << 16 ? SP_NCCL_FLOW_BASE + (r->number << 16) : 0,
				    .pos = (uint32_t)(c - m->m) - r->first,
				    .n = r->n,
				    .first_wall = r->first_wall,
				    .last_wall = r->last_wall,
				    .wall = c->wall,
				    .last_key = r->last_key };
	return 1;
}

uint64_t sp_nccl_match_paired(const struct sp_nccl_match *m)
{
	return m->paired;
}

void sp_nccl_match_free(struct sp_nccl_match *m)
{
	if (!m)
		return;
	free(m->m);
	free(m->runs);
	free(m);
}
