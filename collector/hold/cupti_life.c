/* SPDX-License-Identifier: MIT */
/* cupti_life.c - subscribing to CUPTI and letting go of it (cupti_life.h): the one function that moves the
 * hold's state, attach, cycles and the final detach (drain.c detaches, park.c parks). A failure warns once and
 * leaves stepprof subscribed, with no further cycles. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include "collector/base/clock.h"
#include "collector/base/log.h"
#include "collector/collector.h"
#include "collector/cupti/cupti_api.h"
#include "collector/internal.h"
#include "hold_int.h"

struct sp_hold_state sp_hold;
struct sp_lifecycle sp_lifecycle = { .held_step = INT64_MIN,
				     .off_step = INT64_MIN,
				     .park_lock = PTHREAD_MUTEX_INITIALIZER };

/* No watch set (no hooks to tell): the hold's moves go on alone. */
static void watch_none(int on)
{
}
static void watch_nothing(void)
{
}
static bool watch_no(void)
{
	return false;
}
static const struct sp_hold_watch unwatched = { watch_none, watch_none, watch_nothing, watch_no, watch_nothing };
const struct sp_hold_watch *sp_hold_watching = &unwatched;

void sp_cupti_life_watch(const struct sp_hold_watch *w)
{
	sp_hold_watching = w ? w : &unwatched;
}

bool sp_cupti_life_move(enum sp_hold from, enum sp_hold to)
{
	static _Atomic bool said;
	int seen = (int)from, r = sp_hold_step(&sp_hold.state, from, to, &seen);
	if (r < 0 && !atomic_exchange(&said, true))
		sp_warn("internal: the hold on CUPTI cannot move from %s to %s (%s %s)", sp_hold_name(from),
			sp_hold_name(to), r == -1 ? "no such move in the table;" : "it was", r == -1 ? "" : sp_hold_name(seen));
	return r == 0;
}

void sp_cupti_life_forked(void)
{
	int st = atomic_load(&sp_hold.state);
	if (st != SP_HOLD_GONE)
		(void)sp_cupti_life_move((enum sp_hold)st, SP_HOLD_GONE);
}

/* Registers this CUPTI instance's timestamp and buffer callbacks once: the thread that claims it registers,
 * another waits for the outcome (no lock, no deadlock). Returns CUPTI_SUCCESS, or the failing result (warned). */
static CUptiResult register_activity(const struct sp_cupti_hooks *hooks)
{
	bool no = false;
	if (atomic_load(&sp_lifecycle.registered))
		return CUPTI_SUCCESS;
	if (!atomic_compare_exchange_strong(&sp_lifecycle.claim, &no, true)) {
		int st;
		while ((st = atomic_load(&sp_lifecycle.reg_state)) == 0)
			sched_yield();
		return st > 0 ? CUPTI_SUCCESS : CUPTI_ERROR_UNKNOWN;
	}
	CUptiResult r;
	if ((r = SP_CUPTI(cuptiActivityRegisterTimestampCallback(hooks->timestamp))) == CUPTI_SUCCESS &&
	    (r = SP_CUPTI(cuptiActivityRegisterCallbacks(hooks->requested, hooks->completed))) == CUPTI_SUCCESS)
		atomic_store(&sp_lifecycle.registered, true);
	atomic_store(&sp_lifecycle.reg_state, r == CUPTI_SUCCESS ? 1 : -1);
	return r;
}

/* Subscribes; the first instance registers the activity callbacks at once (a failure there is
 * the caller's to report), a re-attach (lazy) only when its first activity kind is enabled, so
 * that between windows CUPTI holds nothing but the callbacks the marker needs. */
