/* SPDX-License-Identifier: MIT */
/* report.c - aggregates GPU work of the selected windows while streaming the trace, then
 * prints the tables of report.h. Kernel rows live in a table indexed by name id (ids are small
 * and dense: the collector interns names from 1 up), so a window is folded in as it is read. */
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include "bylines.h"
#include "stackagg.h"
#include "format.h"
#include "memtl.h"
#include "commstats.h"
#include "crossrank.h"
#include "cli.h"
#include "report.h"
#include "config/config.h"
#include "export.h"
#include "steps.h"
#include "symbols.h"
#include "windows.h"
#include "report_impl.h"

struct sort_ctx {
	const struct report *rep;
	int key;
};

static int cmp_rows(const void *pa, const void *pb, void *arg)
{
	const struct sort_ctx *c = arg;
	uint32_t ia = *(const uint32_t *)pa, ib = *(const uint32_t *)pb;
	const struct kstat *a = &c->rep->k[ia], *b = &c->rep->k[ib];
	int d = 0;

	switch (c->key) {
	case SP_SORT_TOTAL:
		d = sp_cmp_u64(b->total, a->total);
		break;
	case SP_SORT_AVG:
		d = sp_cmp_u64(b->total / b->calls, a->total / a->calls);
		break;
	case SP_SORT_CALLS:
		d = sp_cmp_u64(b->calls, a->calls);
		break;
	case SP_SORT_MAX:
		d = sp_cmp_u64(b->max, a->max);
		break;
	case SP_SORT_MIN:
		d = sp_cmp_u64(b->min, a->min);
		break;
	}
	return d ? d : strcmp(kname(c->rep, ia), kname(c->rep, ib));
}

/* What the passes over a window of the report work with. */
struct pass {
	struct report *rep;
	struct sp_windows *g;
	struct wsum *s;         /* the window's summary line */
	struct sp_nccl_win nccl; /* its NCCL calls and kernels */
	int by_line;
};

/* The first pass, file order: kernel and copy rows, the steps' GPU work, NCCL links, allocation
 * sites, launch stacks. */
static void add_event(void *ctx, const struct sp_event *e)
{
	struct pass *p = ctx;
	struct report *rep = p->rep;
	uint64_t d = e->end > e->start ? e->end - e->start : 0;

	sp_steps_event(&rep->steps, rep->r, e, sp_windows_anchor(p->g, e));
	sp_nccl_win_event(&p->nccl, rep->r, e);
	sp_stackagg_add(&rep->sites, rep->r, e, SP_FOLD_ALLOC);
	if (p->by_line)
		sp_bylines_call(&rep->lines, e);
	p->s->steps += e->kind == SP_EV_STEP;
	if (!sp_ev_is_gpu(e))
		return;
	if (e->kind == SP_EV_KERNEL) {
		struct kstat *k;
		uint32_t x = sp_trace_string_index(rep->r, e->name); /* dense: k[] is as small as the file */
		rep->k = sp_xgrow(rep->k, &rep->kcap, sizeof(*rep->k), x);
		k = &rep->k[x];
		if (!k->calls || d < k->min)
			k->min = d;
		if (d > k->max)
			k->max = d;
		k->calls++;
		k->total += d;
		p->s->kernels++;
	} else {
		struct mstat *m = &rep->m[e->kind == SP_EV_MEMSET ? MEMSET_ROW : e->sub < MEMSET_ROW ? e->sub : 0];
		m->calls++;
		m->bytes += e->u.copy.bytes;
		m->total += d;
	}
}

/* The second pass, GPU work by start: busy and idle time, kernels by launch stack. */
static void add_gpu(void *ctx, const struct sp_event *e)
{
	struct pass *p = ctx;
	sp_steps_sweep(&p->rep->steps, e);
	if (p->by_line)
		sp_bylines_kernel(&p->rep->lines, e);
}

/* Folds window w (the one g handed out last) into the report: two passes over its events. Exits if
 * memory runs out; otherwise can't fail. */
static void add_window(struct report *rep, struct sp_windows *g, const struct sp_window *w, struct sp_nccl_win *nw,
		       int by_line)
{
	struct pass p = { .rep = rep, .g = g, .by_line = by_line };

	rep->w = sp_xrealloc(rep->w, (rep->nw + 1) * sizeof(*rep->w));
	p.s = &rep->w[rep->nw++];
	memset(p.s, 0, sizeof(*p.s));
	p.s->w = *w;
	for (unsigned i = 0; i < SP_DROP__COUNT; i++)
		rep->dropped[i] += w->dropped[i];
	p.nccl = *nw;
	sp_steps_begin(&rep->steps, w);
	sp_nccl_win_begin(&p.nccl, w);
	if (by_line)
		sp_bylines_begin(&rep->lines, g);
	sp_windows_each(g, add_event, &p);
	sp_windows_sorted(g, sp_ev_is_gpu, add_gpu, &p);
	p.s->busy = sp_steps_end(&rep->steps);
	sp_nccl_stats_add(&rep->nccl, rep->r, &p.nccl);
	*nw = p.nccl; /* its buffers serve the next window */
	if (rep->ops) /* --by op|module: two more passes (report_ops.h) */
		sp_opstats_add_window(rep->ops, rep->r, g, w);
}

