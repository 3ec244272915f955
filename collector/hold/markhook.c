/* SPDX-License-Identifier: MIT */
/* markhook.c - see markhook.h. Application threads (the hooks) and the writer thread (the switch). */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include "collector/base/clock.h"
#include "collector/collector.h"
#include "cupti_life.h"
#include "collector/hookfns.h"
#include "hooklearn.h"
#include "collector/base/intern.h"
#include "collector/internal.h"
#include "decide/life.h"
#include "collector/base/log.h"
#include "markhook.h"
#include "collector/ondemand/ondemand.h"
#include "trace/tokens.h"
#include "collector/out/writer.h"

#define WAIT_ATTACH_NS 1000000000ull /* longest a marker call waits for a re-attach before its window */

/* WANT_NESTED: a driver function that a runtime marker's function calls (hookfns.h SP_HOOK_NESTED) */
enum { WANT_NONE, WANT_MARKER, WANT_GRAPH, WANT_NESTED };

#define HOOK_UNCOUNTED (-2) /* sp_collector_hook_enter: not a hooked function, not in flight */
#define HOOK_GLAUNCH (-3)   /* ... a graph launch, in flight, no marker's */

/* A graph launch: stepprof may detach with the program's graphs alive only if every one comes
 * through here (it waits while CUPTI is finalised; cupti_life.h sp_cupti_life_glaunch). */
static bool glaunch(int fn)
{
	return fn == SP_HOOK_cudaGraphLaunch || fn == SP_HOOK_cudaGraphLaunch_ptsz || fn == SP_HOOK_cuGraphLaunch ||
	       fn == SP_HOOK_cuGraphLaunch_ptsz;
}

/* sp_thr.hook_pending: where the proof stands on this thread's marker call that CUPTI reported
 * outside any hook: none, waiting for a nested driver call, one seen, more than one seen. */
enum { PEND_NONE, PEND_WAIT, PEND_ONE, PEND_MANY };

static const struct {
	uint8_t rt, drv; /* enum sp_hook_fn */
} nested[] = {
#define SP_NESTED_ROW(rt, drv) { SP_HOOK_##rt, SP_HOOK_##drv },
	SP_HOOK_NESTED(SP_NESTED_ROW)
#undef SP_NESTED_ROW
};

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
	uint32_t name[SP_HOOK_N];        /* interned name of a marker's function (a nested one: its caller's) */
	uint8_t drv[SP_HOOK_N];          /* the name is a driver function's (1) or a runtime function's (0) */
	uint8_t flags[SP_HOOK_N];        /* its detector token's flags (driver, synchronising) */
	uint8_t tok[SP_HOOK_N];          /* the detector token a call is while learning from the hooks, 0 none */
	_Atomic uint32_t anchor;         /* auto: the anchor call the hooks follow (sp_hook_follow), 0 none */
	uint32_t probes;                 /* auto: the detector's probes said so far (writer thread) */
	_Atomic int counting;            /* the hooks count marker calls (stepprof is detached) */
	_Atomic bool need_attach;        /* a marker call waits for the re-attach before its window */
	_Atomic bool disarmed;           /* detached for good: the hooks see nothing (sp_hook_disarm) */
	_Atomic unsigned seen, unseen;   /* marker calls CUPTI reported inside / outside a hook */
	_Atomic unsigned nested;         /* ... of which proven by a nested driver call (the runtime unseen) */
	_Atomic unsigned stray;          /* nested driver calls made outside a marker call */
	_Atomic bool stray_said;         /* strays keep stepprof attached (said once) */
	_Atomic bool odd_said;           /* a nested call from an unknown site while counting (said once) */
	_Atomic unsigned extra;          /* hooked marker calls CUPTI did not count as marker calls */
	_Atomic bool graph;              /* a graph was captured or created while counting */
	_Atomic bool slow;               /* a re-attach outlasted WAIT_ATTACH_NS (said once) */
} marker_hooks;

/* The places in a runtime (return addresses) that nested driver calls come from: one seen inside a marker
 * call (good) and never outside (bad) counts steps while detached. Lock-free: a slot's pc is claimed once. */
