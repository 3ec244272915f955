/* SPDX-License-Identifier: MIT */
/* regime.c - regimes and the schedule's numbering (docs/STEPS.md items 6 and 7): each lock is a regime,
 * one seen before resumes its numbers, training regimes are preferred; step numbers never go back. Pure. */
#include <string.h>
#include "stepdet_int.h"
#include "collector/base/intern.h"
#include "config/config.h"

/* What a kernel's name (interned) says, KC_*: backward pass or optimizer (the evidence that a
 * regime is training), optimizer. Names as PyTorch, Inductor, cuDNN, cuBLAS and llm.c spell them;
 * case-insensitive. Cached in d->match, which automatic detection uses for nothing else. */
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

int sp_det_optimizer_kernel(struct sp_stepdet *d, uint32_t id)
{
	return (kernel_class(d, id) & KC_OPTIMIZER) != 0;
}

/* 1 if the learner's locked period launches an optimizer kernel. */
static int period_optimizes(struct sp_stepdet *d)
{
	const struct sp_autostep *a = &d->a;
	for (uint64_t i = a->lock.period_at; i < a->lock.period_at + a->lock.period; i++) {
		uint32_t tok = a->tok[i & (a->cap - 1)];
		if ((tok & SP_AUTOSTEP_KERNEL) && sp_det_optimizer_kernel(d, tok & ~SP_AUTOSTEP_FLAGS))
			return 1;
	}
	return 0;
}

