/* SPDX-License-Identifier: MIT */
/* cupti_life.c - subscribing to CUPTI and letting go of it (see cupti_life.h). Detaching runs on
 * the writer thread: callbacks in flight drain first, activity buffers are flushed, then
 * cuptiUnsubscribe and cuptiFinalize. Any failure warns once and leaves stepprof as it was
 * (still subscribed) with no further cycles; it never stops the program. */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include "collector/base/clock.h"
#include "collector/collector.h"
#include "collector/cupti/cupti_api.h"
#include "cupti_life.h"
#include "hooklearn.h"
#include "collector/base/log.h"
#include "markhook.h"
#include "collector/out/writer.h"

/* The writer's pass while parked between windows: the hooks kick it two steps before the next
 * window (markhook.c), so that its 500 wake-ups a second (2 ms passes) do not go on taking the
 * program's CPU (+4% on a launch-bound loop sharing one CPU with an unprofiled twin, session 11). */
#define SP_PARKED_PASS_NS 100000000ull

#define DRAIN_NS 1000000000ull     /* longest wait for callbacks in flight before giving up */
#define DRAIN_HOOKED_NS 2000000ull /* ... for hooked CUDA calls in progress (a long sync calls it off) */
#define DRAIN_LAUNCH_NS 5000000ull /* ... for kernel launches (one blocked on a full queue calls it off) */
#define LAUNCH_BACKOFF_NS 100000000ull /* no detach this long after one a blocked launch called off */
#define CORR_MARGIN 65536u         /* ids a racing thread may have taken beyond the last one seen */

struct sp_hold_state sp_hold;

static struct {
	struct sp_cupti_hooks hooks; /* of the first attach, reused by re-attaches */
	bool dirty;                  /* an activity kind was on in this CUPTI instance */
	_Atomic bool graphs;         /* the program created a CUDA graph */
	_Atomic bool stopped;        /* no more cycles: one failed or may have missed a boundary */
	_Atomic bool frozen;         /* the process exits: no detach at all any more */
	unsigned cycles;             /* detach + re-attach done */
	bool parked;                 /* detached until the next window, the hooks counting (markhook.h) */
	int64_t park_step;           /* the step it parked in */
	uint64_t park_ns;            /* when */
	_Atomic bool registered;     /* timestamp and buffer callbacks registered in this instance */
	_Atomic bool claim;          /* a thread is registering them, or did, in this instance */
	_Atomic int reg_state;       /* 0 not yet, 1 registered, -1 failed (this instance) */
	bool reg_tried;              /* the writer thread tried to register them (once an instance) */
	const char *held;            /* the last reason said for not detaching between windows */
	int64_t held_step;           /* the step it was first seen in */
	bool keep_guard;             /* a cycle: launches stay counted from its detach to its attach */
	bool said_closing;           /* sp_life_closing was said (once a run) */
	bool said_graphs;            /* sp_life_graphs was said (once a run: it holds for the run) */
	int64_t off_step;            /* the step a called-off detach was last said in */
	_Atomic uint64_t retry_ns;   /* a detach called off for a blocked launch: none before this */
	pthread_mutex_t park_lock;   /* parked: the writer's tick and an application thread's attach */
} L = { .held_step = INT64_MIN, .off_step = INT64_MIN, .park_lock = PTHREAD_MUTEX_INITIALIZER };

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
} IF = { .once = PTHREAD_ONCE_INIT };

static void slot_release(void *p)
{
	struct sp_inflight_slot *s = p;
	sp_inflight_own = NULL; /* a callback later in this thread's teardown claims again */
	atomic_store(&s->owned, 0);
}

static void inflight_init(void)
{
	IF.keyed = pthread_key_create(&IF.key, slot_release) == 0;
	IF.asym = IF.keyed && syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	sp_info("callbacks in flight are counted %s",
		IF.asym ? "per thread (membarrier fences the detaches)" : "in one shared counter (no membarrier here)");
}

