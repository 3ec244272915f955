/* SPDX-License-Identifier: MIT */
/* report_ops.c - GPU time by torch operator and by nn.Module (see report_ops.h). */
#include <stdlib.h>
#include <string.h>
#include "flops.h"
#include "format.h"
#include "opattr.h"
#include "report_ops.h"

#define NO_OP "(no op)" /* GPU work launched outside any op range */
#define OUTSIDE "(outside modules)"

/* One op row (or one module row: then self is forward, bwd backward). */
struct orow {
	char *name, *shapes;     /* shapes NULL unless grouped by them */
	uint64_t calls, kernels; /* op ranges, GPU records they launched themselves */
	uint64_t self, total;    /* ns: their own GPU records; with the ops they called */
	uint64_t bwd;            /* modules: ns of backward records tied to it by sequence number */
	double flops;            /* with the ops they called (flops.h) */
	uint64_t flop_calls;     /* calls with a FLOP formula whose sizes fit it */
	uint64_t flop_bad;       /* ... whose sizes (or a convolution's parameters) did not */
};

struct table {
	struct orow *row;
	size_t n, cap;
	uint32_t *slot; /* row index + 1 by key hash, 0 empty */
	size_t slots;
};

struct sp_opstats {
	int by_shapes;
	struct table ops, mods;
	uint64_t gpu_ns, gpu_records;    /* every GPU record of the windows */
	uint64_t noop_ns, noop_records;  /* ... launched outside any op */
	uint64_t outside_ns;             /* ... outside any module (and not tied to one by seq) */
	uint64_t op_ranges, mod_ranges;  /* ranges seen */
	uint64_t windows, steps;
	struct sp_opattr a;              /* the window being added */
	uint64_t *self, *total, *kern;   /* per op range of the window */
	double *flops;
	size_t cap;
};

static uint64_t hash_str(const char *a, const char *b)
{
	uint64_t h = 1469598103934665603ull;
	for (; *a; a++)
		h = (h ^ (uint8_t)*a) * 1099511628211ull;
	h = (h ^ 0x1f) * 1099511628211ull;
	for (; b && *b; b++)
		h = (h ^ (uint8_t)*b) * 1099511628211ull;
	return h;
}

static int same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* The row of (name, shapes), made if new. Exits the CLI if memory runs out. */
static struct orow *row_of(struct table *t, const char *name, const char *shapes)
{
	if (2 * (t->n + 1) > t->slots) {
		size_t slots = t->slots ? 2 * t->slots : 256;
		free(t->slot);
		t->slot = sp_xrealloc(NULL, slots * sizeof *t->slot);
		memset(t->slot, 0, slots * sizeof *t->slot);
		t->slots = slots;
		for (size_t i = 0; i < t->n; i++) {
			size_t h = hash_str(t->row[i].name, t->row[i].shapes) & (slots - 1);
			while (t->slot[h])
				h = (h + 1) & (slots - 1);
			t->slot[h] = (uint32_t)i + 1;
		}
	}
	size_t h = hash_str(name, shapes) & (t->slots - 1);
	for (; t->slot[h]; h = (h + 1) & (t->slots - 1)) {
		struct orow *r = &t->row[t->slot[h] - 1];
		if (!strcmp(r->name, name) && same(r->shapes, shapes))
			return r;
	}
	t->row = sp_xgrow(t->row, &t->cap, sizeof *t->row, t->n);
	struct orow *r = &t->row[t->n];
	r->name = sp_xstrdup(name);
	r->shapes = shapes ? sp_xstrdup(shapes) : NULL;
	t->slot[h] = (uint32_t)++t->n;
	return r;
}

struct sp_opstats *sp_opstats_new(int shapes)
{
	struct sp_opstats *s = sp_xrealloc(NULL, sizeof *s);
	memset(s, 0, sizeof *s);
	s->by_shapes = shapes;
	return s;
}

static const char *str(const struct sp_trace_reader *r, uint32_t id, const char *none)
{
	const char *v = id ? sp_trace_string(r, id) : NULL;
	return v ? v : none;
}

struct charge {
	struct sp_opstats *s;
	const struct sp_trace_reader *r;
};

