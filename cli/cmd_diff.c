/* SPDX-License-Identifier: MIT */
/* cmd_diff.c - `stepprof diff BASE NEW [--window N|all] [--top N] [--json]`: what changed between two traces
 * (two runs, two commits, two ranks): kernel time per recorded step by kernel name, largest change
 * first, and the median step time of each. Per step, so windows of different lengths compare. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "opts.h"
#include "export.h"
#include "format.h"
#include "steps.h"
#include "symbols.h"

#define DIFF_TOP 20 /* rows shown by default */
#define SP_DIFF_NAME_WIDTH 50

struct krow {
	char *name;             /* raw kernel name (owned) */
	uint64_t calls, total;  /* ns */
};

struct side {
	struct krow *k;         /* sorted by name once loaded */
	size_t n;
	struct sp_steps steps;
	uint64_t total;         /* all kernel time */
};

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct krow *)a)->name, ((const struct krow *)b)->name);
}

/* What the passes over a window work with. */
struct pass {
	struct side *s;
	struct sp_trace_reader *r;
	struct sp_windows *g;
	size_t *byid, cap;      /* byid[name index] = row + 1, growing as ids appear */
};

/* A window's event: its kernel into its row by name, its GPU work into its step. Exits if memory
 * runs out. */
static void add_event(void *ctx, const struct sp_event *e)
{
	struct pass *p = ctx;
	struct side *s = p->s;
	sp_steps_event(&s->steps, p->r, e, sp_windows_anchor(p->g, e));
	if (e->kind != SP_EV_KERNEL)
		return;
	uint32_t x = sp_trace_string_index(p->r, e->name); /* dense: byid is as small as the file */
	p->byid = sp_xgrow(p->byid, &p->cap, sizeof(*p->byid), x);
	if (!p->byid[x]) {
		const char *name = sp_trace_string(p->r, e->name);
		s->k = sp_xrealloc(s->k, (s->n + 1) * sizeof(*s->k));
		s->k[s->n] = (struct krow){ strdup(name ? name : "?"), 0, 0 };
		if (!s->k[s->n].name)
			sp_oom();
		p->byid[x] = ++s->n;
	}
	struct krow *k = &s->k[p->byid[x] - 1];
	uint64_t d = e->end > e->start ? e->end - e->start : 0;
	k->calls++;
	k->total += d;
	s->total += d;
}

static void add_gpu(void *ctx, const struct sp_event *e)
{
	sp_steps_sweep(&((struct pass *)ctx)->s->steps, e);
}

/* Reads path's windows (all, or only window) into s, and the ids of all its windows into ids.
 * Returns 0, 1 after a message (unreadable or corrupt), or 2 when it holds no recorded step there
 * (no message: the caller says it once for both traces). */
static int load(const char *path, long long window, struct side *s, char *ids, size_t idlen)
{
	char err[512];
	const struct sp_window *w;
	int rc;
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	struct pass p = { .s = s, .r = r };

	if (!r) {
		fprintf(stderr, "stepprof diff: %s\n", err);
		return 1;
	}
	struct sp_windows *g = p.g = sp_windows_open(r);
	while ((rc = sp_windows_next(g, &w)) == 1) {
		sp_cli_ids_add(ids, idlen, w->id);
		if (window < 0 || w->id == window) {
			sp_steps_begin(&s->steps, w);
			sp_windows_each(g, add_event, &p);
			sp_windows_sorted(g, sp_ev_is_gpu, add_gpu, &p);
			sp_steps_end(&s->steps);
		}
	}
	if (rc < 0)
		fprintf(stderr, "stepprof diff: %s: %s\n", path, sp_trace_error(r));
	free(p.byid);
	sp_windows_close(g);
	sp_trace_close_reader(r);
	sp_sort(s->k, s->n, sizeof(*s->k), cmp_name);
	return rc < 0 ? 1 : !s->steps.n ? 2 : 0;
}

/* One message for the traces that hold no recorded step (rc[k] == 2), naming each with the
 * windows it has. This function can't fail. */
static void say_no_steps(const char *const *path, const int *rc, char ids[2][96], long long window)
{
	char where[64] = "";

	if (window >= 0)
		snprintf(where, sizeof where, " in window %lld", window);
	if (rc[0] == 2 && rc[1] == 2)
		fprintf(stderr, "stepprof diff: no recorded step%s of either trace (BASE %s: windows %s; NEW %s: windows %s)\n",
			where, path[0], ids[0][0] ? ids[0] : "none", path[1], ids[1][0] ? ids[1] : "none");
	else
		fprintf(stderr, "stepprof diff: no recorded step%s of %s (its windows: %s)\n", where,
			path[rc[0] == 2 ? 0 : 1], ids[rc[0] == 2 ? 0 : 1][0] ? ids[rc[0] == 2 ? 0 : 1] : "none");
}

