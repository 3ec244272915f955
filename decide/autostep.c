/* SPDX-License-Identifier: MIT */
/* autostep.c - automatic step detection (see autostep.h and docs/STEPS.md).
 *
 * Every TRY_EVERY tokens (more often at first: try_gap), take the rarest token that still repeats: any true period P is a
 * distance from its last position to an earlier occurrence of the same token, so those
 * distances are the candidates (graph launches count as launches). For each, measure how far back the stream stays periodic
 * (run length R); the true iteration period has the longest run (sub-periods such as identical
 * layers break at the optimizer; multiples of P have shorter runs). A candidate must hold for at
 * least 4 copies and show where it wraps: after its rarest host synchronisation if it has one,
 * else at the one position whose CPU gap (median of three copies) is >= 4x the period's median
 * gap and >= 20 us (the loop's Python or data loading) - or, without either, a run of >= 32768
 * tokens and 16 copies proves it (boundary at the largest gap). A period must launch a kernel,
 * must be primitive (not a multiple of a shorter period that explains the same run: in a stream
 * of identical launches the driver's own periodic stalls, such as a full launch queue, must not
 * pass for the loop's wrap), and must still hold one full period after it was first found. A
 * period that only a CPU gap wraps needs NOSYNC_REPEATS copies (identical layers behind Python's
 * per-module overhead look like short iterations with a wrap, until the layers end), and a period
 * the caller refuted (sp_autostep_refute) twice as many as the last time.
 * The boundary is expressed as (anchor token, every N-th occurrence). */
#include <stdlib.h>
#include <string.h>
#include "autostep.h"

#define TRY_EVERY 256u     /* tokens between detection attempts (more often at first: try_gap) */
#define COUNT_SLOTS 65536u /* token histogram size (ids are folded into it) */
#define MAX_CANDIDATES 64u /* distances tried per attempt */
#define SCAN_NEWEST 8192u  /* newest tokens searched for the rarest repeating one */
#define SCAN_WINDOWS 3u    /* ... in the newest half, eighth and 32nd of the ring */
#define SCAN_MIN 64u       /* ... each at least this long */
#define SUPER_COPIES 8u    /* a period this many times longer than a launch period ... */
#define SUPER_FILL_NUM 9u  /* ... that the shorter one's run fills 9/10 of is the shorter one */
#define SUPER_FILL_DEN 10u
#define MIN_REPEATS 3u     /* full periods the run must cover besides the current one */
#define MAX_PERIOD 16384u  /* longest iteration, in tokens */
#define GAP_RATIO 4u       /* the wrap's CPU gap vs the period's median gap */
#define MIN_WRAP_NS 20000u /* and at least this long */
#define LONG_RUN 32768u    /* without a clear wrap, a run this long still proves the period */
#define BLOCK_EXTRA \
	16u    /* a synchronised period that is c >= 2 copies of a block plus at most this
			    * many tokens is c iterations (blocks_of) */
#define BLOCK_MAX_COPIES 256u
#define BLOCK_MIN \
	32u      /* ... the finest block at least this many tokens (2000 tiny kernels and a
			    * sync are one iteration, not 2000) */
#define GRAPH_REPEATS 8u   /* ... or this many periods that launch a CUDA graph */
#define GRAPH_TRY \
	64u      /* a graph launch this many tokens after the last attempt brings the
			    * next one forward: a graph loop's copies are few tokens, and attempts
			    * every TRY_EVERY tokens left JAX learning 40 iterations more */
#define NOSYNC_REPEATS \
	8u  /* full periods a period that only a CPU gap wraps must cover (identical
			    * layers behind Python's per-module overhead repeat fewer times than this
			    * in most models; the collector's per-step check refutes deeper stacks) */

/* Tokens until the next attempt after n: every 8 for the first 512 (short loops lock within a few
 * iterations), every 32 up to 4096, then TRY_EVERY (an attempt costs about the newest
 * SCAN_NEWEST tokens, so attempts stay rare per token once the ring is full). */
