/* SPDX-License-Identifier: MIT */
/* markhook.c - see markhook.h. Application threads (the hooks) and the writer thread (the switch). */
#include <stdatomic.h>
#include <stdint.h>
#include <sched.h>
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
		if (m)
			H.name[i] = sp_intern(fns[i].name);
		atomic_store(&H.want[i], m ? WANT_MARKER : fns[i].graph ? WANT_GRAPH : WANT_NONE);
	}
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
		sp_info("a marker call came without going through stepprof's hooks (a runtime linked in statically, "
			"or a function looked up by hand): stepprof stays attached to CUPTI between windows");
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
	if (sp_life_steps_to_window(sp_col.mk[0].schedule, sp_col.step, 1) == 0 || sp_od_busy())
		wait_attached(); /* CUPTI counts this one if the re-attach came in time */
	if (atomic_load(&H.counting)) {
		sp_thr.hook_counted = 1;
		sp_win_detect(0, SP_TOK_API, 0, H.name[fn], sp_now_ns(), 0, 0, fns[fn].drv);
	}
	return fn;
}

void sp_collector_hook_exit(int h)
{
	if (h >= 0 && --sp_thr.hook_depth == 0)
		sp_thr.hook_counted = 0;
}
