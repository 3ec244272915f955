/* SPDX-License-Identifier: MIT */
/* hooklearn.c - see hooklearn.h. Application threads (the launch hooks, CUPTI's launch callbacks)
 * and the writer thread (the switch, through markhook.c's sp_auto_life). The launch hooks' hot
 * path is one relaxed load in preload/procaddr.c; nothing here allocates or takes a lock unless
 * a token is fed to the detector. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "collector/base/clock.h"
#include "collector/collector.h"
#include "cupti_life.h"
#include "hooklearn.h"
#include "collector/base/intern.h"
#include "collector/internal.h"
#include "collector/base/log.h"
#include "markhook.h"
#include "decide/stepdet.h"
#include "collector/out/tokrec.h"
#include "trace/tokens.h"

_Atomic int sp_launch_want;

static struct {
	_Atomic bool begun;      /* this process learned from the hooks (the proof is wanted) */
	_Atomic bool on;         /* learning from the hooks now */
	_Atomic bool failed;     /* the hooks cannot learn here (said once) */
	_Atomic unsigned seen;   /* driver launches CUPTI reported inside a launch hook */
	_Atomic unsigned unseen; /* ... outside any (said once) */
	_Atomic int unhooked;    /* the first launch lookup left unhooked: 1 being written, 2 in `lookup` */
	char lookup[320];        /* ... in words */
} hook_learning;

/* why hook learning cannot be trusted once a launch lookup was left unhooked */
#define UNHOOKED_WHY "a launch lookup stepprof left unhooked: %s"

static __thread int launch_depth; /* launch hooks in progress on this thread */
static __thread int launch_fed;   /* ... and the outermost one fed the detector a token */
static __thread uint32_t launch_id; /* ... the name the hook found for it (0 none) */

bool sp_hooklearn_wanted(void)
{
	const struct sp_config *c = &sp_col.cfg;
	const char *why = sp_cfg_learn_cupti_why(c);
	if (!why && (sp_col.nmk != 1 || sp_col.mk[0].name || sp_col.mk[0].kind != SP_MARK_AUTO))
		why = "phases are set"; /* (as the configuration says: a safety net) */
	else if (!why && sp_tokrec_on)
		why = "the detector's tokens are recorded (STEPPROF_RECORD_TOKENS)";
	static char unhooked[sizeof hook_learning.lookup + 64];
	if (!why && atomic_load_explicit(&hook_learning.unhooked, memory_order_acquire) == 2) {
		snprintf(unhooked, sizeof unhooked, UNHOOKED_WHY, hook_learning.lookup);
		why = unhooked;
	}
	if (why && c->marker_learn == SP_LEARN_HOOKS)
		sp_info("[marker] learn = hooks: learning with CUPTI all the same (%s)", why);
	return why == NULL;
}

void sp_hooklearn_begin(void)
{
	atomic_store(&hook_learning.begun, true);
	atomic_store(&hook_learning.on, true);
	atomic_store(&sp_launch_want, SP_LAUNCH_LEARN);
	sp_info("automatic steps: learning from stepprof's hooks, not subscribed to CUPTI until it locks "
		"([marker] learn = %s)",
		sp_col.cfg.marker_learn == SP_LEARN_AUTO ? "auto" : "hooks");
}

bool sp_hooklearn_on(void)
{
	return atomic_load_explicit(&hook_learning.on, memory_order_relaxed);
}

void sp_hooklearn_end(int attached)
{
	atomic_store(&hook_learning.on, false);
	/* the proof runs only where CUPTI reports launches; once one failed, nothing to prove */
	atomic_store(&sp_launch_want,
		     attached && atomic_load(&hook_learning.begun) &&
		     	!atomic_load(&hook_learning.failed) ? SP_LAUNCH_MARK : SP_LAUNCH_OFF);
}

void sp_hooklearn_abandon(void)
{
	atomic_store(&hook_learning.on, false);
	atomic_store(&hook_learning.begun, false);
	atomic_store(&sp_launch_want, SP_LAUNCH_OFF);
}

void sp_hooklearn_proof(int on)
{
	if (sp_hooklearn_on() || !atomic_load(&hook_learning.begun) || atomic_load(&hook_learning.failed))
		return;
	int from = on ? SP_LAUNCH_OFF : SP_LAUNCH_MARK;
	atomic_compare_exchange_strong(&sp_launch_want, &from, on ? SP_LAUNCH_MARK : SP_LAUNCH_OFF);
}

/* Hands over to CUPTI now, on this application thread (none of stepprof's locks held): once. */
static void hand_over(void)
{
	if (!atomic_exchange(&hook_learning.on, false))
		return; /* another thread does, or did */
	atomic_store(&sp_launch_want, SP_LAUNCH_OFF);
	/* 0: attached already (the writer's tick unparked first: the proof goes on), or the attach failed
	 * (warned: the rest of the run is not profiled) */
	if (!sp_cupti_life_attach_now(&sp_col.sub, sp_col.step, false)) {
		sp_hooklearn_end(atomic_load(&sp_hold.state) == SP_HOLD_ATTACHED);
		return;
	}
	/* the anchor's hook from now on, as the writer's tick would (it runs from the first window): its
	 * calls are proven against CUPTI's and, once proven, its exit may park until the first window */
	pthread_mutex_lock(&sp_col.lock);
	uint32_t anchor = sp_stepdet_anchor_name(sp_col.mk[0].det);
	pthread_mutex_unlock(&sp_col.lock);
	sp_hook_follow(anchor);
}

void sp_hooklearn_fail(const char *why)
{
	if (!atomic_exchange(&hook_learning.failed, true))
		sp_info("automatic steps: cannot learn from stepprof's hooks (%s): learning with CUPTI instead", why);
	hand_over();
}

