/* SPDX-License-Identifier: MIT */
/* cupti_life.h - stepprof's hold on CUPTI: subscribe, detach for good after the last window, or
 * detach and re-attach between windows (on the writer thread, never inside a callback). Owns the count
 * of callbacks in flight and the correlation id offset across re-attaches; the policy is decide/life.h. */
#ifndef SP_CUPTI_LIFE_H
#define SP_CUPTI_LIFE_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <cupti.h>
#include "decide/hold.h"
#include "decide/life.h"

/* What a (re)subscription installs; armed runs after each one, with no CUPTI callback or activity
 * enabled yet, to enable what the current phase needs (it may take the collector's lock). */
struct sp_cupti_hooks {
	CUpti_CallbackFunc callback;
	CUpti_BuffersCallbackRequestFunc requested;
	CUpti_BuffersCallbackCompleteFunc completed;
	CUpti_TimestampCallbackFunc timestamp;
	void (*armed)(void);
};

/* Shared with the inline guards below; read-only outside cupti_life.c. */
extern struct sp_hold_state {
	_Atomic int state;           /* enum sp_hold (decide/hold.h), moved by sp_cupti_life_move only */
	_Atomic int inflight;        /* callbacks and CUPTI calls in progress outside the writer, of the
				      * threads that count here (sp_inflight_shared); the others count
				      * in their own slots */
	_Atomic unsigned generation; /* CUPTI instances so far (0 = the first) */
	_Atomic uint32_t corr_base;  /* added to every correlation id of the current instance */
	_Atomic uint32_t corr_last;  /* a recent raw correlation id of the current instance */
	_Atomic int marking;         /* threads inside a marker call (a detach must wait for none) */
	_Atomic int marker_waiting;  /* marker callbacks waiting out a quiescing detach (it calls off) */
	_Atomic int hooked;          /* threads inside a CUDA call the preload hooks (a detach waits for
				      * none: CUPTI finalised under a call it wraps crashes) */
	_Atomic int launching;       /* kernel launches in progress of the threads that count in the
				      * shared counter (the others: their slot's launch; collector.h
				      * sp_launch_guard) */
	_Atomic unsigned attempt;    /* detaches begun (sp_cupti_life_wait_detach) */
	_Atomic unsigned gave_up;    /* ... one that a call gave up waiting for, + 1; 0 none */
	_Atomic uint64_t last_end;   /* when a marker call last ended (trace clock, ns), 0 never */
	_Atomic uint64_t quiet;      /* shortest time from a marker call's end to the next one's start */
	_Atomic unsigned quiet_seen; /* quiet times measured */
	_Atomic bool lost;           /* a marker call's callback came while detaching (dropped) */
	_Atomic bool overlap;        /* two threads were in marker calls at once (no proof by timing) */
	_Atomic uint64_t verify_by;  /* a re-attach outlasted the quiet time: the next marker call must
				      * begin before this (trace clock, ns) to prove none was missed; 0 none */
} sp_hold;

/* What the preload's hooks do as the hold moves (markhook.c's sp_hook_watch), so that the hold
 * calls nothing of theirs: they ask it for an attach through sp_cupti_life_attach_now alone. */
struct sp_hold_watch {
	void (*count)(int on);   /* the hooks count marker calls (1: parking, parked) or no longer (0) */
	void (*proof)(int on);   /* launch hooks prove themselves against CUPTI (1) or pass through (0) */
	void (*unparked)(void);  /* re-attached: CUPTI counts marker calls, learning from the hooks ends */
	bool (*graph_made)(void); /* a CUDA graph was made while parked (once; clears it) */
	void (*disarm)(void);    /* detached for good: the hooks watch nothing any more */
};
/* Sets the watch, before the first attach or park (NULL: none). This function can't fail. */
void sp_cupti_life_watch(const struct sp_hold_watch *w);
/* This thread runs a detach: a hooked call it makes (CUPTI reaching the driver through a
 * trampoline) must not wait for that detach. */
bool sp_cupti_life_detaching_here(void);

/* Moves the hold from `from` to `to` through the table (decide/hold.h). Returns true, or false if
 * the table has no such move or the state was not `from` (nothing changed; warned once: a bug). */
bool sp_cupti_life_move(enum sp_hold from, enum sp_hold to);
/* In a fork child: the hold is GONE (no detach to wait for, none to make). Can't fail. */
void sp_cupti_life_forked(void);

/* A CUDA call found a detach under way: waits for it, at most limit_ns, then goes ahead (warned once).
 * Returns 1 if the detach was over (count yourself and look again), 0 if it gave up. Not the detaching thread. */
int sp_cupti_life_wait_detach(uint64_t limit_ns);
#define SP_WAIT_LAUNCH_NS \
	10000000000ull /* a launch: far longer than a detach's drains and cuptiFinalize */
