/* SPDX-License-Identifier: MIT */
/* bylines.c - see bylines.h. A window's launch records give correlation id -> stack (an array
 * over the window's ids, a hash map if they are sparse); kernel time is summed per stack id; at
 * print time each stack becomes its row's text and equal texts are merged. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "bylines.h"
#include "format.h"
#include "symbols.h"

#define LINE_WIDTH 70 /* source line column, unless wide */

#define SINGLE_ENTRY 0.5 /* one user line with at least this share of the time: the program's only entry */

/* What a kernel's launch stack says about its line. */
enum { ROW_USER, ROW_LIBRARY, ROW_NO_PYTHON, ROW_NO_STACK, ROW_NO_LAUNCH };
static const char *const row_what[] = { "user", "library", "no Python frame", "no launch stack", "no launch record" };
static const char *const row_text[] = { NULL, NULL, "(no Python frame)", "(no launch stack)", "(no launch record)" };
static const char *const mode_name[] = { [SP_BYLINES_LINE] = "line", [SP_BYLINES_FRAME] = "frame" };

struct row {
	char *text;             /* merge key and what is printed */
	const char *file, *func;/* NULL without a Python frame */
	uint32_t line;
	int what;               /* ROW_* */
	int backward;           /* launched for autograd's backward pass (SP_FRAME_BACKWARD) */
	uint64_t ns, kernels;
};

static int by_text(const void *a, const void *b)
{
	return strcmp(((const struct row *)a)->text, ((const struct row *)b)->text);
}

static int by_time(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;
	if (a->ns != b->ns)
		return a->ns > b->ns ? -1 : 1;
	return strcmp(a->text, b->text);
}

static char *xasprintf_row(const char *file, uint32_t line, const char *func, int library, int backward)
{
	char *t;
	if (asprintf(&t, "%s%s:%u %s%s", library ? "(library) " : "", file, line, func, backward ? " [backward]" : "") <
	    0)
		sp_oom();
	return t;
}

/* The row of one launch stack (pcs, depth frames; none for id 0 or the launches without a record:
 * orphan) by mode: its frame's text, or why it has none. py: the trace has Python frames. Exits if
 * memory runs out. */
static void row_of(struct row *w, struct sp_sym *sym, const uint64_t *pcs, uint32_t depth, int mode, int orphan,
		   int py)
{
	int user = 0, f = !depth ? -1 : mode == SP_BYLINES_FRAME ? sp_sym_model_frame(sym, pcs, depth)
								: sp_sym_user_frame(sym, pcs, depth, &user);
	if (f >= 0 && sp_sym_pyframe(sym, pcs[f], &w->file, &w->func, &w->line) == 0) {
		int frame = mode == SP_BYLINES_FRAME;
		w->what = (frame ? sp_py_user_file(w->file) : user) ? ROW_USER : ROW_LIBRARY;
		w->backward = sp_stack_backward(pcs, depth);
		w->text = xasprintf_row(frame ? sp_py_short_file(w->file) : w->file, w->line, w->func,
					frame ? !sp_py_model_file(w->file) : !user, w->backward);
		return;
	}
	/* a launch without a stack in a trace with Python frames: its thread ran no Python */
	w->what = orphan ? ROW_NO_LAUNCH : depth || py ? ROW_NO_PYTHON : ROW_NO_STACK;
	if (!(w->text = strdup(row_text[w->what])))
		sp_oom();
}

/* The rows of b by mode, merged by text and sorted by time (descending); *n their count, *total
 * the sum. Exits if memory runs out. */