/* The kernel rows (name ids with calls) in the order of sort key `key`; *n gets their count.
 * Caller frees. Exits if memory runs out. */
static uint32_t *sorted_kernels(const struct report *rep, int key, size_t *n)
{
	uint32_t *rows = NULL;
	*n = 0;
	for (size_t id = 0; id < rep->kcap; id++)
		if (rep->k[id].calls) {
			rows = sp_xrealloc(rows, (*n + 1) * sizeof(*rows));
			rows[(*n)++] = (uint32_t)id;
		}
	if (*n)
		sp_sort_r(rows, *n, sizeof(*rows), cmp_rows, &(struct sort_ctx){ rep, key });
	return rows;
}

static void print_kernels(const struct report *rep, const struct sp_report_opts *o, FILE *out)
{
	size_t n, shown;
	uint32_t *rows = sorted_kernels(rep, o->sort, &n);
	uint64_t total = 0, calls = 0, rest = 0;
	int width = SP_REPORT_NAME_WIDTH;
	char t[4][32];

	for (size_t i = 0; i < n; i++) {
		total += rep->k[rows[i]].total;
		calls += rep->k[rows[i]].calls;
	}
	if (!n) {
		fprintf(out, "No GPU kernels recorded.\n");
		return;
	}
	shown = o->top > 0 && (size_t)o->top < n ? (size_t)o->top : n;
	if (o->wide)
		for (size_t i = 0; i < shown; i++) {
			int len = (int)strlen(sp_display_name(kname(rep, rows[i])));
			width = len > width ? len : width;
		}

	fprintf(out, "%-*s %8s %12s %12s %12s %12s %7s\n", width, "Name", "Calls", "Total", "Avg", "Min", "Max",
		"% GPU");
	for (int i = 0; i < width; i++)
		fputc('-', out);
	fprintf(out, " -------- ------------ ------------ ------------ ------------ -------\n");
	for (size_t i = 0; i < n; i++) {
		const struct kstat *k = &rep->k[rows[i]];
		const char *name = sp_display_name(kname(rep, rows[i]));
		if (i >= shown) {
			rest += k->total;
			continue;
		}
		sp_print_name(out, name, width);
		fprintf(out, " %8llu %12s %12s %12s %12s %6.1f%%\n", (unsigned long long)k->calls,
			sp_fmt_ns(t[0], 32, k->total), sp_fmt_ns(t[1], 32, (k->total + k->calls / 2) / k->calls),
			sp_fmt_ns(t[2], 32, k->min), sp_fmt_ns(t[3], 32, k->max), total ? 100.0 * k->total / total : 0);
	}
	if (shown < n)
		fprintf(out, "... %zu more kernel name%s: %s, %.1f%% of GPU time (--top 0 shows all)\n", n - shown,
			n - shown == 1 ? "" : "s", sp_fmt_ns(t[0], 32, rest), total ? 100.0 * rest / total : 0);
	fprintf(out, "%-*s %8llu %12s %12s %12s %12s %6.1f%%\n", width, "Total", (unsigned long long)calls,
		sp_fmt_ns(t[0], 32, total), "", "", "", 100.0);
	fprintf(out, "%zu kernel name%s, %llu kernel%s, %s of kernel time\n", n, sp_plural(n),
		(unsigned long long)calls, sp_plural(calls), sp_fmt_ns(t[0], 32, total));
	free(rows);
}

/* 1 if the windows aggregated belong to two or more phases (or some to none). Can't fail. */
static int phases_mixed(const struct report *rep)
{
	for (size_t i = 1; i < rep->nw; i++)
		if (strcmp(rep->w[i].w.phase, rep->w[0].w.phase))
			return 1;
	return 0;
}

/* The PyTorch memory snapshot the collector wrote beside trace for window id ([activities]
 * torch_memory: TRACE-without-.sptrace.wID.memory_snapshot.pickle) into buf. Returns 1 if that is a
 * regular file, else 0. Found by its name: the trace does not record it. Can't fail. */
static int torch_snapshot(const char *trace, uint32_t id, char *buf, size_t n)
{
	struct stat st;
	size_t len = strlen(trace), ext = strlen(".sptrace");
	if (len > ext && !strcmp(trace + len - ext, ".sptrace"))
		len -= ext;
	int k = snprintf(buf, n, "%.*s.w%u.memory_snapshot.pickle", (int)len, trace, id);
	return k > 0 && (size_t)k < n && stat(buf, &st) == 0 && S_ISREG(st.st_mode);
}

