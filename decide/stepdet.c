/* SPDX-License-Identifier: MIT */
/* stepdet.c - the step detector (see stepdet.h and docs/STEPS.md, "Automatic step detection").
 *
 * Explicit markers count matching tokens against `every`. Automatic detection learns the period
 * (autostep.c), then watches its anchor and counts the launches of every step (one counter per
 * launch): a step whose launches differ from the period's, or that runs far past them without
 * its anchor, ends the regime: the
 * detector learns again, and locks on the next periodic regime. A regime seen before (same anchor,
 * every, period and launches) continues its step numbers; a new one starts at its first periodic
 * iteration, so that the schedule's steps are the dominant loop's even when an evaluation phase
 * came first. A period refuted soon after its lock must show more copies to lock again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fnmatch.h>
#include "stepdet.h"
#include "collector/base/intern.h"
#include "config/config.h"

#define RING_TOKENS (1u << 16)   /* the learner's ring */
#define YOUNG_STEPS 8u           /* a regime that ends within this many steps was a wrong lock */
#define IRREGULAR_STEPS \
	2u       /* a regime this old keeps its lock through one step that differs
				  * (4 refused the extra kernel in the 2nd step after a lock: ddp_train) */
#define IRREGULAR_EXTRA 8u       /* ... by at most 1/8 of its launches more (none below 8) */
#define IRREGULAR_GAP 4          /* ... and at most one such step in this many */
#define SETTLE_STEPS 64u         /* a regime this old is the program's loop (sp_stepdet_settled) */
#define UNDECIDED_TOKENS 65536u  /* learning this long without a lock is reported */
#define OVERRUN 2u               /* a counted step with this many periods' launches ... */
#define OVERRUN_SLACK \
	32u        /* ... and this many more has lost its anchor (time is no
				  * measure: a pause in one step, a checkpoint, must not unlock) */
#define TRAIN_SETTLE \
	4u    /* a regime without training evidence settles after this many
				  * times SETTLE_STEPS (a later training loop may still come) */
#define PROBE_RATIO \
	4u    /* an uncounted step this many times longer or shorter than the
				  * counted ones is counted next (sp_stepdet_blind) */
#define LEARN_WANTS (SP_WANT_LAUNCH | SP_WANT_API | SP_WANT_GRAPH | SP_WANT_NVTX | SP_WANT_NCCL)

static int glob_match(const char *pat, const char *s)
{
	return s && fnmatch(pat, s, 0) == 0;
}

int sp_name_matches(uint32_t id, const char *pat, uint8_t *cache,
		    char *(*demangle)(const char *, char *, size_t *, int *))
{
	if (id < SP_DET_MATCH_CACHE && cache[id])
		return cache[id] == 2;
	const char *raw = sp_intern_lookup(id);
	int ok = glob_match(pat, raw);
	if (!ok && raw && demangle) {
		int st = 0;
		char *dm = demangle(raw, NULL, NULL, &st);
		if (dm && st == 0) {
			ok = glob_match(pat, dm);
			if (!ok) {
				char *p = strchr(dm, '('), *sp;
				if (p)
					*p = 0;
				sp = strrchr(dm, ' ');
				ok = glob_match(pat, sp ? sp + 1 : dm);
			}
		}
		free(dm);
	}
	if (id < SP_DET_MATCH_CACHE)
		cache[id] = ok ? 2 : 1;
	return ok;
}

int sp_stepdet_matches(struct sp_stepdet *d, uint32_t id)
{
	return sp_name_matches(id, d->pattern, d->match, d->demangle);
}

/* s with digit runs folded to '#' after prefix, into buf[n]. This function can't fail. */
static void fold_digits(const char *prefix, const char *s, char *buf, size_t n)
{
	size_t o = (size_t)snprintf(buf, n, "%s", prefix);
	for (; s && *s && o + 1 < n; s++) {
		if (*s >= '0' && *s <= '9') {
			while (s[1] >= '0' && s[1] <= '9')
				s++;
			buf[o++] = '#';
		} else {
			buf[o++] = *s;
		}
	}
	buf[o < n ? o : n - 1] = 0;
}

uint32_t sp_stepdet_nvtx_name(const char *msg)
{
	char buf[160];
	fold_digits("", msg, buf, sizeof buf);
	return sp_intern(buf);
}

/* The learner's token for an NVTX message: "nvtx:" and the message with digit runs folded to
 * '#', so that "step 17" and "step 18" are one token. */