static struct row *rows_of(const struct sp_bylines *b, const struct sp_trace_reader *r, struct sp_sym *sym, int mode,
			   size_t *n, uint64_t *total)
{
	struct row *l = NULL;
	size_t k = 0;
	int py = (sp_trace_header(r)->meta.features & SP_FEAT_PYSTACKS) != 0;
	*total = 0;
	for (uint32_t id = 0; id <= b->cap; id++) { /* id == cap: the kernels without a launch record */
		uint32_t depth = 0;
		const uint64_t *pcs = id && id < b->cap ? sp_trace_stack(r, id, &depth) : NULL;
		struct row w = id < b->cap ? (struct row){ .ns = b->s[id].ns, .kernels = b->s[id].kernels }
					   : (struct row){ .ns = b->orphan.ns, .kernels = b->orphan.kernels };
		if (!w.kernels)
			continue;
		*total += w.ns;
		row_of(&w, sym, pcs, depth, mode, id == b->cap, py);
		l = sp_xrealloc(l, (k + 1) * sizeof(*l));
		l[k++] = w;
	}
	sp_sort(l, k, sizeof(*l), by_text);
	size_t m = 0;
	for (size_t i = 0; i < k; i++) {
		if (m && !strcmp(l[m - 1].text, l[i].text)) {
			l[m - 1].ns += l[i].ns;
			l[m - 1].kernels += l[i].kernels;
			free(l[i].text);
		} else {
			l[m++] = l[i];
		}
	}
	sp_sort(l, m, sizeof(*l), by_time);
	*n = m;
	return l;
}

static void free_rows(struct row *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(l[i].text);
	free(l);
}

/* ---- exported ---- */

void sp_bylines_begin(struct sp_bylines *b, const struct sp_windows *g)
{
	uint32_t lo = 0, hi = 0;
	uint64_t n = sp_windows_corr_range(g, &lo, &hi);

	free(b->launch.stack);
	free(b->launch.has);
	b->launch.stack = NULL;
	b->launch.has = NULL;
	b->launch.lo = lo;
	b->launch.n = n && (uint64_t)hi - lo < 64 * n + 65536 ? (uint64_t)hi - lo + 1 : 0;
	if (b->launch.n) { /* the ids count up as the program runs: dense */
		b->launch.stack = malloc(b->launch.n * sizeof(*b->launch.stack));
		b->launch.has = calloc((b->launch.n + 63) / 64, sizeof(*b->launch.has));
		if (!b->launch.stack || !b->launch.has)
			sp_oom();
	}
	if (b->launch.used)
		memset(b->launch.key, 0, b->launch.cap * sizeof(*b->launch.key));
	b->launch.used = 0;
}

static size_t slot(const struct sp_bylines *b, uint32_t corr)
{
	size_t h = (corr * 2654435761u) & (b->launch.cap - 1);
	while (b->launch.key[h] && b->launch.key[h] != corr)
		h = (h + 1) & (b->launch.cap - 1);
	return h;
}

/* The launch stack of corr into *stack; 0 if no launch record has that id. */
static int launch_get(const struct sp_bylines *b, uint32_t corr, uint32_t *stack)
{
	uint64_t i = (uint64_t)corr - b->launch.lo;
	if (b->launch.n) {
		if (corr < b->launch.lo || i >= b->launch.n || !(b->launch.has[i / 64] >> (i % 64) & 1))
			return 0;
		*stack = b->launch.stack[i];
		return 1;
	}
	if (!b->launch.used)
		return 0;
	size_t h = slot(b, corr);
	*stack = b->launch.val[h];
	return b->launch.key[h] != 0;
}

/* Sets corr's launch stack. Exits if memory runs out. */
static void launch_put(struct sp_bylines *b, uint32_t corr, uint32_t stack)
{
	uint64_t i = (uint64_t)corr - b->launch.lo;
	if (b->launch.n) {
		if (corr >= b->launch.lo && i < b->launch.n) {
			b->launch.stack[i] = stack;
			b->launch.has[i / 64] |= 1ull << (i % 64);
		}
		return;
	}
	if (2 * (b->launch.used + 1) > b->launch.cap) {
		uint32_t *key = b->launch.key, *val = b->launch.val;
		size_t cap = b->launch.cap;
		b->launch.cap = cap ? 2 * cap : 1024;
		b->launch.key = calloc(b->launch.cap, sizeof(*b->launch.key));
		b->launch.val = calloc(b->launch.cap, sizeof(*b->launch.val));
		if (!b->launch.key || !b->launch.val)
			sp_oom();
		for (size_t k = 0; k < cap; k++)
			if (key[k]) {
				size_t h = slot(b, key[k]);
				b->launch.key[h] = key[k];
				b->launch.val[h] = val[k];
			}
		free(key);
		free(val);
	}
	size_t h = slot(b, corr);
	b->launch.used += !b->launch.key[h];
	b->launch.key[h] = corr;
	b->launch.val[h] = stack;
}

