/* SPDX-License-Identifier: MIT */
/* stepdet_py.c - the step detector's Python markers (stepdet.h, docs/STEPS.md "PyTorch optimizer steps"):
 * tokens from collector/pybridge/ for kind = optimizer and python, and kind = auto's switch. Pure. */
#include <string.h>
#include "stepdet.h"
#include "stepdet_int.h"
#include "collector/base/intern.h"
#include "config/config.h"

/* What the PYHOOK token of the optimizer hook's install is named. */
#define HOOK_OPTIMIZER "optimizer"

/* A boundary: step d->step + 1 begins at ts. */
static void boundary(struct sp_stepdet *d, uint64_t ts, struct sp_det_out *out)
{
	d->step++;
	d->step_open = 1;
	d->step_t0 = ts;
	out->what |= SP_DET_BOUNDARY;
	out->step = d->step;
	out->regime = d->how.regime;
}

/* 1 if t is the PYHOOK token of the optimizer hook's install. */
static int optimizer_hooked(const struct sp_token *t)
{
	const char *n = t->kind == SP_TOK_PYHOOK ? sp_intern_lookup(t->name) : NULL;
	return n && !strcmp(n, HOOK_OPTIMIZER);
}

/* An optimizer marker's token: step 0 begins at the hook's install; the learner's ends, every
 * `every` of them, end a step and begin the next. */
static void optimizer(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	unsigned r = 0;
	if (t->kind == SP_TOK_PYCALL)
		return; /* an optimizer made: nothing for its steps */
	if (optimizer_hooked(t)) {
		if (d->step < 0)
			boundary(d, t->ts, out);
		return;
	}
	if (t->kind == SP_TOK_OPTIM)
		r = sp_pysteps_optim(&d->py, t->name);
	else if (t->kind == SP_TOK_SCALER)
		r = sp_pysteps_scaler(&d->py, t->name);
	const struct sp_pysteps_how *h = &d->py.how;
	d->how.anchor = h->end;
	d->how.period = h->period;
	d->how.launches = h->optimizers;
	d->how.confidence = (uint32_t)h->rule;
	d->how.regime = h->changes + 1;
	d->how.relocks = h->breaks;
	if (r & SP_PYSTEPS_RULE)
		out->what |= SP_DET_PYRULE;
	/* a stream without the install (a replay cut short) begins step 0 at the first end */
	if ((r & SP_PYSTEPS_END) && (d->step < 0 || ++d->hits % d->every == 0))
		boundary(d, t->ts, out);
}

/* An optimizer step captured into a CUDA graph (torch.cuda.graph with a capturable optimizer): its
 * replays never call the hook. kind = auto learns the launch stream's period again if no window has
 * begun (steps numbered afresh), and never takes the optimizer steps; kind = optimizer says so. */
static void captured(struct sp_stepdet *d, struct sp_det_out *out)
{
	int first = !d->py_captured;
	d->py_captured = 1;
	if (!d->how.from_auto) {
		if (first && d->kind == SP_MARK_OPTIMIZER)
			out->what |= SP_DET_CAPTURED;
		return;
	}
	if (d->py_no_switch)
		return; /* a window of its steps has begun: the schedule goes on with them */
	d->kind = SP_MARK_AUTO;
	memset(&d->how, 0, sizeof d->how);
	d->how.marker_kind = SP_MARK_AUTO;
	d->step = -1;
	d->step_open = 0;
	d->hits = 0;
	sp_det_start_learning(d, out);
	out->what |= SP_DET_UNSWITCH | SP_DET_END;
}

/* kind = auto: the optimizer hook is in and an optimizer step (or a scaler update) came: the
 * period detector gives way to the program's own steps, numbered from the hook's install, unless a
 * window of automatic steps has begun or a step was captured into a graph. */
static void auto_switch(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	if (t->kind == SP_TOK_PYCALL) {
		const char *n = sp_intern_lookup(t->name);
		d->py_made |= n && !strcmp(n, SP_STEPDET_OPTIM_MADE);
		return;
	}
	if (optimizer_hooked(t))
		d->py_hooked = 1;
	if (!d->py_hooked || (t->kind != SP_TOK_OPTIM && t->kind != SP_TOK_SCALER))
		return;
	if (t->kind == SP_TOK_OPTIM && (t->flags & SP_TOKF_CAPTURED))
		d->py_captured = 1;
	if (d->py_captured)
		return;
	if (d->py_no_switch) {
		if (!d->py_said)
			out->what |= SP_DET_NOSWITCH;
		d->py_said = 1;
		return;
	}
	d->kind = SP_MARK_OPTIMIZER;
	d->learning = d->check.counting = d->check.probe = 0;
	d->regimes.cur = 0;
	memset(&d->how, 0, sizeof d->how);
	d->how.marker_kind = SP_MARK_OPTIMIZER;
	d->how.from_auto = 1;
	d->how.every = d->every = 1;
	d->hits = 0;
	d->step = 0; /* since the hook's install */
	d->step_open = 1;
	if (d->wants)
		out->what |= SP_DET_WANTS;
	d->wants = 0; /* no launch, no call: nothing per launch from here */
	out->what |= SP_DET_SWITCH;
	optimizer(d, t, out);
}

void sp_stepdet_py_feed(struct sp_stepdet *d, const struct sp_token *t, struct sp_det_out *out)
{
	switch (d->kind) {
	case SP_MARK_AUTO:
		auto_switch(d, t, out);
		break;
	case SP_MARK_OPTIMIZER:
		if (t->kind == SP_TOK_OPTIM && (t->flags & SP_TOKF_CAPTURED))
			captured(d, out);
		if (d->kind == SP_MARK_OPTIMIZER)
			optimizer(d, t, out);
		break;
	case SP_MARK_PYTHON:
		if (t->kind == SP_TOK_PYCALL &&
		    ((t->flags & SP_TOKF_MATCHED) || (t->name && sp_stepdet_matches(d, t->name))) &&
		    d->hits++ % d->every == 0)
			boundary(d, t->ts, out);
		break;
	}
}

void sp_stepdet_no_switch(struct sp_stepdet *d)
{
	d->py_no_switch = 1;
}