#define SP_SITES 32
static struct {
	_Atomic uintptr_t pc;       /* 0: free */
	_Atomic unsigned good, bad; /* nested calls from here inside / outside a marker call */
} nest_sites[SP_SITES];
static _Atomic bool sites_full; /* a place found no slot: the proof fails */

static __thread int learn_depth; /* hooked calls on this thread entered while learning from the hooks */
static __thread int learn_fed;   /* ... and the outermost one fed the detector a token */
static __thread struct {
	int watch;     /* the outermost hooked marker call on this thread was made while attached */
	int reported;  /* ... and CUPTI reported it as a marker call */
	uintptr_t pc;  /* the place of the nested driver call in the marker call in progress */
} this_call;

/* The slot of place pc: found, or claimed if add (else -1). Never fails otherwise. */
static int site(uintptr_t pc, int add)
{
	for (int i = 0; i < SP_SITES; i++) {
		uintptr_t cur = atomic_load_explicit(&nest_sites[i].pc, memory_order_acquire);
		if (cur == pc)
			return i;
		if (!cur) {
			if (!add)
				return -1;
			uintptr_t zero = 0;
			if (atomic_compare_exchange_strong(&nest_sites[i].pc, &zero, pc) || zero == pc)
				return i;
		}
	}
	if (add)
		atomic_store(&sites_full, true);
	return -1;
}

/* Every place a marker call's nested driver call came from was never seen outside a marker call. */
static bool sites_ok(void)
{
	if (atomic_load(&sites_full))
		return false;
	for (int i = 0; i < SP_SITES && atomic_load(&nest_sites[i].pc); i++)
		if (atomic_load(&nest_sites[i].good) && atomic_load(&nest_sites[i].bad))
			return false;
	return true;
}

/* A nested call from place pc while counting stands for a marker call (1) or not (0). */
static int site_counts(uintptr_t pc)
{
	int i = site(pc, 0);
	if (i >= 0)
		return atomic_load(&nest_sites[i].good) > 0 && atomic_load(&nest_sites[i].bad) == 0;
	if (!atomic_exchange(&marker_hooks.odd_said, true))
		sp_warn("a driver call that stands for marker calls came from a place in the runtime not seen "
			"while attached to CUPTI: not counted as a step (if it was a marker call, the step numbers "
			"after it are one short until the next window re-attaches)");
	return 0;
}

void sp_hook_arm(void)
{
	const struct sp_mk *mk = &sp_col.mk[0];
	int api = sp_col.nmk == 1 && !mk->name && mk->kind == SP_MARK_API; /* phases: no parking */
	for (int i = 0; i < SP_HOOK_N; i++) {
		int m = api && sp_coll_glob(mk->pattern, fns[i].name);
		const char *n = fns[i].name;
		marker_hooks.name[i] = sp_intern(n);
		marker_hooks.drv[i] = fns[i].drv;
		/* as tokglue.c classifies the call for automatic detection (cbsets.c's api_sync) */
		marker_hooks.flags[i] = (uint8_t)((fns[i].drv ? SP_TOKF_DRIVER : 0) |
				       (sp_coll_glob(fns[i].drv ? "cu*Synchronize*" : "cuda*Synchronize*", n) ||
							!strcmp(n, "cudaMemcpy") || !strcmp(n, "cuMemcpyDtoH")
						? SP_TOKF_SYNC
						: 0));
		marker_hooks.tok[i] = sp_cbset_token_kind(n, fns[i].drv);
		atomic_store(&marker_hooks.want[i], m ? WANT_MARKER : fns[i].graph ? WANT_GRAPH : WANT_NONE);
	}
	/* learning from the hooks: a driver call that may be a runtime call's own (a runtime linked in
	 * statically, whose calls the hooks cannot see) is no token, since CUPTI would name the token
	 * after the runtime call; only launches and the runtime's hooked calls stand for it */
	for (size_t k = 0; k < sizeof nested / sizeof nested[0]; k++)
		marker_hooks.tok[nested[k].drv] = 0;
	/* the driver functions a marked runtime function calls count its calls under its name, where
	 * the runtime call itself is out of the hooks' sight; a function marked itself stays a marker */
	for (size_t k = 0; k < sizeof nested / sizeof nested[0]; k++) {
		unsigned rt = nested[k].rt, drv = nested[k].drv;
		if (atomic_load(&marker_hooks.want[rt]) != WANT_MARKER ||
		    atomic_load(&marker_hooks.want[drv]) != WANT_NONE)
			continue;
		marker_hooks.name[drv] = marker_hooks.name[rt];
		marker_hooks.drv[drv] = 0;
		marker_hooks.flags[drv] = marker_hooks.flags[rt];
		atomic_store(&marker_hooks.want[drv], WANT_NESTED);
	}
}

