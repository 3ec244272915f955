/* SPDX-License-Identifier: MIT */
/* markhook.c - see markhook.h. Application threads (the hooks) and the writer thread (the switch). */
#include <stdatomic.h>
#include <stdint.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include "clock.h"
#include "collector.h"
#include "cupti_life.h"
#include "hookfns.h"
#include "intern.h"
#include "internal.h"
#include "life.h"
#include "log.h"
#include "markhook.h"
#include "ondemand.h"
#include "trace/tokens.h"

#define WAIT_ATTACH_NS 1000000000ull /* longest a marker call waits for a re-attach before its window */

enum { WANT_NONE, WANT_MARKER, WANT_GRAPH };

static const struct {
	const char *name; /* as CUPTI names it, without the version suffix */
	uint8_t drv, graph;
} fns[SP_HOOK_N] = {
#define SP_HOOK_ROW(sym, name, drv, graph) { name, drv, graph },
	SP_HOOK_FNS(SP_HOOK_ROW)
#undef SP_HOOK_ROW
};

static struct {
	_Atomic uint8_t want[SP_HOOK_N]; /* WANT_*: a marker's function, a graph's capture or creation */
	uint32_t name[SP_HOOK_N];        /* interned name of a marker's function */
	uint8_t flags[SP_HOOK_N];        /* its detector token's flags (driver, synchronising) */
	_Atomic uint32_t anchor;         /* auto: the anchor call the hooks follow (sp_hook_follow), 0 none */
	uint32_t probes;                 /* auto: the detector's probes said so far (writer thread) */
	_Atomic int counting;            /* the hooks count marker calls (stepprof is detached) */
	_Atomic bool need_attach;        /* a marker call waits for the re-attach before its window */
	_Atomic unsigned seen, unseen;   /* marker calls CUPTI reported inside / outside a hook */
	_Atomic bool graph;              /* a graph was captured or created while counting */
	_Atomic bool slow;               /* a re-attach outlasted WAIT_ATTACH_NS (said once) */
} H;

void sp_hook_arm(void)
{
	const struct sp_mk *mk = &sp_col.mk[0];
	int api = sp_col.nmk == 1 && !mk->name && mk->kind == SP_MARK_API; /* phases: no parking */
	for (int i = 0; i < SP_HOOK_N; i++) {
		int m = api && sp_coll_glob(mk->pattern, fns[i].name);
		const char *n = fns[i].name;
		H.name[i] = sp_intern(n);
		/* as tokglue.c classifies the call for automatic detection (cbsets.c's api_sync) */
		H.flags[i] = (uint8_t)((fns[i].drv ? SP_TOKF_DRIVER : 0) |
				       (sp_coll_glob(fns[i].drv ? "cu*Synchronize*" : "cuda*Synchronize*", n) ||
						!strcmp(n, "cudaMemcpy") || !strcmp(n, "cuMemcpyDtoH")
					? SP_TOKF_SYNC
					: 0));
		atomic_store(&H.want[i], m ? WANT_MARKER : fns[i].graph ? WANT_GRAPH : WANT_NONE);
	}
}

int sp_hook_follow(uint32_t anchor)
{
	const struct sp_mk *mk = &sp_col.mk[0];
	int fn = -1;
	if (sp_col.nmk != 1 || mk->name || mk->kind != SP_MARK_AUTO)
		return -1;
	for (int i = 0; anchor && i < SP_HOOK_N && fn < 0; i++)
		if (H.name[i] == anchor && !fns[i].graph && !strstr(fns[i].name, "GraphLaunch"))
			fn = i; /* a graph launch anchors graphs: detach_between = auto never parks on those */
	if (fn < 0)
		anchor = 0;
	if (atomic_load(&H.anchor) == anchor)
		return fn;
	for (int i = 0; i < SP_HOOK_N; i++)
		atomic_store(&H.want[i], i == fn ? WANT_MARKER : fns[i].graph ? WANT_GRAPH : WANT_NONE);
	atomic_store(&H.seen, 0); /* another call: proven anew */
	atomic_store(&H.unseen, 0);
	atomic_store(&H.anchor, anchor);
	return fn;
}

int sp_auto_life(struct sp_life_view *v, struct sp_stepdet *det, int64_t *step)
{
	if (sp_col.nmk != 1 || sp_col.mk[0].name || sp_col.mk[0].kind != SP_MARK_AUTO)
		return 0;
	int64_t s = sp_stepdet_sched_step(det, sp_col.step);
	v->det_busy = !sp_stepdet_sparse_quiet(det) || s < 0;
	if (s >= 0)
		*step = s; /* the schedule's step: how far the next window is */
	if (!atomic_load(&H.counting)) /* attached: follow the anchor (none while learning) */
		sp_hook_follow(sp_stepdet_anchor_name(det));
	if (!v->det_busy && sp_hook_proven())
		sp_stepdet_blind(det, 1); /* a park may come: no step may begin counting launches before it */
	if (det->probes != H.probes) {
		H.probes = det->probes;
		sp_info("automatic steps: a step took over 4 times more or less time than those whose launches were "
			"counted: the next step's launches are counted%s",
			atomic_load(&H.counting) ? " (re-attaching to CUPTI for it)" : "");
	}
	return 1;
}

