/* SPDX-License-Identifier: MIT */
/* opattr.c - GPU records to torch operators and modules, per window (see opattr.h). */
#include <stdlib.h>
#include <string.h>
#include "opattr.h"

#define EVAL_FN "autograd::engine::evaluate_function: " /* torch's range around each backward node */

static int cmp_range(const void *pa, const void *pb)
{
	const struct sp_event *a = ((const struct sp_orange *)pa)->e, *b = ((const struct sp_orange *)pb)->e;
	if (a->tid != b->tid)
		return sp_cmp_u64(a->tid, b->tid);
	if (a->start != b->start)
		return sp_cmp_u64(a->start, b->start);
	return sp_cmp_u64(b->end, a->end); /* the enclosing one first */
}

/* Sorts the n ranges of v and links each to its parent (ranges of one thread nest). */
static void nest(struct sp_orange *v, size_t n)
{
	int32_t *stack = NULL;
	size_t depth = 0, cap = 0;
	sp_sort(v, n, sizeof *v, cmp_range);
	for (size_t i = 0; i < n; i++) {
		while (depth && (v[stack[depth - 1]].e->tid != v[i].e->tid || v[stack[depth - 1]].e->end < v[i].e->end))
			depth--;
		v[i].parent = depth ? stack[depth - 1] : -1;
		v[i].module = v[i].node = -1;
		stack = sp_xgrow(stack, &cap, sizeof *stack, depth);
		stack[depth++] = (int32_t)i;
	}
	free(stack);
}

/* The innermost range of v (n, nested) on thread tid around time t, -1 none. */
static int innermost(const struct sp_orange *v, size_t n, uint32_t tid, uint64_t t)
{
	size_t lo = 0, hi = n; /* the first range after (tid, t) */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct sp_event *e = v[mid].e;
		if (e->tid < tid || (e->tid == tid && e->start <= t))
			lo = mid + 1;
		else
			hi = mid;
	}
	int i = (int)lo - 1;
	if (i < 0 || v[i].e->tid != tid)
		return -1;
	while (i >= 0 && v[i].e->end < t)
		i = v[i].parent;
	return i;
}