static uint64_t try_gap(uint64_t n)
{
	return n < 512 ? TRY_EVERY / 32 : n < 4096 ? TRY_EVERY / 8 : TRY_EVERY;
}

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
	/* the lower median: for a period of two tokens, the other gap (the upper one is the wrap) */
	return best_gap >= MIN_WRAP_NS && best_gap >= GAP_RATIO * c[(p - 1) / 2];
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

/* Where a period of p without a visible wrap begins if it launches a graph: before its newest
 * graph launch, as a position in [n - p, n) in *pos. Returns 1 if there is one, else 0. */
static int graph_position(const struct sp_autostep *a, uint32_t p, uint64_t *pos)
{
	for (uint64_t q = a->n; q-- > a->n - p;)
		if (at(a, q) & SP_AUTOSTEP_GRAPH) {
			*pos = q;
			return 1;
		}
	return 0;
}

/* 1 if token x lies among the extras of the period that begins at s0 and ends before b, whose
 * blocks (c of q tokens) begin at s0 + o. */
static int in_extras(const struct sp_autostep *a, uint64_t s0, uint64_t o, uint32_t q, uint32_t c, uint64_t b,
		     uint32_t x)
{
	for (uint64_t i = s0; i < s0 + o; i++)
		if (at(a, i) == x)
			return 1;
	for (uint64_t i = s0 + o + (uint64_t)c * q; i < b; i++)
		if (at(a, i) == x)
			return 1;
	return 0;
}

/* 1 if the extras (as in_extras) launch a kernel. */
static int extras_launch(const struct sp_autostep *a, uint64_t s0, uint64_t o, uint32_t q, uint32_t c, uint64_t b)
{
	for (uint64_t i = s0; i < b; i++)
		if ((i < s0 + o || i >= s0 + o + (uint64_t)c * q) && (at(a, i) & SP_AUTOSTEP_KERNEL))
			return 1;
	return 0;
}

/* A period p whose synchronisation ends it at position b (the token after it, in [n - p, n)) that
 * is c >= 2 copies of a block of q tokens that launches a kernel, plus at most BLOCK_EXTRA tokens
 * before or after them (a loss read's copy and sync): a loop that reads its loss only every c
 * iterations. The finest such block must hold BLOCK_MIN tokens or more and not repeat within
 * itself, and the extras launch no kernel. Returns q, its copies in *c and the offset of the first
 * block from the period's start in *o, or 0. */