void sp_auto_life_after(const struct sp_life_view *v, struct sp_stepdet *det, int act)
{
	int parked = act == SP_LIFE_PARK || (v->parked && act == SP_LIFE_STAY);
	pthread_mutex_lock(&sp_col.lock);
	sp_stepdet_blind(det, parked); /* parked: no launch is seen, the steps are checked by time alone */
	pthread_mutex_unlock(&sp_col.lock);
}

int sp_hook_cupti_anchor(uint32_t name)
{
	return name && name == atomic_load_explicit(&H.anchor, memory_order_relaxed) ? sp_hook_cupti_marker() : 0;
}

void sp_hook_disarm(void)
{
	for (int i = 0; i < SP_HOOK_N; i++)
		atomic_store(&H.want[i], WANT_NONE);
}

int sp_hook_cupti_marker(void)
{
	if (sp_thr.hook_counted)
		return 1;
	if (sp_thr.hook_depth > 0)
		atomic_fetch_add_explicit(&H.seen, 1, memory_order_relaxed);
	else if (atomic_fetch_add(&H.unseen, 1) == 0)
		sp_info("a %s call came without going through stepprof's hooks (a runtime linked in statically, "
			"or a function looked up by hand): stepprof stays attached to CUPTI between windows",
			atomic_load(&H.anchor) ? "step anchor" : "marker");
	return 0;
}

bool sp_hook_proven(void)
{
	return atomic_load(&H.seen) >= SP_HOOK_PROOF && atomic_load(&H.unseen) == 0;
}

void sp_hook_count(int on)
{
	atomic_store(&H.counting, on);
	if (!on)
		atomic_store(&H.need_attach, false);
}

bool sp_hook_need_attach(void)
{
	return atomic_load(&H.need_attach);
}

bool sp_hook_graph_made(void)
{
	return atomic_exchange(&H.graph, false);
}

/* The step that this call may end is the last before a window: waits (holding nothing) until the
 * writer thread has re-attached, so that CUPTI sees the window from its first call. */
static void wait_attached(void)
{
	atomic_store(&H.need_attach, true);
	uint64_t t0 = sp_now_ns();
	while (atomic_load(&H.counting)) {
		if (sp_now_ns() - t0 > WAIT_ATTACH_NS) {
			if (!atomic_exchange(&H.slow, true))
				sp_warn("re-attaching to CUPTI before a window took over 1 s: that window may lack its "
					"first records");
			return;
		}
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
}

/* A detach is finalising CUPTI: a hooked call waits (holding nothing) until it is done, so that
 * CUPTI is never finalised under a call it is about to wrap; at most WAIT_ATTACH_NS. */
static void wait_detach(void)
{
	uint64_t t0 = sp_now_ns();
	int st;
	while (((st = atomic_load(&sp_hold.state)) == SP_HOLD_QUIESCING || st == SP_HOLD_DETACHING) &&
	       sp_now_ns() - t0 < WAIT_ATTACH_NS)
		sched_yield();
}

int sp_collector_hook_enter(int fn)
{
	if ((unsigned)fn >= SP_HOOK_N)
		return -1;
	int st = atomic_load_explicit(&sp_hold.state, memory_order_relaxed);
	if (__builtin_expect(st == SP_HOLD_QUIESCING || st == SP_HOLD_DETACHING, 0))
		wait_detach();
	unsigned w = atomic_load_explicit(&H.want[fn], memory_order_relaxed);
	if (w != WANT_MARKER) {
		if (w == WANT_GRAPH && atomic_load_explicit(&H.counting, memory_order_relaxed))
			atomic_store(&H.graph, true);
		return -1;
	}
	if (sp_thr.hook_depth++ > 0 || !atomic_load(&H.counting))
		return fn;
	/* the schedule's step (automatic detection numbers its regimes' steps apart from it) */
	int64_t sched = sp_stepdet_sched_step(sp_col.mk[0].det, sp_col.step);
	if (sched < 0 || sp_life_steps_to_window(sp_col.mk[0].schedule, sched, 1) == 0 || sp_od_busy())
		wait_attached(); /* CUPTI counts this one if the re-attach came in time */
	if (atomic_load(&H.counting)) {
		sp_thr.hook_counted = 1;
		sp_win_detect(0, SP_TOK_API, H.flags[fn], H.name[fn], sp_now_ns(), 0, 0, fns[fn].drv);
	}
	return fn;
}

void sp_collector_hook_exit(int h)
{
	if (h < 0 || --sp_thr.hook_depth > 0)
		return;
	/* an automatic step that begins after the anchor call: CUPTI's exit callback is not there to
	 * begin it (windows.c's det_apply), the hook's exit is */
	if (sp_thr.hook_counted && sp_thr.after_pending)
		sp_win_after_exit(sp_now_ns());
	sp_thr.hook_counted = 0;
}