/* The pass's callback: each GPU record of the window to its op and module. */
static void charge_gpu(void *ctx, const struct sp_event *e)
{
	struct sp_opstats *s = ((struct charge *)ctx)->s;
	const struct sp_trace_reader *r = ((struct charge *)ctx)->r;
	if (!sp_ev_is_gpu(e) || e->end < e->start)
		return;
	uint64_t d = e->end - e->start;
	s->gpu_ns += d;
	s->gpu_records++;
	int op = sp_opattr_op_of(&s->a, e->corr), bwd;
	if (op < 0) {
		s->noop_ns += d;
		s->noop_records++;
	} else {
		s->self[op] += d;
		s->kern[op]++;
		for (int j = op; j >= 0; j = s->a.op[j].parent)
			s->total[j] += d;
	}
	uint32_t m = sp_opattr_module_of(&s->a, e->corr, &bwd);
	if (!m) {
		s->outside_ns += d;
		return;
	}
	struct orow *row = row_of(&s->mods, str(r, m, "?"), NULL);
	*(bwd ? &row->bwd : &row->self) += d;
}

/* The FLOPs of op range i itself (flops.h; a convolution's parameters from its module), and
 * whether its sizes fit its formula: 1 counted, 0 no formula, -1 they did not fit. */
static int op_flops(const struct sp_opstats *s, const struct sp_trace_reader *r, size_t i, double *f)
{
	const struct sp_event *e = s->a.op[i].e;
	int m = s->a.op[i].module;
	const char *conv = m >= 0 ? str(r, s->a.mod[m].e->u.marker.shapes, NULL) : NULL;
	*f = 0;
	return sp_flops(str(r, e->name, "?"), str(r, e->u.marker.shapes, NULL), conv, f);
}

/* key_averages' rule (torch's EventList._remove_dup_nodes): an op that is the only op inside an
 * op of its own name, which launched nothing itself, is one call with it: its GPU records and
 * kernels move up, its row is not counted. Returns per op range the range it joined, -1 none. */
static int32_t *fold_same_name(struct sp_opstats *s, const struct sp_trace_reader *r, const int *fit)
{
	size_t n = s->a.nop;
	int32_t *into = sp_xrealloc(NULL, (n + 1) * sizeof *into), *kids = sp_xrealloc(NULL, (n + 1) * sizeof *kids);
	memset(kids, 0, (n + 1) * sizeof *kids);
	for (size_t i = 0; i < n; i++)
		if (s->a.op[i].parent >= 0)
			kids[s->a.op[i].parent]++;
	for (size_t i = 0; i < n; i++) { /* parents come first: a chain folds into its outermost op */
		int p = s->a.op[i].parent;
		into[i] = -1;
		if (p < 0 || kids[p] != 1 || strcmp(str(r, s->a.op[p].e->name, "?"), str(r, s->a.op[i].e->name, "")))
			continue;
		int root = into[p] >= 0 ? into[p] : p;
		if (s->kern[p] || (p != root && s->kern[root]))
			continue;
		into[i] = root;
		s->self[root] += s->self[i];
		s->kern[root] += s->kern[i];
		s->self[i] = s->kern[i] = 0;
		if (fit[root]) /* the outer call's own FLOPs are the inner's: count them once */
			s->flops[i] = 0;
	}
	free(kids);
	return into;
}