struct drow {
	const char *name;
	double calls[2], ns[2]; /* per step, base and new */
};

static int cmp_delta(const void *a, const void *b)
{
	const struct drow *x = a, *y = b;
	double dx = x->ns[1] - x->ns[0], dy = y->ns[1] - y->ns[0];
	dx = dx < 0 ? -dx : dx;
	dy = dy < 0 ? -dy : dy;
	return dx != dy ? (dx < dy ? 1 : -1) : strcmp(x->name, y->name);
}

/* The rows of both sides merged by name (per step), largest change first; *nrows gets their count.
 * The caller frees the array (names stay owned by s). Exits if memory runs out. */
static struct drow *diff_rows(const struct side *s, size_t *nrows)
{
	struct drow *rows = sp_xrealloc(NULL, (s[0].n + s[1].n + 1) * sizeof(*rows));
	size_t n = 0, i = 0, j = 0;
	double steps[2] = { (double)s[0].steps.n, (double)s[1].steps.n };

	while (i < s[0].n || j < s[1].n) { /* merge the two name-sorted lists */
		int c = i == s[0].n ? 1 : j == s[1].n ? -1 : strcmp(s[0].k[i].name, s[1].k[j].name);
		struct drow *r = &rows[n++];
		memset(r, 0, sizeof(*r));
		if (c <= 0) {
			r->name = s[0].k[i].name;
			r->calls[0] = s[0].k[i].calls / steps[0];
			r->ns[0] = s[0].k[i].total / steps[0];
			i++;
		}
		if (c >= 0) {
			r->name = s[1].k[j].name;
			r->calls[1] = s[1].k[j].calls / steps[1];
			r->ns[1] = s[1].k[j].total / steps[1];
			j++;
		}
	}
	sp_sort(rows, n, sizeof(*rows), cmp_delta);
	*nrows = n;
	return rows;
}

/* The comparison as one JSON object (schema stepprof.diff): both sides' step counts, median step
 * and kernel time per step, and every kernel row. This function can't fail (exits on OOM). */
static void print_diff_json(const struct side *s, const char *const *path, FILE *out)
{
	struct sp_out *x = sp_out_stream(out);
	size_t n;
	struct drow *rows = diff_rows(s, &n);

	sp_out_puts(x, "{");
	sp_cli_json_head(x, "diff");
	for (int k = 0; k < 2; k++) {
		sp_out_puts(x, k ? ",\n\"new\":{\"trace\":" : "\"base\":{\"trace\":");
		sp_out_json_str(x, path[k]);
		sp_out_printf(x, ",\"steps\":%zu,\"median_step_ns\":%llu,\"kernel_ns_per_step\":%.1f}", s[k].steps.n,
			      (unsigned long long)sp_steps_median_ns(&s[k].steps), (double)s[k].total / s[k].steps.n);
	}
	sp_out_puts(x, ",\n\"kernels\":[");
	for (size_t i = 0; i < n; i++) {
		sp_out_puts(x, i ? ",\n{\"name\":" : "\n{\"name\":");
		sp_out_json_str(x, sp_display_name(rows[i].name));
		sp_out_puts(x, ",\"raw_name\":");
		sp_out_json_str(x, rows[i].name);
		sp_out_printf(x, ",\"calls_per_step\":[%.3f,%.3f],\"ns_per_step\":[%.1f,%.1f]}", rows[i].calls[0],
			      rows[i].calls[1], rows[i].ns[0], rows[i].ns[1]);
	}
	sp_out_puts(x, "]}\n");
	sp_out_close(x, 1);
	free(rows);
}

