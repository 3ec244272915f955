/* SPDX-License-Identifier: MIT */
/* period.c - the learner's period search (autostep.h): keeps the ring of recent tokens and at each attempt
 * finds the stream's period from its rarest repeating tokens and proves it (docs/STEPS.md items 2-4;
 * numbers in tunables.h). Pure. */
#include <stdlib.h>
#include <string.h>
#include "learn.h"

#define MAX_RING (1u << 24)

/* Tokens until the attempt after n: frequent while the stream is young, then try_every. */
static uint64_t try_gap(const struct sp_autostep *a, uint64_t n)
{
	const struct sp_det_tune *t = a->tune;
	return n < t->try_early_tokens ? t->try_early_gap : n < t->try_mid_tokens ? t->try_mid_gap : t->try_every;
}

uint64_t sp_learn_run_length(const struct sp_autostep *a, uint64_t first, uint64_t d)
{
	uint64_t i = a->n - 1, r = 0;
	while (i >= first + d && sp_learn_at(a, i) == sp_learn_at(a, i - d)) {
		r++;
		i--;
	}
	return r;
}

/* 1 if the newest period of length p launches a kernel. */
static int has_kernel(const struct sp_autostep *a, uint32_t p)
{
	for (uint64_t q = a->n - p; q < a->n; q++)
		if (sp_learn_at(a, q) & SP_AUTOSTEP_KERNEL)
			return 1;
	return 0;
}

/* 1 if no shorter period e dividing d keeps the stream periodic over a run of at least r: in a run
 * of identical launches the driver's own periodic stalls must not pass for the loop's wrap. */
static int primitive(const struct sp_autostep *a, uint64_t first, uint64_t d, uint64_t r)
{
	for (uint64_t e = 1; e * e <= d; e++) {
		if (d % e)
			continue;
		if (e < d && sp_learn_run_length(a, first, e) >= r)
			return 0;
		if (e > 1 && d / e < d && sp_learn_run_length(a, first, d / e) >= r)
			return 0;
	}
	return 1;
}

/* Copies a period of d tokens must show: more for periods the caller refuted before. */
static uint64_t required_copies(const struct sp_autostep *a, uint64_t d)
{
	uint64_t c = a->tune->min_repeats + 1;
	for (unsigned i = 0; i < SP_AUTOSTEP_REFUTED; i++)
		if (a->refuted[i].period == d && a->refuted[i].copies > c)
			c = a->refuted[i].copies;
	return c;
}

/* 1 if period d with run r ending at the newest token is proven: enough copies, a kernel, a
 * visible wrap (a synchronisation; else a CPU gap or a graph launch over more copies; else a
 * long run), and primitive. */
static int proven(struct sp_autostep *a, uint64_t first, uint64_t d, uint64_t r)
{
	const struct sp_det_tune *t = a->tune;
	uint64_t wrap;
	if (d > t->max_period || r < (required_copies(a, d) - 1) * d || !has_kernel(a, (uint32_t)d))
		return 0;
	if (!sp_learn_has_sync_end(a, (uint32_t)d) &&
	    !(r >= t->nosync_repeats * d && sp_learn_wrap_position(a, (uint32_t)d, &wrap)) &&
	    !(r >= t->graph_repeats * d && sp_learn_graph_position(a, (uint32_t)d, &wrap)) &&
	    !(r >= t->long_run && r >= t->long_run_copies * d))
		return 0;
	return primitive(a, first, d, r);
}

/* A proven period and its run. */
struct found {
	uint64_t d, run;
};

/* Tries the distances from the occurrence of a token at pos to its earlier ones as periods; the
 * proven one with the longest run goes into *f (d = 0 if none). Notes the longest repeat seen,
 * proven or not, for "undecided". */
