/* SPDX-License-Identifier: MIT */
/* clock.h - the trace clock: CLOCK_MONOTONIC in nanoseconds (vDSO, no syscall). CUPTI is told
 * to stamp its records with it, so CPU and GPU events share one axis. */
#ifndef SP_CLOCK_H
#define SP_CLOCK_H

#include <stdint.h>
#include <time.h>

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

static inline uint64_t sp_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
