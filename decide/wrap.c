/* SPDX-License-Identifier: MIT */
/* wrap.c - where a proven period wraps, and the learner's lock (docs/STEPS.md item 4): after its rarest
 * host synchronisation, else after the CPU gap that stands out, else before a graph launch; the boundary
 * becomes an ordinary marker. Pure. */
#include <string.h>
#include "learn.h"

/* The next position after q within the newest period p (cyclic). */
static uint64_t cyclic_next(const struct sp_autostep *a, uint32_t p, uint64_t q)
{
	return q + 1 == a->n ? q + 1 - p : q + 1;
}

int sp_learn_has_sync_end(const struct sp_autostep *a, uint32_t p)
{
	for (uint64_t q = a->n - p; q < a->n; q++)
		if ((sp_learn_at(a, q) & SP_AUTOSTEP_SYNC) &&
		    !(sp_learn_at(a, cyclic_next(a, p, q)) & SP_AUTOSTEP_SYNC))
			return 1;
	return 0;
}

int sp_learn_wrap_position(struct sp_autostep *a, uint32_t p, uint64_t *pos)
{
	uint64_t best = a->n - p, best_gap = 0, *g = a->gaps;
	uint32_t k = 0;
	for (uint64_t q = a->n - p; q < a->n; q++, k++) {
		g[k] = sp_learn_median3(sp_learn_ts(a, q) - sp_learn_ts(a, q - 1),
					sp_learn_ts(a, q - p) - sp_learn_ts(a, q - p - 1),
					sp_learn_ts(a, q - 2 * p) - sp_learn_ts(a, q - 2 * p - 1));
		if (g[k] > best_gap) {
			best_gap = g[k];
			best = q;
		}
	}
	*pos = best;
	if (p == 1)
		return 0;
	/* the period's median gap (insertion sort of a copy: p is bounded by max_period) */
	uint64_t *c = g + p;
	memcpy(c, g, p * sizeof *g);
	for (uint32_t i = 1; i < p; i++)
		for (uint32_t j = i; j > 0 && c[j - 1] > c[j]; j--) {
			uint64_t t = c[j];
			c[j] = c[j - 1];
			c[j - 1] = t;
		}
	/* the lower median: for a period of two tokens, the other gap (the upper one is the wrap) */
	return best_gap >= a->tune->min_wrap_ns && best_gap >= a->tune->gap_ratio * c[(p - 1) / 2];
}

int sp_learn_graph_position(const struct sp_autostep *a, uint32_t p, uint64_t *pos)
{
	for (uint64_t q = a->n; q-- > a->n - p;)
		if (sp_learn_at(a, q) & SP_AUTOSTEP_GRAPH) {
			*pos = q;
			return 1;
		}
	return 0;
}

/* Occurrences of token t in the newest period of length p. */
static uint32_t count_in_period(const struct sp_autostep *a, uint32_t p, uint32_t t)
{
	uint32_t c = 0;
	for (uint64_t q = a->n - p; q < a->n; q++)
		c += sp_learn_at(a, q) == t;
	return c;
}

/* Where period p wraps if it holds a synchronisation: just after the one rarest per period (ends of runs
 * first, then the newest), as a position in [n - p, n) in *pos. Returns 1 if there is one, else 0. */
static int rarest_sync(const struct sp_autostep *a, uint32_t p, uint64_t *pos)
{
	uint32_t best = UINT32_MAX;
	int best_end = 0;
	for (uint64_t q = a->n; q-- > a->n - p;) {
		if (!(sp_learn_at(a, q) & SP_AUTOSTEP_SYNC))
			continue;
		uint64_t next = cyclic_next(a, p, q);
		int end = !(sp_learn_at(a, next) & SP_AUTOSTEP_SYNC);
		uint32_t c = count_in_period(a, p, sp_learn_at(a, q));
		if (c < best || (c == best && end && !best_end)) {
			best = c;
			best_end = end;
			*pos = next;
		}
	}
	return best != UINT32_MAX;
}

/* A period [s0, b) seen as c blocks of q tokens from s0 + o, and its extras (the rest). */
struct blocks {
	uint64_t s0, o, b;
	uint32_t q, c;
};

/* 1 if position i of the period is among the extras. */
static int is_extra(const struct blocks *k, uint64_t i)
{
	return i < k->s0 + k->o || i >= k->s0 + k->o + (uint64_t)k->c * k->q;
}