static uint32_t nvtx_token(struct sp_stepdet *d, uint32_t msg)
{
	char buf[170];
	unsigned slot = msg & 1023u;
	if (d->nvtx[slot].msg == msg)
		return d->nvtx[slot].tok;
	fold_digits("nvtx:", sp_intern_lookup(msg), buf, sizeof buf);
	d->nvtx[slot].msg = msg;
	d->nvtx[slot].tok = sp_intern(buf);
	return d->nvtx[slot].tok;
}

/* The learner's token for t (name and autostep flags), or 0 if t is not one. */
static uint32_t learn_token(struct sp_stepdet *d, const struct sp_token *t)
{
	switch (t->kind) {
	case SP_TOK_KERNEL:
		return t->name | SP_AUTOSTEP_KERNEL;
	case SP_TOK_GRAPH:
		return t->name | SP_AUTOSTEP_KERNEL | SP_AUTOSTEP_GRAPH;
	case SP_TOK_API:
		return t->name | (t->flags & SP_TOKF_SYNC ? SP_AUTOSTEP_SYNC : 0);
	case SP_TOK_NCCL:
		return t->name;
	case SP_TOK_NVTX_PUSH:
		/* a range with a message; pops and unnamed ranges say nothing the pushes do not (XLA
		 * pushes tens of thousands of unnamed ranges from its compiler threads) */
		return t->name ? nvtx_token(d, t->name) : 0;
	}
	return 0;
}

static unsigned want_of(const struct sp_token *t)
{
	switch (t->kind) {
	case SP_TOK_KERNEL:
		return SP_WANT_LAUNCH;
	case SP_TOK_GRAPH:
		return SP_WANT_GRAPH;
	case SP_TOK_API:
		return SP_WANT_API;
	case SP_TOK_NCCL:
		return SP_WANT_NCCL;
	default:
		return SP_WANT_NVTX;
	}
}

/* 1 if the caller, enabling what sp_stepdet_wants says, would have delivered t. */
static int wanted(const struct sp_stepdet *d, const struct sp_token *t)
{
	if (d->wants & want_of(t))
		return 1;
	return (d->wants & SP_WANT_ANCHOR) && (t->kind == SP_TOK_API || t->kind == SP_TOK_GRAPH) &&
	       t->name == (d->how.anchor & ~SP_AUTOSTEP_FLAGS);
}

/* What a locked detector watches: the anchor, plus launches while a step is counted. */
static unsigned locked_wants(const struct sp_stepdet *d)
{
	uint32_t a = d->how.anchor;
	unsigned w = a & SP_AUTOSTEP_KERNEL ? SP_WANT_LAUNCH | SP_WANT_GRAPH : 0;
	if (!(a & SP_AUTOSTEP_KERNEL)) {
		const char *n = sp_intern_lookup(a & ~SP_AUTOSTEP_FLAGS);
		w |= n && !strncmp(n, "nvtx:", 5)  ? SP_WANT_NVTX
		     : n && !strncmp(n, "nccl", 4) ? SP_WANT_NCCL
						   : SP_WANT_ANCHOR;
	}
	if (d->counting || d->probe)
		w |= SP_WANT_LAUNCH | SP_WANT_GRAPH; /* probe: the caller must show launches again */
	return w;
}

/* Sets the wants to w and flags the change in out. */
static void set_wants(struct sp_stepdet *d, unsigned w, struct sp_det_out *out)
{
	if (w != d->wants)
		out->what |= SP_DET_WANTS;
	d->wants = w;
}

/* What a kernel's name (interned) says, KC_*: backward pass or optimizer (the evidence that a
 * regime is training), optimizer. Names as PyTorch, Inductor, cuDNN, cuBLAS and llm.c spell them;
 * case-insensitive. Cached in d->match, which automatic detection does not otherwise use. */
enum { KC_KNOWN = 1, KC_TRAIN = 2, KC_OPTIMIZER = 4 };
static unsigned kernel_class(struct sp_stepdet *d, uint32_t id)
{
	static const char *const train[] = { "backward", "bwd", "wgrad", "dgrad" };
	static const char *const opt[] = { "adam", "sgd", "optimizer", "lamb", "adagrad", "rmsprop" };
	if (id < SP_DET_MATCH_CACHE && d->match[id])
		return d->match[id];
	const char *n = sp_intern_lookup(id);
	unsigned c = KC_KNOWN;
	for (size_t i = 0; n && i < sizeof opt / sizeof *opt; i++)
		c |= strcasestr(n, opt[i]) ? KC_OPTIMIZER | KC_TRAIN : 0;
	for (size_t i = 0; n && !(c & KC_TRAIN) && i < sizeof train / sizeof *train; i++)
		c |= strcasestr(n, train[i]) ? KC_TRAIN : 0;
	if (id < SP_DET_MATCH_CACHE)
		d->match[id] = (uint8_t)c;
	return c;
}