static void print_windows(const struct report *rep, const char *path, FILE *out)
{
	char t[32], snap[4200];

	for (size_t i = 0; i < rep->nw; i++) {
		const struct wsum *s = &rep->w[i];
		uint64_t dur = s->w.t1 > s->w.t0 ? s->w.t1 - s->w.t0 : 0;
		fprintf(out, "Window %u%s%s%s%s: steps %lld-%lld (%llu step%s), %s, %llu kernel%s, GPU busy %.1f%%",
			s->w.id, s->w.phase[0] ? " (phase " : "", s->w.phase, s->w.phase[0] ? ")" : "",
			s->w.inferred ? " (its beginning is not in the trace: found from its steps)" : "",
			(long long)s->w.first_step, (long long)s->w.last_step, (unsigned long long)s->steps,
			s->steps == 1 ? "" : "s", sp_fmt_ns(t, sizeof(t), dur), (unsigned long long)s->kernels,
			sp_plural(s->kernels), dur ? 100.0 * s->busy / dur : 0);
		if (s->w.origin & SP_WIN_ORIGIN_MASK)
			fprintf(out, ", %s",
				(s->w.origin & SP_WIN_ORIGIN_MASK) == SP_WIN_TRIGGER ? "on demand" : "time range");
		if (s->w.origin & SP_WIN_UNCOUNTED)
			fprintf(out, ", step numbers continue a count that missed steps while detached");
		if (s->w.capped)
			fprintf(out, ", capped");
		if (s->w.dropped_total)
			fprintf(out, ", %llu dropped", (unsigned long long)s->w.dropped_total);
		if (s->w.dropped[SP_DROP_MISSING])
			fprintf(out, ", %llu kernel%s missing (launched in it, never arrived)",
				(unsigned long long)s->w.dropped[SP_DROP_MISSING],
				s->w.dropped[SP_DROP_MISSING] == 1 ? "" : "s");
		if (s->w.complete)
			fputc('\n', out);
		else
			fprintf(out, " (incomplete: cut at step %lld)\n", (long long)s->w.last_step);
		if (torch_snapshot(path, s->w.id, snap, sizeof snap))
			fprintf(out, "  PyTorch memory snapshot of window %u: %s\n", s->w.id, snap);
	}
}

static const char *const mem_kind[MEM_ROWS] = { "Memcpy Unknown", "Memcpy HtoD", "Memcpy DtoH", "Memcpy HtoA",
						"Memcpy AtoH",    "Memcpy AtoA", "Memcpy AtoD", "Memcpy DtoA",
						"Memcpy DtoD",    "Memcpy HtoH", "Memcpy PtoP", "Memset" };

static void print_memory(const struct report *rep, FILE *out)
{
	const char *const *kind = mem_kind;
	char b[32], t[32];
	int header = 0;

	for (int i = 0; i < MEM_ROWS; i++) {
		const struct mstat *m = &rep->m[i];
		if (!m->calls)
			continue;
		if (!header++)
			fprintf(out, "\n%-16s %8s %12s %12s %12s\n", "Memory op", "Calls", "Bytes", "Total", "GB/s");
		fprintf(out, "%-16s %8llu %12s %12s %12.3f\n", kind[i], (unsigned long long)m->calls,
			sp_memtl_bytes(b, sizeof(b), m->bytes), sp_fmt_ns(t, sizeof(t), m->total),
			m->total ? (double)m->bytes / m->total : 0.0);
	}
}

/* NCCL rows by total time, longest first; ties keep the key order (op, ranks, size). */
static int cmp_nccl_rows(const void *pa, const void *pb)
{
	const struct sp_nccl_row *a = *(const struct sp_nccl_row *const *)pa,
				 *b = *(const struct sp_nccl_row *const *)pb;
	return a->ns != b->ns ? (a->ns < b->ns ? 1 : -1) : (a > b) - (a < b);
}

/* The NCCL table, if the windows hold NCCL calls or kernels: one row per op, communicator size and
 * message size, timed as commstats.h says; sizes and bandwidths as nccl-tests reports them. --top rows. */