void sp_bylines_call(struct sp_bylines *b, const struct sp_event *e)
{
	uint32_t had;
	if (e->kind != SP_EV_API || !e->corr)
		return;
	/* a driver call nested in a runtime launch has its id and no stack: the launch's stack wins */
	if (!launch_get(b, e->corr, &had) || (!had && e->u.api.stack))
		launch_put(b, e->corr, e->u.api.stack);
}

void sp_bylines_kernel(struct sp_bylines *b, const struct sp_event *e)
{
	uint32_t stack;
	if (e->kind != SP_EV_KERNEL)
		return;
	uint64_t ns = e->end > e->start ? e->end - e->start : 0;
	if (!e->corr || !launch_get(b, e->corr, &stack)) {
		b->orphan.ns += ns;
		b->orphan.kernels++;
		return;
	}
	if (stack >= b->cap)
		b->s = sp_xgrow(b->s, &b->cap, sizeof(*b->s), stack);
	b->s[stack].ns += ns;
	b->s[stack].kernels++;
}

/* In mode line: 1 if the program's own code reaches the GPU through one line only (HF Trainer's
 * trainer.train()): every user row is that line, with at least SINGLE_ENTRY of the time; its text
 * (without a backward mark) into entry. Can't fail. */
static int single_entry(const struct row *l, size_t n, uint64_t total, char *entry, size_t len)
{
	const struct row *one = NULL;
	uint64_t ns = 0;
	for (size_t i = 0; i < n; i++) {
		if (l[i].what != ROW_USER)
			continue;
		if (one && (strcmp(one->file, l[i].file) || one->line != l[i].line))
			return 0;
		one = &l[i];
		ns += l[i].ns;
	}
	if (!one || (double)ns < SINGLE_ENTRY * (double)total)
		return 0;
	snprintf(entry, len, "%s:%u %s, %.0f%% of GPU time", one->file, one->line, one->func, 100.0 * ns / total);
	return 1;
}

/* The rows by mode; in mode line, if the program's own code has a single entry point, the rows of
 * mode frame instead (*mode set to it, the entry's text in entry, else ""). Exits on OOM. */
static struct row *rows_for(const struct sp_bylines *b, const struct sp_trace_reader *r, struct sp_sym *sym, int *mode,
			    char *entry, size_t len, size_t *n, uint64_t *total)
{
	struct row *l = rows_of(b, r, sym, *mode, n, total);
	entry[0] = 0;
	if (*mode == SP_BYLINES_LINE && single_entry(l, *n, *total, entry, len)) {
		free_rows(l, *n);
		*mode = SP_BYLINES_FRAME;
		l = rows_of(b, r, sym, *mode, n, total);
	}
	return l;
}

/* The text above the table: what a row is, by mode, and why mode frame was chosen (entry). */
static void print_head(FILE *out, int mode, const char *entry)
{
	if (mode == SP_BYLINES_LINE) {
		fprintf(out,
			"GPU kernel time by source line: the innermost Python frame of the program's own code at each\n"
			"launch (frames under site-packages/, dist-packages/, lib/python3*, torch/ or <frozen ...> are\n"
			"library code; \"(library)\" rows had no frame of the program's own)\n");
		return;
	}
	if (entry[0])
		fprintf(out, "The program's own code reaches the GPU through one line only (%s):\n"
			     "by frame instead, as --by frame shows it.\n",
			entry);
	fprintf(out, "GPU kernel time by Python frame: the innermost frame outside torch and the standard library at\n"
		     "each launch, the program's own code or an installed package's (transformers, timm, ...);\n"
		     "\"(library)\" rows had no such frame\n");
}