CUptiResult sp_hold_attach(const struct sp_cupti_hooks *hooks, CUpti_SubscriberHandle *sub, bool lazy,
			   enum sp_hold from)
{
	atomic_store(&sp_launch_guard, 1); /* before CUPTI can wrap a launch (collector.h) */
	CUptiResult r = sp_cupti.cuptiSubscribe(sub, hooks->callback, NULL);
	if (r != CUPTI_SUCCESS && atomic_load(&sp_hold.state) != SP_HOLD_ATTACHED)
		atomic_store(&sp_launch_guard, 0);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
		return r; /* the caller names the other profiler */
	if (r != CUPTI_SUCCESS)
		return sp_cupti_check(r, "cuptiSubscribe", __FILE__, __LINE__);
	sp_lifecycle.hooks = *hooks;
	sp_lifecycle.registered = sp_lifecycle.claim = sp_lifecycle.reg_tried = false;
	sp_lifecycle.reg_state = 0;
	if (!lazy && (r = register_activity(hooks)) != CUPTI_SUCCESS) {
		sp_cupti.cuptiUnsubscribe(*sub);
		atomic_store(&sp_launch_guard, 0);
		return r;
	}
	sp_cupti_life_move(from, SP_HOLD_ATTACHED);
	if (hooks->armed)
		hooks->armed();
	return CUPTI_SUCCESS;
}

CUptiResult sp_cupti_life_attach(const struct sp_cupti_hooks *hooks, CUpti_SubscriberHandle *sub)
{
	return sp_hold_attach(hooks, sub, false, SP_HOLD_NONE);
}

CUptiResult sp_cupti_life_reattach(CUpti_SubscriberHandle *sub)
{
	if (atomic_load(&sp_hold.state) != SP_HOLD_GONE || atomic_load(&sp_lifecycle.frozen))
		return CUPTI_ERROR_INVALID_OPERATION;
	uint32_t base = atomic_load(&sp_hold.corr_base), last = atomic_load(&sp_hold.corr_last);
	atomic_store(&sp_hold.corr_base, base + last + CORR_MARGIN); /* detach for good left it */
	atomic_store(&sp_hold.corr_last, 0);
	uint64_t t0 = sp_now_ns();
	CUptiResult r = sp_hold_attach(&sp_lifecycle.hooks, sub, true, SP_HOLD_GONE);
	if (r != CUPTI_SUCCESS) {
		atomic_store(&sp_hold.corr_base, base);
		atomic_store(&sp_hold.corr_last, last);
		return r;
	}
	sp_lifecycle.held = NULL;
	sp_info("re-attached to CUPTI for an on-demand window in %.2f ms", (sp_now_ns() - t0) / 1e6);
	return CUPTI_SUCCESS;
}

int sp_cupti_life_activity_ready(void)
{
	return register_activity(&sp_lifecycle.hooks) == CUPTI_SUCCESS ? 0 : -1;
}

void sp_cupti_life_dirty(void)
{
	sp_lifecycle.dirty = true; /* set under the collector's lock, read by the tick under it too */
}

void sp_cupti_life_graph(void)
{
	if (!atomic_exchange(&sp_lifecycle.graphs, true))
		sp_info("the program creates CUDA graphs");
}

bool sp_cupti_life_graphs(void)
{
	return atomic_load(&sp_lifecycle.graphs);
}

void sp_cupti_life_glaunch(bool hooked)
{
	if (hooked)
		atomic_fetch_add(&sp_lifecycle.glaunch_hooked, 1);
	else if (atomic_fetch_add(&sp_lifecycle.glaunch_unhooked, 1) == 0)
		sp_info("a CUDA graph launch came past stepprof's hooks (it could not be held while CUPTI is "
			"finalised): stepprof stays subscribed to CUPTI for the rest of the run");
}

/* A detach with graphs alive is safe when every graph launch waits for it in a hook and no graph
 * was replayed with the kinds off after they were on in this instance (docs/CONFIG.md). */
static bool graph_detach_ok(void)
{
	return sp_col.cfg.graph_detach && atomic_load(&sp_lifecycle.glaunch_hooked) > 0 &&
	       !atomic_load(&sp_lifecycle.glaunch_unhooked) &&
	       !atomic_load(&sp_lifecycle.graph_tainted) && !atomic_load(&sp_lifecycle.kinds_went_off);
}

