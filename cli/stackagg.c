/* SPDX-License-Identifier: MIT */
/* stackagg.c - stack aggregation (see stackagg.h). A table per class indexed by stack id while reading; at print time
 * each stack becomes a line (or a site) of text, and equal texts are merged after sorting, so
 * distinct stacks that name the same functions add up. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"
#include "stackagg.h"
#include "memtl.h"

#define SITE_WIDTH 60 /* site column of the sites table */

struct line {
	char *text;
	uint64_t calls, bytes;
	int owner;              /* sites: SP_OWNER_* of GPU allocations, -1 host (or not a site) */
};

static const char *const class_root[SP_FOLD_CLASSES] = { "[alloc]", "[launch]", "[nccl]" };

/* The class of ev (0 alloc, 1 launch, 2 nccl) and its stack id and bytes; -1 if none. */
static int classify(const struct sp_trace_reader *r, const struct sp_event *ev, uint32_t *stack, uint64_t *bytes)
{
	switch (ev->kind) {
	case SP_EV_ALLOC:
		if (ev->u.mem.flags & (SP_MEMF_SNAPSHOT | SP_MEMF_PEAK))
			return -1;
		*stack = ev->u.mem.stack;
		*bytes = ev->u.mem.size;
		return 0;
	case SP_EV_API:
		*stack = ev->u.api.stack;
		*bytes = 0;
		/* without a stack: stacks off, or the driver call nested in a runtime launch (counted there) */
		return ev->u.api.stack && strstr(sp_trace_string(r, ev->name), "aunch") ? 1 : -1;
	case SP_EV_NCCL:
		*stack = ev->u.nccl.stack;
		*bytes = ev->u.nccl.bytes;
		return 2;
	default:
		return -1;
	}
}

static void append(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	if (*len + n + 1 > *cap) {
		*cap = (*len + n + 1) * 2;
		*buf = sp_xrealloc(*buf, *cap);
	}
	memcpy(*buf + *len, s, n + 1);
	*len += n;
}

static int by_text(const void *pa, const void *pb)
{
	const struct line *a = pa, *b = pb;
	int d = strcmp(a->text, b->text);
	return d ? d : a->owner - b->owner;
}

static int by_bytes_desc(const void *pa, const void *pb)
{
	const struct line *a = pa, *b = pb;
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return strcmp(a->text, b->text);
}

/* Sorts lines by text and merges equal ones. Returns the new count. */
static size_t merge(struct line *l, size_t n)
{
	size_t k = 0;
	sp_sort(l, n, sizeof(*l), by_text);
	for (size_t i = 0; i < n; i++) {
		if (k && !strcmp(l[k - 1].text, l[i].text) && l[k - 1].owner == l[i].owner) {
			l[k - 1].calls += l[i].calls;
			l[k - 1].bytes += l[i].bytes;
			free(l[i].text);
		} else {
			l[k++] = l[i];
		}
	}
	return k;
}

/* ---- exported ---- */

void sp_stackagg_add(struct sp_stackagg *a, const struct sp_trace_reader *r, const struct sp_event *ev, unsigned mask)
{
	uint32_t stack;
	uint64_t bytes;
	int c = classify(r, ev, &stack, &bytes);

	if (c < 0 || !(mask & (1u << c)))
		return;
	stack = sp_trace_stack_index(r, stack); /* dense: the table is as small as the file */
	if (stack >= a->cap[c]) {
		size_t cap = a->cap[c] ? a->cap[c] : 64;
		while (cap <= stack)
			cap *= 2;
		a->c[c] = sp_xrealloc(a->c[c], cap * sizeof(*a->c[c]));
		memset(a->c[c] + a->cap[c], 0, (cap - a->cap[c]) * sizeof(*a->c[c]));
		a->cap[c] = (uint32_t)cap;
	}
	a->c[c][stack].calls++;
	a->c[c][stack].bytes += bytes;
	a->c[c][stack].device += c == 0 && ev->device != SP_NO_DEVICE;
	a->total[c]++;
}

size_t sp_stackagg_folded(const struct sp_stackagg *a, unsigned mask, int by_bytes, const struct sp_trace_reader *r,
			  struct sp_sym *sym, FILE *out)
{
	struct line *l = NULL;
	size_t n = 0, written = 0;
	int several = (mask & (mask - 1)) != 0;

