/* SPDX-License-Identifier: MIT */
/* collector.c - the collector's life cycle: loads the configuration and CUPTI at CUDA's
 * initialisation (sp_collector_inject), closes the last window at exit, goes inert in a fork
 * child; defines the shared state (internal.h) and its small helpers. Never exits or aborts:
 * every failure warns once and disables collection. */
#include <dlfcn.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "collector/base/clock.h"
#include "collector.h"
#include "collector/hold/cupti_life.h"
#include "collector/cupti/cupti_share.h"
#include "collector/hold/hooklearn.h"
#include "collector/hold/markhook.h"
#include "collector/base/intern.h"
#include "internal.h"
#include "collector/base/log.h"
#include "collector/ondemand/ondemand.h"
#include "collector/out/ring.h"
#include "collector/out/tokrec.h"
#include "collector/out/writer.h"

struct sp_col_state sp_col = { .lock = PTHREAD_MUTEX_INITIALIZER, .step = -1 };
__thread struct sp_col_thread sp_thr;
static int owner_pid; /* the process that subscribed (a fork child is not it) */
#define SP_SCHEDULE_SCAN 1000000 /* steps searched at exit for the schedule's first RECORD step */

/* ---- life cycle ---- */

static void on_fork_child(void)
{
	sp_host_min_bytes = SIZE_MAX;
	atomic_store(&sp_launch_want, SP_LAUNCH_OFF); /* the launch hooks pass through, learning or not */
	atomic_store(&sp_launch_guard, 0);             /* ... and count nothing (no subscriber here) */
	sp_cupti_life_forked(); /* no detach to wait for: forked mid-detach */
	atomic_store(&sp_devmem_want, 0);
	sp_col.disabled = 1;
	sp_col.active = 0;
	sp_ring_disable_all();
}

/* At exit, if the schedule wanted steps and no window was ever opened, says why on stderr (an
 * empty trace must not pass in silence). Caller holds sp_col.lock. This function can't fail. */
static void explain_no_window(void)
{
	const struct sp_mk *m = &sp_col.mk[sp_col.cur];
	const char *ph = m->name ? sp_intern_lookup(m->name) : NULL;
	char pre[64] = "";
	int64_t first = -1;
	if (sp_col.rt[sp_col.cur].windows || sp_col.disabled)
		return;
	if (sp_out_failure()[0]) { /* the output failed, not the schedule */
		if (sp_col.unwritten)
			sp_warn_once("no trace written (%s): the %llu step%s the schedule records from step %lld to %lld "
				     "%s lost",
				     sp_out_failure(), (unsigned long long)sp_col.unwritten, sp_col.unwritten == 1 ? "" : "s",
				     (long long)sp_col.unwritten_first, (long long)sp_col.unwritten_last,
				     sp_col.unwritten == 1 ? "is" : "are");
		return;
	}
	if (ph)
		snprintf(pre, sizeof pre, "phase %s: ", ph);
	if (!atomic_load_explicit(&sp_col.had_context, memory_order_relaxed))
		return; /* no CUDA context: a launcher (torchrun counts devices) had nothing to profile */
	for (int64_t k = 0; k < SP_SCHEDULE_SCAN && first < 0; k++)
		if (sp_win_is_record(sp_schedule_action(m->schedule, k)))
			first = k;
	if (first < 0)
		return; /* the schedule records nothing */
	const struct sp_det_how *h = &m->det->how;
	const char *anchor = sp_intern_lookup(h->anchor & ~SP_AUTOSTEP_FLAGS);
	char msg[700];
	int kind = m->det->kind; /* the detector's: kind = auto may have switched to optimizer steps */
	if (kind == SP_MARK_AUTO && (sp_stepdet_undecided(m->det, msg, sizeof msg) ||
				     sp_stepdet_why_none(m->det, first, msg, sizeof msg)))
		sp_warn("%sno step recorded: %s", pre, msg);
	else if (sp_col.step < 0 && sp_pyglue_explain(msg, sizeof msg))
		sp_warn("%sno step recorded: %s", pre, msg);
	else if (kind == SP_MARK_OPTIMIZER)
		sp_warn("%sno step recorded: the program ended in step %lld and the schedule records from step "
			"%lld (the program's optimizer steps%s, every %u)",
			pre, (long long)sp_col.step, (long long)first, h->from_auto ? ", found by kind = auto" : "",
			h->every);
	else if (kind == SP_MARK_AUTO)
		sp_warn("%sno step recorded: the program ended in step %lld and the schedule records from step "
			"%lld; automatic boundaries come %s each '%s' (every %u): if the program ran longer, "
			"that call stopped recurring - set an explicit [marker] (docs/STEPS.md)",
			pre, (long long)sp_col.step, (long long)first, h->after ? "after" : "before",
			anchor ? anchor : "?", h->every);
	else if (sp_col.step < 0)
		sp_warn("%sno step recorded: the %s marker '%s' never occurred", pre,
			sp_marker_kind_name((enum sp_marker_kind)m->kind), m->pattern);
	else
		sp_warn("%sno step recorded: the program ended in step %lld and the schedule records from step "
			"%lld (%s marker '%s', every %d)",
			pre, (long long)sp_col.step, (long long)first,
			sp_marker_kind_name((enum sp_marker_kind)m->kind), m->pattern, m->every);
}

