// SPDX-License-Identifier: MIT
/* cupti_floor.c - the benchmark's "CUPTI floor": a CUDA injection library (loaded with
 * CUDA_INJECTION64_PATH) that only enables CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL and drops every
 * filled buffer unread. What it costs is the least any CUPTI-based profiler pays inside a window.
 * CUPTI_FLOOR_MODE picks a variant, to take CUPTI's own costs apart:
 *   kernel (default)  CONCURRENT_KERNEL activity only
 *   sub               subscribed with an empty callback, nothing enabled (the least a subscriber
 *                     pays outside windows)
 *   cb                kernel + empty callbacks on the runtime and driver launch ids (what a
 *                     tracer pays that records launches through callbacks, before doing any work)
 *   act               kernel + RUNTIME and DRIVER activity records (Kineto's way)
 *   ts                kernel, stamped through a timestamp callback reading CLOCK_MONOTONIC
 * With CUPTI_FLOOR_CYCLE set (bench.py --cycle), nothing is enabled at cuInit: the program turns
 * the mode on and off between its steps through cupti_floor_set(), off being stepprof's detach
 * (disable, flush, unsubscribe, cuptiFinalize), so that one process gives the floor's own paired
 * ratio of steps inside windows over steps outside them.
 * It never exits or aborts the host process; at exit it prints how much CUPTI delivered.
 * Build: gcc -O2 -shared -fPIC -I$CUDA/include cupti_floor.c -o libcuptifloor.so -L$CUDA/lib64 -lcupti */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FLOOR_BUFFER_BYTES (8u << 20)

static struct {
	uint64_t buffers;       /* buffers CUPTI handed back */
	uint64_t bytes;         /* valid record bytes in them (dropped unread) */
} floor_g;

static struct {
	/* what the mode turns on; on: turned on (cycle: by cupti_floor_set) */
	int kernel, subscribe, callbacks, api_records, clock, on;
	CUpti_SubscriberHandle sub;
} F;

/* runs on a CUPTI thread. On allocation failure hands CUPTI no buffer (it drops records). */
static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = aligned_alloc(8, FLOOR_BUFFER_BYTES);
	*size = *buf ? FLOOR_BUFFER_BYTES : 0;
	*max_records = 0;
}

/* runs on a CUPTI thread. Drops the records. This function can't fail. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buf, size_t size, size_t valid)
{
	(void)ctx, (void)stream_id, (void)size;
	__atomic_add_fetch(&floor_g.buffers, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&floor_g.bytes, valid, __ATOMIC_RELAXED);
	free(buf);
}

/* Flushes what CUPTI still holds and prints the totals. This function can't fail. */
static void report_at_exit(void)
{
	if (F.on)
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	fprintf(stderr, "cupti_floor: %llu buffers, %llu record bytes dropped\n", (unsigned long long)floor_g.buffers,
		(unsigned long long)floor_g.bytes);
}

/* Does nothing: what CUPTI's dispatch costs by itself. */
static void CUPTIAPI empty_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	(void)ud, (void)dom, (void)cbid, (void)data;
}

/* CUPTI's clock in mode ts. This function can't fail. */
static uint64_t CUPTIAPI monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Enables the callbacks of the runtime and driver launch ids (all variants) on sub. */
static CUptiResult enable_launch_callbacks(CUpti_SubscriberHandle sub)
{
	static const CUpti_CallbackId rt[] = {
		CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
		CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
		CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
		CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
	};
	static const CUpti_CallbackId drv[] = {
		CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
		CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
		CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
		CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	};
	CUptiResult r = CUPTI_SUCCESS;
	for (size_t i = 0; i < sizeof rt / sizeof *rt && r == CUPTI_SUCCESS; i++)
		r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, rt[i]);
	for (size_t i = 0; i < sizeof drv / sizeof *drv && r == CUPTI_SUCCESS; i++)
		r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, drv[i]);
	return r;
}

/* Prints CUPTI's error for what and returns r. This function can't fail. */
static CUptiResult said(CUptiResult r, const char *what)
{
	const char *msg = NULL;
	if (r != CUPTI_SUCCESS) {
		cuptiGetResultString(r, &msg);
		fprintf(stderr, "cupti_floor: %s: CUPTI error %d: %s\n", what, (int)r, msg ? msg : "?");
	}
	return r;
}

/* Turns on what the mode wants. On a CUPTI error returns it (said), with part of it maybe on. */
static CUptiResult floor_on(void)
{
	CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r == CUPTI_SUCCESS && F.clock)
		r = cuptiActivityRegisterTimestampCallback(monotonic_ns);
	if (r == CUPTI_SUCCESS && F.subscribe)
		r = cuptiSubscribe(&F.sub, empty_callback, NULL);
	if (r == CUPTI_SUCCESS && F.callbacks)
		r = enable_launch_callbacks(F.sub);
	if (r == CUPTI_SUCCESS && F.kernel)
		r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (r == CUPTI_SUCCESS && F.api_records)
		r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
	if (r == CUPTI_SUCCESS && F.api_records)
		r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
	F.on = r == CUPTI_SUCCESS;
	return said(r, "turning on");
}

/* stepprof's detach: everything off, records flushed (and dropped), CUPTI finalised. On a CUPTI
 * error returns it (said). */
static CUptiResult floor_off(void)
{
	CUptiResult r = CUPTI_SUCCESS;
	if (F.kernel)
		r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (r == CUPTI_SUCCESS && F.api_records)
		r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
	if (r == CUPTI_SUCCESS && F.api_records)
		r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
	if (r == CUPTI_SUCCESS)
		r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (r == CUPTI_SUCCESS && F.subscribe)
		r = cuptiUnsubscribe(F.sub);
	if (r == CUPTI_SUCCESS)
		r = cuptiFinalize();
	F.on = 0;
	return said(r, "turning off");
}

/* Cycle mode: turns the mode on (1) or off (0) between two steps of the program, never from
 * inside a CUDA call. Returns 0, or -1 on a CUPTI error (said; the floor stays off from then). */
__attribute__((visibility("default"))) int cupti_floor_set(int on)
{
	static int broken;
	if (broken || !on == !F.on)
		return broken ? -1 : 0;
	broken = (on ? floor_on() : floor_off()) != CUPTI_SUCCESS;
	if (broken && F.on)
		floor_off();
	return broken ? -1 : 0;
}

/* Called by the CUDA driver at cuInit. On a CUPTI error prints it and returns 0 with nothing
 * enabled (the process runs on unprofiled). */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
	const char *mode = getenv("CUPTI_FLOOR_MODE"), *cycle = getenv("CUPTI_FLOOR_CYCLE");
	F.kernel = 1;
	if (!mode || !*mode)
		mode = "kernel";
	if (!strcmp(mode, "sub"))
		F.kernel = 0, F.subscribe = 1;
	else if (!strcmp(mode, "cb"))
		F.subscribe = F.callbacks = 1;
	else if (!strcmp(mode, "act"))
		F.api_records = 1;
	else if (!strcmp(mode, "ts"))
		F.clock = 1;
	else if (strcmp(mode, "kernel")) {
		fprintf(stderr, "cupti_floor: unknown CUPTI_FLOOR_MODE %s (kernel, sub, cb, act, ts)\n", mode);
		return 0;
	}
	if (!(cycle && *cycle) && floor_on() != CUPTI_SUCCESS)
		return 0;
	atexit(report_at_exit);
	fprintf(stderr, "cupti_floor: mode %s enabled%s\n", mode, cycle && *cycle ? " (cycled by the program)" : "");
	return 1;
}