/* 1 if token x occurs among the extras. */
static int in_extras(const struct sp_autostep *a, const struct blocks *k, uint32_t x)
{
	for (uint64_t i = k->s0; i < k->s0 + k->o; i++)
		if (sp_learn_at(a, i) == x)
			return 1;
	for (uint64_t i = k->s0 + k->o + (uint64_t)k->c * k->q; i < k->b; i++)
		if (sp_learn_at(a, i) == x)
			return 1;
	return 0;
}

/* 1 if the extras launch a kernel. */
static int extras_launch(const struct sp_autostep *a, const struct blocks *k)
{
	for (uint64_t i = k->s0; i < k->b; i++)
		if (is_extra(k, i) && (sp_learn_at(a, i) & SP_AUTOSTEP_KERNEL))
			return 1;
	return 0;
}

/* 1 if the q tokens from s launch a kernel and do not repeat within themselves. */
static int fine_block(const struct sp_autostep *a, uint64_t s, uint32_t q)
{
	int ok = 0;
	uint64_t i;
	for (i = 0; i < q; i++)
		ok |= (sp_learn_at(a, s + i) & SP_AUTOSTEP_KERNEL) != 0;
	for (uint32_t d = 1; ok && d < q; d++) {
		if (q % d)
			continue;
		for (i = 0; i + d < q && sp_learn_at(a, s + i) == sp_learn_at(a, s + i + d); i++)
			;
		ok = i + d < q;
	}
	return ok;
}

/* Period p, synchronised at b: if it is c >= 2 copies of a block of q tokens plus at most block_extra
 * launch-free tokens (a loss read), fills *k and returns q; else 0. Limits: block_min, block_budget. */
static uint32_t blocks_of(const struct sp_autostep *a, uint32_t p, uint64_t b, struct blocks *k)
{
	const struct sp_det_tune *t = a->tune;
	uint64_t s0 = b - p; /* the previous copy of the period, whole inside the run */
	uint32_t extra = p > t->block_extra ? (uint32_t)t->block_extra : p, launches = 0;
	uint64_t budget = t->block_budget * (uint64_t)p;
	uint64_t most = p / 2 < t->block_max_copies ? p / 2 : t->block_max_copies;
	for (uint64_t i = s0; i < b; i++)
		launches += (sp_learn_at(a, i) & SP_AUTOSTEP_KERNEL) != 0;
	for (uint32_t c = (uint32_t)most; c >= 2; c--) {
		if (launches % c)
			continue; /* the extras launch nothing: each block holds launches / c */
		for (uint32_t q = (p - extra + c - 1) / c; q && q <= p / c; q++) {
			for (uint64_t off = 0; off <= p - (uint64_t)c * q; off++) {
				uint64_t i = 0, span = (uint64_t)(c - 1) * q, s = s0 + off;
				while (i < span && sp_learn_at(a, s + i) == sp_learn_at(a, s + i + q))
					i++;
				if (budget < i)
					return 0;
				budget -= i;
				if (i < span)
					continue;
				*k = (struct blocks){ .s0 = s0, .o = off, .b = b, .q = q, .c = c };
				/* the finest block found: too short, a repeat itself, or with launching extras
				 * (gradient accumulation's optimizer), and the period stays whole */
				if (q < t->block_min || !fine_block(a, s, q) || extras_launch(a, k))
					return 0;
				return q;
			}
		}
	}
	return 0;
}

/* Where the blocks of *k wrap: the position, from s0, whose CPU gap (the median of up to three
 * blocks) is the largest and stands out as a loop's wrap does, its token not among the extras;
 * UINT64_MAX if none stands out. */
static uint64_t block_wrap(const struct sp_autostep *a, const struct blocks *k)
{
	const struct sp_det_tune *t = a->tune;
	uint64_t s = k->s0 + k->o, best = UINT64_MAX, best_gap = 0, *g = a->gaps, q = k->q;
	for (uint32_t j = 0; j < q; j++) {
		uint64_t x = s + j, g0 = sp_learn_ts(a, x) - sp_learn_ts(a, x - 1),
			 g1 = sp_learn_ts(a, x + q) - sp_learn_ts(a, x + q - 1);
		g[j] = k->c >= 3 ? sp_learn_median3(g0, g1, sp_learn_ts(a, x + 2 * q) - sp_learn_ts(a, x + 2 * q - 1))
		       : g0 < g1 ? g0
				 : g1;
		if (g[j] > best_gap && !in_extras(a, k, sp_learn_at(a, x))) {
			best_gap = g[j];
			best = k->o + j;
		}
	}
	uint32_t small = 0; /* gaps a gap_ratio-th of the best or less */
	for (uint32_t j = 0; j < q; j++)
		small += g[j] * t->gap_ratio <= best_gap;
	return best_gap >= t->min_wrap_ns && 100 * (uint64_t)small > t->block_quiet_pct * q ? best : UINT64_MAX;
}

