/* SPDX-License-Identifier: MIT */
/* advice.c - the explicit marker an undecided detector may suggest (stepdet_say.c): an API sync, NVTX range,
 * NCCL call or kernel occurring once in every copy of a candidate period, with launches between, and what it
 * would give. Pure; allocates a scratch table and frees it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stepdet_int.h"
#include "learn.h"
#include "collector/base/intern.h"

#define CALLS_MAX 16384u   /* newest calls searched for a period of calls */
#define SLOTS 8192u        /* candidate markers one period may hold (a power of two) */

/* Marker kinds a token can be, in the order they are preferred (the program's own ranges first). */
enum { ADV_NONE, ADV_NVTX, ADV_API, ADV_NCCL, ADV_KERNEL };

/* Copies of a candidate period: [from, to) in the ring, `copies` whole ones, each `len` tokens (or,
 * with calls, `len` calls and the launches among them). */
struct period {
	uint64_t from, to;
	uint32_t len, copies;
	int calls;
};

/* One candidate marker token and how it fared. */
struct cand {
	uint32_t tok;       /* 0: a free slot */
	uint32_t copy;      /* the last copy it occurred in */
	uint32_t seen;      /* copies it occurred in */
	int twice;          /* it occurred twice in one copy */
	uint64_t at;        /* launches before its last occurrence */
	uint64_t min, max;  /* launches between two consecutive occurrences */
	uint32_t steps;     /* such intervals */
	uint64_t order;     /* its first position (ties) */
};

static int kind_of(uint32_t tok)
{
	if (tok & SP_AUTOSTEP_GRAPH)
		return ADV_NONE; /* an api marker on a graph launch is not replayed the same way */
	if (tok & SP_AUTOSTEP_KERNEL)
		return ADV_KERNEL;
	if (tok & SP_AUTOSTEP_SYNC)
		return ADV_API;
	const char *nm = sp_intern_lookup(tok & ~SP_AUTOSTEP_FLAGS);
	if (nm && !strncmp(nm, "nvtx:", 5) && strcmp(nm, "nvtx:pop"))
		return ADV_NVTX;
	/* copies and sets are left out: those of threads that launch nothing never reach the ring */
	return nm && !strncmp(nm, "nccl", 4) ? ADV_NCCL : ADV_NONE;
}

/* The slot of tok in t (SLOTS entries): its own, or the free one where it would go; NULL if full. */
static struct cand *slot(struct cand *t, uint32_t tok)
{
	uint32_t h = (tok * 2654435761u) & (SLOTS - 1);
	for (uint32_t k = 0; k < SLOTS; k++, h = (h + 1) & (SLOTS - 1))
		if (!t[h].tok || t[h].tok == tok)
			return &t[h];
	return NULL;
}

/* One occurrence of candidate c in copy k, with `launches` launches before it. */
static void occur(struct cand *c, uint32_t k, uint64_t launches)
{
	if (c->seen && c->copy == k)
		c->twice = 1;
	else
		c->seen++;
	if (c->seen > 1 || c->twice) {
		uint64_t gap = launches - c->at;
		c->min = c->steps && c->min < gap ? c->min : gap;
		c->max = c->max > gap ? c->max : gap;
		c->steps++;
	}
	c->copy = k;
	c->at = launches;
}

/* Walks the copies of p: every marker token of the first copy becomes a candidate, and each
 * occurrence is counted. This function can't fail (a full table takes no more candidates). */
static void walk(const struct sp_autostep *a, const struct period *p, struct cand *t)
{
	uint64_t launches = 0, calls = 0;
	uint32_t k = 0;
	for (uint64_t i = p->from; i < p->to; i++) {
		uint32_t tok = sp_learn_at(a, i);
		int launch = (tok & SP_AUTOSTEP_KERNEL) != 0;
		if (p->calls && !launch)
			k = (uint32_t)(calls++ / p->len);
		else if (!p->calls)
			k = (uint32_t)((i - p->from) / p->len);
		struct cand *c = kind_of(tok) ? slot(t, tok) : NULL;
		if (c && !c->tok && k == 0) {
			c->tok = tok;
			c->order = i;
		}
		if (c && c->tok)
			occur(c, k, launches);
		launches += launch;
	}
}

/* The best candidate of t for p: once in every copy, launches between every two occurrences; the
 * preferred kind, then the steadiest, then the first. NULL if none. */
static const struct cand *best_of(const struct cand *t, const struct period *p)
{
	const struct cand *b = NULL;
	for (uint32_t i = 0; i < SLOTS; i++) {
		const struct cand *c = &t[i];
		if (!c->tok || c->twice || c->seen != p->copies || !c->steps || !c->min)
			continue;
		int kc = kind_of(c->tok), kb = b ? kind_of(b->tok) : 0;
		if (!b || kc < kb || (kc == kb && (c->max - c->min < b->max - b->min ||
						   (c->max - c->min == b->max - b->min && c->order < b->order))))
			b = c;
	}
	return b;
}

