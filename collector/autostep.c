/* SPDX-License-Identifier: MIT */
/* autostep.c - automatic step detection (see autostep.h and docs/STEPS.md).
 *
 * Every TRY_EVERY tokens (an eighth of the ring's fill once that is more), take the rarest token that still repeats: any true period P is a
 * distance from its last position to an earlier occurrence of the same token, so those
 * distances are the candidates. For each, measure how far back the stream stays periodic
 * (run length R); the true iteration period has the longest run (sub-periods such as identical
 * layers break at the optimizer; multiples of P have shorter runs). A candidate must hold for at
 * least 4 copies and show where it wraps: after its rarest host synchronisation if it has one,
 * else at the one position whose CPU gap (median of three copies) is >= 4x the period's median
 * gap and >= 20 us (the loop's Python or data loading) - or, without either, a run of >= 32768
 * tokens and 16 copies proves it (boundary at the largest gap). A period must launch a kernel,
 * must be primitive (not a multiple of a shorter period that explains the same run: in a stream
 * of identical launches the driver's own periodic stalls, such as a full launch queue, must not
 * pass for the loop's wrap), and must still hold one full period after it was first found -
 * CONFIRM_TIMING tokens if only a CPU gap shows its wrap (identical layers behind Python's
 * per-module overhead look like short iterations with a wrap, until the layers end).
 * The boundary is expressed as (anchor token, every N-th occurrence). */
#include <stdlib.h>
#include <string.h>
#include "autostep.h"

#define TRY_EVERY 256u     /* tokens between detection attempts (every 8 for the first 2048) */
#define COUNT_SLOTS 65536u /* token histogram size (ids are folded into it) */
#define MAX_CANDIDATES 64u /* distances tried per attempt */
#define MIN_REPEATS 3u     /* full periods the run must cover besides the current one */
#define MAX_PERIOD 16384u  /* longest iteration, in tokens */
#define GAP_RATIO 4u       /* the wrap's CPU gap vs the period's median gap */
#define MIN_WRAP_NS 20000u /* and at least this long */
#define LONG_RUN 32768u    /* without a clear wrap, a run this long still proves the period */
#define CONFIRM_TIMING 4096u /* tokens a period without a synchronisation must keep holding */

static inline uint32_t at(const struct sp_autostep *a, uint64_t i)
{
	return a->tok[i & (a->cap - 1)];
}

static inline uint64_t ts_at(const struct sp_autostep *a, uint64_t i)
{
	return a->ts[i & (a->cap - 1)];
}

/* Length of the periodic run ending at the newest token for distance d (bounded by the ring). */
static uint64_t run_length(const struct sp_autostep *a, uint64_t first, uint64_t d)
{
	uint64_t i = a->n - 1, r = 0;
	while (i >= first + d && at(a, i) == at(a, i - d)) {
		r++;
		i--;
	}
	return r;
}

static uint64_t median3(uint64_t x, uint64_t y, uint64_t z)
{
	uint64_t lo = x < y ? x : y, hi = x < y ? y : x;
	return z < lo ? lo : z > hi ? hi : z;
}

/* Finds where period p wraps: the token after the largest median (over the last three copies)
 * CPU gap. Returns 1 if that gap stands out (>= GAP_RATIO times the period's median gap and
 * >= MIN_WRAP_NS), with its position in [n - p, n) in *pos; else 0. */
static int wrap_position(struct sp_autostep *a, uint32_t p, uint64_t *pos)
{
	uint64_t best = a->n - p, best_gap = 0, *g = a->gaps;
	uint32_t k = 0;
	for (uint64_t q = a->n - p; q < a->n; q++, k++) {
		g[k] = median3(ts_at(a, q) - ts_at(a, q - 1), ts_at(a, q - p) - ts_at(a, q - p - 1),
			       ts_at(a, q - 2 * p) - ts_at(a, q - 2 * p - 1));
		if (g[k] > best_gap) {
			best_gap = g[k];
			best = q;
		}
	}
	*pos = best;
	if (p == 1)
		return 0;
	/* median of the period's gaps (nth_element would do; p is small enough to sort a copy) */
	uint64_t *c = g + p;
	memcpy(c, g, p * sizeof *g);
	for (uint32_t i = 1; i < p; i++)
		for (uint32_t j = i; j > 0 && c[j - 1] > c[j]; j--) {
			uint64_t t = c[j];
			c[j] = c[j - 1];
			c[j - 1] = t;
		}
	return best_gap >= MIN_WRAP_NS && best_gap >= GAP_RATIO * c[p / 2];
}