void sp_opstats_add_window(struct sp_opstats *s, const struct sp_trace_reader *r, struct sp_windows *g,
			   const struct sp_window *w)
{
	sp_opattr_build(&s->a, r, g);
	s->windows++;
	s->steps += w->nsteps;
	if (s->a.nop > s->cap) {
		s->cap = s->a.nop;
		s->self = sp_xrealloc(s->self, s->cap * sizeof *s->self);
		s->total = sp_xrealloc(s->total, s->cap * sizeof *s->total);
		s->kern = sp_xrealloc(s->kern, s->cap * sizeof *s->kern);
		s->flops = sp_xrealloc(s->flops, s->cap * sizeof *s->flops);
	}
	if (s->a.nop) {
		memset(s->self, 0, s->a.nop * sizeof *s->self);
		memset(s->total, 0, s->a.nop * sizeof *s->total);
		memset(s->kern, 0, s->a.nop * sizeof *s->kern);
	}
	struct charge ch = { s, r };
	sp_windows_each(g, charge_gpu, &ch);
	int *fit = sp_xrealloc(NULL, (s->a.nop + 1) * sizeof *fit);
	for (size_t i = 0; i < s->a.nop; i++)
		fit[i] = op_flops(s, r, i, &s->flops[i]);
	int32_t *into = fold_same_name(s, r, fit);
	for (size_t i = s->a.nop; i-- > 0;) /* children come after their parents */
		if (s->a.op[i].parent >= 0)
			s->flops[s->a.op[i].parent] += s->flops[i];
	for (size_t i = 0; i < s->a.nop; i++) {
		const struct sp_event *e = s->a.op[i].e;
		if (into[i] >= 0)
			continue;
		struct orow *row =
			row_of(&s->ops, str(r, e->name, "?"), s->by_shapes ? str(r, e->u.marker.shapes, "") : NULL);
		row->calls++;
		row->kernels += s->kern[i];
		row->self += s->self[i];
		row->total += s->total[i];
		row->flops += s->flops[i];
		row->flop_calls += fit[i] > 0;
		row->flop_bad += fit[i] < 0;
	}
	free(fit);
	free(into);
	s->op_ranges += s->a.nop;
	s->mod_ranges += s->a.nmod;
	for (size_t i = 0; i < s->a.nmod; i++)
		row_of(&s->mods, str(r, s->a.mod[i].e->name, "?"), NULL)->calls++;
}

static int g_sort; /* the key of cmp_ops */

static int cmp_ops(const void *pa, const void *pb)
{
	const struct orow *a = pa, *b = pb;
	int c = 0;
	switch (g_sort) {
	case SP_OPSORT_TOTAL:
		c = sp_cmp_u64(b->total, a->total);
		break;
	case SP_OPSORT_CALLS:
		c = sp_cmp_u64(b->calls, a->calls);
		break;
	case SP_OPSORT_AVG:
		c = sp_cmp_u64(b->calls ? b->self / b->calls : 0, a->calls ? a->self / a->calls : 0);
		break;
	case SP_OPSORT_FLOPS:
		c = (b->flops > a->flops) - (b->flops < a->flops);
		break;
	case SP_OPSORT_NAME:
		break;
	default:
		c = sp_cmp_u64(b->self, a->self);
	}
	if (!c)
		c = strcmp(a->name, b->name);
	return c ? c : strcmp(a->shapes ? a->shapes : "", b->shapes ? b->shapes : "");
}

/* "1.23e+12" (or "-" for none) into buf. */
static const char *fmt_flops(char *buf, size_t n, const struct orow *r)
{
	if (r->flops > 0)
		snprintf(buf, n, "%.3g", r->flops);
	else
		snprintf(buf, n, "%s", r->flop_bad ? "?" : "-");
	return buf;
}

/* Achieved TFLOP/s of row r (over its CUDA total), with its share of peak: "312.4 (32%)". */
static const char *fmt_tflops(char *buf, size_t n, const struct orow *r, double peak)
{
	if (r->flops <= 0 || !r->total) {
		snprintf(buf, n, "-");
		return buf;
	}
	double t = r->flops / (double)r->total / 1e3;
	if (peak > 0)
		snprintf(buf, n, "%.1f (%.0f%%)", t, 100 * t / peak);
	else
		snprintf(buf, n, "%.1f", t);
	return buf;
}

/* Says why the windows hold no op and returns 1, or returns 0. */
static int no_ops(const struct sp_opstats *s, FILE *out, int modules)
{
	if (modules ? s->mod_ranges : s->op_ranges)
		return 0;
	fprintf(out,
		"No %s was recorded in these windows. They are recorded in a PyTorch program whose steps come "
		"from the Python bridge (kind = optimizer or python, or auto once torch's optimizer hook fires: the "
		"default), with [activities] %s = true (off by default), unless the program runs torch.profiler or ran "
		"torch.compile; stepprof said on stderr why not when it ran (STEPPROF_VERBOSE=1 for the details).\n",
		modules ? "nn.Module forward" : "torch operator", modules ? "modules" : "ops");
	return 1;
}