static void print_nccl(const struct report *rep, const struct sp_report_opts *o, FILE *out)
{
	const struct sp_nccl_stats *s = &rep->nccl;
	const struct sp_nccl_row **rows;
	size_t shown;
	uint64_t rest = 0;
	int cpu = 0;
	char sz[32], tb[32], t[2][32], algo[32], n[16];

	if (!s->n) {
		if (s->orphan_kernels) /* kernels, but no calls recorded (nccl = 0) */
			fprintf(out, "\nNCCL kernels linked to no call: %llu, %s\n",
				(unsigned long long)s->orphan_kernels, sp_fmt_ns(t[0], 32, s->orphan_ns));
		return;
	}
	rows = sp_xrealloc(NULL, (s->n + 1) * sizeof(*rows));
	for (size_t i = 0; i < s->n; i++)
		rows[i] = &s->row[i];
	sp_sort(rows, s->n, sizeof(*rows), cmp_nccl_rows);
	shown = o->top > 0 && (size_t)o->top < s->n ? (size_t)o->top : s->n;
	fprintf(out, "\n%-14s %5s %10s %8s %12s %12s  %12s %-21s %10s %10s\n", "NCCL op", "Ranks", "Size", "Calls",
		"Total bytes", "Time", "Avg", "Algo/proto", "algbw GB/s", "busbw GB/s");
	for (size_t i = 0; i < s->n; i++) {
		const struct sp_nccl_row *r = rows[i];
		uint64_t size = sp_nccl_size(r->op, r->bytes, r->nranks);
		double factor = sp_nccl_bus_factor(r->op, r->nranks);
		double algbw = size && r->ns ? (double)size * r->calls / r->ns : -1;
		if (i >= shown) {
			rest += r->ns;
			continue;
		}
		cpu |= r->cpu_timed;
		snprintf(n, sizeof(n), r->nranks > 0 ? "%d" : "?", r->nranks);
		fprintf(out, "%-14s %5s %10s %8llu %12s %12s%c %12s %-21s ", sp_nccl_op_name(r->op), n,
			size ? sp_memtl_bytes(sz, sizeof(sz), size) : "?", (unsigned long long)r->calls,
			size ? sp_memtl_bytes(tb, sizeof(tb), size * r->calls) : "?", sp_fmt_ns(t[0], 32, r->ns),
			r->cpu_timed ? '*' : ' ', sp_fmt_ns(t[1], 32, (r->ns + r->calls / 2) / r->calls),
			sp_nccl_algo_name(r->algo, algo, sizeof(algo)));
		if (algbw < 0)
			fprintf(out, "%10s %10s\n", "-", "-");
		else if (factor < 0)
			fprintf(out, "%10.3f %10s\n", algbw, "-");
		else
			fprintf(out, "%10.3f %10.3f\n", algbw, algbw * factor);
	}
	if (shown < s->n)
		fprintf(out, "... %zu more NCCL row%s: %s (--top 0 shows all)\n", s->n - shown,
			s->n - shown == 1 ? "" : "s", sp_fmt_ns(t[0], 32, rest));
	if (cpu)
		fprintf(out, "* CPU time of the calls: no NCCL kernel was linked to them\n");
	if (s->orphan_kernels)
		fprintf(out, "NCCL kernels linked to no call: %llu, %s\n", (unsigned long long)s->orphan_kernels,
			sp_fmt_ns(t[0], 32, s->orphan_ns));
	free(rows);
}

/* With --peers: this rank's NCCL kernel time split into waiting for the last rank and transfer,
 * and the cross-rank verdict. Can't fail. */
static void print_wait(const struct report *rep, FILE *out)
{
	struct sp_xrank_wait w;
	char t[4][32];

	if (!rep->peers)
		return;
	fprintf(out, "\nWaiting for peers (%zu traces analysed, all windows; `stepprof steps` has the breakdown):\n",
		sp_xrank_count(rep->peers));
	if (rep->self < 0) {
		fprintf(out, "This trace holds no recorded step: nothing to split.\n");
	} else {
		sp_xrank_waits(rep->peers, (size_t)rep->self, &w);
		fprintf(out,
			"NCCL kernels: %s waiting for the last rank to arrive (%.1f%%), %s transfer; per step "
			"(median of %zu): wait %s, transfer %s\n",
			sp_fmt_ns(t[0], 32, w.wait_ns),
			w.wait_ns + w.transfer_ns ? 100.0 * (double)w.wait_ns / (double)(w.wait_ns + w.transfer_ns)
						  : 0.0,
			sp_fmt_ns(t[1], 32, w.transfer_ns), w.steps, sp_fmt_ns(t[2], 32, w.wait_step_ns),
			sp_fmt_ns(t[3], 32, w.transfer_step_ns));
	}
	fprintf(out, "%s\n", sp_xrank_verdict(rep->peers));
}

/* The findings as a "Findings" list; nothing if nothing stands out. Can't fail. */
static void print_findings(const struct report *rep, FILE *out)
{
	char f[FINDINGS_MAX][FINDING_LEN];
	size_t n = sp_report_findings(rep, f);

	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s- %s\n", i ? "" : "\nFindings\n", f[i]);
}