/* At exit, if automatic detection had locked, then lost the loop and never found it again, says
 * so (the steps after the change are missing). Caller holds sp_col.lock. This function can't fail. */
static void explain_relearning(void)
{
	char msg[700];
	const struct sp_mk *m = &sp_col.mk[sp_col.cur];
	if (sp_col.rt[sp_col.cur].windows && m->det->how.relocks + m->det->how.mismatches && m->kind == SP_MARK_AUTO &&
	    sp_stepdet_undecided(m->det, msg, sizeof msg))
		sp_warn("at exit: the program's loop changed after step %lld and %s", (long long)sp_col.step, msg);
}

static void on_exit_process(void)
{
	if (!sp_col.active)
		return;
	sp_pyglue_stop(); /* the Python bridge polls no more */
	sp_od_stop(); /* no re-attach or time range from now on */
	sp_cupti_life_freeze();
	pthread_mutex_lock(&sp_col.lock);
	uint64_t now = sp_now_ns();
	sp_col.at_exit = 1; /* the steps ended here end at exit, not at a boundary */
	for (int i = 0; i < sp_col.nmk; i++) {
		sp_ph_switch(i);
		if (sp_col.open && sp_col.open->mk == i) /* the program ended inside a window: close it here */
			sp_col.action = SP_ACT_RECORD_AND_SAVE;
		sp_win_end_step(now, 0);
		explain_no_window();
		explain_relearning();
	}
	sp_col.done = 1;
	pthread_mutex_unlock(&sp_col.lock);
	if (sp_col.writer_started > 0) {
		sp_act_flush(false); /* nothing if detached: no CUPTI call may bring it back */
		for (int i = 0; i < SP_EXIT_WAIT_POLLS; i++) { /* windows close before the trace ends */
			int closing = 0;
			pthread_mutex_lock(&sp_col.lock);
			for (int k = 0; k < SP_MAX_WINDOWS; k++)
				closing |= sp_col.win[k].used && sp_col.win[k].closing;
			pthread_mutex_unlock(&sp_col.lock);
			if (!closing)
				break;
			sp_writer_kick();
			usleep(SP_EXIT_POLL_US);
		}
		sp_writer_stop();
	}
	sp_act_say_outside();
	sp_win_say_end_waits();
	sp_cupti_life_say_waits();
	sp_col.active = 0;
}

/* ---- helpers every collector file uses (internal.h) ---- */

uint32_t sp_coll_tid(void)
{
	static __thread uint32_t t;
	if (!t)
		t = (uint32_t)syscall(SYS_gettid);
	return t;
}

void sp_coll_saw_context(void)
{
	if (!atomic_load_explicit(&sp_col.had_context, memory_order_relaxed))
		atomic_store_explicit(&sp_col.had_context, 1, memory_order_relaxed);
}

/* Interned id of a name, cached per thread by address. A hit is checked against the name: a module
 * unloaded and another loaded (XLA autotunes that way) may put another kernel's name where a
 * name CUPTI handed out was. */
uint32_t sp_coll_name_id(const char *s)
{
	if (!s)
		return 0;
	size_t h = ((uintptr_t)s >> 3) & (SP_NAME_CACHE - 1);
	const char *was = sp_thr.np[h] == s ? sp_intern_lookup(sp_thr.nid[h]) : NULL;
	if (was && !strcmp(was, s))
		return sp_thr.nid[h];
	uint32_t id = sp_intern(s);
	sp_thr.np[h] = s;
	sp_thr.nid[h] = id;
	return id;
}

int sp_coll_glob(const char *pat, const char *s)
{
	return s && fnmatch(pat, s, 0) == 0;
}

void sp_coll_push(struct sp_event *ev)
{
	if (!sp_thr.named) {
		char nm[32] = "";
		struct sp_event t = { .kind = SP_EV_THREAD, .device = SP_NO_DEVICE, .tid = sp_coll_tid() };
		sp_thr.named = 1;
		pthread_getname_np(pthread_self(), nm, sizeof nm);
		t.name = sp_intern(nm[0] ? nm : "thread");
		t.start = t.end = sp_now_ns();
		sp_ring_push(&t);
	}
	sp_ring_push(ev);
}

/* Subscribes to CUPTI now, or starts parked (subscribed before the first window) where the steps
 * come without it: automatic detection learning from the preload's hooks, or the Python bridge's
 * steps. Returns what the subscription returned (CUPTI_SUCCESS when parked). */
static CUptiResult start_cupti(const struct sp_cupti_hooks *hooks)
{
	sp_cupti_life_watch(&sp_hook_watch); /* the hold tells the hooks when it parks and attaches */
	if (sp_hooklearn_wanted()) {
		sp_cupti_life_start_parked(hooks);
		sp_hooklearn_begin();
		return CUPTI_SUCCESS;
	}
	if (sp_pyglue_parks()) {
		sp_cupti_life_start_parked(hooks);
		return CUPTI_SUCCESS;
	}
	return sp_cupti_life_attach(hooks, &sp_col.sub);
}

