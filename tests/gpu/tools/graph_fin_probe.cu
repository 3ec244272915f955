// SPDX-License-Identifier: MIT
/* graph_fin_probe.cu - does a CUDA graph survive CUPTI's detach (cuptiFinalize)? Runs a sequence
 * of steps given as letters, each reported with the CUDA error it met:
 *   i  attach: activity callbacks, subscribe, runtime launch and graph-launch callbacks on
 *   t  (after i) CUPTI's timestamps from a CLOCK_MONOTONIC callback, as stepprof's
 *   d  (after i) every runtime and driver API callback on, as while recording API calls
 *   k  CONCURRENT_KERNEL on      K  off, flushed
 *   m  MEMCPY, MEMSET and SYNCHRONIZATION on, as stepprof's windows    M  off
 *   f  detach: unsubscribe, cuptiFinalize (from a thread of its own, as stepprof's writer)
 *   c  capture a graph of 20 kernels (each adds to a buffer) and instantiate it
 *   l  launch the graph 20 times and 20 eager kernels, synchronise, check the buffer's sum
 * Exit 0 if every launch step got the right sum and no CUDA error, else 1.
 * Build: nvcc -O2 -o graph_fin_probe graph_fin_probe.cu -lcupti (CUPTI's include and lib dirs). */
#include <cuda_runtime.h>
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__global__ void add_one(int *p) { atomicAdd(p + threadIdx.x, 1); }

static CUpti_SubscriberHandle sub;
static unsigned long long recs;

static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = (uint8_t *)aligned_alloc(8, 1 << 20); *s = 1 << 20; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v) { (void)c, (void)sid, (void)s; recs += v; free(b); }
static void CUPTIAPI cb(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data) { (void)u, (void)d, (void)id, (void)data; }
static uint64_t CUPTIAPI mono(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec; }
static void *fin(void *x) { (void)x; cuptiUnsubscribe(sub); CUptiResult r = cuptiFinalize(); if (r) printf("  cuptiFinalize %d\n", (int)r); return NULL; }

int main(int argc, char **argv)
{
	const char *seq = argc > 1 ? argv[1] : "iclklKfl";
	int *buf, host[32], expect = 0, bad = 0;
	cudaStream_t st;
	cudaGraphExec_t exec = NULL;
	cudaMalloc(&buf, 32 * sizeof(int));
	cudaMemset(buf, 0, 32 * sizeof(int));
	cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
	for (const char *p = seq; *p; p++) {
		cudaError_t e = cudaSuccess;
		CUptiResult r = CUPTI_SUCCESS;
		switch (*p) {
		case 'i':
			r = cuptiActivityRegisterCallbacks(req, done);
			if (!r) r = cuptiSubscribe(&sub, cb, NULL);
			if (!r) r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
			if (!r) r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000);
			break;
		case 't': r = cuptiActivityRegisterTimestampCallback(mono); break;
		case 'd':
			r = cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
			if (!r) r = cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
			break;
		case 'm':
			r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
			if (!r) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
			if (!r) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
			break;
		case 'M':
			r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
			if (!r) r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
			if (!r) r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
			break;
		case 'k': r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); break;
		case 'K':
			r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
			if (!r) r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
			break;
		case 'f': { pthread_t t; pthread_create(&t, NULL, fin, NULL); pthread_join(t, NULL); break; }
		case 'c': {
			cudaGraph_t g;
			e = cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
			for (int k = 0; k < 20 && !e; k++)
				add_one<<<1, 32, 0, st>>>(buf);
			if (!e) e = cudaStreamEndCapture(st, &g);
			if (!e) e = cudaGraphInstantiate(&exec, g, 0);
			break;
		}
		case 'l':
			for (int k = 0; k < 20 && !e && exec; k++)
				e = cudaGraphLaunch(exec, st);
			for (int k = 0; k < 20 && !e; k++)
				add_one<<<1, 32, 0, st>>>(buf);
			if (!e) e = cudaStreamSynchronize(st);
			if (!e) e = cudaMemcpy(host, buf, sizeof host, cudaMemcpyDeviceToHost);
			expect += (exec ? 20 * 20 : 0) + 20;
			if (!e && host[0] != expect) { printf("  sum %d, expected %d\n", host[0], expect); bad = 1; }
			break;
		}
		printf("%s step %ld '%c': %s%s cupti %d\n", seq, (long)(p - seq), *p, e ? "CUDA ERROR " : "",
		       e ? cudaGetErrorString(e) : "ok", (int)r);
		if (e) return 1;
	}
	printf("%s: %s (%llu record bytes)\n", seq, bad ? "WRONG SUM" : "fine", recs);
	return bad;
}
