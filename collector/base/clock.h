/* SPDX-License-Identifier: MIT */
/* clock.h - the trace clock: CLOCK_MONOTONIC in nanoseconds (vDSO, no syscall). CUPTI is told
 * to stamp its records with it, so CPU and GPU events share one axis. Two cheaper readings of the
 * same axis: a coarse one (to the tick) and one from the time-stamp counter (clock.c). */
#ifndef SP_CLOCK_H
#define SP_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static inline uint64_t sp_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The trace clock to the kernel's tick (1-4 ms behind at most, never ahead), at a fraction of
 * sp_now_ns's cost: for times that are stored but not yet recorded, such as when a block that a
 * later window's snapshot lists was allocated. */
static inline uint64_t sp_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The anchor of sp_fast_ns: trace time ns0 at time-stamp counter tsc0, mult ns per tick in 32.32
 * fixed point. seq is 0 before the first anchor, odd while the writer changes it. */
struct sp_tsc_anchor {
	_Atomic uint32_t seq;
	_Atomic uint64_t tsc0, ns0, mult;
};
extern struct sp_tsc_anchor sp_tsc;

/* The trace clock from the CPU's time-stamp counter: one RDTSC (not serialising, unlike the
 * vDSO's) and a multiply against an anchor the writer thread refreshes every pass. For paths that
 * stamp every host allocation, where clock_gettime's serialisation stalls a memory-bound program.
 * Within a microsecond of sp_now_ns at worst (an anchor pair's width plus the rate's error over
 * one pass), usually tens of ns. For the first 10 ms of the writer, off x86-64, or where the
 * kernel does not use the TSC as its clocksource, it is sp_now_ns. This function can't fail. */
static inline uint64_t sp_fast_ns(void)
{
#if defined(__x86_64__)
	for (;;) {
		uint32_t s = atomic_load_explicit(&sp_tsc.seq, memory_order_acquire);
		if (!s)
			return sp_now_ns();
		uint64_t t0 = atomic_load_explicit(&sp_tsc.tsc0, memory_order_relaxed);
		uint64_t n0 = atomic_load_explicit(&sp_tsc.ns0, memory_order_relaxed);
		uint64_t m = atomic_load_explicit(&sp_tsc.mult, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (s & 1) /* the writer is changing it: never wait on a thread that may be preempted */
			return sp_now_ns();
		if (atomic_load_explicit(&sp_tsc.seq, memory_order_relaxed) != s)
			continue;
		int64_t d = (int64_t)(__rdtsc() - t0); /* may be a little negative on another core */
		return n0 + (uint64_t)(int64_t)(((__int128)d * (__int128)m) >> 32);
	}
#else
	return sp_now_ns();
#endif
}

/* sp_now_ns if precise, else sp_fast_ns, made later than *last (a thread's latest such time),
 * which it becomes. The two clocks differ by up to a microsecond either way: a launch made a few
 * hundred ns before a marker call on the same thread was stamped after the step boundary, and the
 * offline tools put its kernel in the next step (tests/e2e/phases.sh, 1 run in 50 on a loaded
 * host). So a thread's calls keep the order it made them in; a boundary moves by at most that
 * difference. This function can't fail. */
static inline uint64_t sp_ordered_ns(uint64_t *last, int precise)
{
	uint64_t t = precise ? sp_now_ns() : sp_fast_ns();
	if (t <= *last)
		t = *last + 1;
	*last = t;
	return t;
}

/* Refreshes sp_fast_ns's anchor (the writer thread, every pass; before the writer runs, the step
 * detector's feeding thread every SP_FAST_ANCHOR_NS; a call while another thread anchors does
 * nothing). The first call
 * checks the clocksource; the rate comes from the first anchor to this one, once they are 10 ms
 * apart. This function can't fail (a check that fails leaves sp_fast_ns on sp_now_ns). */
void sp_fast_anchor(void);
#define SP_FAST_ANCHOR_NS 5000000ull /* between anchors taken outside the writer thread */

/* CLOCK_REALTIME in ns, for the clock anchors that relate the trace clock to wall time (read
 * rarely: at trace open and window ends). Test switch: STEPPROF_TEST_CLOCK_OFFSET_NS (a signed
 * integer, read at the first call) is added to every reading, so that the process's wall clock
 * looks skewed as on a host whose clock is off: the cross-rank alignment of `stepprof steps` must
 * correct it. For tests only; never set it in production. This function can't fail. */
uint64_t sp_realtime_ns(void);

#endif
