/* SPDX-License-Identifier: MIT */
/* stepcheck.c - the per-step check while locked (docs/STEPS.md item 5): a counted step's launches must match
 * the period's, else the regime is refuted (irregular and split steps excepted); uncounted steps are checked
 * by time and one that stands out gets a probe. Pure. */
#include "stepdet_int.h"
#include "config/config.h"

/* The locked period stopped matching: the open step ends, learning starts again. A regime that
 * ends young was a wrong lock: the period the learner proved must prove itself longer next time. */
static void unlock(struct sp_stepdet *d, struct sp_det_out *out)
{
	struct sp_det_regime *r = sp_det_cur(d);
	struct sp_det_check *c = &d->check;
	c->probe = c->split = c->step_opt = 0;
	c->irr_step = INT64_MIN;
	c->ref_ns = 0; /* a new regime's steps take their own time */
	if (r->steps < d->tune->young_steps)
		sp_autostep_refute(&d->a, c->proven_period ? c->proven_period : r->period);
	d->step_open = 0;
	out->what |= SP_DET_END | SP_DET_UNLOCK;
	sp_det_start_learning(d, out);
}

/* The open step did not match the period: it is refuted (not the regime's) and the regime ends. */
static void refute_step(struct sp_stepdet *d, struct sp_det_out *out)
{
	out->what |= SP_DET_MISMATCH;
	out->bad_step = d->step;
	d->how.mismatches++;
	sp_det_cur(d)->last_step = d->step - 1;
	unlock(d, out);
}

/* 1 if the step that just began (d->step) is to be counted (sp_stepdet_sparse): never while the
 * caller is blind to launches (sp_stepdet_blind), always after a step whose time stood out. */
static int count_step(const struct sp_stepdet *d)
{
	const struct sp_det_check *c = &d->check;
	if (c->blind)
		return 0;
	if (c->sparse <= 1 || sp_det_minor(d) || c->probe || d->step % c->sparse == 0)
		return 1;
	if (!c->sparse_sched)
		return 0;
	int64_t s = sp_stepdet_sched_step(d, d->step);
	return sp_schedule_action(c->sparse_sched, s) != SP_ACT_NONE ||
	       sp_schedule_action(c->sparse_sched, s + 1) != SP_ACT_NONE;
}

/* 1 if this anchor call is an extra call of the anchor's function in an established regime (a
 * loss or norm read for logging): none of the step's launches yet, or split_pct of them or more but
 * not all. The next call decides, and the step must then match the period exactly. */
static int extra_call(struct sp_stepdet *d, const struct sp_det_regime *r)
{
	struct sp_det_check *c = &d->check;
	uint64_t n = c->counted, l = d->how.launches;
	if (!c->counting || d->every != 1 || c->split || r->steps < d->tune->irregular_steps ||
	    !(n == 0 || (100 * n >= d->tune->split_pct * l && n < l)))
		return 0;
	c->split = 1;
	return 1;
}

/* 1 if a counted step whose launches differ from the period's must refute the regime: fewer
 * launches, more than irregular_extra allows, another irregular step within irregular_gap, a split
 * step, a young regime, or an optimizer kernel the period lacks (gradient accumulation's micro
 * steps). A few launches more is the same iteration with extra work. */
static int refutes(const struct sp_stepdet *d, const struct sp_det_regime *r)
{
	const struct sp_det_check *c = &d->check;
	const struct sp_det_tune *t = d->tune;
	uint32_t l = d->how.launches;
	return (c->irr_step != INT64_MIN && d->step - c->irr_step < (int64_t)t->irregular_gap) || c->split ||
	       c->step_opt || r->steps < t->irregular_steps || c->counted < l ||
	       c->counted - l > l / t->irregular_extra;
}

/* The time check at the end of step d->step (dur ns): a counted step that matched sets the
 * reference (a moving average); a step not counted whose time stands out by probe_ratio gets the
 * next one counted (SP_DET_PROBE). */
static void time_check(struct sp_stepdet *d, uint64_t dur, int irregular, struct sp_det_out *out)
{
	struct sp_det_check *c = &d->check;
	const struct sp_det_tune *t = d->tune;
	if (c->counting && !irregular) {
		c->ref_ns = c->ref_ns ? (c->ref_ns * (t->ref_weight - 1) + dur) / t->ref_weight : dur;
		c->probe = 0;
	} else if (!c->counting && c->ref_ns && c->sparse > 1 && !c->probe &&
		   (dur > t->probe_ratio * c->ref_ns || dur * t->probe_ratio < c->ref_ns)) {
		c->probe = 1;
		d->probes++;
		out->what |= SP_DET_PROBE;
		out->bad_step = d->step;
	}
}

void sp_det_anchor_hit(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	struct sp_det_check *c = &d->check;
	if (d->hits++ % d->every)
		return;
	struct sp_det_regime *r = sp_det_cur(d);
	if (extra_call(d, r))
		return;
	int irregular = c->counting && c->counted != d->how.launches;
	if (irregular && refutes(d, r)) {
		refute_step(d, out);
		return;
	}
	if (irregular) {
		/* kept and said; the next step is counted and ends the regime if it differs too */
		out->what |= SP_DET_MISMATCH;
		out->bad_step = c->irr_step = d->step;
		d->how.mismatches++;
		c->probe = 1;
	}
	time_check(d, t->ts > d->step_t0 ? t->ts - d->step_t0 : 0, irregular, out);
	sp_det_regime_next(d, t->ts, d->how.after ? SP_DET_AFTER : 0, out);
	c->counting = count_step(d);
	c->counted = 0;
	c->split = c->step_opt = 0;
	sp_det_watch(d, out);
}

void sp_det_launch(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	struct sp_det_check *c = &d->check;
	if (!c->counting)
		return;
	if (t->kind == SP_TOK_KERNEL && !c->period_opt && !c->step_opt)
		c->step_opt = sp_det_optimizer_kernel(d, t->name);
	/* far more launches than a period holds and no anchor: the loop changed (its anchor may never
	 * come again); the step is refuted now */
	if (++c->counted > d->tune->overrun * d->how.launches + d->tune->overrun_slack)
		refute_step(d, out);
}

void sp_stepdet_sparse(struct sp_stepdet *d, uint32_t every, const struct sp_schedule *sched)
{
	d->check.sparse = every;
	d->check.sparse_sched = sched;
}

void sp_stepdet_blind(struct sp_stepdet *d, int on)
{
	d->check.blind = on != 0;
}

int sp_stepdet_sparse_quiet(const struct sp_stepdet *d)
{
	return d->kind == SP_MARK_AUTO && !d->learning && d->check.sparse > 1 && !sp_det_minor(d) &&
	       !(d->wants & (SP_WANT_LAUNCH | SP_WANT_GRAPH));
}