static void try_from(struct sp_autostep *a, uint64_t first, uint64_t pos, struct found *f)
{
	/* the newest tokens all alike: a period no longer than that run is not primitive */
	uint64_t same = a->same;
	uint32_t tried = 0;
	memset(f, 0, sizeof *f);
	/* earlier occurrences through the chain of same-slot positions (a slot may mix tokens) */
	for (uint64_t j = pos, step; tried < a->tune->max_candidates && (step = a->prev[j & (a->cap - 1)]) &&
				     j - first >= step;) {
		j -= step;
		if (sp_learn_at(a, j) != sp_learn_at(a, pos))
			continue;
		uint64_t d = pos - j;
		tried++;
		if ((a->tune->min_repeats + 1) * d > a->n - first)
			break;
		if (d <= same)
			continue;
		uint64_t r = sp_learn_run_length(a, first, d);
		if (r > f->run && proven(a, first, d, r)) {
			f->run = r;
			f->d = d;
		}
		if (r > a->cand.run && r >= d) {
			a->cand.run = r;
			a->cand.period = (uint32_t)d;
			a->cand.end = a->n;
		}
	}
}

/* Where the attempt starts its candidates: per search window, the position of its rarest repeating token
 * in pos[w] and launch in pos[windows + w]. Returns the newest repeating graph launch's position, or n. */
static uint64_t scan_rare(const struct sp_autostep *a, uint64_t *pos)
{
	const struct sp_det_tune *t = a->tune;
	uint64_t span = a->n - sp_learn_first(a), windows = t->scan_windows, min = t->min_repeats + 1;
	uint64_t lo = a->n - (span / 2 > t->scan_newest ? t->scan_newest : span / 2), rp = a->n, kp = a->n;
	uint32_t rb = UINT32_MAX, kb = UINT32_MAX;
	int w = (int)windows - 1; /* the smallest window first */
	for (uint64_t i = a->n; i-- > lo;) {
		for (; w >= 0 && a->n - i > (span >> (1 + 2 * w)) + t->scan_min; w--) {
			pos[w] = rp;
			pos[windows + w] = kp;
		}
		uint32_t tok = sp_learn_at(a, i), c = a->counts[tok & (SP_AUTOSTEP_SLOTS - 1)];
		if (c < min)
			continue;
		if (c < rb) {
			rb = c;
			rp = i;
		}
		if ((tok & SP_AUTOSTEP_KERNEL) && c < kb) {
			kb = c;
			kp = i;
		}
	}
	for (; w >= 0; w--) {
		pos[w] = rp;
		pos[windows + w] = kp;
	}
	/* no graph launch lies past graph_n: streams without graphs pay nothing for this search */
	for (uint64_t i = a->graph_n; i-- > lo;) {
		uint32_t tok = sp_learn_at(a, i);
		if ((tok & SP_AUTOSTEP_GRAPH) && a->counts[tok & (SP_AUTOSTEP_SLOTS - 1)] >= min)
			return i;
	}
	return a->n;
}

/* One attempt. Returns the proven period (its run in found.run), or 0. The longest-running candidate wins,
 * unless a launch period fills super_fill_pct of one super_copies times longer (docs/STEPS.md). */
static uint32_t find_period(struct sp_autostep *a)
{
	const struct sp_det_tune *t = a->tune;
	uint64_t first = sp_learn_first(a), pos[2 * SP_DET_SCAN_MAX], windows = t->scan_windows;
	struct found f = { 0 }, k = { 0 }, g;
	uint64_t gp = scan_rare(a, pos);
	if (a->same > a->cand.run) {
		a->cand.run = a->same;
		a->cand.period = 1;
		a->cand.end = a->n;
	}
	for (unsigned x = 0; x < 2 * windows; x++) {
		struct found *into = x < windows ? &f : &k;
		if (pos[x] == a->n || (x % windows && sp_learn_at(a, pos[x]) == sp_learn_at(a, pos[x - 1])))
			continue; /* none, or the same token as the wider window's */
		try_from(a, first, pos[x], &g);
		if (g.d && g.run > into->run)
			*into = g;
	}
	/* the newest graph launch: a graph loop's rare tokens may be those of an extra every N
	 * iterations, whose N-iteration period repeats too few times to prove */
	if (gp != a->n) {
		try_from(a, first, gp, &g);
		if (g.d && g.run > k.run)
			k = g;
	}
	if (k.d && (!f.d || (f.d >= t->super_copies * k.d && k.run * 100 >= f.d * t->super_fill_pct) ||
		    (f.d < t->super_copies * k.d && k.run > f.run)))
		f = k;
	a->found.run = f.run;
	return (uint32_t)f.d;
}