static size_t hash32(uint64_t v, size_t cap)
{
	return (size_t)((v * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

/* Puts launching call (corr, tid, t) in a's table, keeping the outermost (earliest) call of an
 * id; the table grows to stay at most half full. */
static void call_put(struct sp_opattr *a, uint32_t corr, uint32_t tid, uint64_t t)
{
	if (2 * (a->ncalls + 1) > a->calls_cap) {
		struct call *old = a->calls;
		size_t old_cap = a->calls_cap;
		a->calls_cap = old_cap ? 2 * old_cap : 1024;
		a->calls = sp_xrealloc(NULL, a->calls_cap * sizeof *a->calls);
		memset(a->calls, 0, a->calls_cap * sizeof *a->calls);
		a->ncalls = 0;
		for (size_t i = 0; i < old_cap; i++)
			if (old[i].corr)
				call_put(a, old[i].corr, old[i].tid, old[i].t);
		free(old);
	}
	size_t h = hash32(corr, a->calls_cap);
	while (a->calls[h].corr && a->calls[h].corr != corr)
		h = (h + 1) & (a->calls_cap - 1);
	if (!a->calls[h].corr)
		a->ncalls++;
	if (!a->calls[h].corr || t < a->calls[h].t)
		a->calls[h] = (struct call){ corr, tid, t };
}

static const struct call *call_of(const struct sp_opattr *a, uint32_t corr)
{
	if (!corr || !a->calls_cap)
		return NULL;
	for (size_t h = hash32(corr, a->calls_cap); a->calls[h].corr; h = (h + 1) & (a->calls_cap - 1))
		if (a->calls[h].corr == corr)
			return &a->calls[h];
	return NULL;
}

/* Forward op i with sequence number seq in module (0 none): the seq keeps its first op and the
 * module of its last op in one (the table has room: seq_reserve). */
static void seq_put(struct sp_opattr *a, int64_t seq, uint32_t module, int32_t i)
{
	size_t h = hash32((uint64_t)seq, a->seqs_cap);
	while (a->seqs[h].used && a->seqs[h].seq != seq)
		h = (h + 1) & (a->seqs_cap - 1);
	if (!a->seqs[h].used)
		a->seqs[h] = (struct seqmod){ seq, module, i, 1 };
	else if (module)
		a->seqs[h].module = module;
}

static const struct seqmod *seq_get(const struct sp_opattr *a, int64_t seq)
{
	if (!a->seqs_cap)
		return NULL;
	for (size_t h = hash32((uint64_t)seq, a->seqs_cap); a->seqs[h].used; h = (h + 1) & (a->seqs_cap - 1))
		if (a->seqs[h].seq == seq)
			return &a->seqs[h];
	return NULL;
}

/* Grows the seq table so that n more entries keep it at most half full. */
static void seq_reserve(struct sp_opattr *a, size_t n)
{
	size_t cap = 1024;
	while (cap < 2 * n)
		cap <<= 1;
	if (cap > a->seqs_cap) {
		free(a->seqs);
		a->seqs = sp_xrealloc(NULL, cap * sizeof *a->seqs);
		a->seqs_cap = cap;
	}
	memset(a->seqs, 0, a->seqs_cap * sizeof *a->seqs);
}

/* Backward nodes, each op's module, and the forward ops' seq -> module map. */
static void link(struct sp_opattr *a, const struct sp_trace_reader *r)
{
	size_t nseq = 0;
	for (size_t i = 0; i < a->nop; i++) {
		struct sp_orange *o = &a->op[i];
		const char *pn = o->parent >= 0 ? sp_trace_string(r, a->op[o->parent].e->name) : NULL;
		if (pn && !strncmp(pn, EVAL_FN, sizeof EVAL_FN - 1) && (o->e->u.marker.flags & SP_MARKF_SEQ))
			o->node = (int32_t)i;
		else if (o->parent >= 0)
			o->node = a->op[o->parent].node;
		o->module = innermost(a->mod, a->nmod, o->e->tid, o->e->start);
		nseq += o->node < 0 && (o->e->u.marker.flags & SP_MARKF_SEQ);
	}
	seq_reserve(a, nseq);
	for (size_t i = 0; i < a->nop; i++) {
		const struct sp_orange *o = &a->op[i];
		if (o->node < 0 && (o->e->u.marker.flags & SP_MARKF_SEQ))
			seq_put(a, o->e->u.marker.seq, o->module >= 0 ? a->mod[o->module].e->name : 0, (int32_t)i);
	}
}

/* The first pass's callback: copies of the window's op and module ranges. */
static void collect_ranges(void *ctx, const struct sp_event *e)
{
	struct sp_opattr *a = ctx;
	if (e->kind != SP_EV_MARKER || e->end < e->start)
		return;
	if (e->u.marker.flags & SP_MARKF_OP) {
		a->opev = sp_xgrow(a->opev, &a->opev_cap, sizeof *a->opev, a->nop);
		a->opev[a->nop++] = *e;
	} else if (e->u.marker.flags & SP_MARKF_MODULE) {
		a->modev = sp_xgrow(a->modev, &a->modev_cap, sizeof *a->modev, a->nmod);
		a->modev[a->nmod++] = *e;
	}
}

/* The second pass's callback: the launching calls inside an op or a module range (a call outside
 * every range belongs to no op and no module: not kept). */
static void collect_calls(void *ctx, const struct sp_event *e)
{
	struct sp_opattr *a = ctx;
	if (e->kind == SP_EV_API && e->corr &&
	    (innermost(a->op, a->nop, e->tid, e->start) >= 0 || innermost(a->mod, a->nmod, e->tid, e->start) >= 0))
		call_put(a, e->corr, e->tid, e->start);
}

/* Points the n ranges of v at their copies ev (after the pass: ev no longer moves). */
static struct sp_orange *ranges(struct sp_orange *v, size_t *cap, const struct sp_event *ev, size_t n)
{
	v = sp_xgrow(v, cap, sizeof *v, n);
	for (size_t i = 0; i < n; i++)
		v[i].e = &ev[i];
	return v;
}

void sp_opattr_build(struct sp_opattr *a, const struct sp_trace_reader *r, struct sp_windows *g)
{
	a->nop = a->nmod = a->ncalls = 0;
	if (a->calls)
		memset(a->calls, 0, a->calls_cap * sizeof *a->calls);
	sp_windows_each(g, collect_ranges, a);
	a->op = ranges(a->op, &a->op_cap, a->opev, a->nop);
	a->mod = ranges(a->mod, &a->mod_cap, a->modev, a->nmod);
	nest(a->op, a->nop);
	nest(a->mod, a->nmod);
	if (a->nop || a->nmod)
		sp_windows_each(g, collect_calls, a);
	link(a, r);
}

int sp_opattr_op_at(const struct sp_opattr *a, uint32_t tid, uint64_t t)
{
	return innermost(a->op, a->nop, tid, t);
}

int sp_opattr_op_of(const struct sp_opattr *a, uint32_t corr)
{
	const struct call *c = call_of(a, corr);
	return c ? innermost(a->op, a->nop, c->tid, c->t) : -1;
}

uint32_t sp_opattr_module_of(const struct sp_opattr *a, uint32_t corr, int *backward)
{
	const struct call *c = call_of(a, corr);
	*backward = 0;
	if (!c)
		return 0;
	int m = innermost(a->mod, a->nmod, c->tid, c->t);
	if (m >= 0)
		return a->mod[m].e->name;
	int op = innermost(a->op, a->nop, c->tid, c->t), node = op >= 0 ? a->op[op].node : -1;
	const struct seqmod *sm = node >= 0 ? seq_get(a, a->op[node].e->u.marker.seq) : NULL;
	*backward = sm && sm->module;
	return sm ? sm->module : 0;
}

/* 1 if op range x is a copy of record e (a pass hands out each record once). */
static int same_range(const struct sp_event *x, const struct sp_event *e)
{
	return x->tid == e->tid && x->start == e->start && x->end == e->end && x->name == e->name &&
	       x->u.marker.seq == e->u.marker.seq && x->u.marker.depth == e->u.marker.depth &&
	       x->u.marker.shapes == e->u.marker.shapes;
}

int sp_opattr_index(const struct sp_opattr *a, const struct sp_event *e)
{
	int i = innermost(a->op, a->nop, e->tid, e->start);
	for (; i >= 0; i = a->op[i].parent) /* e is i or one of its parents (a child starts no earlier) */
		if (same_range(a->op[i].e, e))
			return i;
	for (size_t k = 0; k < a->nop; k++) /* ranges of equal start and end: any order */
		if (same_range(a->op[k].e, e))
			return (int)k;
	return -1;
}

int sp_opattr_fwd_of(const struct sp_opattr *a, int i)
{
	if (i < 0 || (size_t)i >= a->nop || a->op[i].node != i)
		return -1;
	const struct seqmod *sm = seq_get(a, a->op[i].e->u.marker.seq);
	return sm ? sm->fwd : -1;
}

void sp_opattr_free(struct sp_opattr *a)
{
	free(a->op);
	free(a->mod);
	free(a->opev);
	free(a->modev);
	free(a->calls);
	free(a->seqs);
	memset(a, 0, sizeof *a);
}