void sp_opstats_print_ops(const struct sp_opstats *s, int sort, int top, int wide, const char *device, FILE *out)
{
	char t[4][40];
	if (no_ops(s, out, 0))
		return;
	size_t n = s->ops.n, shown = top > 0 && (size_t)top < n ? (size_t)top : n;
	struct orow *rows = sp_xrealloc(NULL, (n + 1) * sizeof *rows);
	memcpy(rows, s->ops.row, n * sizeof *rows);
	g_sort = sort;
	sp_sort(rows, n, sizeof *rows, cmp_ops);
	int nw = 50, sw = s->by_shapes ? 32 : 0;
	for (size_t i = 0; wide && i < shown; i++) {
		int a = (int)strlen(rows[i].name), b = rows[i].shapes ? (int)strlen(rows[i].shapes) : 0;
		nw = a > nw ? a : nw;
		sw = s->by_shapes && b > sw ? b : sw;
	}
	double peak = sp_flops_peak(device);
	fprintf(out, "Torch operators: %llu step%s in %llu window%s, %llu op range%s (as key_averages tables them)\n",
		(unsigned long long)s->steps, sp_plural(s->steps), (unsigned long long)s->windows,
		sp_plural(s->windows), (unsigned long long)s->op_ranges, sp_plural(s->op_ranges));
	fprintf(out, "%-*s", nw, "Name");
	if (sw)
		fprintf(out, " %-*s", sw, "Input shapes");
	fprintf(out, " %12s %7s %12s %8s %8s %10s %14s\n", "Self CUDA", "Self %", "CUDA total", "Calls", "Kernels",
		"FLOPs", "TFLOP/s");
	for (size_t i = 0; i < shown; i++) {
		const struct orow *r = &rows[i];
		sp_print_name(out, r->name, nw);
		if (sw) {
			fputc(' ', out);
			sp_print_name(out, r->shapes && *r->shapes ? r->shapes : "-", sw);
		}
		fprintf(out, " %12s %6.1f%% %12s %8llu %8llu %10s %14s\n", sp_fmt_ns(t[0], 40, r->self),
			s->gpu_ns ? 100.0 * (double)r->self / (double)s->gpu_ns : 0, sp_fmt_ns(t[1], 40, r->total),
			(unsigned long long)r->calls, (unsigned long long)r->kernels, fmt_flops(t[2], 40, r),
			fmt_tflops(t[3], 40, r, peak));
	}
	if (shown < n)
		fprintf(out, "... %zu more row%s (--top 0 shows all)\n", n - shown, sp_plural(n - shown));
	fprintf(out, "GPU work outside any op: %s (%.1f%%), %llu record%s\n", sp_fmt_ns(t[0], 40, s->noop_ns),
		s->gpu_ns ? 100.0 * (double)s->noop_ns / (double)s->gpu_ns : 0, (unsigned long long)s->noop_records,
		sp_plural(s->noop_records));
	fprintf(out, "GPU time of the windows: %s (kernels, copies, sets: %llu records)\n",
		sp_fmt_ns(t[0], 40, s->gpu_ns), (unsigned long long)s->gpu_records);
	fprintf(out, "FLOPs: as torch's with_flops counts aten::mm, addmm, bmm, baddbmm and conv2d (a convolution's "
		     "stride and padding from its module), attention as torch.utils.flop_counter does; an op's FLOPs "
		     "and TFLOP/s include the ops it called; ? = sizes that fit no formula\n");
	if (peak > 0)
		fprintf(out, "TFLOP/s in parentheses: share of %s's dense bf16 peak, %.0f TFLOP/s\n", device, peak);
	else
		fprintf(out, "TFLOP/s: unknown peak for %s\n", device ? device : "this GPU (no device record)");
	free(rows);
}

/* The module tree: a node per path prefix ("A", "A.b", "A.b.0"), each module row's times on its
 * node, totals up the tree. */
struct tree {
	struct table t;  /* rows by prefix: calls, self, bwd of the module of that path; total */
	int *parent, *depth;
	int *order;      /* depth-first, children by total descending */
	size_t norder;
};