struct sp_inflight_slot *sp_cupti_life_claim(void)
{
	pthread_once(&IF.once, inflight_init);
	struct sp_inflight_slot *s = &sp_inflight_shared;
	for (int i = 0; IF.asym && i < SP_INFLIGHT_SLOTS; i++) {
		int no = 0;
		if (atomic_load_explicit(&slots[i].owned, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&slots[i].owned, &no, 1))
			continue;
		int h = atomic_load(&IF.high);
		while (h < i + 1 && !atomic_compare_exchange_weak(&IF.high, &h, i + 1))
			;
		if (pthread_setspecific(IF.key, &slots[i])) {
			atomic_store(&slots[i].owned, 0);
			break;
		}
		s = &slots[i];
		break;
	}
	sp_inflight_own = s;
	return s;
}

/* After a change of sp_hold.state: every running thread of the process passes a full memory
 * barrier, so that a thread counting in its slot either is seen counting by the drain or sees
 * the new state (cupti_life.h). Returns 0, or -1 if the fence failed (the drain cannot trust
 * the slots: the caller backs out; said once). */
static int fence_all(void)
{
	if (!IF.asym)
		return 0;
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return 0;
	if (!atomic_exchange(&IF.fence_failed, true))
		sp_warn("membarrier failed: callbacks in flight cannot be counted; staying attached to CUPTI");
	return -1;
}