void sp_bylines_print(const struct sp_bylines *b, const struct sp_trace_reader *r, int mode, int top, int wide,
		      FILE *out)
{
	struct sp_sym *sym = sp_sym_open();
	size_t n, shown;
	uint64_t total, rest = 0, kernels = 0;
	char t[2][32], entry[512];
	int width = LINE_WIDTH, backward = 0;

	sp_sym_use_trace(sym, r);
	struct row *l = rows_for(b, r, sym, &mode, entry, sizeof(entry), &n, &total);
	shown = top > 0 && (size_t)top < n ? (size_t)top : n;
	if (!n) {
		fprintf(out, "No GPU kernels recorded.\n");
		goto done;
	}
	for (size_t i = 0; wide && i < shown; i++)
		width = (int)strlen(l[i].text) > width ? (int)strlen(l[i].text) : width;
	print_head(out, mode, entry);
	fprintf(out, "%-*s %12s %7s %9s\n", width, mode == SP_BYLINES_LINE ? "Source line" : "Frame", "Total", "% GPU",
		"Kernels");
	for (int i = 0; i < width; i++)
		fputc('-', out);
	fprintf(out, " ------------ ------- ---------\n");
	for (size_t i = 0; i < n; i++) {
		kernels += l[i].kernels;
		backward |= l[i].backward;
		if (i >= shown) {
			rest += l[i].ns;
			continue;
		}
		sp_print_name(out, l[i].text, width);
		fprintf(out, " %12s %6.1f%% %9" PRIu64 "\n", sp_fmt_ns(t[0], 32, l[i].ns),
			total ? 100.0 * l[i].ns / total : 0, l[i].kernels);
	}
	if (shown < n)
		fprintf(out, "... %zu more line%s: %s, %.1f%% of GPU time (--top 0 shows all)\n", n - shown,
			n - shown == 1 ? "" : "s", sp_fmt_ns(t[0], 32, rest), total ? 100.0 * rest / total : 0);
	fprintf(out, "%-*s %12s %6.1f%% %9" PRIu64 "\n", width, "Total", sp_fmt_ns(t[1], 32, total), 100.0, kernels);
	if (backward)
		fprintf(out,
			"[backward]: kernels that autograd's threads launched while the program waited in backward()\n"
			"called from that line (those threads run no Python: the frames are the waiting thread's)\n");
	if (!(sp_trace_header(r)->meta.features & SP_FEAT_PYSTACKS))
		fprintf(out, "Note: recorded without Python frames: record with [activities] stacks = python or both "
			     "to see source lines\n");
done:
	free_rows(l, n);
	sp_sym_close(sym);
}

void sp_bylines_json(const struct sp_bylines *b, const struct sp_trace_reader *r, int mode, struct sp_out *x)
{
	struct sp_sym *sym = sp_sym_open();
	size_t n;
	uint64_t total;
	char entry[512];
	int asked = mode;
	sp_sym_use_trace(sym, r);
	struct row *l = rows_for(b, r, sym, &mode, entry, sizeof(entry), &n, &total);
	sp_out_puts(x, "[");
	for (size_t i = 0; i < n; i++) {
		sp_out_puts(x, i ? ",\n{\"file\":" : "\n{\"file\":");
		l[i].file ? sp_out_json_str(x, l[i].file) : sp_out_puts(x, "null");
		l[i].file ? sp_out_printf(x, ",\"line\":%u,\"function\":", l[i].line)
			  : sp_out_puts(x, ",\"line\":null,\"function\":");
		l[i].func ? sp_out_json_str(x, l[i].func) : sp_out_puts(x, "null");
		sp_out_printf(x,
			      ",\"user\":%s,\"what\":\"%s\",\"backward\":%s,\"by\":\"%s\",\"auto\":%s,"
			      "\"total_ns\":%" PRIu64 ",\"kernels\":%" PRIu64 "}",
			      l[i].what == ROW_USER ? "true" : "false", row_what[l[i].what],
			      l[i].backward ? "true" : "false", mode_name[mode], mode != asked ? "true" : "false",
			      l[i].ns, l[i].kernels);
	}
	sp_out_puts(x, "]");
	free_rows(l, n);
	sp_sym_close(sym);
}

void sp_bylines_free(struct sp_bylines *b)
{
	free(b->s);
	free(b->launch.stack);
	free(b->launch.has);
	free(b->launch.key);
	free(b->launch.val);
	memset(b, 0, sizeof(*b));
}
