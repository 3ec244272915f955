/* SPDX-License-Identifier: MIT */
/* clock.c - the anchor behind sp_fast_ns (clock.h): pairs of (time-stamp counter, CLOCK_MONOTONIC)
 * taken by the writer thread every pass (before it runs, by the thread that feeds the step detector:
 * windows.c), published under a sequence counter; one thread at a time anchors.
 * Also the wall-clock reading of the anchors, with its test offset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "log.h"

/* A pair is (counter, clock), the counter read before and after the clock (error: half their distance); wider
 * pairs were interrupted and are dropped, and the rate waits for MIN_BASELINE_NS so pair errors stay small. */
#define MAX_PAIR_TICKS 2000
#define MIN_BASELINE_NS 10000000ull

struct sp_tsc_anchor sp_tsc;

#if defined(__x86_64__)
static void anchor(void);
#endif

static struct {
	int checked, usable;     /* clocksource looked at; it is the TSC */
	uint64_t first_tsc, first_ns;
} clock_anchor;

/* 1 if the kernel keeps CLOCK_MONOTONIC with the TSC (then the counter is invariant and in step
 * across CPUs, or the kernel would have dropped it). */
static int clocksource_is_tsc(void)
{
	char cs[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	if (!f)
		return 0;
	if (!fgets(cs, sizeof cs, f))
		cs[0] = 0;
	fclose(f);
	return !strcmp(cs, "tsc\n");
}

void sp_fast_anchor(void)
{
#if defined(__x86_64__)
	static atomic_flag busy = ATOMIC_FLAG_INIT;
	if (atomic_flag_test_and_set_explicit(&busy, memory_order_acquire))
		return; /* another thread is anchoring: one at a time */
	anchor();
	atomic_flag_clear_explicit(&busy, memory_order_release);
#endif
}

#if defined(__x86_64__)
static void anchor(void)
{
	if (!clock_anchor.checked) {
		clock_anchor.checked = 1;
		clock_anchor.usable = clocksource_is_tsc();
	}
	if (!clock_anchor.usable)
		return;
	uint64_t a = __rdtsc(), ns = sp_now_ns(), b = __rdtsc();
	if (b - a > MAX_PAIR_TICKS)
		return;
	uint64_t tsc = a + (b - a) / 2;
	if (!clock_anchor.first_tsc) {
		clock_anchor.first_tsc = tsc;
		clock_anchor.first_ns = ns;
		return;
	}
	if (ns - clock_anchor.first_ns < MIN_BASELINE_NS || tsc <= clock_anchor.first_tsc)
		return;
	uint64_t mult = (uint64_t)(((unsigned __int128)(ns - clock_anchor.first_ns) << 32) /
				   (tsc - clock_anchor.first_tsc));
	uint32_t s = atomic_load_explicit(&sp_tsc.seq, memory_order_relaxed);
	atomic_store_explicit(&sp_tsc.seq, s + 1, memory_order_relaxed); /* odd: readers retry */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&sp_tsc.tsc0, tsc, memory_order_relaxed);
	atomic_store_explicit(&sp_tsc.ns0, ns, memory_order_relaxed);
	atomic_store_explicit(&sp_tsc.mult, mult, memory_order_relaxed);
	atomic_store_explicit(&sp_tsc.seq, s + 2, memory_order_release);
}
#endif

uint64_t sp_realtime_ns(void)
{
	static _Atomic int64_t offset = INT64_MIN; /* INT64_MIN: not read yet */
	struct timespec ts;
	int64_t off = atomic_load_explicit(&offset, memory_order_relaxed);
	if (off == INT64_MIN) {
		const char *v = getenv("STEPPROF_TEST_CLOCK_OFFSET_NS");
		char *end = NULL;
		off = v && *v ? strtoll(v, &end, 10) : 0;
		if (v && *v && (*end || off == INT64_MIN))
			off = 0; /* not a number: no offset */
		if (off)
			sp_warn("STEPPROF_TEST_CLOCK_OFFSET_NS=%lld: this process's wall-clock anchors are shifted "
				"(a test switch)",
				(long long)off);
		atomic_store_explicit(&offset, off, memory_order_relaxed);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + (uint64_t)off;
}
