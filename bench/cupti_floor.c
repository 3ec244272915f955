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

/* Called by the CUDA driver at cuInit. On a CUPTI error prints it and returns 0 with nothing
 * enabled (the process runs on unprofiled). */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
	const char *msg = NULL, *mode = getenv("CUPTI_FLOOR_MODE");
	static CUpti_SubscriberHandle sub;
	int kernel = 1, subscribe = 0, callbacks = 0, api_records = 0, clock = 0;
	if (!mode || !*mode)
		mode = "kernel";
	if (!strcmp(mode, "sub"))
		kernel = 0, subscribe = 1;
	else if (!strcmp(mode, "cb"))
		subscribe = callbacks = 1;
	else if (!strcmp(mode, "act"))
		api_records = 1;
	else if (!strcmp(mode, "ts"))
		clock = 1;
	else if (strcmp(mode, "kernel")) {
		fprintf(stderr, "cupti_floor: unknown CUPTI_FLOOR_MODE %s (kernel, sub, cb, act, ts)\n", mode);
		return 0;
	}
	CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r == CUPTI_SUCCESS && clock)
		r = cuptiActivityRegisterTimestampCallback(monotonic_ns);
	if (r == CUPTI_SUCCESS && subscribe)
		r = cuptiSubscribe(&sub, empty_callback, NULL);
	if (r == CUPTI_SUCCESS && callbacks)
		r = enable_launch_callbacks(sub);
	if (r == CUPTI_SUCCESS && kernel)
		r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (r == CUPTI_SUCCESS && api_records)
		r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
	if (r == CUPTI_SUCCESS && api_records)
		r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
	if (r != CUPTI_SUCCESS) {
		cuptiGetResultString(r, &msg);
		fprintf(stderr, "cupti_floor: CUPTI error %d: %s\n", (int)r, msg ? msg : "?");
		return 0;
	}
	atexit(report_at_exit);
	fprintf(stderr, "cupti_floor: mode %s enabled\n", mode);
	return 1;
}