int sp_hook_follow(uint32_t anchor)
{
	const struct sp_mk *mk = &sp_col.mk[0];
	int fn = -1;
	if (sp_col.nmk != 1 || mk->name || mk->kind != SP_MARK_AUTO)
		return -1;
	for (int i = 0; anchor && i < SP_HOOK_N && fn < 0; i++)
		if (marker_hooks.name[i] == anchor && !fns[i].graph && !strstr(fns[i].name, "GraphLaunch"))
			fn = i; /* a graph launch anchors graphs: detach_between = auto never parks on those */
	if (fn < 0)
		anchor = 0;
	if (atomic_load(&marker_hooks.anchor) == anchor)
		return fn;
	for (int i = 0; i < SP_HOOK_N; i++)
		atomic_store(&marker_hooks.want[i], i == fn ? WANT_MARKER : fns[i].graph ? WANT_GRAPH : WANT_NONE);
	atomic_store(&marker_hooks.seen, 0); /* another call: proven anew */
	atomic_store(&marker_hooks.unseen, 0);
	atomic_store(&marker_hooks.extra, 0);
	atomic_store(&marker_hooks.anchor, anchor);
	return fn;
}

/* The tick while learning from the hooks (sp_auto_life; the writer thread runs only once a window
 * opened, which an on-demand request may do): the hooks hand over to CUPTI themselves when the
 * detector locks (hooklearn.c), the tick re-attaches (det_busy) if they cannot go on. */
static void learn_tick(struct sp_life_view *v, struct sp_stepdet *det)
{
	if (!sp_hooklearn_failed() && !sp_stepdet_anchor_name(det)) {
		v->hook_learn = 1;
		return;
	}
	sp_hooklearn_end(0);
	v->det_busy = 1;
}

int sp_auto_life(struct sp_life_view *v, struct sp_stepdet *det, int64_t *step)
{
	/* switched to the program's optimizer steps (stepdet_py.c): an explicit marker from then on */
	if (sp_col.nmk != 1 || sp_col.mk[0].name || sp_col.mk[0].kind != SP_MARK_AUTO || det->kind != SP_MARK_AUTO)
		return 0;
	int64_t s = sp_stepdet_sched_step(det, sp_col.step);
	v->det_busy = !sp_stepdet_sparse_quiet(det) || s < 0;
	if (s >= 0)
		*step = s; /* the schedule's step: how far the next window is */
	if (sp_hooklearn_on())
		learn_tick(v, det);
	else if (!atomic_load(&marker_hooks.counting)) /* attached: follow the anchor (none while learning) */
		sp_hook_follow(sp_stepdet_anchor_name(det));
	if (!v->det_busy && sp_hook_proven())
		sp_stepdet_blind(det, 1); /* a park may come: no step may begin counting launches before it */
	if (det->probes != marker_hooks.probes) {
		marker_hooks.probes = det->probes;
		sp_info("automatic steps: a step took over 4 times more or less time than those whose launches were "
			"counted: the next step's launches are counted%s",
			atomic_load(&marker_hooks.counting) ? " (re-attaching to CUPTI for it)" : "");
	}
	return 1;
}

