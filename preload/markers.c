/* SPDX-License-Identifier: MIT */
/* markers.c - hooks on the CUDA functions step markers name (collector/hookfns.h), so marker calls are
 * counted while detached; reached through the dynamic linker only (a static runtime never comes here, and the
 * collector then stays subscribed). Each wrapper resolves once and forwards. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include "collector/collector.h"
#include "resolve.h"

#define SP_EXPORT __attribute__((visibility("default")))

static const char *const rt_libs[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL };
static const char *const drv_libs[] = { "libcuda.so.1", "libcuda.so", NULL };

/* The per-thread default stream variants, declared by the runtime's header only when a program
 * is built for them. */
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int flags);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t g, cudaStream_t s);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode);

/* A wrapper: type, name, the value returned when the real function cannot be found (the library
 * that defines it is not loaded: no caller could have reached it), parameters, arguments. */
#define HOOK(type, fn, libs, fail, params, args)                      \
	SP_EXPORT type fn params                                      \
	{                                                             \
		static type(*real) params;                            \
		if (!real)                                            \
			real = (type(*) params)sp_resolve(#fn, libs); \
		if (!real)                                            \
			return fail;                                  \
		int h = sp_collector_hook_enter(SP_HOOK_##fn);        \
		type r = real args;                                   \
		sp_collector_hook_exit(h);                            \
		return r;                                             \
	}
#define RT(fn, params, args) HOOK(cudaError_t, fn, rt_libs, cudaErrorInitializationError, params, args)
#define DRV(fn, params, args) HOOK(CUresult, fn, drv_libs, CUDA_ERROR_NOT_INITIALIZED, params, args)

RT(cudaDeviceSynchronize, (void), ())
RT(cudaStreamSynchronize, (cudaStream_t s), (s))
RT(cudaStreamSynchronize_ptsz, (cudaStream_t s), (s))
RT(cudaEventSynchronize, (cudaEvent_t e), (e))
RT(cudaStreamQuery, (cudaStream_t s), (s))
RT(cudaStreamQuery_ptsz, (cudaStream_t s), (s))
RT(cudaEventQuery, (cudaEvent_t e), (e))
RT(cudaEventRecord, (cudaEvent_t e, cudaStream_t s), (e, s))
RT(cudaEventRecord_ptsz, (cudaEvent_t e, cudaStream_t s), (e, s))
RT(cudaStreamWaitEvent, (cudaStream_t s, cudaEvent_t e, unsigned int f), (s, e, f))
RT(cudaStreamWaitEvent_ptsz, (cudaStream_t s, cudaEvent_t e, unsigned int f), (s, e, f))
RT(cudaMemcpy, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))
RT(cudaMemcpy_ptds, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))
RT(cudaMemcpyAsync, (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st), (d, s, n, k, st))
RT(cudaMemcpyAsync_ptsz, (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st), (d, s, n, k, st))
RT(cudaGraphLaunch, (cudaGraphExec_t g, cudaStream_t s), (g, s))
RT(cudaGraphLaunch_ptsz, (cudaGraphExec_t g, cudaStream_t s), (g, s))
RT(cudaStreamBeginCapture, (cudaStream_t s, enum cudaStreamCaptureMode m), (s, m))
RT(cudaStreamBeginCapture_ptsz, (cudaStream_t s, enum cudaStreamCaptureMode m), (s, m))
RT(cudaGraphCreate, (cudaGraph_t * g, unsigned int f), (g, f))
DRV(cuCtxSynchronize, (void), ())
DRV(cuStreamSynchronize, (CUstream s), (s))
DRV(cuEventSynchronize, (CUevent e), (e))
DRV(cuGraphLaunch, (CUgraphExec g, CUstream s), (g, s))
DRV(cuMemcpyDtoH_v2, (void *d, CUdeviceptr s, size_t n), (d, s, n))
DRV(cuMemcpyDtoHAsync_v2, (void *d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))
DRV(cuGetErrorName, (CUresult e, const char **p), (e, p))
DRV(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode m), (s, m))
DRV(cuGraphCreate, (CUgraph * g, unsigned int f), (g, f))
