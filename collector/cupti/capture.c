/* SPDX-License-Identifier: MIT */
/* capture.c - the streams under capture (capture.h), from the begin and end capture calls' exits; a launch
 * into one is captured whatever its thread or mode, so the set is the process's. Inside CUPTI callbacks;
 * never calls CUDA. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "capture.h"
#include "collector/base/log.h"

#define SP_CAP_STREAMS 64 /* streams under capture at once (torch captures on one side stream) */
#define SP_PER_THREAD 2   /* cudaStreamPerThread and CU_STREAM_PER_THREAD */

atomic_int sp_cap_open;

/* The streams under capture: keys (stream_key), 0 free. Changed under the lock, read without. */
static struct {
	pthread_mutex_t lock;
	_Atomic uintptr_t key[SP_CAP_STREAMS];
} capturing = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The set's key of stream s as a call of the _ptsz flavour (ptsz) or not names it: its handle,
 * the calling thread's own default stream tagged with its thread id, or 0 for the legacy default
 * stream (it cannot be captured). This function can't fail. */
static uintptr_t stream_key(uintptr_t s, int ptsz)
{
	if (s == SP_PER_THREAD || (s == 0 && ptsz))
		return ((uintptr_t)sp_coll_tid() << 3) | SP_PER_THREAD; /* no handle is 2 mod 8 */
	return s == 1 ? 0 : s;                                       /* 1: cudaStreamLegacy */
}

/* The cooperative launches' parameters begin as the plain launches' do. */
_Static_assert(offsetof(cudaLaunchCooperativeKernel_v9000_params, stream) ==
			       offsetof(cudaLaunchKernel_v7000_params, stream) &&
		       offsetof(cuLaunchCooperativeKernel_params, hStream) == offsetof(cuLaunchKernel_params, hStream),
	       "a cooperative launch's stream is where a launch's is");

/* The stream a launch names in its parameters, and whether it is a _ptsz call; 0 for a call that
 * is no launch or has no parameters. This function can't fail. */
static uintptr_t launch_stream(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *p, int *ptsz)
{
	*ptsz = 0;
	if (!p)
		return 0;
	if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
		switch (cbid) {
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
			*ptsz = 1;
			/* fall through */
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
			return (uintptr_t)((const cudaLaunchKernel_v7000_params *)p)->stream;
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
			*ptsz = 1;
			/* fall through */
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060: {
			const cudaLaunchConfig_t *c = ((const cudaLaunchKernelExC_v11060_params *)p)->config;
			return c ? (uintptr_t)c->stream : 0;
		}
		}
		return 0;
	}
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
		*ptsz = 1;
		/* fall through */
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
		return (uintptr_t)((const cuLaunchKernel_params *)p)->hStream;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
		*ptsz = 1;
		/* fall through */
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
		const CUlaunchConfig *c = ((const cuLaunchKernelEx_params *)p)->config;
		return c ? (uintptr_t)c->hStream : 0;
	}
	}
	return 0;
}

/* 1 begins a capture, -1 ends one, 0 neither; *ptsz: a _ptsz call. This function can't fail. */
static int capture_call(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, int *ptsz)
{
	*ptsz = 0;
	if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
		switch (cbid) {
		case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030:
			*ptsz = 1;
			/* fall through */
		case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030:
			return 1;
		case CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000:
			*ptsz = 1;
			/* fall through */
		case CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000:
			return -1;
		}
		return 0;
	}
	if (dom != CUPTI_CB_DOMAIN_DRIVER_API)
		return 0;
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
	case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz:
	case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz:
		*ptsz = 1;
		/* fall through */
	case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
	case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
	case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph:
		return 1;
	case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz:
		*ptsz = 1;
		/* fall through */
	case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
		return -1;
	}
	return 0;
}

int sp_cap_is_call(CUpti_CallbackDomain dom, CUpti_CallbackId cbid)
{
	int ptsz;
	return capture_call(dom, cbid, &ptsz) != 0;
}

/* Every begin and end call names its stream first, in both APIs. */
_Static_assert(offsetof(cudaStreamBeginCapture_v10000_params, stream) == 0 &&
		       offsetof(cudaStreamBeginCaptureToGraph_v12030_params, stream) == 0 &&
		       offsetof(cudaStreamEndCapture_v10000_params, stream) == 0 &&
		       offsetof(cuStreamBeginCapture_v2_params, hStream) == 0 &&
		       offsetof(cuStreamBeginCaptureToGraph_params, hStream) == 0 &&
		       offsetof(cuStreamEndCapture_params, hStream) == 0,
	       "a capture call's stream is its first parameter");

void sp_cap_call(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, int ok)
{
	int ptsz, what = capture_call(dom, cbid, &ptsz);
	if (!what || !cd->functionParams || (what > 0 && !ok))
		return; /* a begin that failed captures nothing; an end always ends (or there was none) */
	uintptr_t key = stream_key((uintptr_t) * (void *const *)cd->functionParams, ptsz);
	if (!key)
		return;
	pthread_mutex_lock(&capturing.lock);
	int at = -1, free_at = -1;
	for (int i = 0; i < SP_CAP_STREAMS; i++) {
		uintptr_t k = atomic_load_explicit(&capturing.key[i], memory_order_relaxed);
		if (k == key)
			at = i;
		else if (!k && free_at < 0)
			free_at = i;
	}
	/* a runtime call and the driver call it makes both come here: the second changes nothing */
	if (what > 0 && at < 0 && free_at >= 0) {
		atomic_store_explicit(&capturing.key[free_at], key, memory_order_relaxed);
		atomic_fetch_add(&sp_cap_open, 1);
	} else if (what > 0 && at < 0) {
		sp_warn_once("more than %d CUDA streams capture at once: launches into the others are counted as "
			     "launches (their kernels run only in graph replays, and may be said missing)",
			     SP_CAP_STREAMS);
	} else if (what < 0 && at >= 0) {
		atomic_store_explicit(&capturing.key[at], 0, memory_order_relaxed);
		atomic_fetch_sub(&sp_cap_open, 1);
	}
	pthread_mutex_unlock(&capturing.lock);
}

int sp_cap_stream_in(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd)
{
	int ptsz;
	uintptr_t s = launch_stream(dom, cbid, cd->functionParams, &ptsz), key = stream_key(s, ptsz);
	if (!key)
		return 0;
	for (int i = 0; i < SP_CAP_STREAMS; i++)
		if (atomic_load_explicit(&capturing.key[i], memory_order_relaxed) == key)
			return 1;
	return 0;
}