void sp_hooklearn_need_cupti(const char *why)
{
	if (!sp_hooklearn_on())
		return;
	sp_info("automatic steps: %s while learning from stepprof's hooks: attaching to CUPTI", why);
	hand_over();
}

void sp_hooklearn_check(void)
{
	uint32_t anchor = sp_stepdet_anchor_name(sp_col.mk[0].det);
	if (!anchor || !sp_hooklearn_on())
		return;
	sp_info("automatic steps: locked on '%s' while learning from stepprof's hooks: attaching to CUPTI",
		sp_intern_lookup(anchor));
	hand_over();
}

bool sp_hooklearn_failed(void)
{
	return atomic_load(&hook_learning.failed);
}

void sp_hooklearn_cupti_launch(const char *symbol)
{
	if (atomic_load_explicit(&sp_launch_want, memory_order_relaxed) == SP_LAUNCH_OFF)
		return;
	if (launch_depth > 0) {
		atomic_fetch_add_explicit(&hook_learning.seen, 1, memory_order_relaxed);
		uint32_t cupti = sp_coll_name_id(symbol);
		if (launch_id && cupti && launch_id != cupti && !atomic_exchange(&hook_learning.failed, true)) {
			atomic_store(&sp_launch_want, SP_LAUNCH_OFF);
			sp_warn("the driver names a kernel '%s' where CUPTI names it '%s': the steps learned from "
				"stepprof's hooks before the first window may differ from CUPTI's; automatic detection "
				"learns with CUPTI from now on (set [marker] learn = cupti to avoid this)",
				sp_intern_lookup(launch_id), symbol);
		}
		return;
	}
	if (atomic_fetch_add(&hook_learning.unseen, 1) == 0) {
		atomic_store(&hook_learning.failed, true);
		atomic_store(&sp_launch_want, SP_LAUNCH_OFF);
		int known = atomic_load_explicit(&hook_learning.unhooked, memory_order_acquire) == 2;
		sp_warn("a kernel launch came that stepprof's launch hooks did not see (kernel '%s'; %s%s): the steps "
			"learned from the hooks before the first window may be off; automatic detection learns with "
			"CUPTI from now on (set [marker] learn = cupti to avoid this)",
			symbol ? symbol : "unnamed",
			known ? "the first launch lookup stepprof left unhooked: "
			      : "no launch lookup was left unhooked: a launch function found another way, or a launch "
				"call that is not hooked",
			known ? hook_learning.lookup : "");
	}
}

/* A launch function the hooks do not see: before hook learning, sp_hooklearn_wanted says no; during it,
 * hands over to CUPTI now (this thread, no stepprof lock); after, the proof names it if a launch uses it. */
void sp_collector_lookup_unhooked(const char *lookup, const char *why, int what)
{
	sp_info("%s is not hooked: %s", lookup, why);
	if (what == SP_UNHOOKED_ALLOC && sp_col.cfg.device_memory) {
		sp_warn("%s is not hooked (%s): device allocations made through it while stepprof is not "
			"subscribed to CUPTI (learning from its hooks, parked between windows) are not tracked; "
			"memory levels may miss them",
			lookup, why);
		return;
	}
	int free_ = 0;
	if (what != SP_UNHOOKED_LAUNCH || !atomic_compare_exchange_strong(&hook_learning.unhooked, &free_, 1))
		return;
	snprintf(hook_learning.lookup, sizeof hook_learning.lookup, "%s (%s)", lookup, why);
	atomic_store_explicit(&hook_learning.unhooked, 2, memory_order_release);
	if (sp_hooklearn_on()) {
		char msg[sizeof hook_learning.lookup + 64];
		snprintf(msg, sizeof msg, UNHOOKED_WHY, hook_learning.lookup);
		sp_hooklearn_fail(msg);
	}
}

uint32_t sp_collector_kernel_name(const char *mangled)
{
	return mangled ? sp_intern(mangled) : 0;
}

int sp_collector_kernel_named(uint32_t id, const char *mangled)
{
	const char *s = sp_intern_lookup(id);
	return s && mangled && !strcmp(s, mangled);
}

int sp_collector_launch_enter(uint32_t name)
{
	if (launch_depth++ > 0)
		return 1;
	launch_fed = 0;
	launch_id = name;
	sp_coll_saw_context(); /* a launch */
	if (atomic_load_explicit(&sp_launch_want, memory_order_relaxed) != SP_LAUNCH_LEARN || !sp_hooklearn_on())
		return 1;
	if (!name) {
		sp_hooklearn_fail("the driver does not name kernels: neither cuFuncGetName nor cuKernelGetName (CUDA "
				  "12.3+) named a launch");
		return 1;
	}
	/* as CUPTI's driver launch callback feeds it (callbacks.c detect_enter, tokglue.c) */
	if (!sp_col.done && (sp_stepdet_wants(sp_col.mk[0].det) & SP_WANT_LAUNCH)) {
		launch_fed = 1;
		/* the counter clock, as CUPTI's launch callbacks stamp theirs (clock.h; the tokens anchor it) */
		sp_win_detect(0, SP_TOK_KERNEL, SP_TOKF_DRIVER, name, sp_thr_ns(0), 0, 0, 1);
		sp_hooklearn_check();
	}
	return 1;
}

void sp_collector_launch_exit(int h)
{
	if (!h || --launch_depth > 0)
		return;
	/* a step that begins after this launch: no CUPTI exit callback is there to begin it */
	if (launch_fed && sp_thr.after_pending)
		sp_win_after_exit(sp_thr_ns(1));
	launch_fed = 0;
}
