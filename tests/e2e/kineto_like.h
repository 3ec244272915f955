/* SPDX-License-Identifier: MIT */
/* kineto_like.h - a profiler inside the test program that drives CUPTI the way torch 2.11's Kineto
 * does under torch.profiler's schedule (pytorch/kineto aba03d0, Feb 2026: libkineto/src/init.cpp,
 * CuptiActivityApi.cpp, GenericActivityProfiler.cpp), for tests/e2e/share_states.sh. Included by
 * cupti_life_driver.c; every CUPTI call goes through the dynamic linker (stepprof's hooks first,
 * as for libkineto inside libtorch_cuda.so).
 *  - its first prepare subscribes and enables the context-creation callback; either failing is
 *    "CUPTI initialization failed": no GPU events for the rest of the run (libkineto_init);
 *  - each prepare registers its clock (3 ticks a ns, a TSC stand-in) and its buffer callbacks and
 *    enables CONCURRENT_KERNEL; its bufferRequested keeps every buffer it hands out, its
 *    bufferCompleted takes back only those ("unknown buffer" otherwise, dropped);
 *  - start (warmup over) throws away what warmup recorded, flushing first if a buffer is out;
 *  - stop disables the kind and takes the completed buffers, flushing (forced) first only if a
 *    buffer is out (CuptiActivityApi::activityBuffers); a record counts if its start lies between
 *    start and stop in its clock (outOfRange). It never unsubscribes.
 * PROF=FROM,WAIT,WARMUP,ACTIVE[,REPEAT]: the schedule from step FROM on (prepare at the start of
 * step FROM + WAIT, as torch.profiler's step() makes it at the end of the step before). Prints
 * "kineto: records R, outside O, unknown U, cpu_only C, sessions S". */
#ifndef KINETO_LIKE_H
#define KINETO_LIKE_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cupti.h>

#define KL_BUFS 64

static struct {
	int on, from, wait, warmup, active, repeat;
	int inited, cpu_only, sessions;
	CUpti_SubscriberHandle sub;
	uint64_t t_start, t_stop;
	pthread_mutex_t lock;
	uint8_t *out[KL_BUFS];   /* buffers handed out, not yet completed (allocatedGpuTraceBuffers_) */
	struct {
		uint8_t *buf;
		size_t valid;
	} ready[KL_BUFS];        /* completed (readyGpuTraceBuffers_) */
	int nready;
	long records, outside, unknown;
	struct {
		__typeof__(cuptiSubscribe) *subscribe;
		__typeof__(cuptiEnableCallback) *enable_cb;
		__typeof__(cuptiActivityRegisterCallbacks) *reg;
		__typeof__(cuptiActivityRegisterTimestampCallback) *reg_ts;
		__typeof__(cuptiActivityEnable) *enable;
		__typeof__(cuptiActivityDisable) *disable;
		__typeof__(cuptiActivityFlushAll) *flush;
		__typeof__(cuptiActivityGetNextRecord) *next;
	} c;
} KL = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t kl_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) * 3 + 1000000000000ull;
}

static void CUPTIAPI kl_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId cbid, const void *data)
{
	(void)ud, (void)d, (void)cbid, (void)data; /* Kineto's switchboard: context creation only */
}

static void CUPTIAPI kl_requested(uint8_t **buf, size_t *size, size_t *maxrec)
{
	*size = 64 * 1024;
	*buf = aligned_alloc(8, *size);
	*maxrec = 0;
	pthread_mutex_lock(&KL.lock);
	for (int i = 0; *buf && i < KL_BUFS; i++)
		if (!KL.out[i]) {
			KL.out[i] = *buf;
			break;
		}
	pthread_mutex_unlock(&KL.lock);
}

static void CUPTIAPI kl_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	int known = 0;
	(void)ctx, (void)stream, (void)size;
	pthread_mutex_lock(&KL.lock);
	for (int i = 0; i < KL_BUFS && !known; i++)
		if (KL.out[i] == buf) {
			KL.out[i] = NULL;
			known = 1;
		}
	if (!known)
		KL.unknown++;
	else if (KL.nready < KL_BUFS) {
		KL.ready[KL.nready].buf = buf;
		KL.ready[KL.nready++].valid = valid;
		buf = NULL;
	}
	pthread_mutex_unlock(&KL.lock);
	if (!known || buf)
		free(buf);
}