/* The JSON rows of rep's windows (print_json). */
static void json_windows(struct sp_out *x, const struct report *rep, const char *path)
{
	for (size_t i = 0; i < rep->nw; i++) {
		const struct wsum *s = &rep->w[i];
		char cut[24], snap[4200];
		snprintf(cut, sizeof cut, "%lld", (long long)s->w.last_step);
		sp_out_printf(x,
			      "%s{\"id\":%u,\"first_step\":%lld,\"last_step\":%lld,\"duration_ns\":%llu,\"steps\":%llu,"
			      "\"kernels\":%llu,\"gpu_busy_ns\":%llu,\"capped\":%s,\"dropped\":%llu,\"missing\":%llu,"
			      "\"complete\":%s,\"cut_at_step\":%s,\"inferred\":%s,"
			      "\"origin\":\"%s\",\"steps_uncounted_before\":%s,\"torch_memory_snapshot\":",
			      i ? ",\n" : "\n", s->w.id, (long long)s->w.first_step, (long long)s->w.last_step,
			      (unsigned long long)(s->w.t1 > s->w.t0 ? s->w.t1 - s->w.t0 : 0),
			      (unsigned long long)s->steps, (unsigned long long)s->kernels, (unsigned long long)s->busy,
			      s->w.capped ? "true" : "false", (unsigned long long)s->w.dropped_total,
			      (unsigned long long)s->w.dropped[SP_DROP_MISSING], s->w.complete ? "true" : "false",
			      s->w.complete ? "null" : cut, s->w.inferred ? "true" : "false",
			      sp_win_origin_name(s->w.origin), s->w.origin & SP_WIN_UNCOUNTED ? "true" : "false");
		if (torch_snapshot(path, s->w.id, snap, sizeof snap))
			sp_out_json_str(x, snap);
		else
			sp_out_printf(x, "null");
		sp_out_printf(x, "}");
	}
}

/* The JSON rows of rep's steps (print_json). */
static void json_steps(struct sp_out *x, const struct report *rep)
{
	for (size_t i = 0; i < rep->steps.n; i++) {
		const struct sp_step_stat *s = &rep->steps.st[i];
		sp_out_printf(x,
			      "%s{\"number\":%lld,\"window\":%u,\"duration_ns\":%llu,\"kernels\":%llu,\"kernel_ns\":%"
			      "llu,"
			      "\"nccl_ns\":%llu,\"copy_ns\":%llu,\"gpu_busy_ns\":%llu,\"longest_idle_ns\":%llu,"
			      "\"regime\":%u,\"refuted\":%s,\"irregular\":%s,\"training\":%s,\"at_exit\":%s,"
			      "\"late\":%s}",
			      i ? ",\n" : "\n", (long long)s->number, s->window,
			      (unsigned long long)(s->end > s->start ? s->end - s->start : 0),
			      (unsigned long long)s->kernels, (unsigned long long)s->kernel_ns,
			      (unsigned long long)s->nccl_ns, (unsigned long long)s->copy_ns,
			      (unsigned long long)s->busy, (unsigned long long)s->idle, s->how.regime,
			      s->how.flags & SP_STEP_REFUTED ? "true" : "false",
			      s->how.flags & SP_STEP_IRREGULAR ? "true" : "false",
			      s->how.flags & SP_STEP_TRAIN ? "true" : "false",
			      s->how.flags & SP_STEP_AT_EXIT ? "true" : "false",
			      s->how.flags & SP_STEP_LATE ? "true" : "false");
	}
}

/* The JSON rows of rep's NCCL operations (print_json). */
static void json_nccl(struct sp_out *x, const struct report *rep)
{
	for (size_t i = 0; i < rep->nccl.n; i++) {
		const struct sp_nccl_row *r = &rep->nccl.row[i];
		uint64_t size = sp_nccl_size(r->op, r->bytes, r->nranks);
		double factor = sp_nccl_bus_factor(r->op, r->nranks);
		double algbw = size && r->ns ? (double)size * r->calls / r->ns : -1;
		char algo[32];
		sp_out_printf(x,
			      "%s{\"op\":\"%s\",\"ranks\":%d,\"size\":%llu,\"calls\":%llu,\"time_ns\":%llu,"
			      "\"cpu_timed\":%s,\"algo\":",
			      i ? ",\n" : "\n", sp_nccl_op_name(r->op), r->nranks, (unsigned long long)size,
			      (unsigned long long)r->calls, (unsigned long long)r->ns, r->cpu_timed ? "true" : "false");
		sp_out_json_str(x, sp_nccl_algo_name(r->algo, algo, sizeof(algo)));
		algbw < 0 ? sp_out_puts(x, ",\"algbw_gbps\":null") : sp_out_printf(x, ",\"algbw_gbps\":%.3f", algbw);
		algbw < 0 || factor < 0 ? sp_out_puts(x, ",\"busbw_gbps\":null}")
					: sp_out_printf(x, ",\"busbw_gbps\":%.3f}", algbw * factor);
	}
}

