/* SPDX-License-Identifier: MIT */
/* stepdet_say.c - what the step detector (stepdet.h) says in words: why it is undecided, with the
 * explicit marker to set instead; what a regime's preference or deferral does to the schedule;
 * and the warning for a schedule whose first window comes before automatic detection can lock.
 * Pure: no locks, no I/O. */
#include <stdio.h>
#include <string.h>
#include "stepdet_int.h"
#include "collector/base/intern.h"
#include "config/config.h"

int sp_stepdet_undecided(struct sp_stepdet *d, char *buf, size_t n)
{
	char sug[700], adv[690];
	if (d->kind != SP_MARK_AUTO || !d->learning)
		return 0;
	if (sp_det_advice(d, adv, sizeof adv))
		snprintf(sug, sizeof sug, "set %s", adv);
	else
		snprintf(sug, sizeof sug,
			 "no API synchronisation, NVTX range, NCCL call or kernel occurs once in every copy of a "
			 "candidate period with launches between, so none is suggested: mark the iteration with an "
			 "NVTX range the program opens once per iteration ([marker] kind = nvtx) or, in a PyTorch "
			 "program, by its optimizer steps ([marker] kind = optimizer)");
	if (d->a.cand.period)
		snprintf(buf, n,
			 "automatic step detection is undecided after %llu tokens: the best candidate, a period "
			 "of %u tokens, repeated %llu times (not proven: it must repeat exactly, with a host "
			 "synchronisation or a clear CPU gap where it wraps); %s",
			 (unsigned long long)d->learn.tokens, d->a.cand.period,
			 (unsigned long long)(d->a.cand.run / d->a.cand.period + 1), sug);
	else
		snprintf(buf, n, "automatic step detection is undecided after %llu tokens: nothing repeats; %s",
			 (unsigned long long)d->learn.tokens, sug);
	return 1;
}

int sp_stepdet_schedule_warning(const struct sp_schedule *s, char *buf, size_t n)
{
	int64_t first = -1;
	for (int64_t k = 0; k < 100000 && first < 0; k++)
		if (sp_schedule_action(s, k) != SP_ACT_NONE)
			first = k;
	if (first < 0 || first >= SP_STEPDET_LOCK_NOSYNC)
		return 0;
	if (first < SP_STEPDET_LOCK_SYNC) {
		snprintf(buf, n,
			 "the schedule collects from step %lld, but automatic step detection (kind = auto) "
			 "locks during the program's iteration %d at the earliest (%d or later for a loop without a "
			 "host synchronisation per iteration): the schedule then starts from the lock, so its windows "
			 "hold later steps than their numbers say (none is lost); raise skip_first or wait by %lld to "
			 "keep the program's numbering, or set an explicit [marker] (docs/STEPS.md)",
			 (long long)first, SP_STEPDET_LOCK_SYNC - 1, SP_STEPDET_LOCK_NOSYNC - 1,
			 (long long)(SP_STEPDET_LOCK_SYNC - first));
		return 2;
	}
	snprintf(buf, n,
		 "the schedule collects from step %lld: a loop without a host synchronisation per iteration "
		 "(CUDA graphs, JAX) locks automatic step detection at iteration %d or later, and the schedule "
		 "then starts from the lock (its windows hold later steps than their numbers say); raise "
		 "skip_first or wait by %lld to keep the program's numbering for such programs, or set an "
		 "explicit [marker]",
		 (long long)first, SP_STEPDET_LOCK_NOSYNC - 1, (long long)(SP_STEPDET_LOCK_NOSYNC - first));
	return 2;
}