/* Sets a up with a ring of cap tokens (rounded up to a power of two, 256 to 2^24) and tunables t.
 * Returns 0 or -1 (no memory; a is then unusable). */
static int init_ring(struct sp_autostep *a, const struct sp_det_tune *t, uint64_t cap)
{
	uint32_t c = 256;
	while (c < cap && c < MAX_RING)
		c <<= 1;
	memset(a, 0, sizeof *a);
	a->tune = t;
	a->tok = calloc(c, sizeof *a->tok);
	a->ts = calloc(c, sizeof *a->ts);
	a->counts = calloc(SP_AUTOSTEP_SLOTS, sizeof *a->counts);
	a->prev = calloc(c, sizeof *a->prev);
	a->last = calloc(SP_AUTOSTEP_SLOTS, sizeof *a->last);
	a->gaps = calloc(2 * t->max_period, sizeof *a->gaps);
	if (!a->tok || !a->ts || !a->counts || !a->gaps || !a->prev || !a->last) {
		sp_autostep_free(a);
		return -1;
	}
	a->cap = c;
	a->attempt.next = try_gap(a, 0);
	return 0;
}

int sp_autostep_init(struct sp_autostep *a, uint32_t cap)
{
	return init_ring(a, &sp_det_tune_default, cap);
}

int sp_autostep_init_tuned(struct sp_autostep *a, const struct sp_det_tune *t)
{
	return init_ring(a, t, t->ring_tokens);
}

void sp_autostep_free(struct sp_autostep *a)
{
	free(a->tok);
	free(a->ts);
	free(a->counts);
	free(a->prev);
	free(a->last);
	free(a->gaps);
	a->tok = NULL;
	a->ts = NULL;
	a->counts = NULL;
	a->prev = NULL;
	a->last = NULL;
	a->gaps = NULL;
}

void sp_autostep_reset(struct sp_autostep *a)
{
	memset(a->counts, 0, sizeof(uint32_t) * SP_AUTOSTEP_SLOTS);
	memset(a->last, 0, sizeof(uint64_t) * SP_AUTOSTEP_SLOTS);
	a->n = 0;
	a->attempt.next = try_gap(a, 0);
	a->attempt.spent = 0;
	a->found.period = 0;
	a->found.since = 0;
	a->credit = 0;
	a->locked = 0;
	memset(&a->cand, 0, sizeof a->cand);
	a->same = 0;
	a->graph_n = 0;
}

void sp_autostep_refute(struct sp_autostep *a, uint32_t period)
{
	unsigned k = 0;
	for (unsigned i = 0; i < SP_AUTOSTEP_REFUTED; i++) {
		if (a->refuted[i].period == period) {
			a->refuted[i].copies *= (uint32_t)a->tune->refute_factor;
			return;
		}
		if (a->refuted[i].copies < a->refuted[k].copies)
			k = i;
	}
	a->refuted[k].period = period;
	a->refuted[k].copies = (uint32_t)(a->tune->refute_factor * (a->tune->nosync_repeats + 1));
}

void sp_autostep_credit(struct sp_autostep *a, uint64_t ns)
{
	a->credit += ns;
}

uint64_t sp_autostep_graph_try(const struct sp_autostep *a)
{
	return a->attempt.next - try_gap(a, a->attempt.next) + a->tune->graph_try;
}

void sp_autostep_attempt_took(struct sp_autostep *a, uint64_t ns)
{
	a->attempt.spent += ns;
}

/* 1 if the attempts so far leave room for another at stored time ts: the burst, a share of the
 * program's first (eager) time and a smaller share after it. */