void sp_auto_life_after(const struct sp_life_view *v, struct sp_stepdet *det, int act)
{
	/* learning from the hooks: parked, but every launch is seen */
	int parked = (act == SP_LIFE_PARK || (v->parked && act == SP_LIFE_STAY)) && !v->hook_learn;
	pthread_mutex_lock(&sp_col.lock);
	sp_stepdet_blind(det, parked); /* parked: no launch is seen, the steps are checked by time alone */
	pthread_mutex_unlock(&sp_col.lock);
}

int sp_hook_cupti_anchor(uint32_t name)
{
	if (!name || name != atomic_load_explicit(&marker_hooks.anchor, memory_order_relaxed))
		return 0;
	if (sp_thr.hook_counted)
		return 1;
	/* an anchor is proven by its own hook only (no nested driver call stands for it) */
	if (sp_thr.hook_depth > 0) {
		atomic_fetch_add_explicit(&marker_hooks.seen, 1, memory_order_relaxed);
		this_call.reported = 1;
	} else if (atomic_fetch_add(&marker_hooks.unseen, 1) == 0)
		sp_info("a step anchor call came without going through stepprof's hooks (a runtime linked in "
			"statically, or a function looked up by hand): stepprof stays attached to CUPTI between "
			"windows");
	return 0;
}

void sp_hook_disarm(void)
{
	sp_hooklearn_end(0);
	atomic_store(&marker_hooks.disarmed, true);
	for (int i = 0; i < SP_HOOK_N; i++)
		atomic_store(&marker_hooks.want[i], WANT_NONE);
}

int sp_hook_cupti_marker(void)
{
	if (sp_thr.hook_counted)
		return 1;
	/* disarmed (an on-demand window after the final detach): the hooks are not watching, so a
	 * marker call CUPTI reports says nothing about them */
	if (atomic_load_explicit(&marker_hooks.disarmed, memory_order_relaxed))
		return 0;
	if (sp_thr.hook_depth > 0) {
		atomic_fetch_add_explicit(&marker_hooks.seen, 1, memory_order_relaxed);
		this_call.reported = 1;
	} else
		sp_thr.hook_pending = PEND_WAIT; /* the verdict at its end: did a nested driver call come? */
	return 0;
}

/* Nested driver calls stand for marker calls (some runtime is out of the hooks' sight) and one came
 * outside them: the hooks would count a step that is none. Said once. */
static void stray_check(void)
{
	if (!atomic_load(&marker_hooks.stray) || !atomic_load(&marker_hooks.nested) || sites_ok() ||
	    atomic_exchange(&marker_hooks.stray_said, true))
		return;
	uintptr_t both = 0, rel = 0;
	for (int i = 0; i < SP_SITES && atomic_load(&nest_sites[i].pc); i++)
		if (atomic_load(&nest_sites[i].good) && atomic_load(&nest_sites[i].bad))
			both = atomic_load(&nest_sites[i].pc);
	Dl_info di = { 0 };
	if (both && dladdr((void *)both, &di) && di.dli_fbase)
		rel = both - (uintptr_t)di.dli_fbase;
	sp_info("a driver function that stands for the marker's calls (the runtime's own are out of stepprof's "
		"sight) was also called outside them from the same place (%s+%#lx%s, in step %lld): stepprof stays "
		"attached to CUPTI between windows",
		di.dli_fname ? di.dli_fname : "?", (unsigned long)rel,
		atomic_load(&sites_full) ? ", or too many places" : "", (long long)sp_col.step);
}

void sp_hook_cupti_marker_end(void)
{
	int p = sp_thr.hook_pending;
	sp_thr.hook_pending = PEND_NONE;
	if (p == PEND_ONE) {
		int i = site(this_call.pc, 1);
		if (i >= 0)
			atomic_fetch_add(&nest_sites[i].good, 1);
		atomic_fetch_add_explicit(&marker_hooks.seen, 1, memory_order_relaxed);
		if (atomic_fetch_add(&marker_hooks.nested, 1) == 0)
			stray_check();
	} else if (p != PEND_NONE && atomic_fetch_add(&marker_hooks.unseen, 1) == 0)
		sp_info(p == PEND_MANY ? "a marker call made more than one of the driver calls that stand for it: "
					 "stepprof stays attached to CUPTI between windows"
				       : "a marker call came without going through stepprof's hooks (a runtime "
					 "linked in statically whose driver calls were not seen, or a function looked "
					 "up by hand): stepprof stays attached to CUPTI between windows");
}