/* The JSON object of the wait for peers (--peers), or null (print_json). */
static void json_nccl_wait(struct sp_out *x, const struct report *rep)
{
	if (!rep->peers) {
		sp_out_puts(x, "null");
	} else {
		struct sp_xrank_wait w = { 0 };
		const char *cause;
		int straggler = sp_xrank_straggler(rep->peers, &cause);
		if (rep->self >= 0)
			sp_xrank_waits(rep->peers, (size_t)rep->self, &w);
		sp_out_printf(x,
			      "{\"traces\":%zu,\"wait_ns\":%llu,\"transfer_ns\":%llu,\"wait_per_step_ns\":%llu,"
			      "\"transfer_per_step_ns\":%llu,\"straggler\":",
			      sp_xrank_count(rep->peers), (unsigned long long)w.wait_ns,
			      (unsigned long long)w.transfer_ns, (unsigned long long)w.wait_step_ns,
			      (unsigned long long)w.transfer_step_ns);
		if (straggler >= 0 || cause)
			sp_out_printf(x, "{\"rank\":%d,\"cause\":\"%s\"}", straggler, cause);
		else
			sp_out_puts(x, "null");
		sp_out_puts(x, ",\"verdict\":");
		sp_out_json_str(x, sp_xrank_verdict(rep->peers));
		sp_out_puts(x, "}");
	}
}

/* The whole report as one JSON object (docs/OUTPUTS.md): every kernel row (in --sort order,
 * --top ignored), drops, windows, steps, memory ops, NCCL rows and the findings' sentences. */
static void print_json(const struct report *rep, const char *path, const struct sp_trace_header *h,
		       const struct sp_report_opts *o, uint64_t outside, FILE *out)
{
	struct sp_out *x = sp_out_stream(out);
	size_t n;
	uint32_t *rows = sorted_kernels(rep, o->sort, &n);

	sp_out_puts(x, "{");
	sp_cli_json_head(x, "report");
	sp_out_puts(x, "\"trace\":");
	sp_out_json_str(x, path);
	sp_out_puts(x, ",\"run_id\":");
	sp_out_json_str(x, h->meta.run_id);
	sp_out_puts(x, ",\"producer\":");
	sp_out_json_str(x, h->meta.producer);
	sp_out_puts(x, ",\"host\":");
	sp_out_json_str(x, h->meta.host);
	sp_out_printf(x, ",\"rank\":%d,\"world_size\":%d,\"pid\":%d,\"window\":", h->meta.rank, h->meta.world_size,
		      h->meta.pid);
	o->window < 0 ? sp_out_puts(x, "null") : sp_out_printf(x, "%lld", o->window);
	sp_out_puts(x, ",\n\"kernels\":[");
	for (size_t i = 0; i < n; i++) {
		const struct kstat *k = &rep->k[rows[i]];
		const char *raw = kname(rep, rows[i]);
		sp_out_puts(x, i ? ",\n{\"name\":" : "\n{\"name\":");
		sp_out_json_str(x, sp_display_name(raw ? raw : ""));
		sp_out_puts(x, ",\"raw_name\":");
		sp_out_json_str(x, raw);
		sp_out_printf(x, ",\"calls\":%llu,\"total_ns\":%llu,\"min_ns\":%llu,\"max_ns\":%llu}",
			      (unsigned long long)k->calls, (unsigned long long)k->total, (unsigned long long)k->min,
			      (unsigned long long)k->max);
	}
	sp_out_printf(x,
		      "],\n\"dropped\":{\"cupti\":%llu,\"ring_full\":%llu,\"window_cap\":%llu,\"late\":%llu,"
		      "\"missing\":%llu},"
		      "\"records_outside\":%llu,\n\"windows\":[",
		      (unsigned long long)rep->dropped[SP_DROP_CUPTI], (unsigned long long)rep->dropped[SP_DROP_RING],
		      (unsigned long long)rep->dropped[SP_DROP_CAP], (unsigned long long)rep->dropped[SP_DROP_LATE],
		      (unsigned long long)rep->dropped[SP_DROP_MISSING], (unsigned long long)outside);
	json_windows(x, rep, path);
	sp_out_puts(x, "],\n\"steps\":[");
	json_steps(x, rep);
	char how[600];
	sp_out_puts(x, "],\n\"steps_found_by\":");
	sp_report_steps_found_by(rep, how, sizeof how) ? sp_out_json_str(x, how) : sp_out_puts(x, "null");
	sp_out_puts(x, ",\n\"memory_ops\":[");
	for (int i = 0, first = 1; i < MEM_ROWS; i++)
		if (rep->m[i].calls) {
			sp_out_printf(x, "%s{\"kind\":\"%s\",\"calls\":%llu,\"bytes\":%llu,\"total_ns\":%llu}",
				      first ? "" : ",", mem_kind[i], (unsigned long long)rep->m[i].calls,
				      (unsigned long long)rep->m[i].bytes, (unsigned long long)rep->m[i].total);
			first = 0;
		}
	sp_out_puts(x, "],\n\"nccl\":[");
	json_nccl(x, rep);
	sp_out_puts(x, "],\n\"nccl_wait\":");
	json_nccl_wait(x, rep);
	if (o->by_line) {
		sp_out_puts(x, ",\n\"lines\":");
		sp_bylines_json(&rep->lines, rep->r, o->by_line, x);
	}
	if (rep->ops) {
		sp_out_puts(x, ",\n");
		sp_opstats_json(rep->ops, rep->device, x);
	}
	sp_out_puts(x, ",\n\"findings\":[");
	char f[FINDINGS_MAX][FINDING_LEN];
	n = sp_report_findings(rep, f);
	for (size_t i = 0; i < n; i++) {
		sp_out_puts(x, i ? ",\n" : "\n");
		sp_out_json_str(x, f[i]);
	}
	sp_out_puts(x, "]}\n");
	free(rows);
	sp_out_close(x, 1);
}