#define SP_WAIT_HOOKED_NS \
	1000000000ull  /* a hooked call (as before the launch drain: a thread that
					  * cuptiFinalize itself waits on must not stall longer) */

/* At exit (STEPPROF_VERBOSE): how many CUDA calls of the program's waited for a detach, and the
 * longest wait. This function can't fail. */
void sp_cupti_life_say_waits(void);

/* The first marker call after a re-attach that outlasted the quiet time began at now: proves that
 * no marker call came while detached, or reports that one may have. This function can't fail. */
void sp_cupti_life_verify(uint64_t now);

/* Who enters: a CUPTI call made outside the writer thread (under the collector's lock, say), a
 * callback, or a marker call's callback. */
enum sp_enter { SP_ENTER_CALL, SP_ENTER_CALLBACK, SP_ENTER_MARKER };

/* The slow path of sp_cupti_life_enter_as, when not attached. */
int sp_cupti_life_enter_slow(enum sp_enter who);

/* Callbacks and CUPTI calls in flight, counted per thread with an asymmetric fence (membarrier) paid by
 * the detach, else in the shared sp_hold.inflight (docs/ARCHITECTURE.md says why). */
#define SP_INFLIGHT_SLOTS 1024
struct sp_inflight_slot {
	_Atomic int n;     /* this thread's callbacks and CUPTI calls in progress (only it writes) */
	_Atomic int owned; /* a live thread holds the slot */
	_Atomic int launch; /* this thread's kernel launches in progress through the preload's
			     * trampolines, while stepprof is subscribed (only it writes) */
	char pad[52];
};
/* This thread's slot; &sp_inflight_shared: it counts in sp_hold.inflight; NULL: not decided yet. */
extern __thread struct sp_inflight_slot *sp_inflight_own;
extern struct sp_inflight_slot sp_inflight_shared;
/* Decides this thread's slot (the first time it counts). This function can't fail. */
struct sp_inflight_slot *sp_cupti_life_claim(void);

/* Adds d to this thread's count of callbacks and CUPTI calls in flight, or (launch) of kernel
 * launches in flight (collector.h sp_launch_guard). This function can't fail. */
static inline void sp_cupti_life_slot_add(bool launch, int d)
{
	struct sp_inflight_slot *s = sp_inflight_own;
	if (__builtin_expect(!s, 0))
		s = sp_cupti_life_claim();
	if (__builtin_expect(s == &sp_inflight_shared, 0)) {
		atomic_fetch_add(launch ? &sp_hold.launching : &sp_hold.inflight, d);
		return;
	}
	/* only this thread writes it; the compiler keeps the count around the guarded work, and a
	 * detach's membarrier orders it against its state change (cupti_life.c, drain) */
	_Atomic int *c = launch ? &s->launch : &s->n;
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_release);
	atomic_signal_fence(memory_order_seq_cst);
}

static inline void sp_cupti_life_count(int d)
{
	sp_cupti_life_slot_add(false, d);
}

/* Enters a callback or a CUPTI call. Returns 1 (then call sp_cupti_life_leave) while CUPTI may be used,
 * else 0 (a lost marker callback is noted); a callback waits for a deciding detach. This function can't fail. */
static inline int sp_cupti_life_enter_as(enum sp_enter who)
{
	sp_cupti_life_count(1);
	if (__builtin_expect(atomic_load(&sp_hold.state) == SP_HOLD_ATTACHED, 1))
		return 1;
	sp_cupti_life_count(-1);
	return sp_cupti_life_enter_slow(who);
}

static inline int sp_cupti_life_enter(void)
{
	return sp_cupti_life_enter_as(SP_ENTER_CALL);
}

static inline void sp_cupti_life_leave(void)
{
	sp_cupti_life_count(-1);
}

/* A marker call's entry (the first on this thread: the caller keeps the depth) at now. Measures
 * the quiet time since the last marker call ended. This function can't fail. */
static inline void sp_cupti_life_mark_begin(uint64_t now)
{
	if (atomic_fetch_add(&sp_hold.marking, 1) > 0 && !atomic_load_explicit(&sp_hold.overlap, memory_order_relaxed))
		atomic_store(&sp_hold.overlap, true);
	if (__builtin_expect(atomic_load_explicit(&sp_hold.verify_by, memory_order_relaxed) != 0, 0))
		sp_cupti_life_verify(now);
	uint64_t end = atomic_load_explicit(&sp_hold.last_end, memory_order_relaxed);
	if (end && now > end) {
		uint64_t q = now - end, s = atomic_load_explicit(&sp_hold.quiet, memory_order_relaxed);
		if (!s || q < s)
			atomic_store_explicit(&sp_hold.quiet, q, memory_order_relaxed);
		atomic_fetch_add_explicit(&sp_hold.quiet_seen, 1, memory_order_relaxed);
	}
}

