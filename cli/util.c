/* SPDX-License-Identifier: MIT */
/* util.c - generic helpers of the offline CLI (see util.h): allocation that exits when memory
 * runs out, sorting that accepts empty arrays, a set of 64-bit ids. Knows nothing of traces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util.h"

static size_t idset_pos(const struct sp_idset *s, uint64_t key)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(h >> 20) & (s->cap - 1);
	while (s->slot[i] && s->slot[i] != key)
		i = (i + 1) & (s->cap - 1);
	return i;
}

void sp_oom(void)
{
	fprintf(stderr, "stepprof: out of memory\n");
	exit(1);
}

void *sp_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		sp_oom();
	return q;
}

char *sp_xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		sp_oom();
	return p;
}

void *sp_xgrow(void *p, size_t *cap, size_t elem, size_t i)
{
	size_t c = *cap ? *cap : 256;
	if (i < *cap)
		return p;
	while (c <= i)
		c *= 2;
	p = sp_xrealloc(p, c * elem);
	memset((char *)p + *cap * elem, 0, (c - *cap) * elem);
	*cap = c;
	return p;
}

void sp_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

void sp_sort_r(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *), void *ctx)
{
	if (n > 1)
		qsort_r(base, n, size, cmp, ctx);
}

int sp_idset_add(struct sp_idset *s, uint64_t key)
{
	if (!key) {
		int was = s->has_zero;
		s->has_zero = 1;
		return !was;
	}
	if ((s->n + 1) * 2 > s->cap) {
		struct sp_idset big = { .cap = s->cap ? s->cap * 2 : 64 };
		big.slot = memset(sp_xrealloc(NULL, big.cap * sizeof(*big.slot)), 0, big.cap * sizeof(*big.slot));
		for (size_t i = 0; i < s->cap; i++)
			if (s->slot[i])
				big.slot[idset_pos(&big, s->slot[i])] = s->slot[i];
		free(s->slot);
		s->slot = big.slot;
		s->cap = big.cap;
	}
	size_t i = idset_pos(s, key);
	if (s->slot[i])
		return 0;
	s->slot[i] = key;
	s->n++;
	return 1;
}

int sp_idset_has(const struct sp_idset *s, uint64_t key)
{
	if (!key)
		return s->has_zero;
	return s->cap && s->slot[idset_pos(s, key)] == key;
}

void sp_idset_clear(struct sp_idset *s)
{
	if (s->n)
		memset(s->slot, 0, s->cap * sizeof(*s->slot));
	s->n = 0;
	s->has_zero = 0;
}

void sp_idset_free(struct sp_idset *s)
{
	free(s->slot);
	memset(s, 0, sizeof(*s));
}