void sp_collector_inject(void)
{
	struct sp_cfg_errors errs = { 0 };
	char why[512];
	static int once;
	if (once++)
		return;
	if (sp_cfg_load(&sp_col.cfg, NULL, &errs) > 0) {
		for (int i = 0; i < errs.count && i < SP_CFG_MAX_ERRORS; i++)
			sp_warn("%s", errs.msg[i]);
		sp_warn("configuration errors: not profiling this process (check with 'stepprof check')");
		return;
	}
	if (!sp_col.cfg.enabled)
		return;
	sp_ranks_detect(&sp_col.ri, NULL);
	if (sp_col.ri.problem[0])
		sp_warn("%s", sp_col.ri.problem);
	if (sp_col.ri.explicit_bad) { /* the user's own rank setting: never guess past it */
		sp_warn("a STEPPROF_ rank variable is malformed: not profiling this process");
		return;
	}
	if (sp_col.ri.rank >= 0 && !sp_rankset_has(&sp_col.cfg.ranks, sp_col.ri.rank))
		return; /* a rank the environment does not give is decided at the first window */
	if (sp_cupti_load(sp_col.cfg.cupti_library, why, sizeof why) < 0) {
		sp_warn("cannot load CUPTI: %s; not profiling", why);
		return;
	}
	sp_col.buffer_bytes = sp_col.cfg.cupti_buffer_bytes;
	sp_col.demangle = (char *(*)(const char *, char *, size_t *, int *))dlsym(RTLD_DEFAULT, "__cxa_demangle");
	if (sp_ph_init() < 0)
		return; /* warned */
	sp_tokrec_start(); /* before sp_cbset_arm: the truth's API calls are classified there */
	sp_ops_start();    /* ... and which library NVTX injects is chosen there */
	if (sp_cbset_arm() < 0) {
		sp_tokrec_stop();
		return;
	}
	/* through cupti_share.c: a profiler inside the program is served by this subscription */
	sp_share_install();
	static const struct sp_cupti_hooks hooks = { sp_share_on_callback, sp_act_buffer_requested,
						     sp_share_buffer_completed, sp_act_timestamp, sp_share_armed };
	sp_ring_configure(sp_col.cfg.ring_events);
	sp_writer_set_tick(sp_act_writer_tick, NULL);
	sp_writer_set_seen(sp_act_writer_seen);
	CUptiResult r = start_cupti(&hooks);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		const char *msg = "?";
		sp_cupti.cuptiGetResultString(r, &msg);
		sp_warn("CUPTI is already in use in this process (another profiler such as nsys, "
			"compute-sanitizer or torch.profiler subscribed first: %s); stepprof collects nothing here",
			msg);
		return;
	} else if (r != CUPTI_SUCCESS) {
		sp_writer_set_tick(NULL, NULL);
		sp_writer_set_seen(NULL);
		return; /* warned */
	}
	/* the allocation hooks keep device memory while CUPTI is not there (learning, parked) */
	atomic_store(&sp_devmem_want, sp_col.cfg.device_memory ? 1 : 0);
	owner_pid = getpid();
	pthread_atfork(NULL, NULL, on_fork_child);
	atexit(on_exit_process);
	sp_col.active = 1;
	if (sp_col.cfg.host_malloc && !sp_col.malloc_hooks)
		sp_warn("host_malloc = true, but stepprof's malloc hooks are not this process's allocator (libstepprof-"
			"nomalloc.so, or loaded with dlopen): host memory is not tracked; preload libstepprof.so instead");
	else
		sp_host_min_bytes = sp_col.cfg.host_malloc ? (size_t)sp_col.cfg.host_malloc_min : SIZE_MAX;
	for (int i = 0; i < sp_col.nmk; i++)
		sp_info("profiling rank %d (%s), %s%s%smarker %s '%s' every %d", sp_col.ri.rank, sp_col.ri.source,
			sp_col.mk[i].name ? "phase " : "", sp_col.mk[i].name ? sp_intern_lookup(sp_col.mk[i].name) : "",
			sp_col.mk[i].name ? ": " : "", sp_marker_kind_name((enum sp_marker_kind)sp_col.mk[i].kind),
			sp_col.mk[i].pattern, sp_col.mk[i].every);
	sp_od_start(); /* warned if it fails: the schedule's windows still come */
	sp_pyglue_start(); /* in a CPython process whose markers take the program's own steps */
}

int sp_collector_let_go_cupti(void)
{
	return sp_col.active && !sp_col.disabled && owner_pid == getpid() &&
	       atomic_load(&sp_hold.state) == SP_HOLD_GONE;
}

int sp_collector_owns_cupti(void)
{
	/* after the last window stepprof let go of CUPTI: another profiler may take it */
	return sp_col.active && !sp_col.disabled && owner_pid == getpid() &&
	       atomic_load(&sp_hold.state) != SP_HOLD_GONE;
}
