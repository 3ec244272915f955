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

/* The trace clock from one unserialised RDTSC scaled against an anchor the writer refreshes, for paths that
 * stamp every host allocation (docs/BENCHMARKS.md). Within a microsecond of sp_now_ns; sp_now_ns itself
 * where the TSC is not usable. This function can't fail. */
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

/* sp_now_ns if precise, else sp_fast_ns, made later than *last (the thread's latest), which it becomes,
 * so a thread's calls keep their order across the two clocks. This function can't fail. */
static inline uint64_t sp_ordered_ns(uint64_t *last, int precise)
{
	uint64_t t = precise ? sp_now_ns() : sp_fast_ns();
	if (t <= *last)
		t = *last + 1;
	*last = t;
	return t;
}

/* Refreshes sp_fast_ns's anchor (writer thread, or the detector's feeding thread before it runs; a no-op
 * while another thread anchors). Can't fail: a failed clocksource check leaves sp_fast_ns on sp_now_ns. */
void sp_fast_anchor(void);
#define SP_FAST_ANCHOR_NS 5000000ull /* between anchors taken outside the writer thread */

/* CLOCK_REALTIME in ns, for the anchors to wall time. Test switch STEPPROF_TEST_CLOCK_OFFSET_NS (signed,
 * read once) skews it so cross-rank alignment can be tested; never in production. This function can't fail. */
uint64_t sp_realtime_ns(void);

#endif
