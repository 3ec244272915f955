/* SPDX-License-Identifier: MIT */
/* pyglue.c - the Python bridge's events into the step logic: detector tokens fed to the markers that take
 * them; windows.c begins and ends the steps. They need no proof, so stepprof stays detached outside
 * windows and re-attaches on the program's thread. Never calls Python (caller holds the GIL). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "collector/base/intern.h"
#include "collector/base/log.h"
#include "collector/collector.h"
#include "collector/hold/cupti_life.h"
#include "collector/hold/hooklearn.h"
#include "collector/hold/markhook.h"
#include "collector/ondemand/ondemand.h"
#include "collector/out/tokrec.h"
#include "collector/out/writer.h"
#include "collector/pybridge/pybridge.h"
#include "decide/life.h"
#include "internal.h"

#define OBJECTS 64 /* optimizer and scaler objects named at once (the oldest slot is reused) */

static struct {
	pthread_mutex_t lock;     /* the object table */
	struct {
		const void *obj;  /* the Python object (identity only, never dereferenced) */
		uint32_t name;    /* interned "Class#k" */
		uint8_t kind;     /* SP_PY_OPTIM or SP_PY_SCALER */
	} obj[OBJECTS];
	unsigned nobj;            /* slots used (a ring once full) */
	unsigned count[3];        /* objects named so far, by kind (their k) */
	uint32_t hook[3];         /* the PYHOOK tokens' names, by SP_PY_* (interned) */
	uint32_t call[SP_MAX_PHASES]; /* python marker i's module:qualname (interned; the PYCALL name) */
	uint32_t made;            /* SP_STEPDET_OPTIM_MADE, interned (the PYCALL name of an optimizer made) */
	uint32_t pattern[SP_MAX_PHASES]; /* each marker's pattern, interned (python markers' calls) */
	int ncalls;
	_Atomic int made_said;    /* an optimizer made was said (once) */
	int started;              /* the bridge runs (CPython here) */
	_Atomic int64_t ticked;   /* the step the last early life tick ran in */
	int64_t next_active;      /* the first step after `active_from` the schedule collects, or
				   * INT64_MAX (cached: the schedule never changes) */
	int64_t active_from;      /* ... the step it was searched from (-2: not yet) */
} pynames = { .lock = PTHREAD_MUTEX_INITIALIZER, .ticked = -2, .active_from = -2 };

#define ACTIVE_SCAN 1000000 /* steps searched ahead for the next collecting one */

/* 1 if marker mk takes the bridge's token of this kind and name. */
static int takes(int mk, int kind, uint32_t name)
{
	const struct sp_mk *m = &sp_col.mk[mk];
	if (m->kind == SP_MARK_PYTHON)
		return kind == SP_TOK_PYCALL && name == pynames.pattern[mk];
	if (kind == SP_TOK_PYCALL) /* an optimizer made: kind = auto defers loops without training evidence */
		return name == pynames.made && m->kind == SP_MARK_AUTO && sp_col.nmk == 1 && !m->name;
	return m->kind == SP_MARK_OPTIMIZER || (m->kind == SP_MARK_AUTO && sp_col.nmk == 1 && !m->name);
}

/* The interned "Class#k" of an optimizer or scaler object (k: the k-th of its kind). */
static uint32_t object_name(int what, const void *obj, const char *cls)
{
	uint32_t name = 0;
	pthread_mutex_lock(&pynames.lock);
	for (unsigned i = 0; i < pynames.nobj && i < OBJECTS && !name; i++)
		if (pynames.obj[i].obj == obj && pynames.obj[i].kind == what)
			name = pynames.obj[i].name;
	if (!name) {
		char buf[96];
		snprintf(buf, sizeof buf, "%.60s#%u", cls && *cls ? cls : "?", ++pynames.count[what]);
		name = sp_intern(buf);
		unsigned slot = pynames.nobj++ % OBJECTS;
		pynames.obj[slot].obj = obj;
		pynames.obj[slot].name = name;
		pynames.obj[slot].kind = (uint8_t)what;
	}
	pthread_mutex_unlock(&pynames.lock);
	return name;
}

/* Parked, the step just begun is the last before a window: wakes the writer (slow passes while
 * parked) to re-attach now. Read without the lock: a late read only delays the kick. */
static void kick_if_near(void)
{
	int64_t sched = sp_stepdet_sched_step(sp_col.mk[0].det, sp_col.step);
	if (sched >= 0 && sp_life_steps_to_window(sp_col.mk[0].schedule, sched, SP_LIFE_UNPARK_AT) < SP_LIFE_UNPARK_AT)
		sp_writer_kick();
}

