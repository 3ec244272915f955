/* SPDX-License-Identifier: MIT */
/* phases.c - the step markers of this process ([marker]/[schedule], or one per [phase.NAME]), each with its
 * own detector: switches sp_col's step fields between phases under sp_col.lock; a step of one phase ends the
 * others' and one window records at a time (docs/CONFIG.md). */
#include <stdlib.h>
#include <string.h>
#include "collector/base/intern.h"
#include "internal.h"
#include "collector/base/log.h"

/* Sets up sp_col.mk from the configuration, with one detector each. Returns 0, or -1 (warned: no
 * memory) with nothing set up. */
int sp_ph_init(void)
{
	const struct sp_config *c = &sp_col.cfg;
	int n = c->phases.n ? c->phases.n : 1;

	for (int i = 0; i < n; i++) {
		struct sp_mk *m = &sp_col.mk[i];
		const struct sp_phase *p = c->phases.n ? &c->phases.p[i] : NULL;
		m->kind = p ? p->marker_kind : (int)c->marker_kind;
		m->pattern = p ? p->marker_pattern : c->marker_pattern;
		m->every = p ? p->marker_every : c->marker_every;
		m->schedule = p ? &p->schedule : &c->schedule;
		m->name = p ? sp_intern(p->name) : 0;
		m->det = i == 0 ? &sp_col.det : calloc(1, sizeof(struct sp_stepdet));
		if (!m->det || sp_stepdet_init(m->det, m->kind, m->pattern, m->every, sp_col.demangle) < 0) {
			sp_warn("no memory for step detection; not profiling");
			return -1;
		}
		sp_stepdet_schedule(m->det, m->schedule);
		/* once locked, launches are counted in one step of 16 and in those of and before windows
		 * only: launch callbacks go off in between (issue 20; docs/STEPS.md, "The per-step check") */
		if (m->kind == SP_MARK_AUTO)
			sp_stepdet_sparse(m->det, SP_STEPDET_SPARSE, m->schedule);
		sp_col.rt[i] = (struct sp_phase_rt){ .step = -1 };
	}
	sp_col.nmk = n;
	sp_col.cur = 0;
	for (int i = 0; i < n; i++) {
		sp_col.mk_auto |= sp_col.mk[i].kind == SP_MARK_AUTO;
		sp_col.mk_kernel |= sp_col.mk[i].kind == SP_MARK_KERNEL;
	}
	if (c->phases.n && sp_col.cfg.detach_between != SP_DETACH_NEVER) {
		sp_info("phases: CUPTI stays attached between windows (detach_between = never)");
		sp_col.cfg.detach_between = SP_DETACH_NEVER;
	}
	return 0;
}

/* Makes mk's step state the current one (sp_col.step ...). Under sp_col.lock. Can't fail. */
void sp_ph_switch(int mk)
{
	struct sp_phase_rt *r;
	if (mk == sp_col.cur)
		return;
	r = &sp_col.rt[sp_col.cur]; /* save the current phase's */
	r->step = sp_col.step;
	r->action = sp_col.action;
	r->step_start = sp_col.step_start;
	r->step_open = sp_col.step_open;
	r->step_how = sp_col.step_how;
	r->step_refuted = sp_col.step_refuted;
	r = &sp_col.rt[mk];
	sp_col.step = r->step;
	sp_col.action = r->action;
	sp_col.step_start = r->step_start;
	sp_col.step_open = r->step_open;
	sp_col.step_how = r->step_how;
	sp_col.step_refuted = r->step_refuted;
	sp_col.cur = mk;
}

/* 1 if a phase other than the current one wants collection on. Under sp_col.lock. */
int sp_ph_other_wants(void)
{
	for (int i = 0; i < sp_col.nmk; i++)
		if (i != sp_col.cur && sp_col.rt[i].want)
			return 1;
	return 0;
}

/* The current phase's schedule is done: the process is done once every phase is (then nothing
 * is watched any more). Under sp_col.lock. This function can't fail. */
void sp_ph_done(void)
{
	sp_col.rt[sp_col.cur].done = 1;
	for (int i = 0; i < sp_col.nmk; i++)
		if (!sp_col.rt[i].done)
			return;
	sp_col.done = 1;
	sp_cbset_apply();
}

/* A step of the current phase begins at t: the open step of every other phase ends there, and
 * a window of theirs with it (cut at that step: a window never holds another phase's steps).
 * Under sp_col.lock. This function can't fail. */
void sp_ph_end_others(uint64_t t, uint32_t corr)
{
	int me = sp_col.cur;
	for (int i = 0; i < sp_col.nmk; i++) {
		if (i == me || !sp_col.rt[i].step_open)
			continue;
		sp_ph_switch(i);
		if (sp_col.open && sp_col.open->mk == i && sp_col.action == SP_ACT_RECORD)
			sp_col.action = SP_ACT_RECORD_AND_SAVE; /* the window ends with this step */
		sp_win_end_step(t, corr);
		sp_ph_switch(me);
	}
}

/* SP_WANT_* of every detector together. Can't fail. */
uint32_t sp_ph_wants(void)
{
	uint32_t w = 0;
	for (int i = 0; i < sp_col.nmk; i++)
		w |= sp_stepdet_wants(sp_col.mk[i].det);
	return w;
}

/* 1 if name is the anchor call of an automatic phase's detector. Can't fail. */
uint32_t sp_ph_anchor_is(uint32_t name)
{
	for (int i = 0; i < sp_col.nmk; i++) {
		uint32_t a = sp_stepdet_anchor_name(sp_col.mk[i].det);
		if (a && a == name)
			return 1;
	}
	return 0;
}