static void print_diff(const struct side *s, const char *const *path, int top, int wide, FILE *out)
{
	size_t n, shown;
	int width = SP_DIFF_NAME_WIDTH, cut = 0;
	struct drow *rows = diff_rows(s, &n);
	double steps[2] = { (double)s[0].steps.n, (double)s[1].steps.n };
	uint64_t med[2] = { sp_steps_median_ns(&s[0].steps), sp_steps_median_ns(&s[1].steps) };
	char t[6][32];
	double k0 = s[0].total / steps[0], k1 = s[1].total / steps[1];
	fprintf(out, "base %s: %zu step%s, median step %s, kernel time %s per step\n", path[0], s[0].steps.n,
		sp_plural(s[0].steps.n), sp_fmt_ns(t[0], 32, med[0]), sp_fmt_ns(t[1], 32, (uint64_t)(k0 + 0.5)));
	fprintf(out, "new  %s: %zu step%s, median step %s (%+.1f%%), kernel time %s per step (%+.1f%%)\n\n", path[1],
		s[1].steps.n, sp_plural(s[1].steps.n), sp_fmt_ns(t[0], 32, med[1]),
		med[0] ? 100.0 * ((double)med[1] - med[0]) / med[0] : 0.0, sp_fmt_ns(t[1], 32, (uint64_t)(k1 + 0.5)),
		k0 > 0 ? 100.0 * (k1 - k0) / k0 : 0.0);
	shown = top > 0 && (size_t)top < n ? (size_t)top : n;
	for (size_t k = 0; k < shown; k++) { /* --wide: the column as wide as the longest name shown */
		int len = (int)strlen(sp_display_name(rows[k].name));
		cut |= len > SP_DIFF_NAME_WIDTH;
		width = wide && len > width ? len : width;
	}
	fprintf(out, "%-*s %10s %10s %12s %12s %12s %8s\n", width, "Kernel (per step)", "Calls base", "Calls new",
		"Time base", "Time new", "Delta", "Delta %");
	for (size_t k = 0; k < shown; k++) {
		const struct drow *r = &rows[k];
		sp_print_name(out, sp_display_name(r->name), width);
		fprintf(out, " %10.1f %10.1f %12s %12s %12s ", r->calls[0], r->calls[1],
			r->ns[0] > 0 ? sp_fmt_ns(t[0], 32, (uint64_t)(r->ns[0] + 0.5)) : "-",
			r->ns[1] > 0 ? sp_fmt_ns(t[1], 32, (uint64_t)(r->ns[1] + 0.5)) : "-",
			sp_fmt_sns(t[2], 32, llround(r->ns[1] - r->ns[0])));
		if (r->ns[0] > 0)
			fprintf(out, "%+7.1f%%\n", 100.0 * (r->ns[1] - r->ns[0]) / r->ns[0]);
		else
			fprintf(out, "%8s\n", "new");
	}
	if (shown < n)
		fprintf(out, "... %zu more kernel names (--top 0 shows all)\n", n - shown);
	if (cut && !wide)
		fprintf(out, "(names cut at %d characters: --wide shows them whole)\n", SP_DIFF_NAME_WIDTH);
	free(rows);
}

const struct sp_cmd_spec sp_spec_diff = {
	.name = "diff",
	.fn = sp_cmd_diff,
	.operands = "BASE NEW",
	.complete = "TRACE",
	.summary = "kernel time per step by kernel between two traces: what changed",
	.text = "  Kernel time per recorded step by kernel name, BASE against NEW (two runs, two commits,\n"
		"  two ranks), largest change first, and the median step time of each.\n",
	.opt = (const struct sp_opt[]){
		{ "window", 'w', 0, "N|all", "compare window N of each trace (default all)" },
		{ "top", 't', 0, "N", "rows (default " SP_STR(DIFF_TOP) ", 0 = all)" },
		{ "wide", 'W', 0, NULL, "full kernel names (default: cut at " SP_STR(SP_DIFF_NAME_WIDTH) " characters)" },
		{ "json", 'j', 0, NULL, "one JSON object with every row" },
		{ 0 } },
};

static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_diff, f);
	return rc;
}

/* Exit status: 0 printed; 1 a trace unreadable, corrupt or without a recorded step; 2 usage. */
int sp_cmd_diff(int argc, char **argv)
{
	const char *path[2];
	long long window = -1, top = DIFF_TOP;
	struct side s[2];
	int c, ret = 0, json = 0, wide = 0;

	optind = 0;
	while ((c = sp_opts_next(&sp_spec_diff, argc, argv)) != -1) {
		switch (c) {
		case 'w':
			if (sp_cli_window("diff", optarg, &window) < 0)
				return usage(stderr, 2);
			break;
		case 't':
			if (sp_opts_count("diff", "top", optarg, 0, 1000000000, &top) < 0)
				return usage(stderr, 2);
			break;
		case 'W':
			wide = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			return usage(stderr, 2);
		}
	}
	if (sp_cli_operands("diff", argc, argv, 2, 2))
		return usage(stderr, 2);
	path[0] = argv[optind];
	path[1] = argv[optind + 1];
	memset(s, 0, sizeof(s));
	char ids[2][96] = { "", "" };
	int rc[2];
	for (int k = 0; k < 2; k++)
		ret |= rc[k] = load(path[k], window, &s[k], ids[k], sizeof ids[k]);
	if ((rc[0] == 2 || rc[1] == 2) && rc[0] != 1 && rc[1] != 1)
		say_no_steps(path, rc, ids, window);
	ret = ret != 0;
	if (!ret && json)
		print_diff_json(s, path, stdout);
	else if (!ret)
		print_diff(s, path, (int)top, wide, stdout);
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < s[k].n; i++)
			free(s[k].k[i].name);
		free(s[k].k);
		sp_steps_free(&s[k].steps);
	}
	return ret;
}