static uint32_t blocks_of(const struct sp_autostep *a, uint32_t p, uint64_t b, uint32_t *c, uint64_t *o)
{
	uint64_t s0 = b - p; /* the previous copy of the period, whole inside the run */
	uint32_t extra = p > BLOCK_EXTRA ? BLOCK_EXTRA : p, launches = 0;
	uint64_t budget = 4 * (uint64_t)p; /* token comparisons: beyond, the period stays whole */
	for (uint64_t i = s0; i < b; i++)
		launches += (at(a, i) & SP_AUTOSTEP_KERNEL) != 0;
	for (uint32_t k = p / 2 < BLOCK_MAX_COPIES ? p / 2 : BLOCK_MAX_COPIES; k >= 2; k--) {
		if (launches % k)
			continue; /* the extras launch nothing: each block holds launches / k */
		for (uint32_t q = (p - extra + k - 1) / k; q && q <= p / k; q++) {
			for (uint64_t off = 0; off <= p - (uint64_t)k * q; off++) {
				uint64_t i = 0, span = (uint64_t)(k - 1) * q, s = s0 + off;
				while (i < span && at(a, s + i) == at(a, s + i + q))
					i++;
				if (budget < i)
					return 0;
				budget -= i;
				if (i < span)
					continue;
				/* the finest block: too short (tiny kernels), itself a repeat, or without a
				 * launch, and the period stays whole */
				if (q < BLOCK_MIN)
					return 0;
				int ok = 0;
				for (i = 0; i < q; i++)
					ok |= (at(a, s + i) & SP_AUTOSTEP_KERNEL) != 0;
				for (uint32_t d = 1; ok && d < q; d++) {
					if (q % d)
						continue;
					for (i = 0; i + d < q && at(a, s + i) == at(a, s + i + d); i++)
						;
					ok = i + d < q;
				}
				/* the extras launch nothing: a loss read, not an optimizer step (gradient
				 * accumulation: micro-steps alike, then a fused optimizer of a few launches,
				 * are one iteration) */
				if (!ok || extras_launch(a, s0, off, q, k, b))
					return 0;
				*c = k;
				*o = off;
				return q;
			}
		}
	}
	return 0;
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

/* Copies a period of d tokens must show: more for periods the caller refuted before. */
static uint64_t required_copies(const struct sp_autostep *a, uint64_t d)
{
	uint64_t c = MIN_REPEATS + 1;
	for (unsigned i = 0; i < SP_AUTOSTEP_REFUTED; i++)
		if (a->refuted[i].period == d && a->refuted[i].copies > c)
			c = a->refuted[i].copies;
	return c;
}

/* 1 if period d with run r ending at the newest token is proven (see the file's comment), with
 * *sync set if it holds a synchronisation that can end it. */
static int proven(struct sp_autostep *a, uint64_t first, uint64_t d, uint64_t r, int *sync)
{
	uint64_t wrap;
	if (d > MAX_PERIOD || r < (required_copies(a, d) - 1) * d || !has_kernel(a, (uint32_t)d))
		return 0;
	*sync = has_sync_end(a, (uint32_t)d);
	if (!*sync && !(r >= NOSYNC_REPEATS * d && wrap_position(a, (uint32_t)d, &wrap)) &&
	    !(r >= GRAPH_REPEATS * d && graph_position(a, (uint32_t)d, &wrap)) && !(r >= LONG_RUN && r >= 16 * d))
		return 0;
	return primitive(a, first, d, r);
}

/* A proven period and its run. */
struct found {
	uint64_t d, run;
	int sync;
};

/* Tries the distances from the occurrence of a token at pos to its earlier ones as periods; the
 * proven one with the longest run goes into *f (d = 0 if none). */
static void try_from(struct sp_autostep *a, uint64_t first, uint64_t pos, struct found *f)
{
	/* the newest tokens all alike (a run of one kernel): a period no longer than that run is
	 * constant wherever it repeats, so a period of one explains it and it is not primitive;
	 * skipping those spares the measurement of their (long) runs */
	uint64_t same = a->same;
	uint32_t tried = 0;
	memset(f, 0, sizeof *f);
	/* earlier occurrences through the chain of same-slot positions (a slot may mix tokens) */
	for (uint64_t j = pos, step;
	     tried < MAX_CANDIDATES && (step = a->prev[j & (a->cap - 1)]) && j - first >= step;) {
		j -= step;
		if (at(a, j) != at(a, pos))
			continue;
		uint64_t d = pos - j;
		tried++;
		if ((MIN_REPEATS + 1) * d > a->n - first)
			break;
		if (d <= same)
			continue;
		uint64_t r = run_length(a, first, d);
		int sync = 0;
		if (r > f->run && proven(a, first, d, r, &sync)) {
			f->run = r;
			f->d = d;
			f->sync = sync;
		}
		if (r > a->cand_run && r >= d) { /* the best repeat seen, proven or not: for "undecided" */
			a->cand_run = r;
			a->cand_period = (uint32_t)d;
		}
	}
}

/* One detection attempt. Returns the period, or 0 if none is proven yet.
 *
 * Candidates come from the rarest repeating token of the newest half, eighth and 32nd of the ring,
 * and from the rarest repeating launch: a loop that reads its loss every 25 iterations has the read as its rarest
 * token, and the 25 iterations plus the read as a period that repeats; the iteration itself
 * repeats between the reads. When the shorter period fills most of the longer one (SUPER_FILL)
 * many times over, the shorter is the loop and the read an occasional extra; identical layers
 * fill much less of an iteration (backward and optimizer differ). Else the longest run wins. */
static uint32_t find_period(struct sp_autostep *a)
{
	uint64_t first = a->n > a->cap ? a->n - a->cap : 0, span = a->n - first;
	uint64_t pos[2 * SCAN_WINDOWS];        /* rarest token, then rarest launch, per window */
	struct found f = { 0 }, k = { 0 }, g;

	/* the rarest token that still repeats (counts over the ring are kept as tokens come and go),
	 * among the newest half, eighth and 32nd of the ring (at most SCAN_NEWEST tokens back): old
	 * setup or autotuning tokens must not hide the iteration's rare ones, and the newest tokens
	 * hold a token of the current iteration whatever its length. One pass from the newest token
	 * back: the running rarest token (and launch) at each window's edge is that window's. */
	uint64_t lo = a->n - (span / 2 > SCAN_NEWEST ? SCAN_NEWEST : span / 2), rp = a->n, kp = a->n, gp = a->n;
	uint32_t rb = UINT32_MAX, kb = UINT32_MAX;
	int w = SCAN_WINDOWS - 1; /* the smallest window first */
	for (uint64_t i = a->n; i-- > lo;) {
		for (; w >= 0 && a->n - i > (span >> (1 + 2 * w)) + SCAN_MIN; w--) {
			pos[w] = rp;
			pos[SCAN_WINDOWS + w] = kp;
		}
		uint32_t t = at(a, i), c = a->counts[t & (COUNT_SLOTS - 1)];
		if (c < MIN_REPEATS + 1)
			continue;
		if (c < rb) {
			rb = c;
			rp = i;
		}
		if ((t & SP_AUTOSTEP_KERNEL) && c < kb) {
			kb = c;
			kp = i;
		}
	}
	/* the newest graph launch that repeats, in the same window: none lies past graph_n (a search
	 * of its own, so that streams without graphs pay nothing for it in the pass above) */
	for (uint64_t i = a->graph_n; i-- > lo;) {
		uint32_t t = at(a, i);
		if ((t & SP_AUTOSTEP_GRAPH) && a->counts[t & (COUNT_SLOTS - 1)] >= MIN_REPEATS + 1) {
			gp = i;
			break;
		}
	}
	for (; w >= 0; w--) {
		pos[w] = rp;
		pos[SCAN_WINDOWS + w] = kp;
	}
	if (a->same > a->cand_run) {
		a->cand_run = a->same;
		a->cand_period = 1;
	}
	for (unsigned x = 0; x < 2 * SCAN_WINDOWS; x++) {
		struct found *into = x < SCAN_WINDOWS ? &f : &k;
		if (pos[x] == a->n || (x % SCAN_WINDOWS && at(a, pos[x]) == at(a, pos[x - 1])))
			continue; /* none, or the same token as the wider window's */
		try_from(a, first, pos[x], &g);
		if (g.d && g.run > into->run)
			*into = g;
	}
	/* the newest graph launch: a graph-replay loop whose extras every N iterations (an evaluation
	 * of the loss: JAX) hold the rarest tokens and launches would otherwise only be tried as the
	 * N-iteration super-period, which repeats too few times to prove */
	if (gp != a->n) {
		try_from(a, first, gp, &g);
		if (g.d && g.run > k.run)
			k = g;
	}
	if (k.d && (!f.d || (f.d >= SUPER_COPIES * k.d && k.run * SUPER_FILL_DEN >= f.d * SUPER_FILL_NUM) ||
		    (f.d < SUPER_COPIES * k.d && k.run > f.run)))
		f = k;
	a->found_sync = f.sync;
	a->found_run = f.run;
	return (uint32_t)f.d;
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
	a->prev = calloc(c, sizeof *a->prev);
	a->last = calloc(COUNT_SLOTS, sizeof *a->last);
	a->gaps = calloc(2 * MAX_PERIOD, sizeof *a->gaps);
	if (!a->tok || !a->ts || !a->counts || !a->gaps || !a->prev || !a->last) {
		sp_autostep_free(a);
		return -1;
	}
	a->cap = c;
	a->next_try = try_gap(0);
	return 0;
}

void sp_autostep_free(struct sp_autostep *a)
{
	free(a->tok);
	free(a->ts);
	free(a->counts);
	free(a->prev);
	free(a->last);
	a->prev = NULL;
	a->last = NULL;
	free(a->gaps);
	a->gaps = NULL;
	a->tok = NULL;
	a->ts = NULL;
	a->counts = NULL;
}

void sp_autostep_reset(struct sp_autostep *a)
{
	memset(a->counts, 0, sizeof(uint32_t) * COUNT_SLOTS);
	memset(a->last, 0, sizeof(uint64_t) * COUNT_SLOTS);
	a->n = 0;
	a->next_try = try_gap(0);
	a->last_period = 0;
	a->first_found = 0;
	a->found_sync = 0;
	a->credit = 0;
	a->locked = 0;
	a->cand_period = 0;
	a->cand_run = 0;
	a->same = 0;
	a->graph_n = 0;
	a->spent = 0;
}

void sp_autostep_refute(struct sp_autostep *a, uint32_t period)
{
	unsigned k = 0;
	for (unsigned i = 0; i < SP_AUTOSTEP_REFUTED; i++) {
		if (a->refuted[i].period == period) {
			a->refuted[i].copies *= 2;
			return;
		}
		if (a->refuted[i].copies < a->refuted[k].copies)
			k = i;
	}
	a->refuted[k].period = period;
	a->refuted[k].copies = 2 * (NOSYNC_REPEATS + 1);
}

void sp_autostep_credit(struct sp_autostep *a, uint64_t ns)
{
	a->credit += ns;
}

uint64_t sp_autostep_graph_try(const struct sp_autostep *a)
{
	return a->next_try - try_gap(a->next_try) + GRAPH_TRY;
}

void sp_autostep_attempt_took(struct sp_autostep *a, uint64_t ns)
{
	a->spent += ns;
}

/* 1 if the attempts so far leave room for another at stored time ts (SP_AUTOSTEP_SHARE). */
static int within_share(const struct sp_autostep *a, uint64_t ts)
{
	uint64_t ran = a->n && ts > a->t0 ? ts - a->t0 : 0;
	uint64_t eager = ran < SP_AUTOSTEP_EAGER_NS ? ran : SP_AUTOSTEP_EAGER_NS;
	return a->spent <= SP_AUTOSTEP_BURST_NS + eager / SP_AUTOSTEP_SHARE + (ran - eager) / SP_AUTOSTEP_LATE;
}

int sp_autostep_due(const struct sp_autostep *a, int graph, uint64_t ts)
{
	if (a->locked || !a->tok || !(a->n + 1 >= a->next_try || (graph && a->n + 1 >= sp_autostep_graph_try(a))))
		return 0; /* not an attempt's token (most tokens: the cheap test first) */
	return within_share(a, ts - a->credit);
}

/* Where a block of the period that begins at s0 (c blocks of q tokens from s0 + o, extras up to b)
 * wraps: the position, from s0, whose CPU gap (the median of up to three blocks) is the largest
 * and stands out as a loop's wrap does (wrap_position's test), its token not among the extras;
 * UINT64_MAX if none stands out (a read mid-iteration then still puts the boundary where the loop
 * begins, not after the read). */
static uint64_t block_wrap(const struct sp_autostep *a, uint64_t s0, uint64_t o, uint32_t q, uint32_t c, uint64_t b)
{
	uint64_t s = s0 + o, best = UINT64_MAX, best_gap = 0, *g = a->gaps;
	for (uint32_t j = 0; j < q; j++) {
		uint64_t x = s + j, g0 = ts_at(a, x) - ts_at(a, x - 1), g1 = ts_at(a, x + q) - ts_at(a, x + q - 1);
		g[j] = c >= 3    ? median3(g0, g1, ts_at(a, x + 2 * (uint64_t)q) - ts_at(a, x + 2 * (uint64_t)q - 1))
		       : g0 < g1 ? g0
				 : g1;
		if (g[j] > best_gap && !in_extras(a, s0, o, q, c, b, at(a, x))) {
			best_gap = g[j];
			best = o + j;
		}
	}
	uint32_t small = 0; /* gaps a GAP_RATIO-th of the best or less: more than half make it stand out */
	for (uint32_t j = 0; j < q; j++)
		small += g[j] * GAP_RATIO <= best_gap;
	return best_gap >= MIN_WRAP_NS && 2 * small > q ? best : UINT64_MAX;
}

/* Locks on the block of q tokens that a synchronised period p (ending at b) holds c copies of
 * (blocks_of): each block is an iteration, which begins before the block's first token that the
 * extras do not hold (the extras may repeat the anchor's function: a loss read's copy). Returns 1. */
static int lock_blocks(struct sp_autostep *a, uint32_t p, uint64_t b, uint32_t q, uint32_t c, uint64_t off,
		       uint64_t region)
{
	uint64_t s0 = b - p, j = 0;
	while (j < q && in_extras(a, s0, off, q, c, b, at(a, s0 + off + j)))
		j++; /* the first token of the block that the extras do not hold */
	j = (j < q ? j : 0) + off; /* from the period's start */
	uint64_t w = block_wrap(a, s0, off, q, c, b);
	j = w != UINT64_MAX ? w : j;
	a->period = q;
	a->period_at = s0 + off;
	a->anchor = at(a, s0 + j);
	a->after = 0;
	a->every = 0;
	a->launches = 0;
	for (uint64_t i = s0 + off; i < s0 + off + q; i++) {
		a->every += at(a, i) == a->anchor;
		a->launches += (at(a, i) & SP_AUTOSTEP_KERNEL) != 0;
	}
	/* the newest boundary: the newest block start (+ j) at or before the newest token */
	uint64_t bound = s0 + j;
	for (uint64_t base = s0; base < a->n; base += p)
		for (uint32_t k = 0; k < c; k++)
			if (base + j + (uint64_t)k * q < a->n)
				bound = base + j + (uint64_t)k * q;
	a->count = 0;
	for (uint64_t i = bound; i < a->n; i++)
		a->count += at(a, i) == a->anchor;
	a->count %= a->every;
	/* boundaries in [region, bound]: c classes, each every p tokens */
	a->iterations = 0;
	for (uint32_t k = 0; k < c; k++) {
		uint64_t x = s0 + j + (uint64_t)k * q; /* >= s0 >= region */
		x -= (x - region) / p * p;              /* the class's first one in the run */
		if (x <= bound)
			a->iterations += (uint32_t)((bound - x) / p + 1);
	}
	a->copies = (uint32_t)((a->n - region) / p * c);
	a->locked = 1;
	return 1;
}

int sp_autostep_feed(struct sp_autostep *a, uint32_t tok, uint64_t ts)
{
	if (a->locked || !a->tok)
		return 0;
	a->same = a->n && at(a, a->n - 1) == tok ? a->same + 1 : 0;
	if (a->same > a->cap)
		a->same = a->cap; /* as run_length(1), bounded by the ring */
	if (a->n >= a->cap)
		a->counts[at(a, a->n) & (COUNT_SLOTS - 1)]--; /* the token it overwrites leaves the ring */
	a->counts[tok & (COUNT_SLOTS - 1)]++;
	uint64_t last = a->last[tok & (COUNT_SLOTS - 1)]; /* position + 1 of the slot's previous token */
	a->prev[a->n & (a->cap - 1)] = last && a->n - (last - 1) < a->cap ? (uint32_t)(a->n - (last - 1)) : 0;
	a->last[tok & (COUNT_SLOTS - 1)] = a->n + 1;
	a->tok[a->n & (a->cap - 1)] = tok;
	/* stored times never go back: a token stamped with the precise clock may follow one stamped
	 * with the counter clock (collector/base/clock.h), tens of ns apart; a gap must not wrap around */
	uint64_t at_ts = ts - a->credit, prev_ts = a->n ? a->ts[(a->n - 1) & (a->cap - 1)] : 0;
	a->ts[a->n & (a->cap - 1)] = at_ts > prev_ts ? at_ts : prev_ts;
	if (!a->n)
		a->t0 = at_ts;
	if (tok & SP_AUTOSTEP_GRAPH)
		a->graph_n = a->n + 1;
	a->n++;
	if (a->n < a->next_try && !((tok & SP_AUTOSTEP_GRAPH) && a->n >= sp_autostep_graph_try(a)))
		return 0;
	if (!within_share(a, ts - a->credit))
		return 0; /* the attempts' share of the time is used up: a later token asks again */
	a->next_try = a->n + try_gap(a->n);
	uint32_t p = find_period(a);
	uint64_t need = required_copies(a, p) > NOSYNC_REPEATS ? required_copies(a, p) : NOSYNC_REPEATS;
	if (p && a->found_run >= (need + 1) * (uint64_t)p) {
		/* the run already holds a full period more than any proof asks: it has confirmed itself
		 * (a loop whose run a loss read breaks every few iterations may get no second attempt) */
	} else if (!p || p != a->last_period) {
		a->last_period = p;
		a->first_found = a->n;
		return 0;
	} else if (a->n - a->first_found < p) {
		return 0; /* confirm over one more full period */
	}
	/* locked: the iteration starts at position b; count anchor occurrences per period and
	 * since the most recent boundary instance. */
	uint64_t b;
	a->after = rarest_sync(a, p, &b);
	if (!a->after && !wrap_position(a, p, &b))
		graph_position(a, p, &b); /* no wrap to see: before a graph launch, if there is one */
	uint64_t ap = a->after ? b - 1 : b; /* the synchronisation that ends it, or the token that begins it */
	uint64_t first = a->n > a->cap ? a->n - a->cap : 0, region = a->n - run_length(a, first, p) - p;
	uint32_t c = 1;
	uint64_t off = 0;
	uint32_t q = a->after ? blocks_of(a, p, b, &c, &off) : 0;
	a->blocks = 1;
	a->period = p;
	a->period_at = a->n - p;
	a->anchor = at(a, ap);
	a->every = count_in_period(a, p, a->anchor);
	a->count = 0;
	for (uint64_t i = ap; i < a->n; i++)
		a->count += at(a, i) == a->anchor;
	a->count %= a->every;
	a->launches = 0;
	for (uint64_t i = a->n - p; i < a->n; i++)
		a->launches += (at(a, i) & SP_AUTOSTEP_KERNEL) != 0;
	/* iterations begun so far: boundaries inside the periodic region [n - run - p, n) */
	a->iterations = b >= region ? (uint32_t)((b - region) / p + 1) : 1;
	a->copies = (uint32_t)((a->n - region) / p);
	a->locked = 1;
	if (q) { /* the whole period kept for sp_autostep_unblock, then the lock on its blocks */
		a->whole = (struct sp_autostep_whole){ a->period,   a->anchor, a->every, a->count,    a->iterations,
						       a->launches, a->copies, a->after, a->period_at };
		a->blocks = c;
		return lock_blocks(a, p, b, q, c, off, region);
	}
	return 1;
}

void sp_autostep_unblock(struct sp_autostep *a)
{
	if (a->blocks <= 1)
		return;
	const struct sp_autostep_whole *w = &a->whole;
	a->period = w->period, a->anchor = w->anchor, a->every = w->every, a->count = w->count;
	a->iterations = w->iterations, a->launches = w->launches, a->copies = w->copies, a->after = w->after;
	a->period_at = w->period_at;
	a->blocks = 1;
}

uint32_t sp_autostep_count(struct sp_autostep *a, uint32_t tok, int recount)
{
	(void)recount; /* the counts are kept up to date as tokens come and go */
	return a->counts[tok & (COUNT_SLOTS - 1)];
}