/* 1 if a buffer is out (Kineto flushes only then). */
static int kl_any_out(void)
{
	int any = 0;
	pthread_mutex_lock(&KL.lock);
	for (int i = 0; i < KL_BUFS; i++)
		any |= KL.out[i] != NULL;
	pthread_mutex_unlock(&KL.lock);
	return any;
}

/* Takes the completed buffers: counted (count) or thrown away. */
static void kl_take_ready(int count)
{
	pthread_mutex_lock(&KL.lock);
	for (int i = 0; i < KL.nready; i++) {
		CUpti_Activity *r = NULL;
		while (count && KL.c.next(KL.ready[i].buf, KL.ready[i].valid, &r) == CUPTI_SUCCESS && r) {
			if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
				continue;
			const CUpti_ActivityKernel10 *k = (const void *)r;
			if (k->start >= KL.t_start && k->end <= KL.t_stop)
				KL.records++;
			else
				KL.outside++;
		}
		free(KL.ready[i].buf);
	}
	KL.nready = 0;
	pthread_mutex_unlock(&KL.lock);
}

static void kl_setup(void)
{
	const char *p = getenv("PROF");
	KL.repeat = 1;
	if (!p || sscanf(p, "%d,%d,%d,%d,%d", &KL.from, &KL.wait, &KL.warmup, &KL.active, &KL.repeat) < 4)
		return;
#define KL_BIND(f, n) (KL.c.f = (__typeof__(KL.c.f))dlsym(RTLD_DEFAULT, n))
	KL.on = KL_BIND(subscribe, "cuptiSubscribe") && KL_BIND(enable_cb, "cuptiEnableCallback") &&
		KL_BIND(reg, "cuptiActivityRegisterCallbacks") &&
		KL_BIND(reg_ts, "cuptiActivityRegisterTimestampCallback") &&
		KL_BIND(enable, "cuptiActivityEnable") && KL_BIND(disable, "cuptiActivityDisable") &&
		KL_BIND(flush, "cuptiActivityFlushAll") && KL_BIND(next, "cuptiActivityGetNextRecord");
	if (!KL.on)
		fprintf(stderr, "kineto: no CUPTI entry points\n");
}

/* The schedule's phase of step i: 0 none, 1 the prepare step, 2 the start step, 3 the last
 * active step (stop at its end). */
static int kl_phase(int i)
{
	int len = KL.wait + KL.warmup + KL.active, s = i - KL.from;
	if (!KL.on || s < 0 || s / len >= KL.repeat)
		return 0;
	s %= len;
	return s == KL.wait ? 1 : s == KL.wait + KL.warmup ? 2 : s == len - 1 ? 3 : 0;
}

static void kl_prepare(void)
{
	if (!KL.inited) { /* libkineto_init: setupCuptiInitCallback */
		KL.inited = 1;
		if (KL.c.subscribe(&KL.sub, kl_callback, NULL) != CUPTI_SUCCESS ||
		    KL.c.enable_cb(1, KL.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED) !=
			    CUPTI_SUCCESS) {
			KL.cpu_only = 1;
			fprintf(stderr, "kineto: CUPTI initialization failed - CUDA profiler activities will be missing\n");
		}
	}
	if (KL.cpu_only)
		return;
	KL.c.reg_ts(kl_clock);
	KL.c.reg(kl_requested, kl_completed);
	KL.c.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
}

/* At the start of step i. */
static void kl_begin_step(int i)
{
	int ph = kl_phase(i);
	if (ph == 1 || (ph == 2 && !KL.warmup))
		kl_prepare();
	if (ph == 2 || (ph == 1 && !KL.warmup)) { /* startTrace: clearActivities */
		if (!KL.cpu_only && kl_any_out())
			KL.c.flush(0);
		kl_take_ready(0);
		KL.t_start = kl_clock();
	}
}

/* At the end of step i (after its marker call: torch.profiler synchronises first). */
static void kl_end_step(int i)
{
	if (kl_phase(i) != 3 && !(KL.active == 1 && kl_phase(i) == 2))
		return;
	KL.t_stop = kl_clock();
	KL.sessions++;
	if (KL.cpu_only)
		return;
	KL.c.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (kl_any_out()) /* activityBuffers: no flush unless a buffer is out */
		KL.c.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	kl_take_ready(1);
}

static void kl_report(void)
{
	if (KL.on)
		printf("kineto: records %ld, outside %ld, unknown %ld, cpu_only %d, sessions %d\n", KL.records,
		       KL.outside, KL.unknown, KL.cpu_only, KL.sessions);
}

#endif