int sp_report_sort_parse(const char *s)
{
	static const char *const keys[] = { [SP_SORT_TOTAL] = "total", [SP_SORT_AVG] = "avg", [SP_SORT_CALLS] = "calls",
					    [SP_SORT_MAX] = "max",     [SP_SORT_MIN] = "min", [SP_SORT_NAME] = "name" };
	/* torch's key_averages().table(sort_by=...) names: a kernel has no children, so self and
	 * total are the same; torch's cuda_time / device_time is the average */
	static const struct {
		const char *torch;
		int key;
	} aliases[] = {
		{ "self_cuda_time_total", SP_SORT_TOTAL },
		{ "cuda_time_total", SP_SORT_TOTAL },
		{ "self_device_time_total", SP_SORT_TOTAL },
		{ "device_time_total", SP_SORT_TOTAL },
		{ "cuda_time", SP_SORT_AVG },
		{ "device_time", SP_SORT_AVG },
		{ "self_cuda_time", SP_SORT_AVG },
		{ "self_device_time", SP_SORT_AVG },
		{ "count", SP_SORT_CALLS },
	};
	for (int i = 0; i < (int)(sizeof(keys) / sizeof(keys[0])); i++)
		if (!strcmp(s, keys[i]))
			return i;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcmp(s, aliases[i].torch))
			return aliases[i].key;
	return -1;
}

/* Passes "peer PATH: what" (or "peer WHAT" when what is NULL) to o->note. This function can't fail. */
static void peer_note(const struct sp_report_opts *o, const char *what, const char *peer)
{
	char text[600];

	if (!o->note)
		return;
	if (peer)
		snprintf(text, sizeof(text), "peer %s %s", peer, what);
	else
		snprintf(text, sizeof(text), "peer %s", what);
	o->note(text);
}

/* The report as text (rep holds at least one window; seen: the windows of the trace). */
static void print_text(struct report *rep, const char *path, const struct sp_trace_header *h,
		       const struct sp_report_opts *o, struct sp_windows *g, int seen, FILE *out)
{
	fprintf(out, "Trace %s: host %s, ", path, h->meta.host);
	if (h->meta.rank >= 0)
		fprintf(out, "rank %d of %d, ", h->meta.rank, h->meta.world_size);
	fprintf(out, "pid %d\n", h->meta.pid);
	if (o->phase)
		fprintf(out, "Phase %s (%llu window%s of other phases left out)\n", o->phase,
			(unsigned long long)sp_windows_other_phase(g), sp_plural(sp_windows_other_phase(g)));
	if (o->window >= 0)
		fprintf(out, "Window %lld of %d window%s\n\n", o->window, seen, sp_plural((uint64_t)seen));
	else if (rep->nw == 1)
		fprintf(out, "1 window\n\n");
	else
		fprintf(out, "All %zu windows aggregated\n%s\n", rep->nw,
			phases_mixed(rep) ? "(of several phases, each numbering its own steps: --phase NAME "
					    "shows one)\n"
					  : "");
	if (o->by_line)
		sp_bylines_print(&rep->lines, rep->r, o->by_line, o->top, o->wide, out);
	else if (o->by_ops == SP_REPORT_BY_OP)
		sp_opstats_print_ops(rep->ops, o->op_sort, o->top, o->wide, rep->device, out);
	else if (o->by_ops == SP_REPORT_BY_MODULE)
		sp_opstats_print_modules(rep->ops, o->top, o->wide, out);
	else
		print_kernels(rep, o, out);
	fprintf(out, "\nDropped records: %llu (cupti: %llu, ring_full: %llu, window_cap: %llu, late: %llu)\n",
		(unsigned long long)(rep->dropped[SP_DROP_CUPTI] + rep->dropped[SP_DROP_RING] +
				     rep->dropped[SP_DROP_CAP] + rep->dropped[SP_DROP_LATE]),
		(unsigned long long)rep->dropped[SP_DROP_CUPTI], (unsigned long long)rep->dropped[SP_DROP_RING],
		(unsigned long long)rep->dropped[SP_DROP_CAP], (unsigned long long)rep->dropped[SP_DROP_LATE]);
	if (rep->dropped[SP_DROP_MISSING])
		fprintf(out,
			"Missing kernels: %llu launched in the windows never arrived before their window was "
			"written\n",
			(unsigned long long)rep->dropped[SP_DROP_MISSING]);
	print_windows(rep, path, out);
	if (sp_windows_outside(g))
		fprintf(out, "Records outside any window (skipped): %llu\n", (unsigned long long)sp_windows_outside(g));
	if (sp_trace_truncated(rep->r))
		fprintf(out, "Note: the trace was cut short; what followed the cut is lost.\n");
	char how[600];
	if (sp_report_steps_found_by(rep, how, sizeof how))
		fprintf(out, "\nSteps %s\n", how);
	sp_steps_print(&rep->steps, out);
	print_memory(rep, out);
	print_nccl(rep, o, out);
	print_wait(rep, out);
	sp_stackagg_sites(&rep->sites, path, rep->r, SP_SITES_TOP, out);
	print_findings(rep, out);
}