/* 1 if the newest period of length p holds a synchronisation that the next token does not
 * continue (the end of a run of them, cyclic within the period), else 0. */
static int has_sync_end(const struct sp_autostep *a, uint32_t p)
{
	for (uint64_t q = a->n - p; q < a->n; q++) {
		uint64_t next = q + 1 == a->n ? q + 1 - p : q + 1;
		if ((at(a, q) & SP_AUTOSTEP_SYNC) && !(at(a, next) & SP_AUTOSTEP_SYNC))
			return 1;
	}
	return 0;
}

/* Occurrences of token t in the newest period of length p. */
static uint32_t count_in_period(const struct sp_autostep *a, uint32_t p, uint32_t t)
{
	uint32_t c = 0;
	for (uint64_t q = a->n - p; q < a->n; q++)
		c += at(a, q) == t;
	return c;
}

/* Where period p wraps if it holds a synchronisation: just after the synchronisation that occurs
 * fewest times per period (the loop's own torch.cuda.synchronize() or loss.item(), not DDP's
 * per-bucket or statistics event waits, which come and go), as a position in [n - p, n) in *pos.
 * Among equals, one that ends a run of synchronisations, then the newest. The boundary may fall
 * inside a run: torch.cuda.synchronize() followed at once by waits that stop after a few
 * iterations must anchor on the former. Returns 1 if there is one, else 0. Counts tokens:
 * called once, at the lock (candidates only need has_sync_end). */
static int rarest_sync(const struct sp_autostep *a, uint32_t p, uint64_t *pos)
{
	uint32_t best = UINT32_MAX;
	int best_end = 0;
	for (uint64_t q = a->n; q-- > a->n - p;) {
		if (!(at(a, q) & SP_AUTOSTEP_SYNC))
			continue;
		uint64_t next = q + 1 == a->n ? q + 1 - p : q + 1; /* cyclic within the period */
		int end = !(at(a, next) & SP_AUTOSTEP_SYNC);
		uint32_t c = count_in_period(a, p, at(a, q));
		if (c < best || (c == best && end && !best_end)) {
			best = c;
			best_end = end;
			*pos = next;
		}
	}
	return best != UINT32_MAX;
}

/* 1 if the newest period of length p launches a kernel. */
static int has_kernel(const struct sp_autostep *a, uint32_t p)
{
	for (uint64_t q = a->n - p; q < a->n; q++)
		if (at(a, q) & SP_AUTOSTEP_KERNEL)
			return 1;
	return 0;
}

/* 1 if no shorter period e dividing d keeps the stream periodic over a run of at least r. */
static int primitive(const struct sp_autostep *a, uint64_t first, uint64_t d, uint64_t r)
{
	for (uint64_t e = 1; e * e <= d; e++) {
		if (d % e)
			continue;
		if (e < d && run_length(a, first, e) >= r)
			return 0;
		if (e > 1 && d / e < d && run_length(a, first, d / e) >= r)
			return 0;
	}
	return 1;
}