int sp_stepdet_why_none(const struct sp_stepdet *d, int64_t first, char *buf, size_t n)
{
	const struct sp_det_regimes *g = &d->regimes;
	if (d->kind != SP_MARK_AUTO || d->learning || !g->cur)
		return 0;
	const struct sp_det_regime *r = &g->r[g->cur - 1];
	if (sp_det_minor(d) && !g->train)
		snprintf(buf, n,
			 "automatic detection's regime %u (%u launches a step) launches no backward or optimizer "
			 "kernel and had run %llu steps in a row when the program ended in step %lld: its steps "
			 "count towards the schedule from %llu in a row (an evaluation before training is shorter); "
			 "set an explicit [marker] to record such a short loop (docs/STEPS.md, item 7)",
			 g->cur, r->launches, (unsigned long long)r->run, (long long)d->step,
			 (unsigned long long)sp_det_defer_steps(d));
	else if (sp_det_minor(d))
		snprintf(buf, n,
			 "the program ended in step %lld in automatic detection's regime %u, which launches no "
			 "backward or optimizer kernel while regime %u did: its steps are not recorded (set an "
			 "explicit [marker] to record them)",
			 (long long)d->step, g->cur, g->train);
	else if (r->shift)
		snprintf(buf, n,
			 "the program ended in step %lld, the schedule's step %lld (its steps come %lld later than "
			 "the program's: docs/STEPS.md, \"Regimes\"), and the schedule records from its step %lld",
			 (long long)d->step, (long long)(d->step - r->shift), (long long)r->shift, (long long)first);
	else
		return 0;
	return 1;
}

/* The note of kind (a bit of sp_stepdet_regime_note's) for regime k into buf. Can't fail. */
static void say_note(const struct sp_stepdet *d, unsigned kind, uint32_t k, char *buf, size_t n)
{
	const struct sp_det_regimes *g = &d->regimes;
	const struct sp_det_regime *r = &g->r[k - 1];
	unsigned long long defer = (unsigned long long)sp_det_defer_steps(d);
	if (kind == 1)
		snprintf(buf, n,
			 "automatic steps: regime %u (%u launches a step) launches no backward or optimizer kernel, "
			 "regime %u (%u launches) does: regime %u is taken for an evaluation or other side phase and "
			 "its steps are not recorded (set an explicit [marker] to record them)",
			 k, r->launches, g->train, g->r[g->train - 1].launches, k);
	else if (kind == 2)
		snprintf(buf, n,
			 "automatic steps: regime %u (%u launches a step) launches no backward or optimizer kernel: "
			 "its steps count towards the schedule only after %llu of them in a row, those before its lock "
			 "included (an evaluation pass before training is shorter); windows wait until then",
			 k, r->launches, defer);
	else if (kind == 4)
		snprintf(buf, n,
			 "automatic steps: regime %u ran %llu steps in a row without a backward or optimizer kernel "
			 "(those before its lock included): "
			 "taken for the program's loop (inference, or training whose kernel names do not say so); its "
			 "step %lld is the schedule's step %lld (the schedule's steps come %lld steps later than the "
			 "program's); a training regime found later is preferred",
			 k, defer, (long long)d->step, (long long)(d->step - r->shift), (long long)r->shift);
	else if (kind == 8)
		snprintf(buf, n,
			 "automatic steps: regime %u launches backward or optimizer kernels: it is the training "
			 "loop, preferred from now on over the regimes seen before (their steps are not recorded)",
			 k);
	else
		snprintf(buf, n,
			 "automatic steps: the loop was found after the schedule's first window would have begun "
			 "(its step %lld): the schedule starts from here instead, so no window is lost: step %lld is "
			 "the schedule's step %lld, and every window comes %lld steps later than the program's step "
			 "numbers say (the trace keeps the program's numbers; a skip_first or wait that puts the "
			 "first window after step %lld keeps them for the schedule too)",
			 (long long)g->late.first, (long long)g->late.step, (long long)g->late.first,
			 (long long)(g->late.step - g->late.first), (long long)g->late.step);
}

int sp_stepdet_regime_note(struct sp_stepdet *d, char *buf, size_t n)
{
	const struct sp_det_regimes *g = &d->regimes;
	if (d->kind != SP_MARK_AUTO || !g->cur)
		return 0;
	struct sp_det_regime *r = &d->regimes.r[g->cur - 1];
	uint32_t k = g->cur;
	unsigned kind = 0;
	if (d->no_prefer)
		kind = 0;
	else if (!r->train && g->train)
		kind = 1;
	else if (!r->train && !r->proven)
		kind = 2;
	else if (!r->train && r->proven)
		kind = 4;
	else if (r->train && g->train == k && g->n > 1)
		kind = 8;
	kind |= g->late.moved && g->late.regime == k ? 16 : 0; /* the late start (regime.c) */
	kind &= ~r->noted;
	if (!kind)
		return 0;
	kind &= -kind; /* one line per call, the lowest kind first */
	r->noted |= kind;
	say_note(d, kind, k, buf, n);
	return 1;
}