	for (int c = 0; c < SP_FOLD_CLASSES; c++) {
		if (!(mask & (1u << c)))
			continue;
		for (uint32_t id = 0; id < a->cap[c]; id++) {
			uint64_t w = by_bytes ? a->c[c][id].bytes : a->c[c][id].calls;
			uint32_t depth = 0;
			const uint64_t *pcs = id ? sp_trace_stack(r, sp_trace_stack_id(r, id), &depth) : NULL;
			char *buf = NULL;
			size_t len = 0, cap = 0;
			if (!w)
				continue;
			if (several)
				append(&buf, &len, &cap, class_root[c]);
			if (!depth)
				append(&buf, &len, &cap, several ? ";[no stack]" : "[no stack]");
			for (uint32_t f = depth; f-- > 0;) {
				if (len)
					append(&buf, &len, &cap, ";");
				size_t from = len;
				append(&buf, &len, &cap, sp_sym_function(sym, pcs[f]));
				for (char *p = buf + from; *p; p++)
					if (*p == ';' || *p == '\n' || *p == '\r')
						*p = '_';
			}
			l = sp_xrealloc(l, (n + 1) * sizeof(*l));
			l[n++] = (struct line){ buf, a->c[c][id].calls, a->c[c][id].bytes, -1 };
		}
	}
	n = merge(l, n);
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "%s %" PRIu64 "\n", l[i].text, by_bytes ? l[i].bytes : l[i].calls);
		written++;
		free(l[i].text);
	}
	free(l);
	return written;
}

/* The allocation sites of a: merged by innermost frame, by bytes descending; *n gets their count.
 * The caller frees each text and the array. Exits if memory runs out. */
static struct line *collect_sites(const struct sp_stackagg *a, const char *path, const struct sp_trace_reader *r,
				  size_t *n)
{
	struct sp_sym *sym;
	struct line *l = NULL;
	char err[256];

	*n = 0;
	sym = sp_sym_open();
	sp_sym_load_trace(sym, path, err, sizeof(err));
	sp_sym_use_trace(sym, r);
	for (uint32_t id = 0; id < a->cap[0]; id++) {
		uint32_t depth = 0;
		const uint64_t *pcs = id ? sp_trace_stack(r, sp_trace_stack_id(r, id), &depth) : NULL;
		char *text;
		if (!a->c[0][id].calls)
			continue;
		char why[128];
		int owner = a->c[0][id].device ? sp_memtl_owner(sym, pcs, pcs ? depth : 0, why, sizeof(why)) : -1;
		text = strdup(sp_sym_site(sym, pcs, depth));
		if (!text)
			sp_oom();
		l = sp_xrealloc(l, (*n + 1) * sizeof(*l));
		l[(*n)++] = (struct line){ text, a->c[0][id].calls, a->c[0][id].bytes, owner };
	}
	*n = merge(l, *n);
	sp_sort(l, *n, sizeof(*l), by_bytes_desc);
	sp_sym_close(sym);
	return l;
}

void sp_stackagg_sites(const struct sp_stackagg *a, const char *path, const struct sp_trace_reader *r, int top,
		       FILE *out)
{
	struct line *l;
	size_t n = 0;
	char b[32];

	if (!a->total[0])
		return;
	l = collect_sites(a, path, r, &n);
	fprintf(out, "\n%-*s %12s %8s  %s\n", SITE_WIDTH, "Top allocation sites by bytes", "Bytes", "Calls",
		"Owner (GPU)");
	for (size_t i = 0; i < n; i++) {
		if ((int)i < top) {
			int len = (int)strlen(l[i].text);
			if (len > SITE_WIDTH)
				fprintf(out, "%.*s...", SITE_WIDTH - 3, l[i].text);
			else
				fprintf(out, "%-*s", SITE_WIDTH, l[i].text);
			fprintf(out, " %12s %8" PRIu64 "%s%s\n", sp_memtl_bytes(b, sizeof(b), l[i].bytes), l[i].calls,
				l[i].owner >= 0 ? "  " : "", l[i].owner >= 0 ? sp_memtl_owner_label(l[i].owner) : "");
		}
		free(l[i].text);
	}
	if (n > (size_t)top)
		fprintf(out, "... %zu more sites\n", n - (size_t)top);
	free(l);
}

void sp_stackagg_sites_json(const struct sp_stackagg *a, const char *path, const struct sp_trace_reader *r,
			    struct sp_out *x)
{
	struct line *l = NULL;
	size_t n = 0;

	if (a->total[0])
		l = collect_sites(a, path, r, &n);
	sp_out_puts(x, "[");
	for (size_t i = 0; i < n; i++) {
		sp_out_puts(x, i ? ",\n{\"site\":" : "\n{\"site\":");
		sp_out_json_str(x, l[i].text);
		sp_out_printf(x, ",\"bytes\":%" PRIu64 ",\"calls\":%" PRIu64 ",\"owner\":", l[i].bytes, l[i].calls);
		if (l[i].owner >= 0)
			sp_out_printf(x, "\"%s\"}", sp_memtl_owner_key(l[i].owner));
		else
			sp_out_puts(x, "null}");
		free(l[i].text);
	}
	sp_out_puts(x, "]");
	free(l);
}

void sp_stackagg_free(struct sp_stackagg *a)
{
	for (int c = 0; c < SP_FOLD_CLASSES; c++)
		free(a->c[c]);
	memset(a, 0, sizeof(*a));
}
