/* SPDX-License-Identifier: MIT */
/* share_driver.c - a "CUDA program" with its own CUPTI profiler, for tests/e2e/share.sh: runs
 * STEPS steps of KERNELS kernel launches (runtime launch callbacks + a fake kernel record each)
 * and a cudaDeviceSynchronize (the step marker), and from step FROM to step TO-1 plays a second
 * profiler the way Kineto does: cuptiSubscribe, a runtime launch callback, its own timestamp
 * callback (3 ticks per ns, to check the conversion), its buffer callbacks, CONCURRENT_KERNEL
 * (with DOMAIN set it enables the whole runtime domain instead of the launch callback);
 * at the end of the stretch disables the kind, flushes, turns its callback off and keeps the
 * subscription. Runs with stepprof preloaded (CUPTI calls then reach stepprof's hooks first) or
 * without (FAKE_CUPTI names the fake libcupti). Prints what the second profiler received:
 * "second: callbacks C of E, records R of K, corrdata_bad X, stamp_bad Y, corr_bad Z, subscribe S". */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cupti.h>

static int (*fire)(int, unsigned, int, unsigned);
static int (*kernel)(unsigned);
static struct {
	__typeof__(cuptiSubscribe) *subscribe;
	__typeof__(cuptiEnableCallback) *enable_cb;
	__typeof__(cuptiEnableDomain) *enable_domain;
	__typeof__(cuptiActivityRegisterCallbacks) *reg;
	__typeof__(cuptiActivityRegisterTimestampCallback) *reg_ts;
	__typeof__(cuptiActivityEnable) *enable;
	__typeof__(cuptiActivityDisable) *disable;
	__typeof__(cuptiActivityFlushAll) *flush;
	__typeof__(cuptiActivityGetNextRecord) *next;
} C;
static struct {
	unsigned corr_lo, corr_hi;  /* launches of the stretch */
	uint64_t t_on, t_off;       /* the stretch in the second profiler's clock */
	long callbacks, records, corrdata_bad, stamp_bad, corr_bad, buffers_out;
} P;

static uint64_t my_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) * 3 + 1000000000000ull;
}

static void CUPTIAPI my_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cd = data;
	if (ud != &P || d != CUPTI_CB_DOMAIN_RUNTIME_API || cbid != CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
		return;
	P.callbacks++;
	if (cd->callbackSite == CUPTI_API_ENTER)
		*cd->correlationData = 0xabc000u + cd->correlationId;
	else if (*cd->correlationData != 0xabc000u + cd->correlationId)
		P.corrdata_bad++;
}

static void CUPTIAPI my_requested(uint8_t **buf, size_t *size, size_t *maxrec)
{
	*size = 64 * 1024;
	*buf = aligned_alloc(8, *size);
	*maxrec = 0;
	P.buffers_out++;
}

static void CUPTIAPI my_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;
	while (C.next(buf, valid, &r) == CUPTI_SUCCESS && r) {
		if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			continue;
		const CUpti_ActivityKernel10 *k = (const void *)r;
		P.records++;
		/* 1 us of slack each side (3000 ticks): the conversion is linear, not exact */
		if (k->start + 3000 < P.t_on || k->start > P.t_off + 3000 || k->end < k->start)
			P.stamp_bad++;
		if (k->correlationId < P.corr_lo || k->correlationId >= P.corr_hi)
			P.corr_bad++;
	}
	P.buffers_out--;
	free(buf);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 20, kernels = argc > 2 ? atoi(argv[2]) : 5;
	int from = argc > 3 ? atoi(argv[3]) : 8, to = argc > 4 ? atoi(argv[4]) : 12;
	int step_us = getenv("STEP_US") ? atoi(getenv("STEP_US")) : 3000;
	int domain = getenv("DOMAIN") != NULL; /* the whole runtime domain rather than one callback id */
	int (*init)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
	const char *fake = getenv("FAKE_CUPTI");
	if (fake && !dlopen(fake, RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "driver: %s\n", dlerror());
		return 2;
	}
	if (init)
		init(); /* as cuInit would */
	fire = (int (*)(int, unsigned, int, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_fire");
	kernel = (int (*)(unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_kernel");
#define BIND(f, n) (C.f = (__typeof__(C.f))dlsym(RTLD_DEFAULT, n))
	if (!fire || !kernel || !BIND(subscribe, "cuptiSubscribe") || !BIND(enable_cb, "cuptiEnableCallback") ||
	    !BIND(enable_domain, "cuptiEnableDomain") || !BIND(reg, "cuptiActivityRegisterCallbacks") ||
	    !BIND(reg_ts, "cuptiActivityRegisterTimestampCallback") || !BIND(enable, "cuptiActivityEnable") ||
	    !BIND(disable, "cuptiActivityDisable") || !BIND(flush, "cuptiActivityFlushAll") ||
	    !BIND(next, "cuptiActivityGetNextRecord")) {
		fprintf(stderr, "driver: the fake libcupti is not loaded\n");
		return 2;
	}
	unsigned corr = 1;
	CUpti_SubscriberHandle sub = NULL;
	int sub_r = -1;
	for (int i = 0; i < steps; i++) {
		if (i == from) { /* the program's profiler starts, as torch.profiler's Kineto does */
			sub_r = C.subscribe(&sub, my_callback, &P);
			if (sub_r == CUPTI_SUCCESS && domain)
				C.enable_domain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
			else if (sub_r == CUPTI_SUCCESS)
				C.enable_cb(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
					    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
			C.reg_ts(my_clock);
			C.reg(my_requested, my_completed);
			C.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
			P.t_on = my_clock();
			P.corr_lo = corr;
		}
		for (int j = 0; j < kernels; j++, corr++) {
			fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0, corr);
			kernel(corr);
			fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1, corr);
		}
		usleep(step_us);
		fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 0, corr);
		fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 1, corr);
		corr++;
		if (i == to - 1) { /* it stops: disable, flush, callbacks off, subscription kept */
			P.corr_hi = corr;
			P.t_off = my_clock();
			C.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
			C.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
			if (sub_r == CUPTI_SUCCESS && domain)
				C.enable_domain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
			else if (sub_r == CUPTI_SUCCESS)
				C.enable_cb(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
					    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
		}
	}
	C.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	long expect = (long)(to - from) * kernels;
	printf("second: callbacks %ld of %ld, records %ld of %ld, corrdata_bad %ld, stamp_bad %ld, corr_bad %ld, "
	       "subscribe %d, buffers_out %ld\n",
	       P.callbacks, 2 * expect, P.records, expect, P.corrdata_bad, P.stamp_bad, P.corr_bad, sub_r,
	       P.buffers_out);
	return 0;
}