static void tree_build(const struct sp_opstats *s, struct tree *tr)
{
	memset(tr, 0, sizeof *tr);
	for (size_t i = 0; i < s->mods.n; i++) {
		const struct orow *m = &s->mods.row[i];
		char *p = sp_xstrdup(m->name);
		for (char *dot = p;; dot++) { /* each prefix up to a '.' (not one inside a class's "#k") */
			if (*dot && *dot != '.')
				continue;
			char c = *dot;
			*dot = 0;
			row_of(&tr->t, p, NULL);
			*dot = c;
			if (!c)
				break;
		}
		struct orow *n = row_of(&tr->t, m->name, NULL);
		n->calls += m->calls;
		n->self += m->self;
		n->bwd += m->bwd;
		free(p);
	}
	size_t n = tr->t.n;
	tr->parent = sp_xrealloc(NULL, (n + 1) * sizeof *tr->parent);
	tr->depth = sp_xrealloc(NULL, (n + 1) * sizeof *tr->depth);
	for (size_t i = 0; i < n; i++) {
		char *p = sp_xstrdup(tr->t.row[i].name), *dot = strrchr(p, '.');
		int depth = 0;
		for (char *q = p; *q; q++)
			depth += *q == '.';
		tr->depth[i] = depth;
		tr->parent[i] = -1;
		if (dot) {
			*dot = 0;
			tr->parent[i] = (int)(row_of(&tr->t, p, NULL) - tr->t.row);
		}
		free(p);
	}
	for (size_t i = 0; i < n; i++)
		for (int j = (int)i; j >= 0; j = tr->parent[j])
			tr->t.row[j].total += tr->t.row[i].self + tr->t.row[i].bwd;
}

static const struct tree *g_tree;

static int cmp_node(const void *pa, const void *pb)
{
	const struct orow *a = &g_tree->t.row[*(const int *)pa], *b = &g_tree->t.row[*(const int *)pb];
	int c = sp_cmp_u64(b->total, a->total);
	return c ? c : strcmp(a->name, b->name);
}

/* Appends node i and its subtree to tr->order, children by total descending. */
static void tree_walk(struct tree *tr, int i)
{
	tr->order[tr->norder++] = i;
	size_t k = 0;
	int *kids = sp_xrealloc(NULL, (tr->t.n + 1) * sizeof *kids);
	for (size_t j = 0; j < tr->t.n; j++)
		if (tr->parent[j] == i)
			kids[k++] = (int)j;
	g_tree = tr;
	sp_sort(kids, k, sizeof *kids, cmp_node);
	for (size_t j = 0; j < k; j++)
		tree_walk(tr, kids[j]);
	free(kids);
}

static void tree_order(struct tree *tr)
{
	tr->order = sp_xrealloc(NULL, (tr->t.n + 1) * sizeof *tr->order);
	tr->norder = 0;
	tree_walk(tr, -1);
	memmove(tr->order, tr->order + 1, tr->t.n * sizeof *tr->order); /* -1, the root of roots, first */
	tr->norder--;
}

static void tree_free(struct tree *tr)
{
	for (size_t i = 0; i < tr->t.n; i++)
		free(tr->t.row[i].name);
	free(tr->t.row);
	free(tr->t.slot);
	free(tr->parent);
	free(tr->depth);
	free(tr->order);
}

void sp_opstats_print_modules(const struct sp_opstats *s, int top, int wide, FILE *out)
{
	char t[4][40], label[512];
	if (no_ops(s, out, 1))
		return;
	struct tree tr;
	tree_build(s, &tr);
	tree_order(&tr);
	uint64_t in = s->gpu_ns - s->outside_ns, hidden = 0;
	int nw = 50;
	fprintf(out,
		"Modules: %llu step%s in %llu window%s; GPU time of each module's forward kernels and of the backward "
		"kernels autograd ran for it (tied by sequence number), with its submodules\n",
		(unsigned long long)s->steps, sp_plural(s->steps), (unsigned long long)s->windows,
		sp_plural(s->windows));
	fprintf(out, "%-*s %8s %12s %7s %12s %12s\n", nw, "Module", "Calls", "Total", "% GPU", "Self fwd", "Self bwd");
	for (size_t k = 0; k < tr.norder; k++) {
		const struct orow *r = &tr.t.row[tr.order[k]];
		double share = s->gpu_ns ? 100.0 * (double)r->total / (double)s->gpu_ns : 0;
		if (top > 0 && share < 1.0) {
			hidden++;
			continue;
		}
		const char *last = strrchr(r->name, '.');
		snprintf(label, sizeof label, "%*s%s", 2 * tr.depth[tr.order[k]], "", last ? last + 1 : r->name);
		if (wide && (int)strlen(label) > nw)
			fprintf(out, "%s\n%-*s", label, nw, "");
		else
			sp_print_name(out, label, nw);
		fprintf(out, " %8llu %12s %6.1f%% %12s %12s\n", (unsigned long long)r->calls,
			sp_fmt_ns(t[0], 40, r->total), share, sp_fmt_ns(t[1], 40, r->self),
			sp_fmt_ns(t[2], 40, r->bwd));
	}
	if (hidden)
		fprintf(out, "... %llu module%s under 1%% of GPU time not shown (--top 0 shows all)\n",
			(unsigned long long)hidden, sp_plural(hidden));
	fprintf(out,
		"In modules: %s (%.1f%%); %s: %s (%.1f%%: the optimizer, the loss, work of no module's forward and "
		"tied to none); GPU time of the windows: %s\n",
		sp_fmt_ns(t[0], 40, in), s->gpu_ns ? 100.0 * (double)in / (double)s->gpu_ns : 0, OUTSIDE,
		sp_fmt_ns(t[1], 40, s->outside_ns), s->gpu_ns ? 100.0 * (double)s->outside_ns / (double)s->gpu_ns : 0,
		sp_fmt_ns(t[2], 40, s->gpu_ns));
	fprintf(out, "Paths: from each outermost module (by its class; Class#2 for a second one), its named_modules() "
		     "names; a module none named (made anew at each call): parent.Class\n");
	tree_free(&tr);
}