static int within_share(const struct sp_autostep *a, uint64_t ts)
{
	const struct sp_det_tune *t = a->tune;
	uint64_t ran = a->n && ts > a->t0 ? ts - a->t0 : 0;
	uint64_t eager = ran < t->attempt_eager_ns ? ran : t->attempt_eager_ns;
	return a->attempt.spent <= t->attempt_burst_ns + eager / t->attempt_share + (ran - eager) / t->attempt_late;
}

int sp_autostep_due(const struct sp_autostep *a, int graph, uint64_t ts)
{
	if (a->locked || !a->tok ||
	    !(a->n + 1 >= a->attempt.next || (graph && a->n + 1 >= sp_autostep_graph_try(a))))
		return 0; /* not an attempt's token (most tokens: the cheap test first) */
	return within_share(a, ts - a->credit);
}

/* Stores tok at time ts in the ring and its histogram. This function can't fail. */
static void push(struct sp_autostep *a, uint32_t tok, uint64_t ts)
{
	a->same = a->n && sp_learn_at(a, a->n - 1) == tok ? a->same + 1 : 0;
	if (a->same > a->cap)
		a->same = a->cap; /* as a run length, bounded by the ring */
	if (a->n >= a->cap)
		a->counts[sp_learn_at(a, a->n) & (SP_AUTOSTEP_SLOTS - 1)]--; /* the token it overwrites leaves */
	a->counts[tok & (SP_AUTOSTEP_SLOTS - 1)]++;
	uint64_t last = a->last[tok & (SP_AUTOSTEP_SLOTS - 1)]; /* position + 1 of the slot's previous token */
	a->prev[a->n & (a->cap - 1)] = last && a->n - (last - 1) < a->cap ? (uint32_t)(a->n - (last - 1)) : 0;
	a->last[tok & (SP_AUTOSTEP_SLOTS - 1)] = a->n + 1;
	a->tok[a->n & (a->cap - 1)] = tok;
	/* stored times never go back: tokens stamped by two clocks tens of ns apart may come out of
	 * order (collector/base/clock.h), and a gap must not wrap around */
	uint64_t at_ts = ts - a->credit, prev_ts = a->n ? a->ts[(a->n - 1) & (a->cap - 1)] : 0;
	a->ts[a->n & (a->cap - 1)] = at_ts > prev_ts ? at_ts : prev_ts;
	if (!a->n)
		a->t0 = at_ts;
	if (tok & SP_AUTOSTEP_GRAPH)
		a->graph_n = a->n + 1;
	a->n++;
}

int sp_autostep_feed(struct sp_autostep *a, uint32_t tok, uint64_t ts)
{
	if (a->locked || !a->tok)
		return 0;
	push(a, tok, ts);
	if (a->n < a->attempt.next && !((tok & SP_AUTOSTEP_GRAPH) && a->n >= sp_autostep_graph_try(a)))
		return 0;
	if (!within_share(a, ts - a->credit))
		return 0; /* the attempts' share of the time is used up: a later token asks again */
	a->attempt.next = a->n + try_gap(a, a->n);
	uint32_t p = find_period(a);
	uint64_t need = required_copies(a, p);
	need = need > a->tune->nosync_repeats ? need : a->tune->nosync_repeats;
	if (p && a->found.run >= (need + 1) * (uint64_t)p) {
		/* the run already holds a full period more than any proof asks: it confirmed itself (a loop
		 * whose run a loss read breaks every few iterations may get no second attempt) */
	} else if (!p || p != a->found.period) {
		a->found.period = p;
		a->found.since = a->n;
		return 0;
	} else if (a->n - a->found.since < p) {
		return 0; /* confirm over one more full period */
	}
	sp_learn_lock(a, p);
	return 1;
}

uint32_t sp_autostep_count(const struct sp_autostep *a, uint32_t tok)
{
	return a->counts[tok & (SP_AUTOSTEP_SLOTS - 1)];
}
