/* SPDX-License-Identifier: MIT */
/* drain.c - what a detach waits for (callbacks and CUPTI calls in flight, hooked calls and launches in
 * progress), then the detach itself on the writer thread. A detach that cannot drain is called off, nothing lost. */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "collector/base/clock.h"
#include "collector/base/log.h"
#include "collector/collector.h"
#include "collector/cupti/cupti_api.h"
#include "collector/internal.h"
#include "hold_int.h"

#define DRAIN_NS 1000000000ull     /* longest wait for callbacks in flight before giving up */
#define DRAIN_HOOKED_NS 2000000ull /* ... for hooked CUDA calls in progress (a long sync calls it off) */
#define DRAIN_LAUNCH_NS 5000000ull /* ... for kernel launches (one blocked on a full queue calls it off) */
#define LAUNCH_BACKOFF_NS 100000000ull /* no detach this long after one a blocked launch called off */

/* Sleeps about 50 us (the writer thread waits for callbacks to return). */
static void nap(void)
{
	struct timespec ts = { 0, 50000 };
	nanosleep(&ts, NULL);
}

/* ---- callbacks in flight: per-thread slots and the asymmetric fence (cupti_life.h) ---- */

__thread struct sp_inflight_slot *sp_inflight_own;
struct sp_inflight_slot sp_inflight_shared;
static struct sp_inflight_slot slots[SP_INFLIGHT_SLOTS] __attribute__((aligned(64)));
static struct {
	pthread_once_t once;
	bool asym;              /* membarrier PRIVATE_EXPEDITED registered: slots in use */
	_Atomic int high;       /* slots ever handed out (the drain sums these) */
	pthread_key_t key;      /* its destructor gives a thread's slot back */
	bool keyed;
	_Atomic bool fence_failed; /* a membarrier call failed after registering (said once) */
} inflight_slots = { .once = PTHREAD_ONCE_INIT };

static void slot_release(void *p)
{
	struct sp_inflight_slot *s = p;
	sp_inflight_own = NULL; /* a callback later in this thread's teardown claims again */
	atomic_store(&s->owned, 0);
}