void sp_cupti_life_kinds_off(void)
{
	/* a graph made later in this instance is replayed with the kinds off after they were on */
	atomic_store(&sp_lifecycle.kinds_went_off, true);
	uint64_t wanted = atomic_load(&sp_lifecycle.wanted);
	const char *why = atomic_load(&sp_lifecycle.off_why);
	if (!atomic_load(&sp_lifecycle.graphs) || atomic_exchange(&sp_lifecycle.graph_tainted, true) ||
	    !atomic_load(&sp_lifecycle.glaunch_hooked))
		return;
	if (!sp_col.cfg.graph_detach)
		sp_info("activity kinds went off with the program's CUDA graphs alive ([cupti] graph_detach = "
			"false): stepprof stays subscribed for the rest of the run");
	else if (wanted && why)
		sp_info("activity kinds went off with the program's CUDA graphs alive and stepprof subscribed (the "
			"detach after the window was called off and tried again for %.0f ms, last because %s): it "
			"stays subscribed for the rest of the run",
			(sp_now_ns() - wanted) / 1e6, why);
	else if (wanted)
		sp_info("activity kinds went off with the program's CUDA graphs alive and stepprof subscribed (no "
			"detach came within %.0f ms of the window: the hooks not proven, or the detector not done): "
			"it stays subscribed for the rest of the run",
			(sp_now_ns() - wanted) / 1e6);
	else
		sp_info("activity kinds went off with the program's CUDA graphs alive and stepprof subscribed (no "
			"detach followed the window at once): it stays subscribed for the rest of the run");
}

bool sp_cupti_life_graph_hold(void)
{
	return atomic_load(&sp_lifecycle.graphs) && graph_detach_ok();
}

/* No detach is being tried again (a hold is over; the next one starts afresh). */
static void not_wanted(void)
{
	atomic_store(&sp_lifecycle.wanted, 0);
	atomic_store(&sp_lifecycle.tried, false);
	atomic_store(&sp_lifecycle.off_why, NULL);
}

bool sp_cupti_life_hold_kinds(uint64_t now, bool due)
{
	if (!due || !atomic_load(&sp_lifecycle.graphs) || !graph_detach_ok()) {
		if (!due)
			not_wanted(); /* the kinds are off, or on again for a window */
		sp_lifecycle.kinds_held = 0;
		return false;
	}
	if (!sp_lifecycle.kinds_held)
		sp_lifecycle.kinds_held = now;
	/* the tick detaches within the first 10 ms; a detach still to come gets 1 s (the hooks proven, the
	 * detector done), one called off and tried again (a launch blocked on a full queue, a long
	 * synchronisation) 10 s: the kinds cost the program while on */
	uint64_t held = now - sp_lifecycle.kinds_held;
	uint64_t limit = !atomic_load(&sp_lifecycle.wanted) ? SP_GRAPH_HOLD_NS
			 : atomic_load(&sp_lifecycle.tried)   ? SP_GRAPH_HOLD_TRY_NS
							      : SP_GRAPH_HOLD_WAIT_NS;
	if (held < limit)
		return true;
	sp_lifecycle.kinds_held = 0;
	return false; /* (wanted is kept for the message of the kinds' turn-off) */
}

void sp_cupti_life_overlap(void)
{
	if (!sp_lifecycle.said_closing) {
		sp_lifecycle.said_closing = true;
		sp_info("not detaching from CUPTI between windows: %s", sp_life_closing);
	}
}

void sp_cupti_life_freeze(void)
{
	atomic_store(&sp_lifecycle.frozen, true);
}

void sp_cupti_life_missed(const char *why)
{
	if (!atomic_exchange(&sp_lifecycle.stopped, true))
		sp_warn("%s: a step boundary may have been missed while detached from CUPTI, so later step "
			"numbers may be off by one; no more detaching between windows (set [cupti] "
			"detach_between = never to avoid this)",
			why);
}

