/* SPDX-License-Identifier: MIT */
/* cupti_life.c - subscribing to CUPTI and letting go of it (see cupti_life.h). Detaching runs on
 * the writer thread: callbacks in flight drain first, activity buffers are flushed, then
 * cuptiUnsubscribe and cuptiFinalize. Any failure warns once and leaves stepprof as it was
 * (still subscribed) with no further cycles; it never stops the program. */
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include "clock.h"
#include "cupti_api.h"
#include "cupti_life.h"
#include "log.h"

#define DRAIN_NS 1000000000ull     /* longest wait for callbacks in flight before giving up */
#define CORR_MARGIN 65536u         /* ids a racing thread may have taken beyond the last one seen */

struct sp_hold_state sp_hold;

static struct {
	struct sp_cupti_hooks hooks; /* of the first attach, reused by re-attaches */
	bool dirty;                  /* an activity kind was on in this CUPTI instance */
	_Atomic bool graphs;         /* the program created a CUDA graph */
	_Atomic bool stopped;        /* no more cycles: one failed or may have missed a boundary */
	_Atomic bool frozen;         /* the process exits: no detach at all any more */
	unsigned cycles;             /* detach + re-attach done */
} L;

/* Sleeps about 50 us (the writer thread waits for callbacks to return). */
static void nap(void)
{
	struct timespec ts = { 0, 50000 };
	nanosleep(&ts, NULL);
}

/* Waits until no callback or outside CUPTI call is in flight; state must already say QUIESCING
 * (new ones wait). Returns 0, or -1 after DRAIN_NS (one is stuck: caller backs out). */
static int drain(void)
{
	uint64_t t0 = sp_now_ns();
	while (atomic_load(&sp_hold.inflight) > 0) {
		if (sp_now_ns() - t0 > DRAIN_NS)
			return -1;
		nap();
	}
	return 0;
}

int sp_cupti_life_enter_slow(enum sp_enter who)
{
	int waiting = 0, ok = 0;
	for (;;) {
		int st = atomic_load(&sp_hold.state);
		if (st == SP_HOLD_ATTACHED || (st == SP_HOLD_QUIESCING && who == SP_ENTER_CALL)) {
			/* a call goes ahead while a detach decides (still subscribed): the caller may hold
			 * the collector's lock, which callbacks in flight may be waiting for; the detach
			 * drains again before it touches CUPTI */
			atomic_fetch_add(&sp_hold.inflight, 1);
			int now = atomic_load(&sp_hold.state);
			if (now == SP_HOLD_ATTACHED || (now == SP_HOLD_QUIESCING && who == SP_ENTER_CALL)) {
				ok = 1;
				break;
			}
			atomic_fetch_sub(&sp_hold.inflight, 1);
			continue;
		}
		if (st != SP_HOLD_QUIESCING)
			break;
		/* a callback waits: it holds none of stepprof's locks, and no CUPTI call is made until
		 * the verdict, so this cannot deadlock */
		if (who == SP_ENTER_MARKER && !waiting) {
			atomic_fetch_add(&sp_hold.marker_waiting, 1);
			waiting = 1;
		}
		sched_yield();
	}
	if (!ok && who == SP_ENTER_MARKER)
		atomic_store(&sp_hold.lost, true);
	if (waiting)
		atomic_fetch_sub(&sp_hold.marker_waiting, 1);
	return ok;
}

/* Detaches: drains, flushes, unsubscribes, finalises. For good, or (a cycle) only if no marker
 * call is in progress or waiting once callbacks have drained. Returns 0 (state NONE or GONE), 1
 * if a marker call was in progress (called off: state back to ATTACHED, nothing lost), or -1 if
 * callbacks did not drain (likewise, and warned). */
static int detach(CUpti_SubscriberHandle sub, bool for_good)
{
	atomic_store(&sp_hold.state, SP_HOLD_QUIESCING);
	if (drain() < 0) {
		atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
		sp_warn("a CUPTI callback did not return within 1 s; staying attached to CUPTI");
		return -1;
	}
	if (!for_good && atomic_load(&sp_hold.marking) + atomic_load(&sp_hold.marker_waiting) > 0) {
		atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
		return 1; /* its exit must be seen by the instance that saw its entry */
	}
	atomic_store(&sp_hold.state, SP_HOLD_DETACHING); /* waiting callbacks return now */
	if (drain() < 0) { /* calls that went ahead while quiescing */
		atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
		sp_warn("a CUPTI call did not return within 1 s; staying attached to CUPTI");
		return -1;
	}
	/* the writer thread is the only one touching CUPTI now; records still buffered arrive in
	 * the buffer callback on this thread (late ones are counted, not lost in silence) */
	SP_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	SP_CUPTI(cuptiUnsubscribe(sub));
	SP_CUPTI(cuptiFinalize());
	L.dirty = false;
	if (!for_good) { /* the next instance's ids go past every id of this one */
		uint32_t last = atomic_load(&sp_hold.corr_last);
		atomic_store(&sp_hold.corr_base, atomic_load(&sp_hold.corr_base) + last + CORR_MARGIN);
		atomic_store(&sp_hold.corr_last, 0);
	}
	atomic_fetch_add(&sp_hold.generation, 1);
	atomic_store(&sp_hold.state, for_good ? SP_HOLD_GONE : SP_HOLD_NONE);
	return 0;
}

