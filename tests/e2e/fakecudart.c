/* SPDX-License-Identifier: MIT */
/* fakecudart.c - a stand-in libcudart for tests/e2e/cupti_life.sh: its cudaDeviceSynchronize fires
 * the runtime API callbacks through the fake libcupti (fake_cupti_fire), with SYNC_US microseconds
 * inside the call, as the real one does through CUPTI. cupti_life_driver (VIA_CUDART set) loads
 * it RTLD_GLOBAL and calls cudaDeviceSynchronize through the dynamic linker, so stepprof's hook
 * (preload/markers.c) comes first, as it does for libtorch. Its cudaEventQuery stays QUERY_US
 * (default 300) microseconds inside a call the fake libcupti counts as wrapped (fake_cupti_wrapped),
 * as NCCL's watchdog thread polls the real one. Its cudaGraphLaunch fires cudaGraphLaunch's and, inside
 * it, cuGraphLaunch's callbacks around a replay the fake libcupti watches (fake_cupti_graph_launch),
 * counted as a wrapped call. */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#include <cupti.h>

static unsigned corr = 1000000, seen;

__attribute__((visibility("default"))) cudaError_t cudaDeviceSynchronize(void)
{
	static int (*fire)(int, unsigned, int, unsigned);
	static int sync_us = -1;
	if (!fire)
		fire = (int (*)(int, unsigned, int, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_fire");
	if (sync_us < 0)
		sync_us = getenv("SYNC_US") ? atoi(getenv("SYNC_US")) : 0;
	unsigned c = corr++;
	seen += fire && fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 0, c);
	if (sync_us)
		usleep(sync_us);
	if (fire)
		fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 1, c);
	return cudaSuccess;
}

/* Calls whose entry callback stepprof had enabled. */
__attribute__((visibility("default"))) unsigned fake_cudart_seen(void)
{
	return seen;
}

/* A call CUPTI wraps without any callback enabled (the real one's driver entry is instrumented while
 * a subscriber exists): the fake libcupti logs a cuptiFinalize made while one is in progress. */
__attribute__((visibility("default"))) cudaError_t cudaEventQuery(cudaEvent_t e)
{
	static void (*wrapped)(int);
	static int query_us = -1;
	(void)e;
	if (!wrapped)
		wrapped = (void (*)(int))dlsym(RTLD_DEFAULT, "fake_cupti_wrapped");
	if (query_us < 0)
		query_us = getenv("QUERY_US") ? atoi(getenv("QUERY_US")) : 300;
	if (wrapped)
		wrapped(1);
	usleep(query_us);
	if (wrapped)
		wrapped(-1);
	return cudaSuccess;
}

__attribute__((visibility("default"))) cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t st)
{
	static int (*fire)(int, unsigned, int, unsigned);
	static void (*wrapped)(int), (*replay)(void);
	(void)g, (void)st;
	if (!fire) {
		wrapped = (void (*)(int))dlsym(RTLD_DEFAULT, "fake_cupti_wrapped");
		replay = (void (*)(void))dlsym(RTLD_DEFAULT, "fake_cupti_graph_launch");
		fire = (int (*)(int, unsigned, int, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_fire");
	}
	if (!fire || !wrapped || !replay)
		return cudaErrorInitializationError;
	static int glaunch_us = -1;
	if (glaunch_us < 0) /* GLAUNCH_US: each replay blocks this long (a full launch queue) */
		glaunch_us = getenv("GLAUNCH_US") ? atoi(getenv("GLAUNCH_US")) : 0;
	unsigned c = corr++;
	wrapped(1);
	fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 0, c);
	fire(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, 0, c);
	if (glaunch_us)
		usleep(glaunch_us);
	replay();
	fire(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, 1, c);
	fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 1, c);
	wrapped(-1);
	return cudaSuccess;
}

/* A graph's creation: the resource callback CUPTI makes for it (a subscriber must exist first). */
__attribute__((visibility("default"))) cudaError_t cudaGraphCreate(cudaGraph_t *g, unsigned int flags)
{
	static int (*fire)(int, unsigned, int, unsigned);
	(void)flags;
	if (!fire)
		fire = (int (*)(int, unsigned, int, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_fire");
	if (fire)
		fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPH_CREATED, 0, 0);
	if (g)
		*g = (cudaGraph_t)0x1;
	return cudaSuccess;
}
