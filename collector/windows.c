/* SPDX-License-Identifier: MIT */
/* windows.c - steps and windows: begins and ends steps from the detector's decisions, opens and hands
 * windows to the writer as the schedule says. Under sp_col.lock; no CUPTI change inside an API exit callback. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collector/base/clock.h"
#include "collector/base/intern.h"
#include "internal.h"
#include "collector/base/log.h"
#include "collector/hold/cupti_life.h"
#include "collector/mem/memory.h"
#include "collector/ondemand/ondemand.h"
#include "collector/out/writer.h"

/* The program's threads at window ends: how long stepprof kept them, from the boundary's time to
 * the end of its handling (lock waits and CUPTI calls included), the last END_WAITS of them, for
 * the STEPPROF_VERBOSE line at exit (docs/BENCHMARKS.md, "The program's thread at a window's
 * end"). Under sp_col.lock. */
#define END_WAITS 1024
static struct {
	uint64_t n, max_ns;
	uint64_t last[END_WAITS];
	uint64_t between_n, between_max_ns; /* other boundaries but those that begin collecting */
} end_waits;

/* After a boundary's handling, out of sp_col.lock, on the thread whose call (at t) made it: notes the time
 * of a window's end or of a boundary that did not begin collecting. This function can't fail. */
static void note_end(uint64_t t)
{
	if (__builtin_expect(!sp_thr.end_now && !sp_thr.end_soon && !sp_thr.bound_now, 1))
		return;
	uint64_t now = sp_now_ns(), took = now > t ? now - t : 0;
	if (!sp_thr.end_now && sp_thr.end_soon) { /* the entry of a call whose exit ends the window */
		sp_thr.end_carry = took;
		sp_thr.end_soon = sp_thr.bound_now = sp_thr.began = 0;
		return;
	}
	bool end = sp_thr.end_now, between = !end && !sp_thr.began;
	took += end ? sp_thr.end_carry : 0;
	sp_thr.end_now = sp_thr.end_soon = sp_thr.bound_now = sp_thr.began = 0;
	sp_thr.end_carry = 0;
	pthread_mutex_lock(&sp_col.lock);
	if (end) {
		end_waits.last[end_waits.n++ % END_WAITS] = took;
		if (took > end_waits.max_ns)
			end_waits.max_ns = took;
	} else if (between) {
		end_waits.between_n++;
		if (took > end_waits.between_max_ns)
			end_waits.between_max_ns = took;
	}
	pthread_mutex_unlock(&sp_col.lock);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

void sp_win_say_end_waits(void)
{
	static uint64_t v[END_WAITS];
	pthread_mutex_lock(&sp_col.lock);
	uint64_t n = end_waits.n < END_WAITS ? end_waits.n : END_WAITS, max = end_waits.max_ns, all = end_waits.n;
	uint64_t bn = end_waits.between_n, bmax = end_waits.between_max_ns;
	memcpy(v, end_waits.last, n * sizeof *v);
	pthread_mutex_unlock(&sp_col.lock);
	if (!n)
		return;
	qsort(v, n, sizeof *v, cmp_u64);
	sp_info("at %llu window ends the program's thread spent in stepprof: median %.3f ms, p99 %.3f ms, at most "
		"%.3f ms (from the boundary to the end of its handling); at the %llu other step boundaries outside "
		"windows at most %.3f ms",
		(unsigned long long)all, v[n / 2] / 1e6, v[n - 1 - n / 100] / 1e6, max / 1e6, (unsigned long long)bn,
		bmax / 1e6);
}

/* The writer's turn-off of activity kinds, made outside sp_col.lock so no marker call waits on CUPTI; a
 * window that begins first calls it off. lock orders the two; due is set under sp_col.lock, cleared under lock. */
static struct {
	pthread_mutex_t lock;
	bool due;
} act_off = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct window *new_window(void)
{
	for (int i = 0; i < SP_MAX_WINDOWS; i++)
		if (!sp_col.win[i].used) {
			memset(&sp_col.win[i], 0, sizeof sp_col.win[i]);
			sp_col.win[i].used = 1;
			return &sp_col.win[i];
		}
	return NULL;
}

/* Sets w's lower (lo) or upper correlation bound to corr, or arranges for the next CUDA call's id
 * to fill it; this thread's own next call then lowers it to its id if need be (sp_win_own_split). */
static void split_at(struct window *w, uint32_t corr, int lo)
{
	uint32_t *field = lo ? &w->corr_lo : &w->corr_hi;
	*field = corr ? corr : SP_CORR_PENDING;
	if (!corr) {
		if (lo)
			sp_col.split_lo = field;
		else
			sp_col.split_hi = field;
		atomic_store(&sp_col.split_pending, 1);
		sp_thr.own_slot[lo] = (int)(w - sp_col.win) + 1;
		sp_thr.own_id[lo] = w->id;
		sp_thr.own_split = 1;
	}
}

void sp_win_own_split(uint32_t corr)
{
	sp_thr.own_split = 0;
	pthread_mutex_lock(&sp_col.lock);
	for (int lo = 0; lo < 2; lo++) {
		int slot = sp_thr.own_slot[lo] - 1;
		sp_thr.own_slot[lo] = 0;
		if (slot < 0 || slot >= SP_MAX_WINDOWS)
			continue;
		struct window *w = &sp_col.win[slot];
		uint32_t *field = lo ? &w->corr_lo : &w->corr_hi;
		if (w->used && w->id == sp_thr.own_id[lo] && *field != SP_CORR_PENDING && corr < *field)
			__atomic_store_n(field, corr, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&sp_col.lock);
}

static void push_ctl(enum sp_ev_kind kind, uint64_t t, struct window *w)
{
	struct sp_event ev = { .kind = kind,
			       .sub = w->origin,
			       .device = SP_NO_DEVICE,
			       .tid = sp_coll_tid(),
			       .start = t,
			       .end = t };
	ev.name = sp_col.mk[w->mk].name; /* the phase, 0 without phases */
	ev.u.window.id = w->id;
	ev.u.window.first_step = w->first_step;
	ev.u.window.last_step = w->last_step;
	sp_coll_push(&ev);
}

int sp_win_is_record(enum sp_action a)
{
	return a == SP_ACT_RECORD || a == SP_ACT_RECORD_AND_SAVE;
}

/* 1 if a window's correlation range is still open at its top (SP_CORR_PENDING until the next
 * watched call): records of work launched now would fall inside it. Under sp_col.lock. */
static int window_top_pending(void)
{
	for (int i = 0; i < SP_MAX_WINDOWS; i++)
		if (sp_col.win[i].used && sp_col.win[i].corr_hi == SP_CORR_PENDING)
			return 1;
	return 0;
}

/* Switches activity kinds and recording callbacks to what `act` needs: kinds go off here only while a
 * window's top is pending, else at the writer's tick once records are in (docs/ARCHITECTURE.md, writer). */
void sp_win_set_collecting(enum sp_action act)
{
	sp_col.rt[sp_col.cur].want = act != SP_ACT_NONE;
	int want = (act != SP_ACT_NONE || sp_ph_other_wants()) && !sp_col.disabled;
	if (want && !sp_col.collecting && sp_out_start_writer() < 0)
		want = 0;
	/* a window whose top is pending (an optimizer step ends it at the next call) turns the kinds off at
	 * once, unless the program's graphs want them on until a detach (the writer's tick then) */
	if (want != sp_col.activities_on && (want || (window_top_pending() && !sp_cupti_life_graph_hold()))) {
		pthread_mutex_lock(&act_off.lock);
		if (!(want && act_off.due)) /* (due: still on in CUPTI, the writer's turn-off called off) */
			sp_cbset_activities(want);
		act_off.due = false;
		pthread_mutex_unlock(&act_off.lock);
		sp_col.activities_on = want;
	}
	if (want != sp_col.collecting) {
		sp_col.collecting = want;
		sp_thr.began |= (uint8_t)want; /* (note_end) */
		sp_cbset_apply();
	}
}

void sp_win_activities_due_off(void)
{
	sp_col.activities_on = 0;
	act_off.due = true;
}

void sp_win_activities_off(void)
{
	pthread_mutex_lock(&act_off.lock);
	if (act_off.due)
		sp_cbset_activities(0);
	act_off.due = false;
	pthread_mutex_unlock(&act_off.lock);
}

bool sp_win_activities_due(void)
{
	pthread_mutex_lock(&act_off.lock);
	bool due = act_off.due;
	pthread_mutex_unlock(&act_off.lock);
	return due;
}

void sp_win_activities_off_detaching(void)
{
	pthread_mutex_lock(&act_off.lock);
	if (act_off.due)
		sp_cbset_kinds(0);
	act_off.due = false;
	pthread_mutex_unlock(&act_off.lock);
}

void sp_win_activities_armed(void)
{
	pthread_mutex_lock(&act_off.lock);
	act_off.due = false; /* a new CUPTI instance holds none */
	pthread_mutex_unlock(&act_off.lock);
}

/* Turns activity kinds off when nothing wants them any more: not collecting, and every window
 * written. Writer thread (its tick), under sp_col.lock; the CUPTI calls come in
 * sp_win_activities_off. This function can't fail. */
void sp_win_activities_idle(void)
{
	if (!sp_col.activities_on || sp_col.collecting)
		return;
	for (int i = 0; i < SP_MAX_WINDOWS; i++)
		if (sp_col.win[i].used)
			return;
	sp_win_activities_due_off();
}

/* Opens a window at time t (corr as for sp_win_end_step) named after the current step, if the
 * writer can start. Under sp_col.lock. Returns the window, or NULL (warned once, or the process is
 * not profiled after all). */
static struct window *open_window(uint64_t t, uint32_t corr)
{
	struct window *w = new_window();
	if (!w) {
		sp_warn_once("too many windows waiting for GPU records; skipping a window");
		return NULL;
	}
	if (sp_out_start_writer() < 0) {
		w->used = 0; /* not profiled after all, or no trace file: no window */
		if (!sp_col.disabled) { /* no trace: the exit says which steps were lost */
			sp_col.unwritten_first = sp_col.unwritten++ ? sp_col.unwritten_first : sp_col.step;
			sp_col.unwritten_last = sp_col.step;
		}
		return NULL;
	}
	w->id = sp_col.next_window_id++;
	w->mk = sp_col.cur;
	sp_stepdet_no_switch(sp_col.mk[sp_col.cur].det); /* its steps stay as they are (stepdet.h) */
	sp_col.rt[sp_col.cur].windows++;
	w->first_step = w->last_step = sp_col.step;
	w->t_begin = t;
	w->corr_hi = SP_CORR_PENDING;
	w->origin = sp_od_window_origin(w->id, sp_col.step);
	split_at(w, corr, 1);
	push_ctl(SP_EV_WINDOW_BEGIN, t, w);
	sp_out_write_devices(t); /* if the writer's start could not */
	sp_out_window_context(t);
	sp_comms_announce(t); /* each window names its communicators */
	__atomic_store_n(&sp_col.open, w, __ATOMIC_RELEASE);
	return w;
}

/* Hands the open window to the writer thread, ending at time t in the current step (corr as for
 * sp_win_end_step). Under sp_col.lock, sp_col.open set. This function can't fail. */
static void close_window(uint64_t t, uint32_t corr)
{
	struct window *w = sp_col.open;
	w->last_step = sp_col.step;
	w->t_end = t;
	split_at(w, corr, 0);
	w->close_ts = sp_now_ns();
	w->closing = 1;
	sp_thr.end_now = 1;
	__atomic_store_n(&sp_col.open, NULL, __ATOMIC_RELEASE);
	if (sp_col.cfg.device_memory || sp_col.cfg.host_malloc)
		sp_mem_peaks(t);
	sp_writer_kick();
}

/* Fills a STEP record's account of how the step was found (format version 2): the detector's
 * kind (kind = auto may have switched to the program's optimizer steps). */
static void step_how(struct sp_event *ev)
{
	const struct sp_det_how *h = &sp_col.step_how;
	const struct sp_mk *m = &sp_col.mk[sp_col.cur];
	int aut = h->marker_kind == SP_MARK_AUTO, opt = h->marker_kind == SP_MARK_OPTIMIZER;
	ev->name = aut || opt ? h->anchor & ~SP_AUTOSTEP_FLAGS : sp_intern(m->pattern[0] ? m->pattern : "?");
	ev->u.step.how = (uint8_t)(h->marker_kind + 1);
	ev->u.step.flags =
		(uint8_t)((aut && h->after ? SP_STEP_AFTER : 0) | (sp_col.step_refuted == 1 ? SP_STEP_REFUTED : 0) |
			  (sp_col.step_refuted == 2 ? SP_STEP_IRREGULAR : 0) | (aut && h->train ? SP_STEP_TRAIN : 0) |
			  (sp_col.at_exit ? SP_STEP_AT_EXIT : 0) | (h->from_auto ? SP_STEP_FROM_AUTO : 0) |
			  (aut && h->late ? SP_STEP_LATE : 0));
	ev->u.step.regime = h->regime;
	ev->u.step.period = h->period;
	ev->u.step.launches = h->launches;
	ev->u.step.every = aut || opt ? h->every : (uint32_t)m->every;
	ev->u.step.confidence = h->confidence;
	ev->u.step.relocks = h->relocks;
}

/* Ends the current step at time t; corr is the correlation id of the CUDA call that is the
 * marker (0 if the marker is not a CUDA call). Writes the step if it was recorded and hands a
 * finished window to the writer thread. */
void sp_win_end_step(uint64_t t, uint32_t corr)
{
	if (!sp_col.step_open)
		return;
	sp_col.step_open = 0;
	sp_thr.bound_now = 1; /* (note_end) */
	if (sp_win_is_record(sp_col.action)) {
		struct sp_event ev = { .kind = SP_EV_STEP,
				       .sub = sp_col.action,
				       .device = SP_NO_DEVICE,
				       .tid = sp_coll_tid(),
				       .start = sp_col.step_start,
				       .end = t };
		ev.u.step.number = sp_col.step;
		step_how(&ev);
		sp_coll_push(&ev);
	}
	if (sp_col.action == SP_ACT_RECORD_AND_SAVE && sp_col.open && sp_col.open->mk == sp_col.cur)
		close_window(t, corr);
	if (sp_od_action(sp_col.step + 1) == SP_ACT_NONE)
		sp_win_set_collecting(SP_ACT_NONE);
}

/* Begins step `number` at time t (corr as for end_step): opens a window at the first RECORD
 * step and switches collection on from WARMUP. */
void sp_win_begin_step(uint64_t t, uint32_t corr, int64_t number)
{
	const struct sp_mk *m = &sp_col.mk[sp_col.cur];
	if (sp_col.nmk > 1)
		sp_ph_end_others(t, corr); /* phases alternate: this step ends theirs */
	sp_col.step = number;
	sp_col.step_open = 1;
	sp_col.step_how = m->det->how;
	sp_col.step_refuted = 0;
	sp_col.step_start = t;
	/* the schedule counts the preferred regime's steps only (docs/STEPS.md, "Regimes"); an on-demand
	 * request may record steps the schedule does not */
	int64_t sched = sp_stepdet_sched_step(m->det, sp_col.step);
	sp_col.action = sp_od_action(sp_col.step);
	sp_info("%s%s%sstep %lld begins (%s) on thread %u", m->name ? "phase " : "",
		m->name ? sp_intern_lookup(m->name) : "", m->name ? ": " : "", (long long)sp_col.step,
		sp_action_name(sp_col.action), sp_coll_tid());
	if (sp_win_is_record(sp_col.action) && sp_col.open && sp_col.open->mk != sp_col.cur) {
		sp_warn("phase %s: step %lld not recorded: a window of phase %s is recording (one window at a time)",
			sp_intern_lookup(m->name), (long long)sp_col.step,
			sp_intern_lookup(sp_col.mk[sp_col.open->mk].name));
		sp_col.action = SP_ACT_NONE; /* not possible while steps of phases alternate; kept as a guard */
	}
	if (sp_win_is_record(sp_col.action) && !sp_col.open)
		open_window(t, corr);
	sp_win_set_collecting(sp_col.action);
	/* done once the schedule is, and the detector trusts its regime (a later phase of the program
	 * would get the schedule anew: docs/STEPS.md), and no on-demand request waits for steps */
	if (!sp_col.rt[sp_col.cur].done && sp_col.action == SP_ACT_NONE && sched >= 0 &&
	    sp_schedule_done(m->schedule, sched) && sp_stepdet_settled(m->det) && !sp_od_busy())
		sp_ph_done();
}

/* Automatic detection locked on step `step`: it is open from t but was not watched from its start,
 * so it records nothing (a lock after the schedule's first window would have begun starts the
 * schedule from here: the detector says so, sp_stepdet_regime_note). Under sp_col.lock. */
static void det_locked(const struct sp_det_out *o, uint64_t t)
{
	const struct sp_mk *m = &sp_col.mk[sp_col.cur];
	const struct sp_det_how *h = &m->det->how;
	sp_col.step = o->step;
	sp_col.step_open = 1;
	sp_col.step_how = m->det->how;
	sp_col.step_refuted = 0;
	sp_col.action = SP_ACT_NONE;
	sp_col.step_start = t;
	char blocks[160] = "";
	if (h->blocks > 1)
		snprintf(blocks, sizeof blocks,
			 " (the host synchronises only every %u iterations: a loss read; each of them is a step)",
			 h->blocks);
	sp_info("automatic steps%s: regime %u, period %u calls (%u launches), boundary %s '%s' (every %u), "
		"proven by %u copies, at step %lld%s",
		o->what & SP_DET_RELOCK ? " (re-lock)" : "", h->regime, h->period, h->launches,
		h->after ? "after" : "before", sp_intern_lookup(h->anchor & ~SP_AUTOSTEP_FLAGS), h->every,
		h->confidence, (long long)sp_col.step, blocks);
}

/* What the Python bridge's tokens decided (stepdet_py.c): the switch of kind = auto to the
 * program's optimizer steps, or why none came, and a change of the optimizer steps' rule. */
static void py_apply(const struct sp_det_out *o)
{
	const struct sp_stepdet *det = sp_col.mk[sp_col.cur].det;
	char say[300];
	if (o->what & SP_DET_SWITCH)
		sp_pyglue_switched(o->step);
	if (o->what & SP_DET_UNSWITCH) {
		sp_info("the program's optimizer step ran inside a CUDA graph capture in step %lld (a graph's replays "
			"never call torch's optimizer hook): automatic steps again, learning the launch stream's "
			"period; steps are numbered afresh from its lock",
			(long long)sp_col.step);
		sp_win_set_collecting(SP_ACT_NONE); /* nothing is collected while the detector learns again */
		sp_col.step = -1;
		sp_col.step_open = 0;
		sp_pyglue_unswitched();
		sp_writer_kick(); /* launches are wanted: a parked writer re-attaches now */
	}
	if (o->what & SP_DET_CAPTURED)
		sp_warn("the program's optimizer step ran inside a CUDA graph capture (step %lld): the graph's "
			"replays never call torch's optimizer hook, so [marker] kind = optimizer counts no step "
			"they make (kind = auto finds them from the launches)",
			(long long)sp_col.step);
	if (o->what & SP_DET_HELD)
		sp_info("automatic steps: a loop without backward or optimizer kernels has run %llu steps in a row in "
			"step %lld, but the program made a torch optimizer that has not stepped yet (a rollout or an "
			"evaluation before training?): its steps count only after %llu in a row, and the optimizer's "
			"first step takes over before that",
			(unsigned long long)det->tune->defer_steps, (long long)sp_col.step,
			(unsigned long long)det->tune->optim_defer_steps);
	if (o->what & SP_DET_NOSWITCH)
		sp_warn("the program's optimizer steps came after a window of automatic steps had begun: the steps "
			"stay "
			"automatic (set [marker] kind = optimizer to take them)");
	if (o->what & SP_DET_PYRULE) {
		struct sp_pysteps_how h = det->py.how;
		sp_info("optimizer steps from step %lld: %s", (long long)sp_col.step,
			sp_pysteps_say(&h, sp_intern_lookup(h.end), say, sizeof say));
	}
}

/* Applies one decision of the detector at time t (corr as for end_step). Under sp_col.lock. */
static void det_apply(const struct sp_det_out *o, uint64_t t, uint32_t corr, CUpti_CallbackId cbid, int d)
{
	char msg[700];
	if ((o->what & SP_DET_MISMATCH) && (o->what & SP_DET_UNLOCK)) {
		sp_info("step %lld did not match the detected period: automatic detection learns again",
			(long long)o->bad_step);
		sp_col.step_refuted = 1; /* it is the open step: its STEP record says so */
	} else if (o->what & SP_DET_MISMATCH) {
		sp_info("step %lld launched a few kernels more than the detected period: kept as an irregular step "
			"(the next step is checked)",
			(long long)o->bad_step);
		sp_col.step_refuted = 2;
	}
	if ((o->what & SP_DET_UNLOCK) && sp_col.open && sp_col.open->mk == sp_col.cur)
		sp_col.action = SP_ACT_RECORD_AND_SAVE; /* the loop changed: a window open now ends with this step */
	if (o->what & SP_DET_END)
		sp_win_end_step(t, corr);
	if (o->what & SP_DET_UNLOCK)
		sp_win_set_collecting(SP_ACT_NONE); /* nothing is collected while the detector learns again */
	if (o->what & (SP_DET_PROBE | SP_DET_MISMATCH | SP_DET_UNLOCK))
		sp_writer_kick(); /* launches are wanted: a parked writer (slow passes) re-attaches now */
	if (o->what & SP_DET_LOCK)
		det_locked(o, t);
	if ((o->what & SP_DET_BOUNDARY) && (o->what & SP_DET_AFTER)) {
		/* CUPTI must not be reconfigured inside an API exit callback (seen on CUDA 13: enabling
		 * activity kinds there froze every later correlation id): the coming step's collection
		 * is set now, at the call's entry, and only the bookkeeping waits for its exit */
		if (sp_col.action == SP_ACT_RECORD_AND_SAVE && sp_col.open && sp_col.open->mk == sp_col.cur)
			sp_thr.end_soon = 1; /* the window ends at this call's exit */
		sp_win_set_collecting(sp_od_action(o->step));
		sp_thr.after_pending = 1;
		sp_thr.after_step = o->step;
		sp_thr.after_mk = sp_col.cur;
		sp_thr.after_cb[d] = cbid;
	} else if (o->what & SP_DET_BOUNDARY) {
		sp_win_end_step(t, corr);
		sp_win_begin_step(t, corr, o->step);
	}
	while ((o->what & (SP_DET_LOCK | SP_DET_PROVEN)) &&
	       sp_stepdet_regime_note(sp_col.mk[sp_col.cur].det, msg, sizeof msg))
		sp_warn("%s", msg);
	if (o->what & SP_DET_WANTS)
		sp_cbset_apply();
	if ((o->what & SP_DET_UNDECIDED) && sp_stepdet_undecided(sp_col.mk[sp_col.cur].det, msg, sizeof msg))
		sp_warn("%s", msg);
	py_apply(o);
}

/* Feeds marker mk's detector (sp_col.mk) one token (kind, flags and name as in trace/tokens.h)
 * seen at time t, and applies what it decides. corr as for end_step; cbid/d name the API call
 * (for a boundary at its exit). Takes sp_col.lock. This function can't fail. */
void sp_win_detect(int mk, uint8_t kind, uint8_t flags, uint32_t name, uint64_t t, uint32_t corr, CUpti_CallbackId cbid,
		   int d)
{
	static _Atomic uint64_t anchored; /* when a token last anchored the counter clock */
	struct sp_det_out o;
	if (kind <= SP_TOK_NCCL)
		sp_coll_saw_context(); /* a CUDA call or launch */
	/* learning before the first window: no writer thread anchors sp_fast_ns, which the callbacks'
	 * clock is, so the tokens do (outside the lock: the first anchor reads a sysfs file) */
	if ((int64_t)(t - atomic_load_explicit(&anchored, memory_order_relaxed)) >= (int64_t)SP_FAST_ANCHOR_NS) {
		atomic_store_explicit(&anchored, t, memory_order_relaxed);
		if (!sp_writer_running())
			sp_fast_anchor();
	}
	pthread_mutex_lock(&sp_col.lock);
	if (sp_col.done || sp_col.disabled) {
		pthread_mutex_unlock(&sp_col.lock);
		return;
	}
	sp_ph_switch(mk);
	struct sp_token tk = { .ts = t - sp_col.credit,
			       .name = name,
			       .tid = sp_coll_tid(),
			       .kind = kind,
			       .flags = flags };
	int attempt = sp_stepdet_may_try(sp_col.mk[mk].det, &tk);
	sp_stepdet_feed(sp_col.mk[mk].det, &tk, &o);
	if (o.what)
		det_apply(&o, t, corr, cbid, d);
	if (attempt) { /* a detection attempt ran: its time is not the program's */
		uint64_t now = sp_now_ns(); /* t may be the counter clock's, a little ahead of this one */
		uint64_t took = now > t ? now - t : 0;
		sp_col.credit += took;
		sp_stepdet_attempt_took(sp_col.mk[mk].det, took);
	}
	pthread_mutex_unlock(&sp_col.lock);
	note_end(t);
}

/* The exit of a call that ends its step (see det_apply): the next step begins now; the next CUDA
 * call's correlation id splits the two. */
void sp_win_after_exit(uint64_t t)
{
	sp_thr.after_pending = 0;
	sp_thr.after_cb[0] = sp_thr.after_cb[1] = 0;
	pthread_mutex_lock(&sp_col.lock);
	sp_ph_switch(sp_thr.after_mk);
	sp_win_end_step(t, 0);
	sp_win_begin_step(t, 0, sp_thr.after_step);
	pthread_mutex_unlock(&sp_col.lock);
	note_end(t);
}

/* A time range begins now, at t, outside any step boundary (ondemand.c; not in a callback): opens
 * a window and collects until sp_win_close_now. The step in progress gets no STEP record (it is
 * not whole inside the range). Under sp_col.lock. Returns 0, or -1 if no window could open. */
int sp_win_open_now(uint64_t t)
{
	if (sp_col.disabled)
		return -1;
	if (!sp_col.open && !open_window(t, 0))
		return -1;
	sp_win_set_collecting(SP_ACT_RECORD);
	return 0;
}

/* The time range ends now, at t: closes the open window (the step in progress gets no STEP
 * record) and collects only what the schedule says. Under sp_col.lock. This function can't fail. */
void sp_win_close_now(uint64_t t)
{
	if (sp_col.open)
		close_window(t, 0);
	if (sp_win_is_record(sp_col.action))
		sp_col.action = SP_ACT_NONE;
	sp_win_set_collecting(sp_od_action(sp_col.step + 1));
}
