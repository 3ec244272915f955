/* SPDX-License-Identifier: MIT */
/* park.c - parking: detached from CUPTI until the next window is near while the hooks count marker calls
 * (markhook.h), re-attached by the writer's tick or at once by sp_cupti_life_attach_now. Policy: decide/life.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include "collector/base/clock.h"
#include "collector/base/log.h"
#include "collector/cupti/cupti_api.h"
#include "collector/out/writer.h"
#include "hold_int.h"

/* The writer's pass while parked: slow, as the hooks kick it two steps before the next window
 * (markhook.c); 2 ms passes would go on taking the program's CPU (docs/ARCHITECTURE.md). */
#define SP_PARKED_PASS_NS 100000000ull

/* Parks (sp_cupti_life_tick's PARK): the hooks count marker calls from now on, then stepprof
 * detaches as for a cycle but stays detached until the next window is near. Returns SP_LIFE_PARK,
 * or SP_LIFE_STAY if the detach was called off (the hooks stop counting again). */
enum sp_life_act sp_hold_park(int64_t step, CUpti_SubscriberHandle *sub)
{
	uint64_t fin = 0, t0 = sp_now_ns();
	sp_hold_watching->count(1); /* before the detach: a marker call counts where it enters, hook or callback */
	int r = sp_hold_detach(*sub, false, &fin);
	if (r != 0) {
		sp_hold_watching->count(0);
		if (r < 0)
			atomic_store(&sp_lifecycle.stopped, true);
		return SP_LIFE_STAY;
	}
	if (atomic_exchange(&sp_hold.lost, false))
		sp_cupti_life_missed("a marker call that bypassed stepprof's hooks came while detaching");
	sp_hold_watching->proof(0); /* nothing reports launches now: the launch hooks pass them through */
	sp_cupti_life_move(SP_HOLD_NONE, SP_HOLD_PARKED);
	sp_lifecycle.park_step = step;
	sp_lifecycle.park_ns = sp_now_ns();
	sp_lifecycle.held = NULL;
	sp_writer_set_pass_ns(SP_PARKED_PASS_NS); /* the hooks kick the writer when the window nears */
	sp_info("detached from CUPTI in step %lld until the next window in %.2f ms (cuptiUnsubscribe + cuptiFinalize "
		"%.2f ms): stepprof's hooks count the marker calls meanwhile",
		(long long)step, (sp_lifecycle.park_ns - t0) / 1e6, fin / 1e6);
	return SP_LIFE_PARK;
}

/* Re-attaches a parked stepprof before its next window (sp_cupti_life_tick's UNPARK): with the
 * marker's callbacks, which count from now on instead of the hooks. Returns SP_LIFE_UNPARK, or
 * SP_LIFE_DETACH if the re-attach failed (warned; the rest of the run is not profiled). */
static enum sp_life_act unpark(int64_t step, CUpti_SubscriberHandle *sub)
{
	uint64_t t0 = sp_now_ns();
	sp_hold_watching->proof(1); /* before the attach: each launch CUPTI reports finds its hook watching */
	CUptiResult r = sp_hold_attach(&sp_lifecycle.hooks, sub, true, SP_HOLD_PARKED);
	sp_writer_set_pass_ns(0); /* windows close at the usual pace */
	if (r != CUPTI_SUCCESS) {
		const char *msg = "?";
		sp_cupti.cuptiGetResultString(r, &msg);
		sp_warn("cannot re-attach to CUPTI before a window (%s); the rest of the run is not profiled", msg);
		sp_cupti_life_move(SP_HOLD_PARKED, SP_HOLD_GONE);
		atomic_store(&sp_lifecycle.stopped, true);
		sp_hold_watching->disarm();
		return SP_LIFE_DETACH;
	}
	/* the marker's callbacks count the calls that enter from now on; learning from the hooks ends */
	sp_hold_watching->unparked();
	sp_lifecycle.cycles++;
	sp_info("re-attached to CUPTI in step %lld for the next window in %.2f ms (parked since step %lld, %.1f ms; "
		"cycle %u)",
		(long long)step, (sp_now_ns() - t0) / 1e6, (long long)sp_lifecycle.park_step, (t0 - sp_lifecycle.park_ns) / 1e6, sp_lifecycle.cycles);
	if (sp_hold_watching->graph_made()) {
		atomic_store(&sp_lifecycle.graphs, true);
		atomic_store(&sp_lifecycle.stopped, true);
		sp_warn("the program made a CUDA graph while stepprof was detached from CUPTI: that graph's kernels "
			"may "
			"be missing from later windows; no more detaching between windows (set [cupti] detach_between "
			"= "
			"never to avoid this)");
	}
	return SP_LIFE_UNPARK;
}

/* The tick while parked: stay, re-attach for the next window, or stay detached for good. */
enum sp_life_act sp_hold_parked_tick(struct sp_life_view *v, int64_t step, CUpti_SubscriberHandle *sub)
{
	v->parked = true;
	enum sp_life_act act = sp_life_decide(v);
	if (act == SP_LIFE_UNPARK)
		return unpark(step, sub);
	if (act == SP_LIFE_DETACH) {
		sp_cupti_life_move(SP_HOLD_PARKED, SP_HOLD_GONE);
		sp_hold_watching->disarm();
		sp_info("the schedule is done in step %lld: stepprof stays detached from CUPTI for the rest of the run",
			(long long)step);
	}
	return act;
}

void sp_cupti_life_start_parked(const struct sp_cupti_hooks *hooks)
{
	pthread_mutex_lock(&sp_lifecycle.park_lock);
	sp_lifecycle.hooks = *hooks;
	sp_cupti_life_move(SP_HOLD_NONE, SP_HOLD_PARKED);
	sp_lifecycle.park_step = 0;
	sp_lifecycle.park_ns = sp_now_ns();
	sp_writer_set_pass_ns(SP_PARKED_PASS_NS);
	sp_hold_watching->count(1);
	pthread_mutex_unlock(&sp_lifecycle.park_lock);
}

int sp_cupti_life_attach_now(CUpti_SubscriberHandle *sub, int64_t step, bool graph)
{
	if (atomic_load(&sp_lifecycle.frozen))
		return 0;
	pthread_mutex_lock(&sp_lifecycle.park_lock);
	if (atomic_load(&sp_hold.state) != SP_HOLD_PARKED) {
		pthread_mutex_unlock(&sp_lifecycle.park_lock);
		return 0;
	}
	if (graph)
		sp_cupti_life_graph();
	enum sp_life_act act = unpark(step, sub);
	pthread_mutex_unlock(&sp_lifecycle.park_lock);
	if (act == SP_LIFE_UNPARK && graph)
		sp_info("attached to CUPTI before the program's CUDA graph capture or creation (graphs made before "
			"a subscriber exists are invisible to it)");
	return act == SP_LIFE_UNPARK;
}