void sp_opstats_json(const struct sp_opstats *s, const char *device, struct sp_out *x)
{
	double peak = sp_flops_peak(device);
	sp_out_printf(x, "\"ops\":{\"steps\":%llu,\"windows\":%llu,\"gpu_ns\":%llu,\"outside_ops_ns\":%llu,\"device\":",
		      (unsigned long long)s->steps, (unsigned long long)s->windows, (unsigned long long)s->gpu_ns,
		      (unsigned long long)s->noop_ns);
	device ? sp_out_json_str(x, device) : sp_out_puts(x, "null");
	peak > 0 ? sp_out_printf(x, ",\"peak_tflops\":%.2f", peak) : sp_out_puts(x, ",\"peak_tflops\":null");
	sp_out_puts(x, ",\"rows\":[");
	for (size_t i = 0; i < s->ops.n; i++) {
		const struct orow *r = &s->ops.row[i];
		sp_out_puts(x, i ? ",\n{\"name\":" : "\n{\"name\":");
		sp_out_json_str(x, r->name);
		sp_out_puts(x, ",\"shapes\":");
		r->shapes ? sp_out_json_str(x, r->shapes) : sp_out_puts(x, "null");
		sp_out_printf(x,
			      ",\"calls\":%llu,\"kernels\":%llu,\"self_ns\":%llu,\"total_ns\":%llu,\"flops\":%.17g,"
			      "\"flop_calls\":%llu,\"flop_unfit\":%llu}",
			      (unsigned long long)r->calls, (unsigned long long)r->kernels, (unsigned long long)r->self,
			      (unsigned long long)r->total, r->flops, (unsigned long long)r->flop_calls,
			      (unsigned long long)r->flop_bad);
	}
	sp_out_printf(x, "]},\n\"modules\":{\"gpu_ns\":%llu,\"outside_ns\":%llu,\"rows\":[",
		      (unsigned long long)s->gpu_ns, (unsigned long long)s->outside_ns);
	for (size_t i = 0; i < s->mods.n; i++) {
		const struct orow *r = &s->mods.row[i];
		sp_out_puts(x, i ? ",\n{\"path\":" : "\n{\"path\":");
		sp_out_json_str(x, r->name);
		sp_out_printf(x, ",\"calls\":%llu,\"forward_ns\":%llu,\"backward_ns\":%llu}",
			      (unsigned long long)r->calls, (unsigned long long)r->self, (unsigned long long)r->bwd);
	}
	sp_out_puts(x, "]}");
}

void sp_opstats_free(struct sp_opstats *s)
{
	if (!s)
		return;
	struct table *t[2] = { &s->ops, &s->mods };
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < t[k]->n; i++) {
			free(t[k]->row[i].name);
			free(t[k]->row[i].shapes);
		}
		free(t[k]->row);
		free(t[k]->slot);
	}
	sp_opattr_free(&s->a);
	free(s->self);
	free(s->total);
	free(s->kern);
	free(s->flops);
	free(s);
}
