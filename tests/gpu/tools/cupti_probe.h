/* SPDX-License-Identifier: MIT */
/* cupti_probe.h - the CUPTI states of the CUDA-graph detach probe (graph_fin_probe.cu, and
 * cupti_shim.c for the torch variant): attach with chosen activity kinds and callbacks, a window
 * that switches activity kinds on and off, and the detach stepprof does (kinds off, flush,
 * unsubscribe, cuptiFinalize on a thread of its own). No CUDA calls here; C and C++ alike.
 * A spec is "KEY=VALUE,KEY=VALUE...":
 *   A  activity kinds switched on at attach (before the graph's capture when I=under):
 *      none | K (CONCURRENT_KERNEL) | KM (+MEMCPY, MEMSET) | KMS (+SYNCHRONIZATION) |
 *      all (+RUNTIME, DRIVER, MEMORY2, OVERHEAD, EXTERNAL_CORRELATION) | gt (GRAPH_TRACE alone) |
 *      win (none at attach; KM on only inside probe_window, after the capture: stepprof's windows)
 *   C  callbacks: off (no CUPTI at all) | none (subscribed, nothing enabled) | launch (the kernel
 *      and graph launch ids of both API domains) | domains (the whole runtime and driver domains) |
 *      resource (the whole resource domain: graph, node and exec bookkeeping) | graph (only the
 *      CUPTI_CBID_RESOURCE_GRAPH* ids) | sp (stepprof's set: context and graph creation, launch and
 *      graph launch ids, cudaMalloc/cudaFree)
 *   T  1: CUPTI's timestamps from a CLOCK_MONOTONIC callback, as stepprof's (default 1); 0: not
 * Unknown keys are left to the caller (graph_fin_probe.cu: I, R, F, G, X). */
#ifndef CUPTI_PROBE_H
#define CUPTI_PROBE_H
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct probe_state {
	CUpti_SubscriberHandle sub;
	int attached;                       /* subscribed and not finalized */
	CUpti_ActivityKind on[16];          /* activity kinds switched on, to switch off at detach */
	int non;
	unsigned long long records, callbacks;
	char note[256];                     /* what the attach could not switch on (not fatal) */
	pthread_t fin_thread;
	int fin_started;                    /* fin_thread runs or ran and was not joined */
	volatile int fin_done;
	CUptiResult fin_result;
};
static struct probe_state probe;

/* The value of KEY in spec ("" if absent), copied to out. */
static const char *probe_get(const char *spec, const char *key, char *out, size_t len)
{
	size_t k = strlen(key);
	out[0] = 0;
	for (const char *p = spec; p && *p;) {
		if (!strncmp(p, key, k) && p[k] == '=') {
			const char *e = strchr(p + k + 1, ',');
			size_t n = e ? (size_t)(e - p - k - 1) : strlen(p + k + 1);
			if (n >= len)
				n = len - 1;
			memcpy(out, p + k + 1, n);
			out[n] = 0;
			return out;
		}
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return out;
}

static void CUPTIAPI probe_req(uint8_t **b, size_t *s, size_t *m)
{
	*b = (uint8_t *)aligned_alloc(8, 1 << 20);
	*s = *b ? 1 << 20 : 0;
	*m = 0;
}

static void CUPTIAPI probe_done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
	CUpti_Activity *r = NULL;
	(void)c, (void)sid, (void)s;
	while (v && cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS)
		__atomic_fetch_add(&probe.records, 1, __ATOMIC_RELAXED);
	free(b);
}

static void CUPTIAPI probe_cb(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
	(void)u, (void)d, (void)id, (void)data;
	__atomic_fetch_add(&probe.callbacks, 1, __ATOMIC_RELAXED);
}

static uint64_t CUPTIAPI probe_mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Switches one activity kind on and remembers it; a kind CUPTI refuses goes into the note. */
static void probe_kind(CUpti_ActivityKind k, const char *name)
{
	CUptiResult r = cuptiActivityEnable(k);
	if (r == CUPTI_SUCCESS && probe.non < 16)
		probe.on[probe.non++] = k;
	else if (r != CUPTI_SUCCESS)
		snprintf(probe.note + strlen(probe.note), sizeof probe.note - strlen(probe.note), " %s refused (%d)", name,
			 (int)r);
}