/* Steps after `step` before the single marker's next collecting one (as sp_life_steps_to_window
 * says, without its loop per event: the answer is cached until the step passes it). Called with
 * the GIL held (one caller at a time). This function can't fail. */
static int64_t steps_to_active(int64_t step)
{
	const struct sp_schedule *sch = sp_col.mk[0].schedule;
	if (pynames.active_from < -1 || step < pynames.active_from || step >= pynames.next_active) {
		pynames.active_from = step;
		pynames.next_active = INT64_MAX;
		for (int64_t k = step + 1; k <= step + ACTIVE_SCAN && !sp_schedule_done(sch, k - 1); k++)
			if (sp_schedule_action(sch, k) != SP_ACT_NONE) {
				pynames.next_active = k;
				break;
			}
	}
	return pynames.next_active == INT64_MAX ? INT64_MAX : pynames.next_active - step - 1;
}

/* After a token: a collecting step needs CUPTI from its first call, so a parked stepprof attaches here at the
 * latest; before the writer exists this thread runs the life tick once a step, after it wakes the writer. */
static void after_token(void)
{
	int collecting = __atomic_load_n(&sp_col.collecting, __ATOMIC_RELAXED) ||
			 __atomic_load_n(&sp_col.open, __ATOMIC_RELAXED) != NULL;
	int attached = atomic_load(&sp_hold.state) == SP_HOLD_ATTACHED;
	if (collecting && !attached)
		sp_cupti_life_attach_now(&sp_col.sub, sp_col.step, false);
	if (__atomic_load_n(&sp_col.writer_started, __ATOMIC_ACQUIRE)) {
		kick_if_near();
		return;
	}
	int64_t step = __atomic_load_n(&sp_col.step, __ATOMIC_RELAXED);
	if (!attached && sp_pyglue_counts() && steps_to_active(step) >= SP_LIFE_UNPARK_AT)
		return;
	if (atomic_load(&pynames.ticked) != step && sp_act_early_tick())
		atomic_store(&pynames.ticked, step);
}

/* One token of the bridge at t on this thread: recorded, fed to each marker that takes it. */
static void token(int kind, uint8_t flags, uint32_t name, uint64_t t)
{
	if (sp_tokrec_on)
		sp_tokrec_add((uint8_t)kind, flags, name, t, sp_coll_tid());
	for (int i = 0; i < sp_col.nmk; i++)
		if (takes(i, kind, name))
			sp_win_detect(i, (uint8_t)kind, flags | (kind == SP_TOK_PYCALL ? SP_TOKF_MATCHED : 0), name, t, 0,
				      0, 0);
	after_token();
}

/* 1 while the bridge's events count here: profiled, not a fork child (collector.c's fork handler
 * clears active and sets disabled in the child). */
static int live(void)
{
	return sp_col.active && !sp_col.disabled;
}

void sp_collector_py_installed(int what, int index)
{
	if (!live() || what < SP_PY_OPTIM || what > SP_PY_CALL ||
	    (what == SP_PY_CALL && (index < 0 || index >= pynames.ncalls)))
		return;
	token(SP_TOK_PYHOOK, 0, what == SP_PY_CALL ? pynames.call[index] : pynames.hook[what - 1], sp_thr_ns(1));
}

void sp_collector_py_event(int what, const void *obj, const char *cls, int index)
{
	if (!live())
		return;
	uint64_t t = sp_thr_ns(1);
	if (what == SP_PY_CALL && index >= 0 && index < pynames.ncalls)
		token(SP_TOK_PYCALL, 0, pynames.call[index], t);
	else if (what == SP_PY_MADE) {
		if (!atomic_exchange(&pynames.made_said, 1))
			sp_info("the program made a torch optimizer%s%s (step %lld)", cls ? ": " : "", cls ? cls : "",
				(long long)__atomic_load_n(&sp_col.step, __ATOMIC_RELAXED));
		token(SP_TOK_PYCALL, 0, pynames.made, t);
	}
	else if (what == SP_PY_OPTIM || what == SP_PY_SCALER)
		token(what == SP_PY_OPTIM ? SP_TOK_OPTIM : SP_TOK_SCALER,
		      what == SP_PY_OPTIM && index ? SP_TOKF_CAPTURED : 0, object_name(what, obj, cls), t);
}

int sp_collector_py_check_capture(void)
{
	return live() && __atomic_load_n(&sp_col.next_window_id, __ATOMIC_RELAXED) == 0;
}