CUptiResult sp_cupti_life_attach(const struct sp_cupti_hooks *hooks, CUpti_SubscriberHandle *sub)
{
	CUptiResult r = sp_cupti.cuptiSubscribe(sub, hooks->callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
		return r; /* the caller names the other profiler */
	if (r != CUPTI_SUCCESS)
		return sp_cupti_check(r, "cuptiSubscribe", __FILE__, __LINE__);
	if ((r = SP_CUPTI(cuptiActivityRegisterTimestampCallback(hooks->timestamp))) != CUPTI_SUCCESS ||
	    (r = SP_CUPTI(cuptiActivityRegisterCallbacks(hooks->requested, hooks->completed))) != CUPTI_SUCCESS) {
		sp_cupti.cuptiUnsubscribe(*sub);
		return r;
	}
	L.hooks = *hooks;
	atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
	if (hooks->armed)
		hooks->armed();
	return CUPTI_SUCCESS;
}

void sp_cupti_life_dirty(void)
{
	L.dirty = true; /* set under the collector's lock, read by the tick under it too */
}

void sp_cupti_life_graph(void)
{
	if (!atomic_exchange(&L.graphs, true))
		sp_info("the program creates CUDA graphs");
}

void sp_cupti_life_freeze(void)
{
	atomic_store(&L.frozen, true);
}

void sp_cupti_life_missed(const char *why)
{
	if (!atomic_exchange(&L.stopped, true))
		sp_warn("%s: a step boundary may have been missed while detached from CUPTI, so later step "
			"numbers may be off by one; no more detaching between windows (set [cupti] "
			"detach_between = never to avoid this)", why);
}

enum sp_life_act sp_cupti_life_tick(struct sp_life_view *v, int64_t step, uint64_t now, CUpti_SubscriberHandle *sub)
{
	int state = atomic_load(&sp_hold.state);
	if (state != SP_HOLD_ATTACHED || atomic_load(&L.frozen))
		return SP_LIFE_STAY;
	uint64_t end = atomic_load(&sp_hold.last_end), quiet = atomic_load(&sp_hold.quiet);
	unsigned seen = atomic_load(&sp_hold.quiet_seen);
	uint64_t since = end && now > end ? now - end : UINT64_MAX / 2;
	v->dirty = L.dirty;
	v->graphs = atomic_load(&L.graphs);
	v->stopped = atomic_load(&L.stopped);
	v->fresh_step = atomic_load(&sp_hold.marking) == 0 && sp_life_quiet_fresh(quiet, seen, since);
	enum sp_life_act act = sp_life_decide(v);
	if (act == SP_LIFE_DETACH) {
		if (detach(*sub, true) != 0) {
			atomic_store(&L.stopped, true);
			atomic_store(&L.frozen, true); /* warned; no second try */
			return SP_LIFE_STAY;
		}
		sp_info("detached from CUPTI in step %lld (the schedule is done): the rest of the run is not "
			"profiled", (long long)step);
		return act;
	}
	if (act != SP_LIFE_CYCLE)
		return act;
	uint64_t t0 = sp_now_ns();
	int r0 = detach(*sub, false);
	if (r0 != 0) {
		if (r0 < 0)
			atomic_store(&L.stopped, true);
		if (atomic_exchange(&sp_hold.lost, false))
			sp_cupti_life_missed("a marker call came while a detach was being called off");
		return SP_LIFE_STAY;
	}
	CUptiResult r = sp_cupti_life_attach(&L.hooks, sub);
	uint64_t gap = sp_now_ns() - t0;
	if (r != CUPTI_SUCCESS) {
		const char *msg = "?";
		sp_cupti.cuptiGetResultString(r, &msg);
		sp_warn("cannot re-attach to CUPTI after detaching between windows (%s); the rest of the run "
			"is not profiled", msg);
		atomic_store(&sp_hold.state, SP_HOLD_GONE);
		atomic_store(&L.stopped, true);
		return SP_LIFE_DETACH;
	}
	L.cycles++;
	sp_info("detached from and re-attached to CUPTI in step %lld (detach_between = %s): %.2f ms without "
		"a subscriber", (long long)step, v->policy == SP_DETACH_ALWAYS ? "always" : "auto", gap / 1e6);
	if (atomic_exchange(&sp_hold.lost, false))
		sp_cupti_life_missed("a marker call came while detaching");
	else if (!sp_life_quiet_fits(quiet, seen, since + (t0 > now ? t0 - now : 0), gap))
		sp_cupti_life_missed("the detach outlasted the shortest time between two marker calls");
	return act;
}