/* The learner's longest repeat as whole copies still in the ring, if it covers enough of them. */
static int repeat_period(const struct sp_autostep *a, struct period *p)
{
	uint64_t len = a->cand.period, first = sp_learn_first(a), c = len ? (a->cand.run + len) / len : 0;
	if (!len || c < a->tune->min_repeats + 1 || a->cand.end < c * len || a->cand.end - c * len < first)
		return 0;
	*p = (struct period){ .from = a->cand.end - c * len, .to = a->cand.end, .len = (uint32_t)len,
			      .copies = (uint32_t)c };
	return 1;
}

/* The period of the program's calls alone among the newest CALLS_MAX (pos: scratch for their
 * positions): the shortest that repeats over min_repeats + 2 copies or more, as whole copies. */
static int calls_period(const struct sp_autostep *a, uint64_t *pos, struct period *p)
{
	uint32_t m = 0, need = (uint32_t)a->tune->min_repeats + 2;
	for (uint64_t i = a->n; i-- > sp_learn_first(a) && m < CALLS_MAX;)
		if (!(sp_learn_at(a, i) & SP_AUTOSTEP_KERNEL))
			pos[m++] = i; /* newest first */
	for (uint32_t d = 1; d * need <= m; d++) {
		uint32_t r = 0;
		while (r + d < m && sp_learn_at(a, pos[r]) == sp_learn_at(a, pos[r + d]))
			r++;
		uint32_t c = (r + d) / d; /* copies of d calls, the newest one (still open) among them */
		if (c < need)
			continue;
		/* whole copies: from the oldest one's first call to the newest one's first call */
		*p = (struct period){ .from = pos[c * d - 1], .to = pos[d - 1], .len = d, .copies = c - 1, .calls = 1 };
		return 1;
	}
	return 0;
}

/* The pattern that matches tok as an explicit marker of its kind, into buf. Can't fail. */
static void pattern_of(uint32_t tok, char *buf, size_t n)
{
	const char *nm = sp_intern_lookup(tok & ~SP_AUTOSTEP_FLAGS);
	int nvtx = kind_of(tok) == ADV_NVTX;
	snprintf(buf, n, "%s", nm ? nm + (nvtx ? 5 : 0) : "?");
	for (char *s = buf; nvtx && *s; s++)
		*s = *s == '#' ? '*' : *s; /* the learner folded the message's digits to '#' */
}

/* Evaluates period p: the best candidate's sentence into buf. Returns its fewest launches per step
 * (0: none qualifies, buf untouched). */
static uint64_t advise(const struct sp_autostep *a, const struct period *p, struct cand *t, char *buf, size_t n)
{
	static const char *const kinds[] = { "", "nvtx", "api", "nccl", "kernel" };
	char pat[256], steps[64];
	memset(t, 0, SLOTS * sizeof *t);
	walk(a, p, t);
	const struct cand *b = best_of(t, p);
	if (!b)
		return 0;
	pattern_of(b->tok, pat, sizeof pat);
	if (b->min == b->max)
		snprintf(steps, sizeof steps, "%llu launches", (unsigned long long)b->min);
	else
		snprintf(steps, sizeof steps, "%llu to %llu launches", (unsigned long long)b->min,
			 (unsigned long long)b->max);
	snprintf(buf, n,
		 "[marker] kind = %s, pattern = %s: it occurs once in each of the last %u copies of %s %u %s, "
		 "and its steps there would hold %s each",
		 kinds[kind_of(b->tok)], pat, p->copies,
		 p->calls ? "the program's calls, a period of" : "the candidate of", p->len,
		 p->calls ? "calls (launches left out)" : "tokens", steps);
	return b->min;
}

int sp_det_advice(struct sp_stepdet *d, char *buf, size_t n)
{
	const struct sp_autostep *a = &d->a;
	struct cand *t = calloc(SLOTS, sizeof *t);
	uint64_t *pos = calloc(CALLS_MAX, sizeof *pos);
	struct period p;
	char other[512];
	uint64_t got = 0, alt;
	if (t && pos && a->tok) {
		if (repeat_period(a, &p))
			got = advise(a, &p, t, buf, n);
		/* the period whose steps hold more launches is more likely the iteration (a repeat may be one
		 * of its identical layers) */
		if (calls_period(a, pos, &p) && (alt = advise(a, &p, t, other, sizeof other)) > got) {
			snprintf(buf, n, "%s", other);
			got = alt;
		}
	}
	free(t);
	free(pos);
	return got > 0;
}