static void inflight_init(void)
{
	inflight_slots.keyed = pthread_key_create(&inflight_slots.key, slot_release) == 0;
	inflight_slots.asym = inflight_slots.keyed && syscall(__NR_membarrier,
							      MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	sp_info("callbacks in flight are counted %s",
		inflight_slots.asym ? "per thread (membarrier fences the detaches)"
				    : "in one shared counter (no membarrier here)");
}

struct sp_inflight_slot *sp_cupti_life_claim(void)
{
	pthread_once(&inflight_slots.once, inflight_init);
	struct sp_inflight_slot *s = &sp_inflight_shared;
	for (int i = 0; inflight_slots.asym && i < SP_INFLIGHT_SLOTS; i++) {
		int no = 0;
		if (atomic_load_explicit(&slots[i].owned, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&slots[i].owned, &no, 1))
			continue;
		int h = atomic_load(&inflight_slots.high);
		while (h < i + 1 && !atomic_compare_exchange_weak(&inflight_slots.high, &h, i + 1))
			;
		if (pthread_setspecific(inflight_slots.key, &slots[i])) {
			atomic_store(&slots[i].owned, 0);
			break;
		}
		s = &slots[i];
		break;
	}
	sp_inflight_own = s;
	return s;
}

/* After a change of sp_hold.state: a full barrier on every thread, so a slot's counter is seen by the drain or
 * sees the new state. Returns 0, or -1 if the fence failed (caller backs out; said once). */
static int fence_all(void)
{
	if (!inflight_slots.asym)
		return 0;
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return 0;
	if (!atomic_exchange(&inflight_slots.fence_failed, true))
		sp_warn("membarrier failed: callbacks in flight cannot be counted; staying attached to CUPTI");
	return -1;
}

/* Callbacks and outside CUPTI calls in flight now, every thread's. */
static int inflight_now(void)
{
	int n = atomic_load(&sp_hold.inflight);
	for (int i = 0, h = atomic_load(&inflight_slots.high); i < h; i++)
		n += atomic_load_explicit(&slots[i].n, memory_order_acquire);
	return n;
}

/* Waits until count() is 0, at most limit_ns. Returns 0, or -1 after the limit. */
static int wait_none(int (*count)(void), uint64_t limit_ns)
{
	uint64_t t0 = sp_now_ns();
	while (count() > 0) {
		if (sp_now_ns() - t0 > limit_ns)
			return -1;
		nap();
	}
	return 0;
}

/* Waits until no callback or outside CUPTI call is in flight (DRAIN_NS); state must already say
 * QUIESCING or DETACHING (new ones wait). Returns 0, or -1 after the limit or if the fence failed
 * (caller backs out). */
static int drain_inflight(void)
{
	return fence_all() < 0 ? -1 : wait_none(inflight_now, DRAIN_NS);
}

/* ---- kernel launches in flight (collector.h sp_launch_guard) ---- */

_Atomic int sp_launch_guard;
static __thread bool self_detaching; /* this thread runs a detach: its own launches never wait */

/* CUDA calls of the program's that waited for a detach, and the longest wait (ns): said at exit. */
static struct {
	_Atomic uint64_t n, max_ns;
} detach_waits;

static void note_detach_wait(uint64_t t0)
{
	uint64_t w = sp_now_ns() - t0, m = atomic_load(&detach_waits.max_ns);
	atomic_fetch_add(&detach_waits.n, 1);
	while (w > m && !atomic_compare_exchange_weak(&detach_waits.max_ns, &m, w))
		;
}

void sp_cupti_life_say_waits(void)
{
	if (atomic_load(&detach_waits.n))
		sp_info("%llu CUDA calls of the program's waited for a detach from CUPTI, the longest %.3f ms",
			(unsigned long long)atomic_load(&detach_waits.n), atomic_load(&detach_waits.max_ns) / 1e6);
}

int sp_cupti_life_wait_detach(uint64_t limit_ns)
{
	static _Atomic bool said;
	if (atomic_load(&sp_hold.gave_up) == atomic_load(&sp_hold.attempt) + 1)
		return 0; /* a call already gave up on this detach: it is wedged, nobody waits for it */
	uint64_t t0 = sp_now_ns();
	int st;
	while ((st = atomic_load(&sp_hold.state)) == SP_HOLD_QUIESCING || st == SP_HOLD_DETACHING) {
		if (sp_now_ns() - t0 > limit_ns) { /* the program goes on rather than hang */
			/* the detach under way now (the wait may have outlasted several) is wedged: no call
			 * waits for it again (not after a hooked call's short wait: launches still do) */
			if (limit_ns >= SP_WAIT_LAUNCH_NS)
				atomic_store(&sp_hold.gave_up, atomic_load(&sp_hold.attempt) + 1);
			if (!atomic_exchange(&said, true))
				sp_warn("a CUDA call waited %.0f s for a detach from CUPTI and went ahead",
					limit_ns / 1e9);
			note_detach_wait(t0);
			return 0;
		}
		struct timespec ts = { 0, 20000 }; /* leaves the CPU to the detaching thread */
		nanosleep(&ts, NULL);
	}
	note_detach_wait(t0);
	return 1;
}

/* The launch guard's slow path (a detach under way): counts the launch at once inside one of stepprof's
 * callbacks or CUPTI calls (the drain waits for it), else waits for the detach's verdict; returns as the guard. */
/* This thread's own slot, or NULL (it counts in the shared counters). */
static struct sp_inflight_slot *own_slot(void)
{
	struct sp_inflight_slot *own = sp_inflight_own;
	return own != &sp_inflight_shared ? own : NULL;
}

static __attribute__((noinline)) int launch_wait(void)
{
	struct sp_inflight_slot *own = own_slot();
	if (own && atomic_load_explicit(&own->n, memory_order_relaxed) > 0) {
		sp_cupti_life_slot_add(true, 1);
		return 1;
	}
	return sp_cupti_life_wait_detach(SP_WAIT_LAUNCH_NS) ? sp_collector_launch_guard() : 0;
}

int sp_collector_launch_guard(void)
{
	/* acquire: a launch that reads the guard cleared by a detach sees all it did (weakly ordered
	 * CPUs; a plain load on x86) */
	if (!atomic_load_explicit(&sp_launch_guard, memory_order_acquire) || self_detaching)
		return 0;
	/* counted first, then the state (as the callbacks: a detach's fence and drain see this launch,
	 * or it sees the detach); counted while not subscribed too (the guard is set from the start of
	 * an attach: its subscription may come before its state says so) */
	sp_cupti_life_slot_add(true, 1);
	int st = atomic_load(&sp_hold.state);
	if (__builtin_expect(st != SP_HOLD_QUIESCING && st != SP_HOLD_DETACHING, 1))
		return 1;
	sp_cupti_life_slot_add(true, -1);
	return launch_wait();
}

void sp_collector_launch_unguard(int g)
{
	if (g)
		sp_cupti_life_slot_add(true, -1);
}

/* This thread's launches in flight: a detach made inside one of them (none is today) calls itself
 * off rather than finalise under it. */
static int own_launches(void)
{
	struct sp_inflight_slot *own = own_slot();
	return own ? atomic_load_explicit(&own->launch, memory_order_relaxed) : 0;
}

/* Launches in flight now, every thread's but this one's (a detach never waits for itself). */
static int launches_now(void)
{
	int n = atomic_load(&sp_hold.launching);
	for (int i = 0, h = atomic_load(&inflight_slots.high); i < h; i++)
		n += atomic_load_explicit(&slots[i].launch, memory_order_acquire);
	return n - own_launches();
}

/* Threads inside a hooked CUDA call (sp_hold.hooked). */
static int hooked_now(void)
{
	return atomic_load(&sp_hold.hooked);
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
			sp_cupti_life_count(1);
			int now = atomic_load(&sp_hold.state);
			if (now == SP_HOLD_ATTACHED || (now == SP_HOLD_QUIESCING && who == SP_ENTER_CALL)) {
				ok = 1;
				break;
			}
			sp_cupti_life_count(-1);
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

/* Detaches (drain, flush, unsubscribe, finalise), for good or not, unless a marker call is in progress.
 * Returns 0 (NONE or GONE), 1 if called off for a marker call (back to ATTACHED), -1 if callbacks did not
 * drain (likewise, warned). */
static int detach_body(CUpti_SubscriberHandle sub, bool for_good, uint64_t *fin_ns)
{
	atomic_fetch_add(&sp_hold.attempt, 1);
	if (!sp_cupti_life_move(SP_HOLD_ATTACHED, SP_HOLD_QUIESCING))
		return -1;
	if (drain_inflight() < 0) {
		sp_cupti_life_move(SP_HOLD_QUIESCING, SP_HOLD_ATTACHED);
		if (!atomic_load(&inflight_slots.fence_failed))
			sp_warn("a CUPTI callback did not return within 1 s; staying attached to CUPTI");
		return -1;
	}
	if (atomic_load(&sp_hold.marking) + atomic_load(&sp_hold.marker_waiting) > 0) {
		/* its exit must be seen by the instance that saw its entry, and CUPTI must not be
		 * finalised under a call it wraps (docs/ARCHITECTURE.md, "Why a detach waits") */
		sp_cupti_life_move(SP_HOLD_QUIESCING, SP_HOLD_ATTACHED);
		atomic_store(&sp_lifecycle.off_why, "a marker call was in progress");
		return 1;
	}
	sp_cupti_life_move(SP_HOLD_QUIESCING, SP_HOLD_DETACHING); /* waiting callbacks return now */
	if (drain_inflight() < 0) { /* calls that went ahead while quiescing */
		sp_cupti_life_move(SP_HOLD_DETACHING, SP_HOLD_ATTACHED);
		if (!atomic_load(&inflight_slots.fence_failed))
			sp_warn("a CUPTI call did not return within 1 s; staying attached to CUPTI");
		return -1;
	}
	/* no thread inside a hooked CUDA call: CUPTI wraps it, and finalising CUPTI under it crashes;
	 * new ones wait. One that outlasts DRAIN_HOOKED_NS (a long synchronisation) calls the detach
	 * off: the next tick tries again. Launches come next (with host functions, asynchronous
	 * memsets and copies: SP_GUARDS in preload/procaddr_rows.h); other driver calls are not covered */
	if (wait_none(hooked_now, DRAIN_HOOKED_NS) < 0) {
		sp_cupti_life_move(SP_HOLD_DETACHING, SP_HOLD_ATTACHED);
		atomic_store(&sp_lifecycle.off_why, "a hooked CUDA call (a synchronisation, a graph launch) lasted over 2 ms");
		return 1;
	}
	/* nor inside a kernel launch: cuptiFinalize under CUPTI's dispatch of one crashes or corrupts
	 * the heap. New launches wait; one blocked on a full launch queue past DRAIN_LAUNCH_NS calls the
	 * detach off (the next tick tries again). The fence after DETACHING (drain_inflight) orders the
	 * launch counts as it does the callbacks' */
	if (own_launches() > 0 || wait_none(launches_now, DRAIN_LAUNCH_NS) < 0) {
		/* a launch behind a long kernel may stay blocked for a while: no retry at every tick, each
		 * holding the program's launches for DRAIN_LAUNCH_NS */
		atomic_store(&sp_lifecycle.retry_ns, sp_now_ns() + LAUNCH_BACKOFF_NS);
		sp_cupti_life_move(SP_HOLD_DETACHING, SP_HOLD_ATTACHED);
		atomic_store(&sp_lifecycle.off_why, "a kernel launch lasted over 5 ms (a full launch queue)");
		return 1;
	}
	/* the writer thread is the only one touching CUPTI now: kinds left on for the program's graphs go
	 * off with no graph launched until the finalise; records still buffered arrive in the buffer
	 * callback on this thread (late ones are counted, not lost in silence) */
	sp_win_activities_off_detaching();
	SP_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	uint64_t t0 = sp_now_ns();
	SP_CUPTI(cuptiUnsubscribe(sub));
	SP_CUPTI(cuptiFinalize());
	*fin_ns = sp_now_ns() - t0;
	sp_lifecycle.dirty = false;
	atomic_store(&sp_lifecycle.kinds_went_off, false); /* the next instance starts clean */
	if (!for_good) { /* the next instance's ids go past every id of this one */
		uint32_t last = atomic_load(&sp_hold.corr_last);
		atomic_store(&sp_hold.corr_base, atomic_load(&sp_hold.corr_base) + last + CORR_MARGIN);
		atomic_store(&sp_hold.corr_last, 0);
	}
	atomic_fetch_add(&sp_hold.generation, 1);
	/* launches pass straight through until the next attach: cleared before the state says the
	 * detach is over, so that an attach that follows at once (on-demand) keeps its own guard; not
	 * in a cycle, whose attach follows at once (a launch that began between them uncounted would
	 * be in flight, unseen, under that instance) */
	if (!sp_lifecycle.keep_guard)
		atomic_store(&sp_launch_guard, 0);
	sp_cupti_life_move(SP_HOLD_DETACHING, for_good ? SP_HOLD_GONE : SP_HOLD_NONE);
	return 0;
}

/* detach_body on this thread, marked as the detaching one: a hooked driver call that CUPTI itself
 * makes while it is torn down does not wait for the detach it is part of (markhook.c). */
int sp_hold_detach(CUpti_SubscriberHandle sub, bool for_good, uint64_t *fin_ns)
{
	self_detaching = true;
	int r = detach_body(sub, for_good, fin_ns);
	self_detaching = false;
	return r;
}

bool sp_cupti_life_detaching_here(void)
{
	return self_detaching;
}
