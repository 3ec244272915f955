/* SPDX-License-Identifier: MIT */
/* lifetick.c - the hold's periodic tick: gathers what the collector knows into a decide/life.h view for
 * cupti_life.c to act on, then applies a final detach to the rest of the collector. The writer ticks after
 * each pass, an application thread before it exists; never from a callback. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "collector/collector.h"
#include "collector/cupti/cupti_share.h"
#include "collector/internal.h"
#include "collector/ondemand/ondemand.h"
#include "collector/out/tokrec.h"
#include "collector/out/writer.h"
#include "cupti_life.h"
#include "decide/life.h"
#include "markhook.h"

/* One life-cycle tick at a time: the writer thread's, or an application thread's before the writer
 * exists (sp_act_early_tick); the one that finds it taken skips its turn. */
static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;

/* Between and after windows: asks cupti_life whether to detach (for good once the schedule is
 * done) or to detach and re-attach. Writer thread, without sp_col.lock. This function can't fail. */
static enum sp_life_act life_tick(uint64_t now, bool early)
{
	struct sp_life_view v = { .policy = sp_col.cfg.detach_between, .early = early };
	pthread_mutex_lock(&sp_col.lock);
	int64_t step = sp_col.step;
	const struct sp_schedule *sched = sp_col.mk[sp_col.cur].schedule;
	v.marker = sp_col.mk[sp_col.cur].kind;
	struct sp_stepdet *det = sp_col.mk[0].det;
	int aut = sp_auto_life(&v, det, &step);
	if (sp_col.nmk > 1 || sp_col.mk[0].name)
		v.policy = SP_DETACH_NEVER; /* phases: steps of several schedules; only the final detach */
	v.done = sp_col.done;
	bool writing = sp_col.activities_on || sp_col.open != NULL; /* a window not yet written */
	for (int i = 0; i < SP_MAX_WINDOWS; i++)
		writing |= sp_col.win[i].used;
	/* an on-demand request waits for steps: CUPTI must be there for them; recording the
	 * detector's tokens (a corpus run): the stream is replayed against its truth from the first
	 * token to the last, so CUPTI stays for the whole run */
	bool held = sp_col.collecting || sp_od_busy() || sp_tokrec_on;
	pthread_mutex_unlock(&sp_col.lock);
	held |= sp_share_busy(); /* the program's profiler works through stepprof's subscription */
	v.busy = held || writing;
	v.closing = writing && !held;
	/* only whether the next window is SP_LIFE_MIN_GAP steps away or more matters */
	v.steps_to_window =
		(v.busy && !v.closing) || v.done || v.policy == SP_DETACH_NEVER || sp_hook_need_attach()
			? 0
			: sp_life_steps_to_window(sched, step,
						  early ? SP_LIFE_EARLY_GAP : SP_LIFE_MIN_GAP + SP_LIFE_PARK_MARGIN);
	v.hook_ok = sp_hook_proven() || sp_pyglue_counts(); /* the bridge's steps need no proof */
	enum sp_life_act act = sp_cupti_life_tick(&v, step, now, &sp_col.sub);
	if (aut)
		sp_auto_life_after(&v, det, act);
	if (act == SP_LIFE_DETACH) {
		sp_share_detached(); /* the program's profiler gets CUPTI itself */
		sp_host_min_bytes = SIZE_MAX; /* host allocations: nothing will be recorded again */
		sp_writer_set_pass_ns(SP_DETACHED_PASS_NS); /* nothing to drain but the odd NCCL event */
	}
	return act;
}

bool sp_act_early_tick(void)
{
	static bool once; /* parked before the first window once and re-attached: no second park */
	if (__atomic_load_n(&sp_col.writer_started, __ATOMIC_ACQUIRE) || !sp_col.active ||
	    pthread_mutex_trylock(&tick_lock))
		return false;
	/* the writer ticks once it exists; a re-attach before the window is near (automatic
	 * detection checking a step that the detach itself made long, the program's profiler, a
	 * trigger) leaves stepprof attached until the window, so that parks and checks cannot alternate */
	if (!__atomic_load_n(&sp_col.writer_started, __ATOMIC_ACQUIRE) &&
	    life_tick(sp_now_ns(), !once) == SP_LIFE_UNPARK)
		once = true;
	pthread_mutex_unlock(&tick_lock);
	return true;
}

void sp_life_tick(uint64_t now)
{
	if (pthread_mutex_trylock(&tick_lock) == 0) {
		(void)life_tick(now, false);
		pthread_mutex_unlock(&tick_lock);
	}
}