/* One detection attempt. Returns the period, or 0 if none is proven yet. */
static uint32_t find_period(struct sp_autostep *a)
{
	uint64_t first = a->n > a->cap ? a->n - a->cap : 0;
	uint64_t pos = a->n - 1, best_d = 0, best_run = 0;
	uint32_t best_count = UINT32_MAX;

	/* the rarest token that still repeats: its last occurrence and earlier ones give the candidates */
	memset(a->counts, 0, sizeof(uint32_t) * COUNT_SLOTS);
	for (uint64_t j = first; j < a->n; j++)
		a->counts[at(a, j) & (COUNT_SLOTS - 1)]++;
	/* among the newer half only: old setup tokens must not hide the iteration's rare ones */
	for (uint64_t i = a->n; i-- > first + (a->n - first) / 2;) {
		uint32_t c = a->counts[at(a, i) & (COUNT_SLOTS - 1)];
		if (c >= MIN_REPEATS + 1 && c < best_count) {
			best_count = c;
			pos = i;
		}
	}
	if (best_count == UINT32_MAX)
		return 0;
	uint32_t tried = 0;
	for (uint64_t j = pos; j-- > first && tried < MAX_CANDIDATES;) {
		if (at(a, j) != at(a, pos))
			continue;
		uint64_t d = pos - j;
		tried++;
		if ((MIN_REPEATS + 1) * d > a->n - first)
			break;
		uint64_t r = run_length(a, first, d), wrap;
		int sync = 0;
		if (r >= MIN_REPEATS * d && r > best_run && d <= MAX_PERIOD && has_kernel(a, (uint32_t)d) &&
		    ((sync = has_sync_end(a, (uint32_t)d)) || wrap_position(a, (uint32_t)d, &wrap) ||
		     (r >= LONG_RUN && r >= 16 * d)) && primitive(a, first, d, r)) {
			best_run = r;
			best_d = d;
			a->found_sync = sync;
		}
	}
	return (uint32_t)best_d;
}

int sp_autostep_init(struct sp_autostep *a, uint32_t cap)
{
	uint32_t c = 256;
	while (c < cap && c < (1u << 24))
		c <<= 1;
	memset(a, 0, sizeof *a);
	a->tok = calloc(c, sizeof *a->tok);
	a->ts = calloc(c, sizeof *a->ts);
	a->counts = calloc(COUNT_SLOTS, sizeof *a->counts);
	a->gaps = calloc(2 * MAX_PERIOD, sizeof *a->gaps);
	if (!a->tok || !a->ts || !a->counts || !a->gaps) {
		sp_autostep_free(a);
		return -1;
	}
	a->cap = c;
	a->next_try = TRY_EVERY / 32;
	return 0;
}

void sp_autostep_free(struct sp_autostep *a)
{
	free(a->tok);
	free(a->ts);
	free(a->counts);
	free(a->gaps);
	a->gaps = NULL;
	a->tok = NULL;
	a->ts = NULL;
	a->counts = NULL;
}

void sp_autostep_credit(struct sp_autostep *a, uint64_t ns)
{
	a->credit += ns;
}

int sp_autostep_feed(struct sp_autostep *a, uint32_t tok, uint64_t ts)
{
	if (a->locked || !a->tok)
		return 0;
	a->tok[a->n & (a->cap - 1)] = tok;
	a->ts[a->n & (a->cap - 1)] = ts - a->credit;
	a->n++;
	if (a->n < a->next_try)
		return 0;
	/* an attempt costs about the ring's fill (and runs in the program's launch path): spaced by
	 * an eighth of it, at least TRY_EVERY, the cost per token stays flat as the ring fills */
	uint64_t fill = a->n < a->cap ? a->n : a->cap;
	a->next_try = a->n + (a->n < 8 * TRY_EVERY ? TRY_EVERY / 32 : fill / 8 > TRY_EVERY ? fill / 8 : TRY_EVERY);
	uint32_t p = find_period(a);
	if (!p || p != a->last_period) {
		a->last_period = p;
		a->first_found = a->n;
		return 0;
	}
	if (a->n - a->first_found < (a->found_sync || p > CONFIRM_TIMING ? p : CONFIRM_TIMING))
		return 0; /* confirm over one more full period (longer if only a gap shows the wrap) */
	/* locked: the iteration starts at position b; count anchor occurrences per period and
	 * since the most recent boundary instance. */
	uint64_t b;
	a->after = rarest_sync(a, p, &b);
	if (!a->after)
		wrap_position(a, p, &b);
	uint64_t ap = a->after ? b - 1 : b; /* the synchronisation that ends it, or the token that begins it */
	a->period = p;
	a->anchor = at(a, ap);
	a->every = count_in_period(a, p, a->anchor);
	a->count = 0;
	for (uint64_t i = ap; i < a->n; i++)
		a->count += at(a, i) == a->anchor;
	a->count %= a->every;
	/* iterations begun so far: boundaries inside the periodic region [n - run - p, n) */
	uint64_t first = a->n > a->cap ? a->n - a->cap : 0, region = a->n - run_length(a, first, p) - p;
	a->iterations = b >= region ? (uint32_t)((b - region) / p + 1) : 1;
	a->locked = 1;
	return 1;
}