void sp_cupti_life_verify(uint64_t now)
{
	uint64_t by = atomic_exchange(&sp_hold.verify_by, 0);
	if (!by)
		return;
	if (atomic_load(&sp_hold.overlap)) /* marker calls on two threads at once: timing proves nothing */
		sp_cupti_life_missed("the detach outlasted the shortest time between two marker calls, and marker "
				     "calls overlap on several threads");
	else if (now >= by)
		sp_cupti_life_missed("the detach outlasted the shortest time between two marker calls, and the "
				     "next marker call came too late to prove that none came while detached");
	else
		sp_info("the first marker call after the re-attach began %.2f ms before the earliest a "
			"second one could have: no marker call was missed while detached",
			(by - now) / 1e6);
}

/* Says (STEPPROF_VERBOSE) why CUPTI stays dirty between windows, when the reason changes; "no
 * marker call ended just now" only once it has held for a whole step (ticks miss the first
 * quarter of the quiet time now and then). This function can't fail. */
static void say_held(const struct sp_life_view *v, int64_t step)
{
	const char *why = sp_life_stay_reason(v);
	if (why != sp_lifecycle.held) {
		sp_lifecycle.held = why;
		sp_lifecycle.held_step = step;
		if (why == sp_life_closing)
			sp_cupti_life_overlap(); /* each gap would say it: once a run */
		else if (why == sp_life_graphs && !sp_lifecycle.said_graphs) {
			sp_lifecycle.said_graphs = true;
			sp_info("not detaching from CUPTI in step %lld%s: %s", (long long)step,
				v->done ? " (the schedule is done)" : "", why);
		} else if (why && why != sp_life_not_fresh && why != sp_life_det_busy) /* these two come and go */
			sp_info("not detaching from CUPTI between windows in step %lld: %s", (long long)step, why);
	} else if (why == sp_life_not_fresh && step == sp_lifecycle.held_step + 2) {
		sp_info("not detaching from CUPTI between windows in steps %lld-%lld: %s (no tick of the writer "
			"thread fell in the first quarter of the %.2f ms between marker calls)",
			(long long)sp_lifecycle.held_step, (long long)step - 1, why, atomic_load(&sp_hold.quiet) / 1e6);
	}
}

/* The next window comes: registers the activity callbacks here, outside callbacks, rather than
 * in the marker callback that enables its activity kinds (sp_cupti_life_activity_ready); once.
 * Does nothing if not attached. This function can't fail. */
static void register_early(int64_t step)
{
	if (!sp_cupti_life_enter())
		return;
	uint64_t r0 = sp_now_ns();
	sp_lifecycle.reg_tried = true;
	if (!atomic_load(&sp_lifecycle.claim) && register_activity(&sp_lifecycle.hooks) == CUPTI_SUCCESS)
		sp_info("activity callbacks registered in step %lld for the next window in %.2f ms", (long long)step,
			(sp_now_ns() - r0) / 1e6);
	sp_cupti_life_leave();
}

/* Detaches and re-attaches between windows (sp_cupti_life_tick's CYCLE; end, quiet, seen and
 * since as it read them). Returns SP_LIFE_CYCLE, SP_LIFE_STAY if the detach was called off, or
 * SP_LIFE_DETACH if the re-attach failed (warned; the rest of the run is not profiled). */