static int train_kernel(struct sp_stepdet *d, uint32_t id)
{
	return (kernel_class(d, id) & KC_TRAIN) != 0;
}

/* 1 if the kernel name (interned) says optimizer step (a subset of train_kernel's words). */
static int optimizer_kernel(struct sp_stepdet *d, uint32_t id)
{
	return (kernel_class(d, id) & KC_OPTIMIZER) != 0;
}

/* 1 if the learner's locked period launches an optimizer kernel. */
static int period_optimizes(struct sp_stepdet *d)
{
	const struct sp_autostep *a = &d->a;
	for (uint64_t i = a->period_at; i < a->period_at + a->period; i++) {
		uint32_t tok = a->tok[i & (a->cap - 1)];
		if ((tok & SP_AUTOSTEP_KERNEL) && optimizer_kernel(d, tok & ~SP_AUTOSTEP_FLAGS))
			return 1;
	}
	return 0;
}

/* 1 if the learner's last period (the one it locked on) launches a training kernel. */
static int period_trains(struct sp_stepdet *d)
{
	const struct sp_autostep *a = &d->a;
	uint64_t from = a->period_at;
	for (uint64_t i = from; i < from + a->period; i++) {
		uint32_t tok = a->tok[i & (a->cap - 1)];
		if ((tok & SP_AUTOSTEP_KERNEL) && !(tok & SP_AUTOSTEP_GRAPH) &&
		    train_kernel(d, tok & ~SP_AUTOSTEP_FLAGS))
			return 1;
	}
	return 0;
}

