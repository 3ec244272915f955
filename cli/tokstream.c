/* SPDX-License-Identifier: MIT */
/* tokstream.c - loading a recorded token stream and its statistics (see tokstream.h). */
#include <stdlib.h>
#include <string.h>
#include "tokstream.h"
#include "windows.h"
#include "collector/base/intern.h"

#define TOP_NAMES 8 /* most frequent names printed per kind */

int sp_tokstream_load(struct sp_tokstream *s, const char *path, char *err, size_t errlen)
{
	struct sp_tok_reader *r = sp_tok_open(path, err, errlen);
	uint32_t *map = NULL;
	size_t cap = 0, map_cap = 0;
	struct sp_token t;
	int rc;
	memset(s, 0, sizeof *s);
	if (!r)
		return -1;
	s->h = *sp_tok_get_header(r);
	while ((rc = sp_tok_next(r, &t, err, errlen)) == 1) {
		if (t.name) {
			map = sp_xgrow(map, &map_cap, sizeof *map, t.name);
			if (!map[t.name]) {
				const char *nm = sp_tok_name(r, t.name);
				map[t.name] = sp_intern(nm ? nm : "?");
			}
			t.name = map[t.name];
		}
		s->tok = sp_xgrow(s->tok, &cap, sizeof *s->tok, s->n);
		s->tok[s->n++] = t;
		s->truth += t.kind == SP_TOK_TRUTH;
	}
	s->truncated = sp_tok_truncated(r);
	free(map);
	sp_tok_close_reader(r);
	if (rc < 0) {
		size_t k = strlen(err);
		snprintf(err + k, errlen - k, " (%s, after %zu tokens)", path, s->n);
		sp_tokstream_free(s);
		return -1;
	}
	return 0;
}

void sp_tokstream_free(struct sp_tokstream *s)
{
	free(s->tok);
	memset(s, 0, sizeof *s);
}

struct name_count {
	uint32_t name;
	uint64_t n;
};

static int by_count(const void *a, const void *b)
{
	const struct name_count *x = a, *y = b;
	return x->n != y->n ? (x->n < y->n ? 1 : -1) : (x->name > y->name) - (x->name < y->name);
}

void sp_tokstream_json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

/* Prints the most frequent names of kind k (json: array elements, a comma first unless *first). */
static void top_names(const struct sp_tokstream *s, int k, FILE *out, int json, int *first)
{
	size_t cap = 0, used = 0;
	struct name_count *c = NULL;
	uint64_t *slot = NULL; /* interned id -> index + 1 in c */
	size_t slot_cap = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (s->tok[i].kind != k)
			continue;
		uint32_t nm = s->tok[i].name;
		slot = sp_xgrow(slot, &slot_cap, sizeof *slot, nm);
		if (!slot[nm]) {
			c = sp_xgrow(c, &cap, sizeof *c, used);
			c[used].name = nm;
			slot[nm] = ++used;
		}
		c[slot[nm] - 1].n++;
	}
	sp_sort(c, used, sizeof *c, by_count);
	for (size_t i = 0; i < used && i < TOP_NAMES; i++) {
		const char *nm = c[i].name ? sp_intern_lookup(c[i].name) : "(none)";
		if (json) {
			fprintf(out, "%s{\"kind\":\"%s\",\"count\":%llu,\"name\":", *first ? "" : ",",
				sp_tok_kind_name(k), (unsigned long long)c[i].n);
			sp_tokstream_json_str(out, nm);
			fputc('}', out);
			*first = 0;
		} else
			fprintf(out, "  %-9s %10llu  %.100s\n", sp_tok_kind_name(k), (unsigned long long)c[i].n, nm);
	}
	free(c);
	free(slot);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

void sp_tokstream_stats(const struct sp_tokstream *s, FILE *out, int json)
{
	uint64_t kinds[SP_TOK_KIND_MAX + 1] = { 0 }, *per = NULL;
	uint32_t threads[64];
	size_t nthreads = 0, niter = 0, cap = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct sp_token *t = &s->tok[i];
		kinds[t->kind <= SP_TOK_KIND_MAX ? t->kind : 0]++;
		size_t k = 0;
		while (k < nthreads && threads[k] != t->tid)
			k++;
		if (k == nthreads && nthreads < 64)
			threads[nthreads++] = t->tid;
		if (t->kind == SP_TOK_TRUTH) { /* kernels per true iteration (the last one is cut by the exit) */
			per = sp_xgrow(per, &cap, sizeof *per, niter);
			niter++;
		} else if (t->kind == SP_TOK_KERNEL && niter) {
			per[niter - 1]++;
		}
	}
	double dur = s->n ? (s->tok[s->n - 1].ts - s->tok[0].ts) / 1e9 : 0;
	uint64_t med = 0, lo = 0, hi = 0;
	if (niter > 1) {
		sp_sort(per, niter - 1, sizeof *per, cmp_u64);
		lo = per[0], med = per[(niter - 1) / 2], hi = per[niter - 2];
	}
	if (json) {
		int first = 1;
		fprintf(out, "\"stream\":{\"version\":%u,\"pid\":%d,\"stepprof\":", s->h.version, s->h.pid);
		sp_tokstream_json_str(out, s->h.stepprof);
		fprintf(out, ",\"host\":");
		sp_tokstream_json_str(out, s->h.host);
		fprintf(out, ",\"truth\":");
		sp_tokstream_json_str(out, s->h.truth);
		fprintf(out, ",\"tokens\":%zu,\"truncated\":%d,\"threads\":%zu,\"seconds\":%.3f,\"kinds\":{", s->n,
			s->truncated, nthreads, dur);
		for (int k = 1; k <= SP_TOK_KIND_MAX; k++)
			fprintf(out, "%s\"%s\":%llu", k > 1 ? "," : "", sp_tok_kind_name(k),
				(unsigned long long)kinds[k]);
		fprintf(out,
			"},\"true_iterations\":%zu,\"kernels_per_true_iteration\":{\"min\":%llu,\"median\":%llu,"
			"\"max\":%llu},\"top\":[",
			niter, (unsigned long long)lo, (unsigned long long)med, (unsigned long long)hi);
		for (int k = 1; k < SP_TOK_TRUTH; k++)
			top_names(s, k, out, 1, &first);
		fprintf(out, "]}");
		free(per);
		return;
	}
	fprintf(out, "stream: version %u, written by stepprof %s, pid %d on %s\n  command: %.200s\n", s->h.version,
		s->h.stepprof, s->h.pid, s->h.host, s->h.command);
	fprintf(out, "tokens: %zu over %.3f s on %zu thread%s%s\n", s->n, dur, nthreads, nthreads == 1 ? "" : "s",
		s->truncated ? " (the file ends inside a chunk: the process died while writing)" : "");
	for (int k = 1; k <= SP_TOK_KIND_MAX; k++)
		if (kinds[k])
			fprintf(out, "  %-9s %10llu\n", sp_tok_kind_name(k), (unsigned long long)kinds[k]);
	if (s->h.truth[0])
		fprintf(out, "truth: %s, %zu true iterations; kernels per iteration min %llu, median %llu, max %llu\n",
			s->h.truth, niter, (unsigned long long)lo, (unsigned long long)med, (unsigned long long)hi);
	else
		fprintf(out, "truth: none recorded (STEPPROF_RECORD_TRUTH)\n");
	fprintf(out, "most frequent:\n");
	for (int k = 1; k < SP_TOK_TRUTH; k++)
		top_names(s, k, out, 0, NULL);
	free(per);
}