static enum sp_life_act cycle(const struct sp_life_view *v, int64_t step, uint64_t now, CUpti_SubscriberHandle *sub,
			      uint64_t end, uint64_t quiet, unsigned seen, uint64_t since)
{
	uint64_t fin = 0;
	uint64_t t0 = sp_now_ns();
	sp_lifecycle.keep_guard = true;
	int r0 = sp_hold_detach(*sub, false, &fin);
	sp_lifecycle.keep_guard = false;
	if (r0 != 0) {
		if (r0 < 0)
			atomic_store(&sp_lifecycle.stopped, true);
		else if (sp_lifecycle.off_step != step) { /* once a step: ticks come every 2 ms */
			sp_lifecycle.off_step = step;
			sp_info("detach between windows called off in step %lld (%s)", (long long)step,
				sp_lifecycle.off_why ? sp_lifecycle.off_why : "?");
		}
		if (atomic_exchange(&sp_hold.lost, false))
			sp_cupti_life_missed("a marker call came while a detach was being called off");
		return SP_LIFE_STAY;
	}
	uint64_t t1 = sp_now_ns();
	/* a marker call that came while detached ended no earlier than `end + quiet`, so the next
	 * one begins no earlier than `end + 2 quiet`: one before that proves none came (a quarter of
	 * the quiet time kept as margin, as quiet_fits does); armed before the marker's callback is */
	atomic_store(&sp_hold.verify_by, end ? end + quiet / 4 * 7 : 1);
	CUptiResult r = sp_hold_attach(&sp_lifecycle.hooks, sub, true, SP_HOLD_NONE);
	uint64_t t2 = sp_now_ns(), gap = t2 - t0;
	if (r != CUPTI_SUCCESS) {
		const char *msg = "?";
		atomic_store(&sp_hold.verify_by, 0);
		sp_cupti.cuptiGetResultString(r, &msg);
		sp_warn("cannot re-attach to CUPTI after detaching between windows (%s); the rest of the run "
			"is not profiled",
			msg);
		sp_cupti_life_move(SP_HOLD_NONE, SP_HOLD_GONE);
		atomic_store(&sp_lifecycle.stopped, true);
		return SP_LIFE_DETACH;
	}
	sp_lifecycle.cycles++;
	sp_lifecycle.held = NULL;
	sp_info("detached from and re-attached to CUPTI in step %lld (detach_between = %s, cycle %u): %.2f ms "
		"in all, detach %.2f ms (cuptiUnsubscribe + cuptiFinalize %.2f ms), re-attach %.2f ms; %.2f ms "
		"after the last marker call, %.2f ms the shortest time between two",
		(long long)step, v->policy == SP_DETACH_ALWAYS ? "always" : "auto", sp_lifecycle.cycles, gap / 1e6,
		(t1 - t0) / 1e6, fin / 1e6, (t2 - t1) / 1e6, since / 1e6, quiet / 1e6);
	uint64_t late = since + (t0 > now ? t0 - now : 0);
	if (atomic_exchange(&sp_hold.lost, false)) {
		atomic_store(&sp_hold.verify_by, 0);
		sp_cupti_life_missed("a marker call came while detaching");
	} else if (sp_life_quiet_fits(quiet, seen, late, gap))
		atomic_store(&sp_hold.verify_by, 0); /* no marker call could begin while detached */
	return SP_LIFE_CYCLE;
}

/* A detach the tick wanted was called off: tried again at the next tick (a graph program's kinds stay
 * on meanwhile, sp_cupti_life_hold_kinds); `what`, if set, is said once a step. */
static void called_off(int64_t step, uint64_t now, const char *what)
{
	uint64_t no = 0;
	atomic_compare_exchange_strong(&sp_lifecycle.wanted, &no, now);
	atomic_store(&sp_lifecycle.tried, true);
	const char *why = atomic_load(&sp_lifecycle.off_why);
	if (what && sp_lifecycle.off_step != step) {
		sp_lifecycle.off_step = step;
		sp_info("%s called off in step %lld (%s): tried again", what, (long long)step, why ? why : "?");
	}
}

/* 1 if the tick's STAY may pass (the window still being written, the hooks not proven yet, the detector
 * busy, the next window near): a graph program's kinds stay on for the detach that follows. */