/* That marker call's exit, at now. This function can't fail. */
static inline void sp_cupti_life_mark_end(uint64_t now)
{
	atomic_store_explicit(&sp_hold.last_end, now, memory_order_relaxed);
	atomic_fetch_sub(&sp_hold.marking, 1);
}

/* The CUPTI instance now (changes at each re-attach: per-thread call state from before is stale). */
static inline unsigned sp_cupti_life_generation(void)
{
	return atomic_load_explicit(&sp_hold.generation, memory_order_relaxed);
}

/* A raw correlation id from CUPTI, as the trace numbers it (0 stays 0: no correlation). */
static inline uint32_t sp_cupti_life_corr(uint32_t raw)
{
	return raw ? raw + atomic_load_explicit(&sp_hold.corr_base, memory_order_relaxed) : 0;
}

/* Subscribes, registers the buffer and timestamp callbacks (once per CUPTI instance), runs hooks->armed.
 * Returns CUPTI_SUCCESS, or the failing call's result with nothing held (warned, except a second subscriber). */
CUptiResult sp_cupti_life_attach(const struct sp_cupti_hooks *hooks, CUpti_SubscriberHandle *sub);
/* After a detach for good, re-subscribes for an on-demand window (the on-demand thread), ids continuing.
 * Returns CUPTI_SUCCESS, CUPTI_ERROR_INVALID_OPERATION if not GONE or exiting, or the failing call's
 * result (still GONE). */
CUptiResult sp_cupti_life_reattach(CUpti_SubscriberHandle *sub);
/* Before an activity kind is enabled (under the collector's lock, inside sp_cupti_life_enter):
 * registers the timestamp and buffer callbacks if this instance has not yet (a re-attach leaves
 * them until its first window). Returns 0, or -1 if registering failed (warned; enable nothing). */
int sp_cupti_life_activity_ready(void);
/* Notes that an activity kind is being enabled (the instance now leaves a cost behind). */
void sp_cupti_life_dirty(void);
/* Notes that the program created a CUDA graph (stepprof stays subscribed from then on: life.c). */
void sp_cupti_life_graph(void);
/* Whether it did. Can't fail. */
bool sp_cupti_life_graphs(void);
/* A graph launch CUPTI reported (driver API entry): inside one of the preload's hooks or not. */
void sp_cupti_life_glaunch(bool hooked);
/* Activity kinds go off while attached (not in a detach): with graphs alive, their replays would
 * fail after a later cuptiFinalize, so stepprof stays subscribed from then on. Can't fail. */
void sp_cupti_life_kinds_off(void);
/* Writer thread, kinds due off (due): true to leave them on for SP_GRAPH_HOLD_NS, the program having
 * graphs that a detach can keep safe (the detach turns them off with graph launches held). */
bool sp_cupti_life_hold_kinds(uint64_t now, bool due);
/* Whether the program's graphs want the kinds left on after a window for a detach to turn them off
 * (graphs made, and a detach can keep them safe). Can't fail. */
bool sp_cupti_life_graph_hold(void);
/* A window was written only after the next one began: says once (STEPPROF_VERBOSE) that there was
 * nothing to detach for. Writer thread. This function can't fail. */
void sp_cupti_life_overlap(void);
/* Notes that a step boundary may have been missed while detached (warns once; no more cycles). */
void sp_cupti_life_missed(const char *why);
/* Starts detached, as parked before a window (the hooks count, markhook.h), without subscribing:
 * automatic detection learns from the preload's hooks (hooklearn.h); hooks are what the first
 * attach installs. Before the writer thread's first tick. This function can't fail. */
void sp_cupti_life_start_parked(const struct sp_cupti_hooks *hooks);
/* Parked: attaches now on an application thread holding no stepprof lock (learning hands over, or a graph
 * comes). Returns 1 if it attached, 0 if not parked or the attach failed (warned). */
int sp_cupti_life_attach_now(CUpti_SubscriberHandle *sub, int64_t step, bool graph);
/* The process is exiting: from now on the tick detaches nothing (finalising CUPTI while CUDA
 * tears itself down gains nothing and risks a hang). This function can't fail. */
void sp_cupti_life_freeze(void);
/* Writer thread's tick, without the collector's lock: detaches or cycles when sp_life_decide says so.
 * Returns the act done (SP_LIFE_STAY if nothing, failed or called off). Never from a callback. */
enum sp_life_act sp_cupti_life_tick(struct sp_life_view *v, int64_t step, uint64_t now, CUpti_SubscriberHandle *sub);

#endif