/* Callbacks and outside CUPTI calls in flight now, every thread's. */
static int inflight_now(void)
{
	int n = atomic_load(&sp_hold.inflight);
	for (int i = 0, h = atomic_load(&IF.high); i < h; i++)
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

/* The launch guard's slow path: a detach is under way (this launch uncounted). Counts it at once if
 * this thread is inside a callback or CUPTI call of stepprof's (a program's forwarded callback
 * launching, say: a detach drains that first, so this launch must not wait for it; counted, it is
 * drained in turn); else waits for the detach's verdict and returns what the guard returns. */
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
	for (int i = 0, h = atomic_load(&IF.high); i < h; i++)
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

/* Detaches: drains, flushes, unsubscribes, finalises, for good or not, only if no marker call is
 * in progress or waiting once callbacks have drained (the hooks hold new hooked calls meanwhile). Returns 0 (state NONE or GONE), 1
 * if a marker call was in progress (called off: state back to ATTACHED, nothing lost), or -1 if
 * callbacks did not drain (likewise, and warned). */
static int detach_body(CUpti_SubscriberHandle sub, bool for_good, uint64_t *fin_ns)
{
	atomic_fetch_add(&sp_hold.attempt, 1);
	atomic_store(&sp_hold.state, SP_HOLD_QUIESCING);
	if (drain_inflight() < 0) {
		atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
		if (!atomic_load(&IF.fence_failed))
			sp_warn("a CUPTI callback did not return within 1 s; staying attached to CUPTI");
		return -1;
	}
	if (atomic_load(&sp_hold.marking) + atomic_load(&sp_hold.marker_waiting) > 0) {
		/* its exit must be seen by the instance that saw its entry, and CUPTI must not be
		 * finalised under a call it wraps (seen on H100: a SIGSEGV in the cudaDeviceSynchronize
		 * that a detach for good fell into, in 2-rank DDP jobs) */
		atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
		return 1;
	}
	atomic_store(&sp_hold.state, SP_HOLD_DETACHING); /* waiting callbacks return now */
	if (drain_inflight() < 0) { /* calls that went ahead while quiescing */
		atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
		if (!atomic_load(&IF.fence_failed))
			sp_warn("a CUPTI call did not return within 1 s; staying attached to CUPTI");
		return -1;
	}
	/* no thread inside a hooked CUDA call: CUPTI wraps it, and finalising CUPTI under it crashed
	 * (H100, 2-rank DDP: the NCCL watchdog's cudaEventQuery, 2 of 15 jobs); new ones wait. A call
	 * that outlasts 2 ms (a long synchronisation) calls the detach off: the next tick tries again.
	 * Launches come next (with host functions, asynchronous memsets and copies: SP_GUARDS in
	 * preload/procaddr_rows.h); other driver calls (synchronous memsets...) are not covered */
	if (wait_none(hooked_now, DRAIN_HOOKED_NS) < 0) {
		atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
		return 1;
	}
	/* nor inside a kernel launch: CUPTI's dispatch of a launch in flight when cuptiFinalize ran
	 * crashed it (SIGSEGV at 0x18 under cuLaunchKernel) or corrupted the heap ("malloc(): unsorted
	 * double linked list corrupted", then a hang); H200, a launch-bound loop parking between
	 * windows: 10 of 478 runs of 200 steps, 3 programs a GPU. New launches wait; one blocked on a
	 * full launch queue past DRAIN_LAUNCH_NS calls the detach off (the next tick tries again). The
	 * fence after DETACHING (drain_inflight) orders the launch counts as it does the callbacks' */
	if (own_launches() > 0 || wait_none(launches_now, DRAIN_LAUNCH_NS) < 0) {
		/* a launch behind a long kernel may stay blocked for a while: no retry at every tick, each
		 * holding the program's launches for DRAIN_LAUNCH_NS */
		atomic_store(&L.retry_ns, sp_now_ns() + LAUNCH_BACKOFF_NS);
		atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
		return 1;
	}
	/* the writer thread is the only one touching CUPTI now; records still buffered arrive in
	 * the buffer callback on this thread (late ones are counted, not lost in silence) */
	SP_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	uint64_t t0 = sp_now_ns();
	SP_CUPTI(cuptiUnsubscribe(sub));
	SP_CUPTI(cuptiFinalize());
	*fin_ns = sp_now_ns() - t0;
	L.dirty = false;
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
	if (!L.keep_guard)
		atomic_store(&sp_launch_guard, 0);
	atomic_store(&sp_hold.state, for_good ? SP_HOLD_GONE : SP_HOLD_NONE);
	return 0;
}

/* detach_body on this thread, marked as the detaching one: a hooked driver call that CUPTI itself
 * makes while it is torn down does not wait for the detach it is part of (markhook.c). */
static int detach(CUpti_SubscriberHandle sub, bool for_good, uint64_t *fin_ns)
{
	sp_hook_detaching(1);
	self_detaching = true;
	int r = detach_body(sub, for_good, fin_ns);
	self_detaching = false;
	sp_hook_detaching(0);
	return r;
}

/* Registers the timestamp and buffer callbacks of this CUPTI instance, once: the writer thread
 * (ahead of a window) and an application thread (enabling its activity kinds) may both come; the
 * one that claims it registers, the other waits for the outcome (the claimant takes no lock, so
 * this cannot deadlock). Returns CUPTI_SUCCESS, or the failing call's result (warned). */
static CUptiResult register_activity(const struct sp_cupti_hooks *hooks)
{
	bool no = false;
	if (atomic_load(&L.registered))
		return CUPTI_SUCCESS;
	if (!atomic_compare_exchange_strong(&L.claim, &no, true)) {
		int st;
		while ((st = atomic_load(&L.reg_state)) == 0)
			sched_yield();
		return st > 0 ? CUPTI_SUCCESS : CUPTI_ERROR_UNKNOWN;
	}
	CUptiResult r;
	if ((r = SP_CUPTI(cuptiActivityRegisterTimestampCallback(hooks->timestamp))) == CUPTI_SUCCESS &&
	    (r = SP_CUPTI(cuptiActivityRegisterCallbacks(hooks->requested, hooks->completed))) == CUPTI_SUCCESS)
		atomic_store(&L.registered, true);
	atomic_store(&L.reg_state, r == CUPTI_SUCCESS ? 1 : -1);
	return r;
}

/* Subscribes; the first instance registers the activity callbacks at once (a failure there is
 * the caller's to report), a re-attach (lazy) only when its first activity kind is enabled, so
 * that between windows CUPTI holds nothing but the callbacks the marker needs. */
static CUptiResult attach(const struct sp_cupti_hooks *hooks, CUpti_SubscriberHandle *sub, bool lazy)
{
	atomic_store(&sp_launch_guard, 1); /* before CUPTI can wrap a launch (collector.h) */
	CUptiResult r = sp_cupti.cuptiSubscribe(sub, hooks->callback, NULL);
	if (r != CUPTI_SUCCESS && atomic_load(&sp_hold.state) != SP_HOLD_ATTACHED)
		atomic_store(&sp_launch_guard, 0);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
		return r; /* the caller names the other profiler */
	if (r != CUPTI_SUCCESS)
		return sp_cupti_check(r, "cuptiSubscribe", __FILE__, __LINE__);
	L.hooks = *hooks;
	L.registered = L.claim = L.reg_tried = false;
	L.reg_state = 0;
	if (!lazy && (r = register_activity(hooks)) != CUPTI_SUCCESS) {
		sp_cupti.cuptiUnsubscribe(*sub);
		atomic_store(&sp_launch_guard, 0);
		return r;
	}
	atomic_store(&sp_hold.state, SP_HOLD_ATTACHED);
	if (hooks->armed)
		hooks->armed();
	return CUPTI_SUCCESS;
}

CUptiResult sp_cupti_life_attach(const struct sp_cupti_hooks *hooks, CUpti_SubscriberHandle *sub)
{
	return attach(hooks, sub, false);
}

CUptiResult sp_cupti_life_reattach(CUpti_SubscriberHandle *sub)
{
	if (atomic_load(&sp_hold.state) != SP_HOLD_GONE || atomic_load(&L.frozen))
		return CUPTI_ERROR_INVALID_OPERATION;
	uint32_t base = atomic_load(&sp_hold.corr_base), last = atomic_load(&sp_hold.corr_last);
	atomic_store(&sp_hold.corr_base, base + last + CORR_MARGIN); /* detach for good left it */
	atomic_store(&sp_hold.corr_last, 0);
	uint64_t t0 = sp_now_ns();
	CUptiResult r = attach(&L.hooks, sub, true);
	if (r != CUPTI_SUCCESS) {
		atomic_store(&sp_hold.corr_base, base);
		atomic_store(&sp_hold.corr_last, last);
		return r;
	}
	L.held = NULL;
	sp_info("re-attached to CUPTI for an on-demand window in %.2f ms", (sp_now_ns() - t0) / 1e6);
	return CUPTI_SUCCESS;
}

int sp_cupti_life_activity_ready(void)
{
	return register_activity(&L.hooks) == CUPTI_SUCCESS ? 0 : -1;
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

void sp_cupti_life_overlap(void)
{
	if (!L.said_closing) {
		L.said_closing = true;
		sp_info("not detaching from CUPTI between windows: %s", sp_life_closing);
	}
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
			"detach_between = never to avoid this)",
			why);
}

void sp_cupti_life_verify(uint64_t now)
{
	uint64_t by = atomic_exchange(&sp_hold.verify_by, 0);
	if (!by)
		return;
	if (atomic_load(&sp_hold.overlap)) /* marker calls on two threads at once: timing proves nothing */
		sp_cupti_life_missed("the detach outlasted the shortest time between two marker calls, and marker "
				     "calls overlap on several threads");
	else if (now >= by)
		sp_cupti_life_missed("the detach outlasted the shortest time between two marker calls, and the "
				     "next marker call came too late to prove that none came while detached");
	else
		sp_info("the first marker call after the re-attach began %.2f ms before the earliest a "
			"second one could have: no marker call was missed while detached",
			(by - now) / 1e6);
}

/* Says (STEPPROF_VERBOSE) why CUPTI stays dirty between windows, when the reason changes; "no
 * marker call ended just now" only once it has held for a whole step (ticks miss the first
 * quarter of the quiet time now and then). This function can't fail. */
static void say_held(const struct sp_life_view *v, int64_t step)
{
	const char *why = sp_life_stay_reason(v);
	if (why != L.held) {
		L.held = why;
		L.held_step = step;
		if (why == sp_life_closing)
			sp_cupti_life_overlap(); /* each gap would say it: once a run */
		else if (why == sp_life_graphs && !L.said_graphs) {
			L.said_graphs = true;
			sp_info("not detaching from CUPTI in step %lld%s: %s", (long long)step,
				v->done ? " (the schedule is done)" : "", why);
		} else if (why && why != sp_life_not_fresh && why != sp_life_det_busy) /* these two come and go */
			sp_info("not detaching from CUPTI between windows in step %lld: %s", (long long)step, why);
	} else if (why == sp_life_not_fresh && step == L.held_step + 2) {
		sp_info("not detaching from CUPTI between windows in steps %lld-%lld: %s (no tick of the writer "
			"thread fell in the first quarter of the %.2f ms between marker calls)",
			(long long)L.held_step, (long long)step - 1, why, atomic_load(&sp_hold.quiet) / 1e6);
	}
}

/* The next window comes: registers the activity callbacks here, outside callbacks, rather than
 * in the marker callback that enables its activity kinds (sp_cupti_life_activity_ready); once.
 * Does nothing if not attached. This function can't fail. */
static void register_early(int64_t step)
{
	if (!sp_cupti_life_enter())
		return;
	uint64_t r0 = sp_now_ns();
	L.reg_tried = true;
	if (!atomic_load(&L.claim) && register_activity(&L.hooks) == CUPTI_SUCCESS)
		sp_info("activity callbacks registered in step %lld for the next window in %.2f ms", (long long)step,
			(sp_now_ns() - r0) / 1e6);
	sp_cupti_life_leave();
}

/* Detaches and re-attaches between windows (sp_cupti_life_tick's CYCLE; end, quiet, seen and
 * since as it read them). Returns SP_LIFE_CYCLE, SP_LIFE_STAY if the detach was called off, or
 * SP_LIFE_DETACH if the re-attach failed (warned; the rest of the run is not profiled). */
static enum sp_life_act cycle(const struct sp_life_view *v, int64_t step, uint64_t now, CUpti_SubscriberHandle *sub,
			      uint64_t end, uint64_t quiet, unsigned seen, uint64_t since)
{
	uint64_t fin = 0;
	uint64_t t0 = sp_now_ns();
	L.keep_guard = true;
	int r0 = detach(*sub, false, &fin);
	L.keep_guard = false;
	if (r0 != 0) {
		if (r0 < 0)
			atomic_store(&L.stopped, true);
		else if (L.off_step != step) { /* once a step: ticks come every 2 ms */
			L.off_step = step;
			sp_info("detach between windows called off in step %lld: a marker call, a hooked CUDA call or "
				"a "
				"kernel launch was in progress",
				(long long)step);
		}
		if (atomic_exchange(&sp_hold.lost, false))
			sp_cupti_life_missed("a marker call came while a detach was being called off");
		return SP_LIFE_STAY;
	}
	uint64_t t1 = sp_now_ns();
	/* a marker call that came while detached ended no earlier than `end + quiet`, so the next
	 * one begins no earlier than `end + 2 quiet`: one before that proves none came (a quarter of
	 * the quiet time kept as margin, as quiet_fits does); armed before the marker's callback is */
	atomic_store(&sp_hold.verify_by, end ? end + quiet / 4 * 7 : 1);
	CUptiResult r = attach(&L.hooks, sub, true);
	uint64_t t2 = sp_now_ns(), gap = t2 - t0;
	if (r != CUPTI_SUCCESS) {
		const char *msg = "?";
		atomic_store(&sp_hold.verify_by, 0);
		sp_cupti.cuptiGetResultString(r, &msg);
		sp_warn("cannot re-attach to CUPTI after detaching between windows (%s); the rest of the run "
			"is not profiled",
			msg);
		atomic_store(&sp_hold.state, SP_HOLD_GONE);
		atomic_store(&L.stopped, true);
		return SP_LIFE_DETACH;
	}
	L.cycles++;
	L.held = NULL;
	sp_info("detached from and re-attached to CUPTI in step %lld (detach_between = %s, cycle %u): %.2f ms "
		"in all, detach %.2f ms (cuptiUnsubscribe + cuptiFinalize %.2f ms), re-attach %.2f ms; %.2f ms "
		"after the last marker call, %.2f ms the shortest time between two",
		(long long)step, v->policy == SP_DETACH_ALWAYS ? "always" : "auto", L.cycles, gap / 1e6,
		(t1 - t0) / 1e6, fin / 1e6, (t2 - t1) / 1e6, since / 1e6, quiet / 1e6);
	uint64_t late = since + (t0 > now ? t0 - now : 0);
	if (atomic_exchange(&sp_hold.lost, false)) {
		atomic_store(&sp_hold.verify_by, 0);
		sp_cupti_life_missed("a marker call came while detaching");
	} else if (sp_life_quiet_fits(quiet, seen, late, gap))
		atomic_store(&sp_hold.verify_by, 0); /* no marker call could begin while detached */
	return SP_LIFE_CYCLE;
}

/* Parks (sp_cupti_life_tick's PARK): the hooks count marker calls from now on, then stepprof
 * detaches as for a cycle but stays detached until the next window is near. Returns SP_LIFE_PARK,
 * or SP_LIFE_STAY if the detach was called off (the hooks stop counting again). */
static enum sp_life_act park(int64_t step, CUpti_SubscriberHandle *sub)
{
	uint64_t fin = 0, t0 = sp_now_ns();
	sp_hook_count(1); /* before the detach: a marker call counts where it enters, hook or callback */
	int r = detach(*sub, false, &fin);
	if (r != 0) {
		sp_hook_count(0);
		if (r < 0)
			atomic_store(&L.stopped, true);
		return SP_LIFE_STAY;
	}
	if (atomic_exchange(&sp_hold.lost, false))
		sp_cupti_life_missed("a marker call that bypassed stepprof's hooks came while detaching");
	sp_hooklearn_proof(0); /* nothing reports launches now: the launch hooks pass them through */
	L.parked = true;
	L.park_step = step;
	L.park_ns = sp_now_ns();
	L.held = NULL;
	sp_writer_set_pass_ns(SP_PARKED_PASS_NS); /* the hooks kick the writer when the window nears */
	sp_info("detached from CUPTI in step %lld until the next window in %.2f ms (cuptiUnsubscribe + cuptiFinalize "
		"%.2f ms): stepprof's hooks count the marker calls meanwhile",
		(long long)step, (L.park_ns - t0) / 1e6, fin / 1e6);
	return SP_LIFE_PARK;
}

/* Re-attaches a parked stepprof before its next window (sp_cupti_life_tick's UNPARK): with the
 * marker's callbacks, which count from now on instead of the hooks. Returns SP_LIFE_UNPARK, or
 * SP_LIFE_DETACH if the re-attach failed (warned; the rest of the run is not profiled). */
static enum sp_life_act unpark(int64_t step, CUpti_SubscriberHandle *sub)
{
	uint64_t t0 = sp_now_ns();
	sp_hooklearn_proof(1); /* before the attach: each launch CUPTI reports finds its hook watching */
	CUptiResult r = attach(&L.hooks, sub, true);
	L.parked = false;
	sp_writer_set_pass_ns(0); /* windows close at the usual pace */
	if (r != CUPTI_SUCCESS) {
		const char *msg = "?";
		sp_cupti.cuptiGetResultString(r, &msg);
		sp_warn("cannot re-attach to CUPTI before a window (%s); the rest of the run is not profiled", msg);
		atomic_store(&sp_hold.state, SP_HOLD_GONE);
		atomic_store(&L.stopped, true);
		sp_hook_disarm();
		return SP_LIFE_DETACH;
	}
	sp_hook_count(0); /* the marker's callbacks are on: CUPTI counts the calls that enter from now on */
	sp_hooklearn_end(1); /* learning from the hooks ends: launches are proven against CUPTI's */
	L.cycles++;
	sp_info("re-attached to CUPTI in step %lld for the next window in %.2f ms (parked since step %lld, %.1f ms; "
		"cycle %u)",
		(long long)step, (sp_now_ns() - t0) / 1e6, (long long)L.park_step, (t0 - L.park_ns) / 1e6, L.cycles);
	if (sp_hook_graph_made()) {
		atomic_store(&L.graphs, true);
		atomic_store(&L.stopped, true);
		sp_warn("the program made a CUDA graph while stepprof was detached from CUPTI: that graph's kernels "
			"may "
			"be missing from later windows; no more detaching between windows (set [cupti] detach_between "
			"= "
			"never to avoid this)");
	}
	return SP_LIFE_UNPARK;
}

/* The tick while parked: stay, re-attach for the next window, or stay detached for good. */
static enum sp_life_act parked_tick(struct sp_life_view *v, int64_t step, CUpti_SubscriberHandle *sub)
{
	v->parked = true;
	enum sp_life_act act = sp_life_decide(v);
	if (act == SP_LIFE_UNPARK)
		return unpark(step, sub);
	if (act == SP_LIFE_DETACH) {
		L.parked = false;
		atomic_store(&sp_hold.state, SP_HOLD_GONE);
		sp_hook_disarm();
		sp_info("the schedule is done in step %lld: stepprof stays detached from CUPTI for the rest of the run",
			(long long)step);
	}
	return act;
}

void sp_cupti_life_start_parked(const struct sp_cupti_hooks *hooks)
{
	pthread_mutex_lock(&L.park_lock);
	L.hooks = *hooks;
	L.parked = true;
	L.park_step = 0;
	L.park_ns = sp_now_ns();
	sp_writer_set_pass_ns(SP_PARKED_PASS_NS);
	sp_hook_count(1);
	pthread_mutex_unlock(&L.park_lock);
}

int sp_cupti_life_attach_now(CUpti_SubscriberHandle *sub, int64_t step, bool graph)
{
	if (atomic_load(&L.frozen))
		return 0;
	pthread_mutex_lock(&L.park_lock);
	if (!L.parked) {
		pthread_mutex_unlock(&L.park_lock);
		return 0;
	}
	if (graph)
		sp_cupti_life_graph();
	enum sp_life_act act = unpark(step, sub);
	pthread_mutex_unlock(&L.park_lock);
	if (act == SP_LIFE_UNPARK && graph)
		sp_info("attached to CUPTI before the program's CUDA graph capture or creation (graphs made before "
			"a subscriber exists are invisible to it); no more detaching between windows");
	return act == SP_LIFE_UNPARK;
}

enum sp_life_act sp_cupti_life_tick(struct sp_life_view *v, int64_t step, uint64_t now, CUpti_SubscriberHandle *sub)
{
	int state = atomic_load(&sp_hold.state);
	if (atomic_load(&L.frozen))
		return SP_LIFE_STAY;
	pthread_mutex_lock(&L.park_lock);
	if (L.parked) {
		enum sp_life_act act = parked_tick(v, step, sub);
		pthread_mutex_unlock(&L.park_lock);
		return act;
	}
	pthread_mutex_unlock(&L.park_lock);
	if (now < atomic_load(&L.retry_ns))
		return SP_LIFE_STAY; /* a blocked launch called the last detach off (detach_body) */
	state = atomic_load(&sp_hold.state);
	if (state != SP_HOLD_ATTACHED)
		return SP_LIFE_STAY;
	uint64_t end = atomic_load(&sp_hold.last_end), quiet = atomic_load(&sp_hold.quiet);
	unsigned seen = atomic_load(&sp_hold.quiet_seen);
	uint64_t since = end && now > end ? now - end : UINT64_MAX / 2, fin = 0;
	v->dirty = L.dirty;
	v->graphs = atomic_load(&L.graphs);
	v->stopped = atomic_load(&L.stopped);
	v->fresh_step = atomic_load(&sp_hold.marking) == 0 && sp_life_quiet_fresh(quiet, seen, since);
	enum sp_life_act act = sp_life_decide(v);
	if (act == SP_LIFE_STAY)
		say_held(v, step);
	if (act == SP_LIFE_STAY && !v->done && !L.reg_tried && (v->busy || v->steps_to_window < SP_LIFE_MIN_GAP))
		register_early(step);
	if (act == SP_LIFE_DETACH) {
		uint64_t t0 = sp_now_ns();
		int r = detach(*sub, true, &fin);
		if (r > 0)
			return SP_LIFE_STAY; /* a marker call was in progress: the next tick tries again */
		if (r < 0) {
			atomic_store(&L.stopped, true);
			atomic_store(&L.frozen, true); /* warned; no second try */
			return SP_LIFE_STAY;
		}
		sp_hook_disarm();
		sp_info("detached from CUPTI in step %lld (the schedule is done) in %.2f ms (cuptiUnsubscribe + "
			"cuptiFinalize %.2f ms): the rest of the run is not profiled",
			(long long)step, (sp_now_ns() - t0) / 1e6, fin / 1e6);
		return act;
	}
	if (act == SP_LIFE_PARK)
		return park(step, sub);
	if (act != SP_LIFE_CYCLE)
		return act;
	return cycle(v, step, now, sub, end, quiet, seen, since);
}