/* --peers: the arrivals of path and its peers' traces in rep->peers (rep->self: path's index, or -1
 * if it holds no step); a peer that does not load is said through o->note. */
static void load_peers(struct report *rep, const char *path, const struct sp_report_opts *o)
{
	char err[256];

	rep->peers = sp_xrank_new();
	rep->self = sp_xrank_load(rep->peers, path, err, sizeof(err)) == 1 ? 0 : -1;
	for (int i = 0; i < o->npeers; i++) {
		int lrc = sp_xrank_load(rep->peers, o->peers[i], err, sizeof(err));
		if (lrc < 0)
			peer_note(o, err, NULL);
		else if (!lrc)
			peer_note(o, "holds no recorded step; left out", o->peers[i]);
	}
	sp_xrank_analyse(rep->peers);
}

enum sp_report_status sp_report(const char *path, const struct sp_report_opts *o, FILE *out,
				struct sp_report_result *res)
{
	struct sp_report_result dummy;
	struct report rep = { 0 };
	const struct sp_trace_header *h;
	const struct sp_window *w;
	struct sp_windows *g;
	struct sp_nccl_win nw = { 0 };
	int rc, seen = 0;
	enum sp_report_status ret = SP_REPORT_OK;

	if (!res)
		res = &dummy;
	res->why[0] = 0;
	res->seen = 0;
	res->outside = 0;
	res->ids[0] = 0;
	rep.r = sp_trace_open(path, res->why, sizeof(res->why));
	if (!rep.r)
		return SP_REPORT_UNREADABLE;
	h = sp_trace_header(rep.r);
	if (o->npeers) /* a first pass over the trace and its peers: the arrivals */
		load_peers(&rep, path, o);
	g = sp_windows_open(rep.r);
	sp_windows_set_phase(g, o->phase);
	if (o->by_ops)
		rep.ops = sp_opstats_new(o->shapes);
	while ((rc = sp_windows_next(g, &w)) == 1) {
		seen++;
		sp_cli_ids_add(res->ids, sizeof(res->ids), w->id);
		if (o->window < 0 || w->id == o->window)
			add_window(&rep, g, w, &nw, o->by_line);
	}
	for (unsigned d = 0; d < SP_WIN_MAX_DEVICES && !rep.device; d++) /* the peak of TFLOP/s: the first GPU's */
		if (sp_windows_device(g, d))
			rep.device = sp_trace_string(rep.r, sp_windows_device(g, d)->name);
	res->seen = seen;
	res->outside = sp_windows_outside(g);
	res->truncated = sp_trace_truncated(rep.r);
	if (rc < 0) {
		snprintf(res->why, sizeof(res->why), "%s", sp_trace_error(rep.r));
		ret = SP_REPORT_CORRUPT;
	} else if (!rep.nw) {
		res->other_phase = o->phase ? sp_windows_other_phase(g) : 0;
		ret = SP_REPORT_NO_WINDOW;
	}
	if (rep.nw && o->json) {
		print_json(&rep, path, h, o, sp_windows_outside(g), out);
	} else if (rep.nw) {
		print_text(&rep, path, h, o, g, seen, out);
	}
	free(rep.k);
	free(rep.w);
	sp_steps_free(&rep.steps);
	sp_nccl_stats_free(&rep.nccl);
	sp_nccl_win_free(&nw);
	sp_xrank_free(rep.peers);
	sp_stackagg_free(&rep.sites);
	sp_bylines_free(&rep.lines);
	sp_opstats_free(rep.ops);
	sp_windows_close(g);
	sp_trace_close_reader(rep.r);
	return ret;
}