/* Locks on the blocks of *k: each block is an iteration, which begins at the block's wrap if one
 * stands out, else before the block's first token that the extras do not hold (they may repeat the
 * anchor's function: a loss read's copy). region: where the periodic run begins. */
static void lock_blocks(struct sp_autostep *a, const struct blocks *k, uint32_t p, uint64_t region)
{
	struct sp_autostep_lock *l = &a->lock;
	uint64_t s0 = k->s0, j = 0;
	while (j < k->q && in_extras(a, k, sp_learn_at(a, s0 + k->o + j)))
		j++;
	j = (j < k->q ? j : 0) + k->o; /* from the period's start */
	uint64_t w = block_wrap(a, k);
	j = w != UINT64_MAX ? w : j;
	l->period = k->q;
	l->period_at = s0 + k->o;
	l->anchor = sp_learn_at(a, s0 + j);
	l->after = 0;
	l->every = 0;
	l->launches = 0;
	for (uint64_t i = s0 + k->o; i < s0 + k->o + k->q; i++) {
		l->every += sp_learn_at(a, i) == l->anchor;
		l->launches += (sp_learn_at(a, i) & SP_AUTOSTEP_KERNEL) != 0;
	}
	/* the newest boundary: the newest block start (+ j) at or before the newest token */
	uint64_t bound = s0 + j;
	for (uint64_t base = s0; base < a->n; base += p)
		for (uint32_t c = 0; c < k->c; c++)
			if (base + j + (uint64_t)c * k->q < a->n)
				bound = base + j + (uint64_t)c * k->q;
	l->count = 0;
	for (uint64_t i = bound; i < a->n; i++)
		l->count += sp_learn_at(a, i) == l->anchor;
	l->count %= l->every;
	/* boundaries in [region, bound]: c classes, each every p tokens */
	l->iterations = 0;
	for (uint32_t c = 0; c < k->c; c++) {
		uint64_t x = s0 + j + (uint64_t)c * k->q; /* >= s0 >= region */
		x -= (x - region) / p * p;                 /* the class's first one in the run */
		if (x <= bound)
			l->iterations += (uint32_t)((bound - x) / p + 1);
	}
	l->copies = (uint32_t)((a->n - region) / p * k->c);
}

void sp_learn_lock(struct sp_autostep *a, uint32_t p)
{
	struct sp_autostep_lock *l = &a->lock;
	uint64_t b;
	l->after = rarest_sync(a, p, &b);
	if (!l->after && !sp_learn_wrap_position(a, p, &b))
		sp_learn_graph_position(a, p, &b); /* no wrap to see: before a graph launch, if there is one */
	uint64_t ap = l->after ? b - 1 : b; /* the synchronisation that ends it, or the token that begins it */
	uint64_t region = a->n - sp_learn_run_length(a, sp_learn_first(a), p) - p;
	struct blocks k;
	uint32_t q = l->after ? blocks_of(a, p, b, &k) : 0;
	a->blocks = 1;
	l->period = p;
	l->period_at = a->n - p;
	l->anchor = sp_learn_at(a, ap);
	l->every = count_in_period(a, p, l->anchor);
	l->count = 0;
	for (uint64_t i = ap; i < a->n; i++)
		l->count += sp_learn_at(a, i) == l->anchor;
	l->count %= l->every;
	l->launches = 0;
	for (uint64_t i = a->n - p; i < a->n; i++)
		l->launches += (sp_learn_at(a, i) & SP_AUTOSTEP_KERNEL) != 0;
	/* iterations begun so far: boundaries inside the periodic region [n - run - p, n) */
	l->iterations = b >= region ? (uint32_t)((b - region) / p + 1) : 1;
	l->copies = (uint32_t)((a->n - region) / p);
	a->locked = 1;
	if (q) { /* the whole period kept for sp_autostep_unblock, then the lock on its blocks */
		a->whole = *l;
		a->blocks = k.c;
		lock_blocks(a, &k, p, region);
	}
}

void sp_autostep_unblock(struct sp_autostep *a)
{
	if (a->blocks <= 1)
		return;
	a->lock = a->whole;
	a->blocks = 1;
}