/* 1 if the learner's last period (the one it locked on) launches a training kernel. */
static int period_trains(struct sp_stepdet *d)
{
	const struct sp_autostep *a = &d->a;
	uint64_t from = a->lock.period_at;
	for (uint64_t i = from; i < from + a->lock.period; i++) {
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
	uint64_t from = a->lock.period_at, sig = 0;
	uint32_t first = 0, prev = 0;
	for (uint64_t i = from; i < from + a->lock.period; i++) {
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

int sp_det_minor(const struct sp_stepdet *d)
{
	/* no training evidence while a training regime is known, or not yet proven by its run */
	if (d->kind != SP_MARK_AUTO || !d->regimes.cur || d->no_prefer)
		return 0;
	const struct sp_det_regime *r = &d->regimes.r[d->regimes.cur - 1];
	return !r->train && (d->regimes.train || !r->proven);
}

int sp_stepdet_settled(const struct sp_stepdet *d)
{
	const struct sp_det_tune *t = d->tune;
	if (d->kind != SP_MARK_AUTO)
		return 1;
	const struct sp_det_regime *r = d->regimes.cur ? &d->regimes.r[d->regimes.cur - 1] : NULL;
	return r && !sp_det_minor(d) &&
	       r->steps >= (r->train || d->no_prefer ? t->settle_steps : t->train_settle * t->settle_steps);
}

void sp_stepdet_schedule(struct sp_stepdet *d, const struct sp_schedule *sched)
{
	d->regimes.sched = sched;
}

int64_t sp_stepdet_sched_step(const struct sp_stepdet *d, int64_t step)
{
	if (sp_det_minor(d))
		return -1;
	return d->kind == SP_MARK_AUTO && d->regimes.cur ? step - d->regimes.r[d->regimes.cur - 1].shift : step;
}

/* The schedule's first step with an action (its first warmup, or its first recorded step without
 * warmup), or -1 if it has none. */
static int64_t first_active(const struct sp_schedule *s)
{
	int64_t f = s->skip_first + (s->skip_first_wait ? 0 : s->wait);
	return f >= 0 && sp_schedule_action(s, f) != SP_ACT_NONE ? f : -1;
}

/* The late start: step `next` of regime r is the first to count; if the schedule's first window would
 * have begun before it, the schedule starts here instead, so no window is lost. This function can't fail. */
static void late_start(struct sp_stepdet *d, struct sp_det_regime *r, int64_t next)
{
	struct sp_det_regimes *g = &d->regimes;
	int64_t f = g->sched && !g->hand ? first_active(g->sched) : -1, s = next - r->shift;
	if (f < 0 || s <= f)
		return;
	r->shift += s - f;
	g->late.moved += s - f;
	g->late.step = next;
	g->late.first = f;
	g->late.regime = (uint32_t)(r - g->r) + 1;
	d->how.late = (uint32_t)g->late.moved;
}

/* The schedule's numbering never goes back: a step of the preferred regime gets a schedule step
 * after the highest one handed out so far, or the same one when that is a warmup (a re-lock
 * repeats the warmup of the step it refuted). Shifts the current regime if needed. Can't fail. */
void sp_det_hand_out(struct sp_stepdet *d)
{
	struct sp_det_regimes *g = &d->regimes;
	if (d->kind != SP_MARK_AUTO || !g->cur || sp_det_minor(d))
		return;
	struct sp_det_regime *r = &g->r[g->cur - 1];
	late_start(d, r, d->step);
	int64_t s = d->step - r->shift;
	int rewarm = g->sched && s == g->sched_hi && sp_schedule_action(g->sched, s) == SP_ACT_WARMUP;
	if (g->hand && s <= g->sched_hi && !rewarm) {
		r->shift += s - (g->sched_hi + 1);
		s = g->sched_hi + 1;
	}
	g->hand = g->cur;
	g->sched_hi = s;
}

/* The schedule steps a training regime skips at its re-lock after its last watched one: the gap advances
 * the schedule only through steps with no action, so a window never falls into it (docs/STEPS.md). Can't fail. */
static int64_t gap_steps(const struct sp_stepdet *d, const struct sp_det_regime *r)
{
	const struct sp_schedule *sched = d->regimes.sched;
	int64_t last = r->last_step + 1 - r->shift, next = d->step + 1 - r->shift;
	/* a warmup in the refuted step warmed nothing the window will hold: it comes again */
	int64_t from = sched && sp_schedule_action(sched, last) == SP_ACT_WARMUP ? last : last + 1;
	for (int64_t k = from; k < next; k++) {
		if (sched && sp_schedule_done(sched, k - 1))
			return 0;
		if (!sched || sp_schedule_action(sched, k) != SP_ACT_NONE)
			return next - k;
	}
	return 0;
}

/* The shift of regime r (at its lock on d->step) that continues the numbering of p, the regime that last
 * counted (r itself when it resumes), with the gap rule (gap_steps). Can't fail. */
static int64_t continued_shift(const struct sp_stepdet *d, const struct sp_det_regime *p, const struct sp_det_regime *r)
{
	if (p->proven && !p->train)
		return p->shift + (d->step - p->last_step);
	if (p->train)
		return p->shift + gap_steps(d, p);
	return r->shift;
}

/* The regime the learner's lock (with signature sig) is, if seen before: its anchor, every,
 * boundary side and launches match and either its period or its launches in order do (API calls
 * that come and go change the period, not the loop). NULL if new. */
static struct sp_det_regime *known_regime(struct sp_stepdet *d, uint64_t sig)
{
	const struct sp_autostep_lock *l = &d->a.lock;
	for (uint32_t i = 0; i < d->regimes.n; i++) {
		struct sp_det_regime *r = &d->regimes.r[i];
		if (r->anchor == l->anchor && r->every == l->every && r->launches == l->launches &&
		    r->after == l->after && (r->period == l->period || r->sig == sig))
			return r;
	}
	return NULL;
}

/* Numbers the step open at the lock in regime r (found again if `known`); p: a copy of the regime that
 * counted last. Numbers go on from it plus the iterations spent learning. This function can't fail. */
static void number_lock(struct sp_stepdet *d, struct sp_det_regime *r, int known, struct sp_det_regime p)
{
	struct sp_det_regimes *g = &d->regimes;
	uint32_t iterations = d->a.lock.iterations;
	if (known) { /* its iterations went on while the detector learned */
		if (!g->hand || p.last_step <= r->last_step)
			p = *r;
		d->step = p.last_step + (int64_t)iterations;
		r->shift = continued_shift(d, &p, r);
		r->continued |= g->hand != 0;
	} else if (g->hand) {
		d->step = p.last_step + (int64_t)iterations;
		r->continued = 1;
		r->shift = continued_shift(d, &p, r);
	} else {
		d->step = (int64_t)iterations - 1; /* from the regime's first periodic iteration */
	}
}

/* Fills d->how (and the marker state) from the lock on regime r. Can't fail. */
static void how_from_lock(struct sp_stepdet *d, const struct sp_det_regime *r, int relock)
{
	const struct sp_autostep_lock *l = &d->a.lock;
	d->how.regime = d->regimes.cur;
	d->how.period = l->period;
	d->how.launches = l->launches;
	d->how.anchor = l->anchor;
	d->how.after = l->after;
	d->how.every = l->every;
	d->how.confidence = l->copies;
	d->how.blocks = d->a.blocks;
	d->how.train = r->train;
	d->how.relocks += relock;
	d->every = l->every;
	d->hits = l->count;
}

void sp_det_lock(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	struct sp_det_regimes *g = &d->regimes;
	/* a block is an iteration only with training evidence: an inference loop's identical layers, or
	 * its micro-batches, synchronised once, are one step */
	if (d->a.blocks > 1 && !period_trains(d))
		sp_autostep_unblock(&d->a);
	d->check.proven_period = d->a.blocks > 1 ? d->a.whole.period : d->a.lock.period;
	d->check.period_opt = period_optimizes(d);
	const struct sp_autostep_lock *l = &d->a.lock;
	uint64_t sig = period_sig(d);
	struct sp_det_regime *r = known_regime(d, sig);
	int relock = d->how.regime != 0 || g->n > 0, known = r != NULL;
	struct sp_det_regime p = g->hand ? g->r[g->hand - 1] : (struct sp_det_regime){ .last_step = -1 };
	if (!r) {
		r = &g->r[g->n < SP_DET_REGIMES ? g->n++ : SP_DET_REGIMES - 1];
		memset(r, 0, sizeof *r);
		r->anchor = l->anchor;
		r->every = l->every;
		r->launches = l->launches;
		r->after = l->after;
	}
	number_lock(d, r, known, p);
	r->period = l->period;
	r->sig = sig;
	r->last_step = d->step;
	r->run = l->iterations; /* the iterations the learner saw in a row, the open one included */
	r->train |= period_trains(d);
	if (!r->train && !r->proven)
		r->deferred_from = d->step;
	g->cur = (uint32_t)(r - g->r) + 1;
	if (r->train && !g->train)
		g->train = g->cur;
	if (!r->train && !r->proven && !g->train && r->run >= sp_det_defer_steps(d)) {
		r->proven = 1; /* it ran long enough before its lock: its steps count from the next one */
		out->what |= SP_DET_PROVEN;
	}
	how_from_lock(d, r, relock);
	if (!sp_det_minor(d))
		late_start(d, r, d->step + 1); /* the open step was not watched: the next one counts first */
	d->learning = 0;
	d->step_open = 1;
	d->step_t0 = t->ts;
	d->check.counting = 0; /* the locked step began before the lock: counted from the next one */
	out->what |= SP_DET_LOCK | (relock ? SP_DET_RELOCK : 0) | (sp_det_minor(d) ? SP_DET_MINOR : 0);
	out->step = d->step;
	out->regime = d->how.regime;
	sp_det_watch(d, out);
}

/* While the program has made a torch optimizer that has not stepped (the hook that would see it in), a
 * loop without training evidence is taken for a phase before training (an RL rollout, an evaluation):
 * kind = auto waits for that first step. */
uint64_t sp_det_defer_steps(const struct sp_stepdet *d)
{
	return d->py_made && d->py_hooked && !d->py_captured ? d->tune->optim_defer_steps : d->tune->defer_steps;
}

void sp_det_regime_next(struct sp_stepdet *d, uint64_t ts, unsigned flags, struct sp_det_out *out)
{
	struct sp_det_regime *r = sp_det_cur(d);
	++r->run;
	if (r->run == d->tune->defer_steps && sp_det_defer_steps(d) > r->run && !r->train && !r->proven &&
	    !d->regimes.train && !d->py_held) {
		d->py_held = 1;
		out->what |= SP_DET_HELD;
	}
	if (r->run >= sp_det_defer_steps(d) && !r->train && !r->proven && !d->regimes.train) {
		/* defer_steps steps in a row, those before its lock included: the program's loop
		 * (inference, or training whose kernels do not say so); its steps count from this one */
		r->proven = 1;
		if (d->regimes.hand) /* numbered on from a regime that counted: the deferred steps are skipped */
			r->shift += d->step - r->deferred_from;
		out->what |= SP_DET_PROVEN;
	}
	sp_det_boundary(d, ts, flags, out);
	r->last_step = d->step;
	r->steps++;
}