int sp_pyglue_parks(void)
{
	const struct sp_config *c = &sp_col.cfg;
	int k = sp_col.mk[0].kind;
	return sp_col.nmk == 1 && !sp_col.mk[0].name && (k == SP_MARK_OPTIMIZER || k == SP_MARK_PYTHON) &&
	       c->detach_between != SP_DETACH_NEVER && !c->ondemand_delay_ms && !c->ondemand_duration_ms &&
	       !sp_tokrec_on;
}

int sp_pyglue_counts(void)
{
	if (sp_col.nmk != 1 || sp_col.mk[0].name)
		return 0;
	int k = __atomic_load_n(&sp_col.mk[0].det->kind, __ATOMIC_RELAXED);
	return k == SP_MARK_OPTIMIZER || k == SP_MARK_PYTHON;
}

void sp_pyglue_start(void)
{
	struct sp_pybridge_ask ask = { 0 };
	int loud = 0;
	pynames.hook[SP_PY_OPTIM - 1] = sp_intern("optimizer");
	pynames.hook[SP_PY_SCALER - 1] = sp_intern("GradScaler.update");
	pynames.made = sp_intern(SP_STEPDET_OPTIM_MADE);
	for (int i = 0; i < sp_col.nmk; i++) {
		const struct sp_mk *m = &sp_col.mk[i];
		int seen = 0;
		pynames.pattern[i] = m->kind == SP_MARK_PYTHON ? sp_intern(m->pattern) : 0;
		ask.optimizer |= takes(i, SP_TOK_OPTIM, 0);
		ask.made |= takes(i, SP_TOK_PYCALL, pynames.made);
		loud |= m->kind == SP_MARK_OPTIMIZER || m->kind == SP_MARK_PYTHON;
		for (int k = 0; k < ask.ncalls; k++)
			seen |= !strcmp(ask.calls[k], m->pattern);
		if (m->kind == SP_MARK_PYTHON && !seen) {
			pynames.call[ask.ncalls] = sp_intern(m->pattern);
			ask.calls[ask.ncalls++] = m->pattern;
		}
	}
	pynames.ncalls = ask.ncalls;
	ask.torch_memory = sp_col.cfg.torch_memory;
	ask.torch_memory_entries = sp_col.cfg.torch_memory_entries;
	if (!ask.optimizer && !ask.ncalls)
		return;
	int r = sp_pybridge_start(&ask, loud);
	pynames.started = r > 0;
	if (r == 0 && loud)
		sp_warn("the %s marker needs CPython, and this process runs none (or one the bridge does not know): "
			"no steps",
			sp_marker_kind_name((enum sp_marker_kind)sp_col.mk[0].kind));
}

void sp_pyglue_stop(void)
{
	sp_pybridge_stop();
}

void sp_pyglue_unswitched(void)
{
	atomic_store(&pynames.ticked, -2); /* step -1 again: the next token ticks (the detector wants launches) */
}

void sp_pyglue_switched(int64_t step)
{
	sp_hooklearn_abandon(); /* no launch hook wanted: nothing per launch from here */
	sp_hook_follow(0);      /* nor an anchor's hook */
	sp_info("automatic steps: the program's own optimizer steps (torch's global optimizer post hook) from step "
		"%lld on, numbered from the hook's install; the launch stream's period is no longer looked for",
		(long long)step);
}

int sp_pyglue_explain(char *buf, size_t n)
{
	const struct sp_mk *m = &sp_col.mk[sp_col.cur];
	int kind = m->det->kind, what = kind == SP_MARK_OPTIMIZER ? 0 : 2;
	if (kind != SP_MARK_OPTIMIZER && kind != SP_MARK_PYTHON)
		return 0;
	for (int i = 0; kind == SP_MARK_PYTHON && i < pynames.ncalls; i++)
		if (pynames.call[i] == pynames.pattern[sp_col.cur])
			what = 2 + i;
	int st = pynames.started ? sp_pybridge_state(what) : -2;
	snprintf(buf, n, "%s: %s", kind == SP_MARK_OPTIMIZER ? "the optimizer marker" : m->pattern,
		 st == -2  ? "no CPython (3.10 to 3.13) runs in this process"
		 : st < 0  ? "CPython was never initialised in this process"
		 : st == 0 ? (kind == SP_MARK_OPTIMIZER ? "torch.optim.optimizer was never imported (or its import "
							  "never finished)"
							: "the function was never found (its module never imported, or "
							  "the name never defined)")
		 : st == 2 ? "its watch could not be installed (said above)"
			   : (kind == SP_MARK_OPTIMIZER ? "no optimizer step came" : "the function was never called"));
	return 1;
}