/* Mixes two launch tokens into a hash. */
static uint64_t mix2(uint32_t x, uint32_t y)
{
	uint64_t h = ((uint64_t)x << 32 | y) * 0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

/* The learner's last period's kernel and graph launches in their cyclic order, as a hash that does
 * not depend on where the period was cut (a sum over consecutive pairs, the last with the first):
 * two locks on one loop agree whatever API calls come and go between its launches. */
static uint64_t period_sig(const struct sp_stepdet *d)
{
	const struct sp_autostep *a = &d->a;
	uint64_t from = a->period_at, sig = 0;
	uint32_t first = 0, prev = 0;
	for (uint64_t i = from; i < from + a->period; i++) {
		uint32_t tok = a->tok[i & (a->cap - 1)];
		if (!(tok & SP_AUTOSTEP_KERNEL))
			continue;
		if (prev)
			sig += mix2(prev, tok);
		else
			first = tok;
		prev = tok;
	}
	return prev ? sig + mix2(prev, first) : 0;
}

/* 1 if the current regime's steps do not count towards the schedule: it shows no training
 * evidence and a regime that does is known, or it has not yet run SP_DET_DEFER_STEPS steps. */
static int minor(const struct sp_stepdet *d)
{
	if (d->kind != SP_MARK_AUTO || !d->cur || d->no_prefer)
		return 0;
	const struct sp_det_regime *r = &d->reg[d->cur - 1];
	return !r->train && (d->train || !r->proven);
}

static void start_learning(struct sp_stepdet *d, struct sp_det_out *out)
{
	d->learning = 1;
	d->undecided_at = d->tokens = 0;
	d->cur = 0;
	d->how.regime = 0;
	d->counting = 0;
	sp_autostep_reset(&d->a);
	set_wants(d, LEARN_WANTS, out);
}

int sp_stepdet_init(struct sp_stepdet *d, int kind, const char *pattern, int every,
		    char *(*demangle)(const char *, char *, size_t *, int *))
{
	struct sp_det_out ignore = { 0 };
	memset(d, 0, sizeof *d);
	d->kind = kind;
	snprintf(d->pattern, sizeof d->pattern, "%s", pattern ? pattern : "");
	d->every = every >= 1 ? (uint32_t)every : 1;
	d->demangle = demangle;
	d->step = -1;
	d->irr_step = INT64_MIN;
	d->how.marker_kind = kind;
	d->how.every = d->every;
	d->nvtx_pop = sp_intern("nvtx:pop");
	sp_pysteps_init(&d->py);
	if (kind != SP_MARK_AUTO) {
		/* optimizer and python markers need nothing from CUPTI: the Python bridge brings them */
		d->wants = kind == SP_MARK_KERNEL                                ? SP_WANT_LAUNCH
			   : kind == SP_MARK_NVTX                                ? SP_WANT_NVTX
			   : kind == SP_MARK_NCCL                                ? SP_WANT_NCCL
			   : kind == SP_MARK_OPTIMIZER || kind == SP_MARK_PYTHON ? 0
										 : SP_WANT_MARKER;
		return 0;
	}
	if (sp_autostep_init(&d->a, RING_TOKENS) < 0)
		return -1;
	start_learning(d, &ignore);
	return 0;
}

void sp_stepdet_free(struct sp_stepdet *d)
{
	sp_autostep_free(&d->a);
}

int sp_stepdet_may_try(const struct sp_stepdet *d, const struct sp_token *t)
{
	/* a graph launch may bring the attempt forward (sp_autostep_feed); any other token may not:
	 * asking for every token would time every token from GRAPH_TRY tokens after an attempt on,
	 * a clock read each (2x the learning phase's cost on a launch-bound loop) */
	return d->learning && sp_autostep_due(&d->a, t->kind == SP_TOK_GRAPH, t->ts);
}

void sp_stepdet_attempt_took(struct sp_stepdet *d, uint64_t ns)
{
	if (d->learning)
		sp_autostep_attempt_took(&d->a, ns);
}

unsigned sp_stepdet_wants(const struct sp_stepdet *d)
{
	return d->wants;
}

uint32_t sp_stepdet_anchor_name(const struct sp_stepdet *d)
{
	return d->kind == SP_MARK_AUTO && !d->learning ? d->how.anchor & ~SP_AUTOSTEP_FLAGS : 0;
}

int sp_stepdet_settled(const struct sp_stepdet *d)
{
	if (d->kind != SP_MARK_AUTO)
		return 1;
	const struct sp_det_regime *r = d->cur ? &d->reg[d->cur - 1] : NULL;
	return r && !minor(d) && r->steps >= (r->train || d->no_prefer ? SETTLE_STEPS : TRAIN_SETTLE * SETTLE_STEPS);
}

void sp_stepdet_schedule(struct sp_stepdet *d, const struct sp_schedule *sched)
{
	d->sched = sched;
}

void sp_stepdet_sparse(struct sp_stepdet *d, uint32_t every, const struct sp_schedule *sched)
{
	d->sparse = every;
	d->sparse_sched = sched;
}

void sp_stepdet_blind(struct sp_stepdet *d, int on)
{
	d->blind = on != 0;
}

int sp_stepdet_sparse_quiet(const struct sp_stepdet *d)
{
	return d->kind == SP_MARK_AUTO && !d->learning && d->sparse > 1 && !minor(d) &&
	       !(d->wants & (SP_WANT_LAUNCH | SP_WANT_GRAPH));
}

int64_t sp_stepdet_sched_step(const struct sp_stepdet *d, int64_t step)
{
	if (minor(d))
		return -1;
	return d->kind == SP_MARK_AUTO && d->cur ? step - d->reg[d->cur - 1].shift : step;
}

int sp_stepdet_regime_note(struct sp_stepdet *d, char *buf, size_t n)
{
	if (d->kind != SP_MARK_AUTO || !d->cur || d->no_prefer)
		return 0;
	struct sp_det_regime *r = &d->reg[d->cur - 1];
	unsigned k = d->cur, kind;
	if (!r->train && d->train)
		kind = 1;
	else if (!r->train && !r->proven)
		kind = 2;
	else if (!r->train && r->run == SP_DET_DEFER_STEPS)
		kind = 4;
	else if (r->train && d->train == k && d->nreg > 1)
		kind = 8;
	else
		return 0;
	if (r->noted & kind)
		return 0;
	r->noted |= kind;
	if (kind == 1)
		snprintf(buf, n,
			 "automatic steps: regime %u (%u launches a step) launches no backward or optimizer kernel, "
			 "regime %u (%u launches) does: regime %u is taken for an evaluation or other side phase and "
			 "its "
			 "steps are not recorded (set an explicit [marker] to record them)",
			 k, r->launches, d->train, d->reg[d->train - 1].launches, k);
	else if (kind == 2)
		snprintf(buf, n,
			 "automatic steps: regime %u (%u launches a step) launches no backward or optimizer kernel: "
			 "its steps count towards the schedule only after %u of them in a row (an evaluation pass "
			 "before "
			 "training is shorter); windows wait until then",
			 k, r->launches, SP_DET_DEFER_STEPS);
	else if (kind == 4)
		snprintf(buf, n,
			 "automatic steps: regime %u ran %u steps in a row without a backward or optimizer kernel: "
			 "taken for the program's loop (inference, or training whose kernel names do not say so); its "
			 "step "
			 "%lld is the schedule's step %lld (the schedule's steps come %lld steps later than the "
			 "program's); a training regime found later is preferred",
			 k, SP_DET_DEFER_STEPS, (long long)d->step, (long long)(d->step - r->shift),
			 (long long)r->shift);
	else
		snprintf(buf, n,
			 "automatic steps: regime %u launches backward or optimizer kernels: it is the training "
			 "loop, preferred from now on over the regimes seen before (their steps are not recorded)",
			 k);
	return 1;
}

/* The schedule's numbering never goes back: a step of the preferred regime gets a schedule step
 * after the highest one handed out so far, or the same one when that is a warmup (a re-lock repeats
 * the warmup of the step it refuted: it warmed nothing the window will hold). The lock's numbering
 * (lock()) already continues; this holds whatever a regime's own shift says (a regime proven after
 * another counted, a resumed one). Shifts the current regime if needed. This function can't fail. */
static void hand_out(struct sp_stepdet *d)
{
	if (d->kind != SP_MARK_AUTO || !d->cur || minor(d))
		return;
	struct sp_det_regime *r = &d->reg[d->cur - 1];
	int64_t s = d->step - r->shift;
	int rewarm = d->sched && s == d->sched_hi && sp_schedule_action(d->sched, s) == SP_ACT_WARMUP;
	if (d->hand && s <= d->sched_hi && !rewarm) {
		r->shift += s - (d->sched_hi + 1);
		s = d->sched_hi + 1;
	}
	d->hand = d->cur;
	d->sched_hi = s;
}

/* A boundary: step d->step + 1 begins. */
static void boundary(struct sp_stepdet *d, uint64_t ts, unsigned flags, struct sp_det_out *out)
{
	d->step++;
	hand_out(d);
	d->step_open = 1;
	d->step_t0 = ts;
	out->what |= SP_DET_BOUNDARY | flags | (minor(d) ? SP_DET_MINOR : 0);
	out->step = d->step;
	out->regime = d->how.regime;
}

/* An explicit marker occurrence, counted against every. */
static void marker_hit(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	if (d->hits++ % d->every == 0)
		boundary(d, t->ts, 0, out);
}

/* A profiler_range marker call: a Start begins a step, the matching Stop ends it. */
static void range_call(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	const char *n = sp_intern_lookup(t->name);
	if (n && strstr(n, "Stop")) {
		if (++d->range_stops % d->every == 0 && d->step_open) {
			d->step_open = 0;
			out->what |= SP_DET_END;
		}
	} else if (n && strstr(n, "Start") && d->range_starts++ % d->every == 0) {
		boundary(d, t->ts, 0, out);
	}
}

/* The schedule steps a training regime skips at its re-lock on step d->step after its last
 * watched one, r->last_step + 1 (refuted: it keeps its schedule step): the iterations spent
 * learning again advance the schedule only through steps it gives no action, up to the first it
 * does (or the refuted step's own, if it was a warmup), which the next boundary then gets. So a
 * window never falls into the gap (llm.c's
 * validation every 20 steps took skip_first 10, wait 10's window whole), and elsewhere the
 * schedule keeps the program's numbering. Without a schedule, every step of the gap is skipped.
 * The loop runs once per iteration of the gap, which the program ran. This function can't fail. */
static int64_t gap_steps(const struct sp_stepdet *d, const struct sp_det_regime *r)
{
	int64_t last = r->last_step + 1 - r->shift, next = d->step + 1 - r->shift;
	/* a warmup in the refuted step warmed nothing the window will hold: it comes again */
	int64_t from = d->sched && sp_schedule_action(d->sched, last) == SP_ACT_WARMUP ? last : last + 1;
	for (int64_t k = from; k < next; k++) {
		if (d->sched && sp_schedule_done(d->sched, k - 1))
			return 0;
		if (!d->sched || sp_schedule_action(d->sched, k) != SP_ACT_NONE)
			return next - k;
	}
	return 0;
}

/* The shift of regime r (at its lock on d->step) that continues the schedule's numbering of regime p,
 * the one that last counted (r itself when it resumes): a regime taken for the loop after its
 * deferral counts only the steps the detector watched (the cuBLAS loop's evaluation passes every 40
 * iterations took two of its three steps), a training regime skips only the gap's steps the schedule
 * gives no action (gap_steps); one that never counted keeps r's. This function can't fail. */
static int64_t continued_shift(const struct sp_stepdet *d, const struct sp_det_regime *p, const struct sp_det_regime *r)
{
	if (p->proven && !p->train)
		return p->shift + (d->step - p->last_step);
	if (p->train)
		return p->shift + gap_steps(d, p);
	return r->shift;
}

/* The learner locked: find or open the regime, number the open step, watch the anchor. A regime is
 * found again when its anchor, every, boundary side and launches match and either its period or
 * the order of its launches does: API calls that come and go (DDP's eight cudaEventSynchronize of
 * its first ten iterations) change the period, not the loop. Once a regime counted for the
 * schedule, every lock numbers on from it (the iterations spent learning again advance it, with
 * the gap rule): step numbers never go back and no schedule step is handed out twice. */
static void lock(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	/* a block is an iteration only with training evidence: identical layers of an inference loop's
	 * forward pass, or its micro-batches, synchronised once, are one step */
	if (d->a.blocks > 1 && !period_trains(d))
		sp_autostep_unblock(&d->a);
	d->a_proven = d->a.blocks > 1 ? d->a.whole.period : d->a.period; /* what the learner proved */
	d->period_opt = period_optimizes(d);
	const struct sp_autostep *a = &d->a;
	struct sp_det_regime *r = NULL;
	uint64_t sig = period_sig(d);
	for (uint32_t i = 0; i < d->nreg && !r; i++)
		if (d->reg[i].anchor == a->anchor && d->reg[i].every == a->every && d->reg[i].launches == a->launches &&
		    d->reg[i].after == a->after && (d->reg[i].period == a->period || d->reg[i].sig == sig))
			r = &d->reg[i];
	int relock = d->how.regime != 0 || d->nreg > 0;
	/* the regime that counted last, copied: a new regime may take its slot */
	struct sp_det_regime p = d->hand ? d->reg[d->hand - 1] : (struct sp_det_regime){ .last_step = -1 };
	if (r) { /* a regime seen before resumes: its iterations went on while the detector learned */
		if (!d->hand || p.last_step <= r->last_step)
			p = *r;
		d->step = p.last_step + (int64_t)a->iterations;
		r->shift = continued_shift(d, &p, r);
		r->continued |= d->hand != 0;
	} else {
		r = &d->reg[d->nreg < SP_DET_REGIMES ? d->nreg++ : SP_DET_REGIMES - 1];
		memset(r, 0, sizeof *r);
		r->anchor = a->anchor;
		r->every = a->every;
		r->launches = a->launches;
		r->after = a->after;
		if (d->hand) { /* numbered on from the regime that counted last */
			d->step = p.last_step + (int64_t)a->iterations;
			r->continued = 1;
			r->shift = continued_shift(d, &p, r);
		} else {
			d->step = (int64_t)a->iterations - 1; /* from the regime's first periodic iteration */
		}
	}
	r->period = a->period;
	r->sig = sig;
	r->last_step = d->step;
	r->run = 0;
	r->train |= period_trains(d);
	if (!r->train && !r->proven)
		r->deferred_from = d->step;
	d->cur = (uint32_t)(r - d->reg) + 1;
	if (r->train && !d->train)
		d->train = d->cur;
	d->how.regime = d->cur;
	d->how.period = a->period;
	d->how.launches = a->launches;
	d->how.anchor = a->anchor;
	d->how.after = a->after;
	d->how.every = a->every;
	d->how.confidence = a->copies;
	d->how.blocks = a->blocks;
	d->how.train = r->train;
	d->how.relocks += relock;
	d->every = a->every;
	d->hits = a->count;
	d->learning = 0;
	d->step_open = 1;
	d->step_t0 = t->ts;
	d->counting = 0; /* the locked step began before the lock: counted from the next one */
	out->what |= SP_DET_LOCK | (relock ? SP_DET_RELOCK : 0) | (minor(d) ? SP_DET_MINOR : 0);
	out->step = d->step;
	out->regime = d->how.regime;
	set_wants(d, locked_wants(d), out);
}

/* The locked period stopped matching: the open step ends, learning starts again. A regime that
 * ends young was a wrong lock: its period must prove itself longer next time. */
static void unlock(struct sp_stepdet *d, struct sp_det_out *out)
{
	struct sp_det_regime *r = &d->reg[d->cur - 1];
	d->probe = d->split = d->step_opt = 0;
	d->irr_step = INT64_MIN;
	d->ref_ns = 0; /* a new regime's steps take their own time */
	if (r->steps < YOUNG_STEPS)
		sp_autostep_refute(&d->a, d->a_proven ? d->a_proven : r->period); /* the one the learner proved */
	d->step_open = 0;
	out->what |= SP_DET_END | SP_DET_UNLOCK;
	start_learning(d, out);
}

/* The open step did not match the period: it is refuted (not the regime's) and the regime ends. */
static void refute_step(struct sp_stepdet *d, struct sp_det_out *out)
{
	out->what |= SP_DET_MISMATCH;
	out->bad_step = d->step;
	d->how.mismatches++;
	d->reg[d->cur - 1].last_step = d->step - 1;
	unlock(d, out);
}

/* The cheap check of a step that ends: 1 if its launches differ from the period's. */
static int step_differs(const struct sp_stepdet *d)
{
	return d->counting && d->counted != d->how.launches;
}

/* 1 if the step that just began (d->step) is to be counted (sp_stepdet_sparse): never while the
 * caller is blind to launches (sp_stepdet_blind), always after a step whose time stood out. */
static int count_step(const struct sp_stepdet *d)
{
	if (d->blind)
		return 0;
	if (d->sparse <= 1 || minor(d) || d->probe || d->step % d->sparse == 0)
		return 1;
	if (!d->sparse_sched)
		return 0;
	int64_t s = sp_stepdet_sched_step(d, d->step);
	return sp_schedule_action(d->sparse_sched, s) != SP_ACT_NONE ||
	       sp_schedule_action(d->sparse_sched, s + 1) != SP_ACT_NONE;
}

/* An anchor occurrence while locked. */
static void anchor_hit(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	if (d->hits++ % d->every)
		return;
	struct sp_det_regime *r = &d->reg[d->cur - 1];
	/* an anchor call with none of the step's launches, or with half of them or more but not all, in
	 * an established regime: an extra call of the anchor's function (a loss or norm read for
	 * logging); the next one decides, and the step's launches must then match the period exactly.
	 * A call with fewer than half is a shorter step (an evaluation pass): refuted at once */
	uint32_t c = d->counted, l = d->how.launches;
	if (d->counting && d->every == 1 && !d->split && (c == 0 || (2 * c >= l && c < l)) &&
	    r->steps >= IRREGULAR_STEPS) {
		d->split = 1;
		return;
	}
	int irregular = step_differs(d);
	/* a few launches more than the period's: the same iteration with extra work; fewer, or twice
	 * as many, are a boundary out of place (an extra or a missed anchor call) */
	if (irregular &&
	    ((d->irr_step != INT64_MIN && d->step - d->irr_step < IRREGULAR_GAP) || d->split ||
	     d->step_opt /* an optimizer step the period lacks: micro-batches of gradient accumulation */ ||
	     r->steps < IRREGULAR_STEPS || d->counted < d->how.launches ||
	     d->counted - d->how.launches > d->how.launches / IRREGULAR_EXTRA)) {
		refute_step(d, out);
		return;
	}
	if (irregular) {
		/* one step of an established regime with a few launches more (an extra kernel every N
		 * iterations: a norm logged, an EMA update) is said and kept; the next step is counted, and
		 * ends the regime if it differs too (a regime that changed), as does any within
		 * IRREGULAR_GAP steps (a pattern every 2 or 3 iterations is a period of its own) */
		out->what |= SP_DET_MISMATCH;
		out->bad_step = d->irr_step = d->step;
		d->how.mismatches++;
		d->probe = 1;
	}
	/* the cheap check of a step whose launches were not counted: its time against the counted
	 * ones'; one that stands out gets the next step counted (a probe), which refutes the regime if
	 * its launches differ. A counted step that matched sets the reference. */
	uint64_t dur = t->ts > d->step_t0 ? t->ts - d->step_t0 : 0;
	if (d->counting && !irregular) {
		d->ref_ns = d->ref_ns ? (d->ref_ns * 7 + dur) / 8 : dur;
		d->probe = 0;
	} else if (!d->counting && d->ref_ns && d->sparse > 1 && !d->probe &&
		   (dur > PROBE_RATIO * d->ref_ns || dur * PROBE_RATIO < d->ref_ns)) {
		d->probe = 1;
		d->probes++;
		out->what |= SP_DET_PROBE;
		out->bad_step = d->step;
	}
	if (++r->run >= SP_DET_DEFER_STEPS && !r->train && !r->proven && !d->train) {
		/* long enough to be the program's loop (inference, or training whose kernels do not say
		 * so: CUDA graphs, XLA): the schedule counts its steps from the next one on */
		r->proven = 1;
		r->shift += d->step - r->deferred_from; /* after the shift a continued regime got at its lock */
		out->what |= SP_DET_PROVEN;
	}
	boundary(d, t->ts, d->how.after ? SP_DET_AFTER : 0, out);
	r->last_step = d->step;
	r->steps++;
	/* every step is counted by default: a sparser check (one step in 16, and after a step whose
	 * duration stood out) let evaluation passes that end in the loop's own call pass for steps on
	 * the GPU machine (a cuBLAS loop with 10 evaluation passes every 40 iterations);
	 * sp_stepdet_sparse trades that for cost, keeping the steps of windows counted */
	d->counting = count_step(d);
	d->counted = 0;
	d->split = d->step_opt = 0;
	set_wants(d, locked_wants(d), out);
}

/* 1 if thread tid has launched a kernel or graph (remembering it if `launch`). Beyond 16 such
 * threads every thread counts as one. This function can't fail. */
static int launcher(struct sp_stepdet *d, uint32_t tid, int launch)
{
	for (unsigned i = 0; i < 16; i++) {
		if (d->launchers[i] == tid + 1)
			return 1;
		if (!d->launchers[i]) {
			if (launch)
				d->launchers[i] = tid + 1;
			return launch;
		}
	}
	return 1;
}

static void auto_feed(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	int launch = t->kind == SP_TOK_KERNEL || t->kind == SP_TOK_GRAPH;
	/* a copy or a set from a thread that launches no work is not the loop's structure: JAX feeds
	 * its batches from a pool of threads whose copies interleave differently in each iteration,
	 * which kept its loop from repeating exactly for over 100 iterations */
	if (!launcher(d, t->tid, launch) && t->kind == SP_TOK_API && !(t->flags & SP_TOKF_SYNC))
		return;
	uint32_t tok = learn_token(d, t);
	if (!tok || !wanted(d, t))
		return; /* not a token, or one the detector would not have been shown */
	if (d->learning) {
		d->tokens++;
		if (sp_autostep_feed(&d->a, tok, t->ts))
			lock(d, t, out);
		else if (d->tokens >= d->undecided_at + UNDECIDED_TOKENS && !d->reported) {
			d->undecided_at = d->tokens;
			d->reported = 1;
			out->what |= SP_DET_UNDECIDED;
		}
		return;
	}
	/* a launch that is the anchor begins its step: count it in the new one */
	if (tok == d->how.anchor)
		anchor_hit(d, t, out);
	if (d->counting && t->kind == SP_TOK_KERNEL && !d->period_opt && !d->step_opt)
		d->step_opt = optimizer_kernel(d, t->name);
	if (d->counting && (t->kind == SP_TOK_KERNEL || t->kind == SP_TOK_GRAPH) &&
	    ++d->counted > OVERRUN * d->how.launches + OVERRUN_SLACK) {
		/* far more launches than a period holds and no anchor: the loop has changed (its anchor
		 * may never come again); the step is refuted now */
		refute_step(d, out);
	}
}

void sp_stepdet_feed(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	memset(out, 0, sizeof *out);
	out->regime = d->how.regime;
	if (t->kind == SP_TOK_TRUTH)
		return;
	if (sp_stepdet_py_token(t)) { /* the Python bridge's: stepdet_py.c */
		sp_stepdet_py_feed(d, t, out);
		return;
	}
	switch (d->kind) {
	case SP_MARK_AUTO:
		auto_feed(d, t, out);
		break;
	case SP_MARK_PROFILER_RANGE:
		if (t->kind == SP_TOK_API)
			range_call(d, t, out);
		break;
	case SP_MARK_KERNEL:
	case SP_MARK_API:
	case SP_MARK_NCCL:
	case SP_MARK_NVTX:
		if (t->kind == (d->kind == SP_MARK_KERNEL ? SP_TOK_KERNEL
				: d->kind == SP_MARK_API  ? SP_TOK_API
				: d->kind == SP_MARK_NCCL ? SP_TOK_NCCL
							  : SP_TOK_NVTX_PUSH) &&
		    ((t->flags & SP_TOKF_MATCHED) || (t->name && sp_stepdet_matches(d, t->name))))
			marker_hit(d, t, out);
		break;
	}
}