bool sp_hook_proven(void)
{
	return atomic_load(&marker_hooks.seen) >= SP_HOOK_PROOF && atomic_load(&marker_hooks.unseen) == 0 &&
		atomic_load(&marker_hooks.extra) == 0 &&
	       (atomic_load(&marker_hooks.nested) == 0 || sites_ok());
}

void sp_hook_count(int on)
{
	atomic_store(&marker_hooks.counting, on);
	if (!on)
		atomic_store(&marker_hooks.need_attach, false);
}

bool sp_hook_need_attach(void)
{
	return atomic_load(&marker_hooks.need_attach);
}

bool sp_hook_graph_made(void)
{
	return atomic_exchange(&marker_hooks.graph, false);
}

/* Parked, a marker call began a step: once the next window is under SP_LIFE_UNPARK_AT steps away, wakes the
 * writer to re-attach now. The step is read without the lock (a late read delays by a step). Can't fail. */
static void kick_if_near(void)
{
	int64_t sched = sp_stepdet_sched_step(sp_col.mk[0].det, sp_col.step);
	if (sched >= 0 && sp_life_steps_to_window(sp_col.mk[0].schedule, sched, SP_LIFE_UNPARK_AT) < SP_LIFE_UNPARK_AT)
		sp_writer_kick();
}

/* The step that this call may end is the last before a window: waits (holding nothing) until the
 * writer thread has re-attached, so that CUPTI sees the window from its first call. */