static bool stay_passes(const struct sp_life_view *v)
{
	return !v->graphs && !v->stopped && v->policy != SP_DETACH_NEVER &&
	       !(v->policy == SP_DETACH_AUTO && v->marker == SP_MARK_NVTX && !v->done);
}

enum sp_life_act sp_cupti_life_tick(struct sp_life_view *v, int64_t step, uint64_t now, CUpti_SubscriberHandle *sub)
{
	int state = atomic_load(&sp_hold.state);
	if (atomic_load(&sp_lifecycle.frozen))
		return SP_LIFE_STAY;
	pthread_mutex_lock(&sp_lifecycle.park_lock);
	if (atomic_load(&sp_hold.state) == SP_HOLD_PARKED) {
		enum sp_life_act act = sp_hold_parked_tick(v, step, sub);
		pthread_mutex_unlock(&sp_lifecycle.park_lock);
		return act;
	}
	pthread_mutex_unlock(&sp_lifecycle.park_lock);
	if (now < atomic_load(&sp_lifecycle.retry_ns))
		return SP_LIFE_STAY; /* a blocked launch called the last detach off (detach_body): still wanted */
	state = atomic_load(&sp_hold.state);
	if (state != SP_HOLD_ATTACHED)
		return SP_LIFE_STAY;
	uint64_t end = atomic_load(&sp_hold.last_end), quiet = atomic_load(&sp_hold.quiet);
	unsigned seen = atomic_load(&sp_hold.quiet_seen);
	uint64_t since = end && now > end ? now - end : UINT64_MAX / 2, fin = 0;
	v->dirty = sp_lifecycle.dirty;
	v->graphs = atomic_load(&sp_lifecycle.graphs) && !graph_detach_ok(); /* a graph that forbids a detach */
	v->stopped = atomic_load(&sp_lifecycle.stopped);
	v->fresh_step = atomic_load(&sp_hold.marking) == 0 && sp_life_quiet_fresh(quiet, seen, since);
	enum sp_life_act act = sp_life_decide(v);
	if (act == SP_LIFE_STAY && stay_passes(v)) {
		uint64_t no = 0; /* a detach is to come: wanted from now, as one called off */
		atomic_compare_exchange_strong(&sp_lifecycle.wanted, &no, now);
	}
	if (act == SP_LIFE_STAY)
		say_held(v, step);
	if (act == SP_LIFE_STAY && !v->done && !sp_lifecycle.reg_tried && (v->busy || v->steps_to_window < SP_LIFE_MIN_GAP))
		register_early(step);
	if (act == SP_LIFE_DETACH) {
		uint64_t t0 = sp_now_ns();
		int r = sp_hold_detach(*sub, true, &fin);
		if (r > 0) { /* a call was in progress: the next tick tries again */
			called_off(step, now, "the detach after the last window");
			return SP_LIFE_STAY;
		}
		if (r < 0) {
			atomic_store(&sp_lifecycle.stopped, true);
			atomic_store(&sp_lifecycle.frozen, true); /* warned; no second try */
			not_wanted();
			return SP_LIFE_STAY;
		}
		sp_hold_watching->disarm();
		not_wanted();
		sp_info("detached from CUPTI in step %lld (the schedule is done) in %.2f ms (cuptiUnsubscribe + "
			"cuptiFinalize %.2f ms): the rest of the run is not profiled",
			(long long)step, (sp_now_ns() - t0) / 1e6, fin / 1e6);
		return act;
	}
	enum sp_life_act decided = act;
	if (act == SP_LIFE_PARK)
		act = sp_hold_park(step, sub);
	else if (act == SP_LIFE_CYCLE)
		act = cycle(v, step, now, sub, end, quiet, seen, since);
	if (atomic_load(&sp_lifecycle.stopped) || (act != SP_LIFE_STAY && act == decided))
		not_wanted(); /* detached, or no more tries */
	else if (decided != SP_LIFE_STAY && act == SP_LIFE_STAY)
		called_off(step, now, NULL);
	return act;
}