/* Switches on the kinds of an A value (KM for "win"). */
static void probe_kinds(const char *a)
{
	if (!strcmp(a, "gt")) {
		probe_kind(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, "GRAPH_TRACE");
		return;
	}
	if (!*a || !strcmp(a, "none"))
		return;
	probe_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL");
	if (strcmp(a, "K")) {
		probe_kind(CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY");
		probe_kind(CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET");
	}
	if (!strcmp(a, "KMS") || !strcmp(a, "all"))
		probe_kind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION");
	if (!strcmp(a, "all")) {
		probe_kind(CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME");
		probe_kind(CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER");
		probe_kind(CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2");
		probe_kind(CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD");
		probe_kind(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION");
	}
}

/* Switches every kind probe_kinds switched on off, then flushes. */
static CUptiResult probe_kinds_off(void)
{
	CUptiResult r = CUPTI_SUCCESS;
	for (int i = 0; i < probe.non; i++) {
		CUptiResult e = cuptiActivityDisable(probe.on[i]);
		if (e != CUPTI_SUCCESS)
			r = e;
	}
	probe.non = 0;
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	return r;
}

/* Enables the callbacks of a C value. Returns the first CUPTI error, else CUPTI_SUCCESS. */
static CUptiResult probe_callbacks(const char *c)
{
	static const CUpti_CallbackId rt_launch[] = { CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
						      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
						      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
						      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
						      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000 };
	static const CUpti_CallbackId drv_launch[] = { CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
						       CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
						       CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
						       CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
						       CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz };
	CUptiResult r = CUPTI_SUCCESS;
	int launch = !strcmp(c, "launch") || !strcmp(c, "sp");
	for (size_t i = 0; launch && i < sizeof rt_launch / sizeof *rt_launch && !r; i++)
		r = cuptiEnableCallback(1, probe.sub, CUPTI_CB_DOMAIN_RUNTIME_API, rt_launch[i]);
	for (size_t i = 0; launch && i < sizeof drv_launch / sizeof *drv_launch && !r; i++)
		r = cuptiEnableCallback(1, probe.sub, CUPTI_CB_DOMAIN_DRIVER_API, drv_launch[i]);
	if (!r && !strcmp(c, "domains")) {
		r = cuptiEnableDomain(1, probe.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
		if (!r)
			r = cuptiEnableDomain(1, probe.sub, CUPTI_CB_DOMAIN_DRIVER_API);
	}
	if (!r && !strcmp(c, "resource"))
		r = cuptiEnableDomain(1, probe.sub, CUPTI_CB_DOMAIN_RESOURCE);
	if (!r && !strcmp(c, "graph"))
		for (int id = CUPTI_CBID_RESOURCE_GRAPH_CREATED; id <= CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED && !r; id++)
			r = cuptiEnableCallback(1, probe.sub, CUPTI_CB_DOMAIN_RESOURCE, (CUpti_CallbackId)id);
	if (!r && !strcmp(c, "sp")) {
		r = cuptiEnableCallback(1, probe.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
		if (!r)
			r = cuptiEnableCallback(1, probe.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPH_CREATED);
		if (!r)
			r = cuptiEnableCallback(1, probe.sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020);
		if (!r)
			r = cuptiEnableCallback(1, probe.sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020);
	}
	return r;
}

/* Attaches as spec says (C=off: does nothing). Returns CUPTI_SUCCESS or the failing call's error,
 * with *what naming the call; kinds CUPTI refuses are only noted (probe.note). */
static CUptiResult probe_attach(const char *spec, const char **what)
{
	char a[16], c[16], t[8];
	CUptiResult r;
	probe_get(spec, "A", a, sizeof a);
	probe_get(spec, "C", c, sizeof c);
	probe_get(spec, "T", t, sizeof t);
	*what = "";
	if (!strcmp(c, "off"))
		return CUPTI_SUCCESS;
	if (strcmp(t, "0") && (r = cuptiActivityRegisterTimestampCallback(probe_mono)) != CUPTI_SUCCESS)
		return *what = "cuptiActivityRegisterTimestampCallback", r;
	if ((r = cuptiActivityRegisterCallbacks(probe_req, probe_done)) != CUPTI_SUCCESS)
		return *what = "cuptiActivityRegisterCallbacks", r;
	if ((r = cuptiSubscribe(&probe.sub, probe_cb, NULL)) != CUPTI_SUCCESS)
		return *what = "cuptiSubscribe", r;
	probe.attached = 1;
	if ((r = probe_callbacks(c)) != CUPTI_SUCCESS)
		return *what = "enabling callbacks", r;
	if (strcmp(a, "win"))
		probe_kinds(a);
	return CUPTI_SUCCESS;
}

/* A window: on switches KM on (A=win), off switches every kind off and flushes. */
static void probe_window(int on)
{
	if (!probe.attached)
		return;
	if (on)
		probe_kinds("KM");
	else
		probe_kinds_off();
}

static void *probe_fin_main(void *x)
{
	(void)x;
	probe_kinds_off();
	cuptiUnsubscribe(probe.sub);
	probe.fin_result = cuptiFinalize();
	__atomic_store_n(&probe.fin_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Starts the detach on a thread of its own (as stepprof's writer does); probe_fin_join waits. */
static int probe_fin_start(void)
{
	if (!probe.attached) {
		probe.fin_done = 1;
		return 0;
	}
	probe.attached = 0;
	probe.fin_done = 0;
	if (pthread_create(&probe.fin_thread, NULL, probe_fin_main, NULL))
		return -1;
	probe.fin_started = 1;
	return 0;
}

static int probe_fin_busy(void) { return !__atomic_load_n(&probe.fin_done, __ATOMIC_ACQUIRE); }

/* Returns cuptiFinalize's result (CUPTI_SUCCESS when there was nothing to detach). */
static CUptiResult probe_fin_join(void)
{
	if (probe.fin_started) {
		pthread_join(probe.fin_thread, NULL);
		probe.fin_started = 0;
	}
	return probe.fin_result;
}
#endif