static void wait_attached(void)
{
	atomic_store(&marker_hooks.need_attach, true);
	sp_writer_kick(); /* its passes are slow while parked: it re-attaches now */
	uint64_t t0 = sp_now_ns();
	while (atomic_load(&marker_hooks.counting)) {
		sp_act_early_tick(); /* no writer yet (parked before the first window): this thread re-attaches */
		if (sp_now_ns() - t0 > WAIT_ATTACH_NS) {
			if (!atomic_exchange(&marker_hooks.slow, true))
				sp_warn("re-attaching to CUPTI before a window took over 1 s: that window may lack its "
					"first records");
			return;
		}
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
}

/* A hooked call while learning from the hooks: the outermost one on this thread is a token if
 * CUPTI's callbacks would make it one (tokglue.c: a driver call inside a runtime call is none).
 * Returns the handle for sp_collector_hook_exit. */
static int learn_enter(int fn)
{
	if (learn_depth++ > 0)
		return SP_HOOK_N + fn;
	learn_fed = 0;
	unsigned wants = sp_stepdet_wants(sp_col.mk[0].det);
	if (sp_col.done || !marker_hooks.tok[fn] || !sp_hooklearn_on() ||
	    !(wants & (marker_hooks.tok[fn] == SP_TOK_GRAPH ? SP_WANT_GRAPH : SP_WANT_API)))
		return SP_HOOK_N + fn;
	learn_fed = 1;
	sp_win_detect(0, marker_hooks.tok[fn], marker_hooks.flags[fn], marker_hooks.name[fn], sp_thr_ns(1), 0, 0,
		      marker_hooks.drv[fn]);
	sp_hooklearn_check();
	return SP_HOOK_N + fn;
}

int sp_collector_hook_enter(int fn)
{
	return sp_collector_hook_enter_at(fn, NULL);
}

/* The hooks count this thread's marker call (a hook of fn: its own function, or a static runtime's
 * driver call inside it, whose runtime call goes on: see callbacks.c). */
static void count_here(int fn, unsigned w)
{
	sp_thr.hook_counted = 1;
	sp_thr.nested_counted = w == WANT_NESTED;
	sp_win_detect(0, SP_TOK_API, marker_hooks.flags[fn], marker_hooks.name[fn], sp_thr_ns(1), 0, 0,
		      marker_hooks.drv[fn]);
}

/* A marker's hooked call while CUPTI counts (attached): the proof's watch and strays. */
static int attached_enter(int fn, unsigned w, const void *from)
{
	/* a stray only where CUPTI reports every marker call: attached, the schedule not done (after
	 * it the marker's callbacks are off, and every call would look like one) */
	bool reported = !sp_col.done && atomic_load(&sp_hold.state) == SP_HOLD_ATTACHED;
	/* a static runtime's marker call that began before a re-attach: this thread has had no
	 * callback since (CUPTI saw no entry of it), and this driver call comes from the place the
	 * proof counts, inside marker calls only; the hooks count it, as while parked */
	if (w == WANT_NESTED && reported && sp_thr.gen != sp_cupti_life_generation() &&
	    atomic_load_explicit(&marker_hooks.nested, memory_order_relaxed) && site_counts((uintptr_t)from)) {
		count_here(fn, w);
		return fn;
	}
	if (w == WANT_NESTED && reported) {
		int i = site((uintptr_t)from, 1);
		if (i >= 0)
			atomic_fetch_add(&nest_sites[i].bad, 1);
		atomic_fetch_add(&marker_hooks.stray, 1);
		stray_check();
	}
	/* CUPTI must report it as a marker call before it ends (where it reports them: as above) */
	this_call.watch = w == WANT_MARKER && reported;
	this_call.reported = 0;
	return fn;
}

int sp_collector_hook_enter_at(int fn, const void *from)
{
	if ((unsigned)fn >= SP_HOOK_N)
		return HOOK_UNCOUNTED;
	/* in flight first, then the state (both sequentially consistent): a detach either sees this call
	 * and waits for it, or this call sees the detach and waits for it to finish */
	atomic_fetch_add(&sp_hold.hooked, 1);
	bool gl = glaunch(fn);
	int st;
	/* a detach is under way: waits (holding nothing) until it is over, then looks again, counted,
	 * as the next detach may have begun meanwhile (libcupti may reach the driver through our
	 * trampolines: not on its own detach) */
	while (__builtin_expect((st = atomic_load(&sp_hold.state)) == SP_HOLD_QUIESCING || st == SP_HOLD_DETACHING,
				0) &&
	       !sp_cupti_life_detaching_here()) {
		atomic_fetch_sub(&sp_hold.hooked, 1);
		/* a graph replayed under cuptiFinalize is as unsafe as a kernel launched under it */
		int over = sp_cupti_life_wait_detach(gl ? SP_WAIT_LAUNCH_NS : SP_WAIT_HOOKED_NS);
		atomic_fetch_add(&sp_hold.hooked, 1);
		if (!over)
			break; /* gave up (warned): goes ahead */
	}
	if (gl)
		sp_thr.graph_hooked++;
	unsigned w = atomic_load_explicit(&marker_hooks.want[fn], memory_order_relaxed);
	if (w != WANT_MARKER && w != WANT_NESTED) {
		/* parked: CUPTI must exist before the graph does (graphs captured earlier are invisible) */
		if (w == WANT_GRAPH && atomic_load_explicit(&marker_hooks.counting, memory_order_relaxed) &&
		    !sp_cupti_life_attach_now(&sp_col.sub, sp_col.step, true))
			atomic_store(&marker_hooks.graph, true);
		if (atomic_load_explicit(&sp_launch_want, memory_order_relaxed) == SP_LAUNCH_LEARN)
			return learn_enter(fn);
		return gl ? HOOK_GLAUNCH : -1;
	}
	if (sp_thr.hook_depth++ > 0)
		return fn;
	sp_thr.nested_counted = 0;
	if (sp_thr.hook_pending != PEND_NONE) { /* inside a marker call CUPTI counted: the proof only */
		sp_thr.hook_pending = sp_thr.hook_pending == PEND_WAIT ? PEND_ONE : PEND_MANY;
		this_call.pc = (uintptr_t)from;
		return fn;
	}
	if (!atomic_load(&marker_hooks.counting))
		return attached_enter(fn, w, from);
	/* a driver call stands for a marker call only where the proof relied on that: otherwise the
	 * runtime's hooks count (a nested call is inside one) and this one is none of them */
	if (w == WANT_NESTED &&
	    (!atomic_load_explicit(&marker_hooks.nested, memory_order_relaxed) || !site_counts((uintptr_t)from)))
		return fn;
	/* the schedule's step (automatic detection numbers its regimes' steps apart from it) */
	int64_t sched = sp_stepdet_sched_step(sp_col.mk[0].det, sp_col.step);
	if (sched < 0 || sp_life_steps_to_window(sp_col.mk[0].schedule, sched, 1) == 0 || sp_od_busy())
		wait_attached(); /* CUPTI counts this one if the re-attach came in time */
	/* a nested driver call comes inside its runtime's marker call, which began while parked (CUPTI
	 * reported no entry of it: hook_pending above): CUPTI cannot count that call even if stepprof
	 * re-attached since, so the hooks do (a late re-attach said it missed before) */
	if (w == WANT_NESTED || atomic_load(&marker_hooks.counting)) {
		count_here(fn, w);
		kick_if_near();
	}
	return fn;
}

/* A marker call's hook, once the call is over: before the writer thread exists, the life-cycle tick
 * runs here, once a step (it parks once the hooks are proven, re-attaches before the first window).
 * Not for a driver call inside a runtime's marker call (still in progress: no detach there). */
static void early_tick(int fn)
{
	static _Atomic int64_t last = -1;
	if (__atomic_load_n(&sp_col.writer_started, __ATOMIC_RELAXED) ||
	    atomic_load_explicit(&marker_hooks.want[fn], memory_order_relaxed) != WANT_MARKER ||
	    	atomic_load(&sp_hold.marking) > 0)
		return;
	int64_t step = __atomic_load_n(&sp_col.step, __ATOMIC_RELAXED);
	if (atomic_load(&last) != step && sp_act_early_tick())
		atomic_store(&last, step);
}

void sp_collector_hook_exit(int h)
{
	if (h == HOOK_UNCOUNTED)
		return;
	if (h == HOOK_GLAUNCH || (h >= 0 && glaunch(h >= SP_HOOK_N ? h - SP_HOOK_N : h)))
		sp_thr.graph_hooked--;
	atomic_fetch_sub(&sp_hold.hooked, 1);
	if (h == HOOK_GLAUNCH)
		return;
	if (h >= SP_HOOK_N) { /* learn_enter's */
		if (--learn_depth == 0 && learn_fed && sp_thr.after_pending)
			sp_win_after_exit(sp_thr_ns(1)); /* no CUPTI exit callback is there to begin the step */
		if (learn_depth == 0)
			learn_fed = 0;
		return;
	}
	if (h < 0 || --sp_thr.hook_depth > 0)
		return;
	/* an automatic step that begins after the anchor call: CUPTI's exit callback is not there to
	 * begin it (windows.c's det_apply), the hook's exit is */
	if (sp_thr.hook_counted && sp_thr.after_pending) {
		sp_win_after_exit(sp_thr_ns(1));
		kick_if_near();
	}
	sp_thr.hook_counted = 0;
	/* a call the hooks would count that CUPTI did not count (a driver marker's function called
	 * from inside the runtime, which CUPTI leaves out): the hooks' steps would not be CUPTI's */
	if (this_call.watch && !this_call.reported && !atomic_load(&marker_hooks.counting) &&
	    atomic_fetch_add(&marker_hooks.extra, 1) == 0)
		sp_info("a hooked call of %s was not a marker call for CUPTI (made inside a runtime call): the "
			"hooks cannot count its steps, stepprof stays attached to CUPTI between windows",
			fns[h].name);
	this_call.watch = 0;
	early_tick(h);
}

/* Re-attached after a park: CUPTI's callbacks count marker calls from now on, and learning from
 * the hooks ends (launches are proven against CUPTI's). */
static void hook_unparked(void)
{
	sp_hook_count(0);
	sp_hooklearn_end(1);
}

const struct sp_hold_watch sp_hook_watch = { sp_hook_count, sp_hooklearn_proof, hook_unparked, sp_hook_graph_made,
					     sp_hook_disarm };
