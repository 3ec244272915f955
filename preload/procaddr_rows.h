/* SPDX-License-Identifier: MIT */
/* procaddr_rows.h - the driver functions preload/procaddr.c hands out trampolines for, as X-macro
 * tables: the hooked calls (SP_TRAMPOLINES), the guard-only calls (SP_GUARDS), the allocations
 * (SP_ALLOCS) and the kernel launches (SP_LAUNCHES). Included by procaddr.c only. */
#ifndef SP_PROCADDR_ROWS_H
#define SP_PROCADDR_ROWS_H
#include <cuda.h>
#include "trace/event.h"

#define ANY_PT 2 /* a function without per-thread variant: the same whatever the flags */

/* The trampolines: X(hook, name, first version, versions up to (excluded), per-thread: 0, 1 or ANY_PT,
 * the driver's exported symbol of this ABI, params, args). Bounds from cuda.h (CUDA 13.0); a newer version
 * is trusted only when the driver returned the exported symbol itself. */
#define SP_TRAMPOLINES(X)                                                                                             \
	X(cuCtxSynchronize, "cuCtxSynchronize", 2000, 13000, ANY_PT, "cuCtxSynchronize", (void), ())                  \
	X(cuCtxSynchronize_v2, "cuCtxSynchronize", 13000, 99999, ANY_PT, "cuCtxSynchronize_v2", (CUcontext c), (c))   \
	X(cuStreamSynchronize, "cuStreamSynchronize", 2000, 99999, 0, "cuStreamSynchronize", (CUstream s), (s))       \
	X(cuStreamSynchronize_ptsz, "cuStreamSynchronize", 7000, 99999, 1, "cuStreamSynchronize_ptsz", (CUstream s),  \
	  (s))                                                                                                        \
	X(cuEventSynchronize, "cuEventSynchronize", 2000, 99999, ANY_PT, "cuEventSynchronize", (CUevent e), (e))      \
	X(cuEventRecord, "cuEventRecord", 2000, 99999, 0, "cuEventRecord", (CUevent e, CUstream s), (e, s))           \
	X(cuEventRecord_ptsz, "cuEventRecord", 7000, 99999, 1, "cuEventRecord_ptsz", (CUevent e, CUstream s), (e, s)) \
	X(cuGraphLaunch, "cuGraphLaunch", 10000, 99999, 0, "cuGraphLaunch", (CUgraphExec g, CUstream s), (g, s))      \
	X(cuGraphLaunch_ptsz, "cuGraphLaunch", 10000, 99999, 1, "cuGraphLaunch_ptsz", (CUgraphExec g, CUstream s),    \
	  (g, s))                                                                                                     \
	X(cuMemcpyDtoH_v2, "cuMemcpyDtoH", 3020, 99999, 0, "cuMemcpyDtoH_v2", (void *d, CUdeviceptr s, size_t n),     \
	  (d, s, n))                                                                                                  \
	X(cuMemcpyDtoH_v2_ptds, "cuMemcpyDtoH", 7000, 99999, 1, "cuMemcpyDtoH_v2_ptds",                               \
	  (void *d, CUdeviceptr s, size_t n), (d, s, n))                                                              \
	X(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", 3020, 99999, 0, "cuMemcpyDtoHAsync_v2",                          \
	  (void *d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))                                             \
	X(cuMemcpyDtoHAsync_v2_ptsz, "cuMemcpyDtoHAsync", 7000, 99999, 1, "cuMemcpyDtoHAsync_v2_ptsz",                \
	  (void *d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))                                             \
	X(cuMemcpy, "cuMemcpy", 4000, 99999, 0, "cuMemcpy", (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))      \
	X(cuMemcpy_ptds, "cuMemcpy", 7000, 99999, 1, "cuMemcpy_ptds", (CUdeviceptr d, CUdeviceptr s, size_t n),       \
	  (d, s, n))                                                                                                  \
	X(cuMemcpyAsync, "cuMemcpyAsync", 4000, 99999, 0, "cuMemcpyAsync",                                            \
	  (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))                                       \
	X(cuMemcpyAsync_ptsz, "cuMemcpyAsync", 7000, 99999, 1, "cuMemcpyAsync_ptsz",                                  \
	  (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))                                       \
	X(cuStreamBeginCapture_v2, "cuStreamBeginCapture", 10010, 99999, 0, "cuStreamBeginCapture_v2",                \
	  (CUstream s, CUstreamCaptureMode m), (s, m))                                                                \
	X(cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture", 10010, 99999, 1, "cuStreamBeginCapture_v2_ptsz",      \
	  (CUstream s, CUstreamCaptureMode m), (s, m))                                                                \
	X(cuGraphCreate, "cuGraphCreate", 10000, 99999, ANY_PT, "cuGraphCreate", (CUgraph * g, unsigned f), (g, f))

/* The kernel launches (cuda.h versions, each with a _ptsz variant). Every runtime gets them through
 * cuGetProcAddress; two loads and a tail call while stepprof wants no launch and is detached. */
#define LK_PARAMS                                                                                                 \
	(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh, \
	 CUstream s, void **kp, void **ex)
#define LK_ARGS (f, gx, gy, gz, bx, by, bz, sh, s, kp, ex)
#define LX_PARAMS (const CUlaunchConfig *c, CUfunction f, void **kp, void **ex)
#define LX_ARGS (c, f, kp, ex)
#define LC_PARAMS                                                                                                 \
	(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh, \
	 CUstream s, void **kp)
#define LC_ARGS (f, gx, gy, gz, bx, by, bz, sh, s, kp)
#define SP_LAUNCHES(X)                                                                                             \
	X(cuLaunchKernel, "cuLaunchKernel", 4000, 99999, 0, "cuLaunchKernel", LK_PARAMS, LK_ARGS)                  \
	X(cuLaunchKernel_ptsz, "cuLaunchKernel", 7000, 99999, 1, "cuLaunchKernel_ptsz", LK_PARAMS, LK_ARGS)        \
	X(cuLaunchKernelEx, "cuLaunchKernelEx", 11060, 99999, 0, "cuLaunchKernelEx", LX_PARAMS, LX_ARGS)           \
	X(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", 11060, 99999, 1, "cuLaunchKernelEx_ptsz", LX_PARAMS, LX_ARGS) \
	X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 9000, 99999, 0, "cuLaunchCooperativeKernel",     \
	  LC_PARAMS, LC_ARGS)                                                                                      \
	X(cuLaunchCooperativeKernel_ptsz, "cuLaunchCooperativeKernel", 9000, 99999, 1,                             \
	  "cuLaunchCooperativeKernel_ptsz", LC_PARAMS, LC_ARGS)

/* Other work queued on a stream (host functions, async memsets and copies), counted in flight while
 * subscribed so a detach waits for it; docs/LIMITS.md lists what is not covered. */
#define HF_PARAMS (CUstream s, CUhostFn fn, void *u)
#define HF_ARGS (s, fn, u)
#define MS_PARAMS(T) (CUdeviceptr d, T v, size_t n, CUstream s)
#define MS_ARGS (d, v, n, s)
#define M2_PARAMS(T) (CUdeviceptr d, size_t p, T v, size_t w, size_t h, CUstream s)
#define M2_ARGS (d, p, v, w, h, s)
#define SP_GUARD_MEMSET(X, n, T, P, A)                                                               \
	X(cuMemset##n##Async, "cuMemset" #n "Async", 3020, 99999, 0, "cuMemset" #n "Async", P(T), A) \
	X(cuMemset##n##Async_ptsz, "cuMemset" #n "Async", 7000, 99999, 1, "cuMemset" #n "Async_ptsz", P(T), A)
#define SP_GUARD_COPY(X, k, S)                                                                              \
	X(cuMemcpy##k##Async_v2, "cuMemcpy" #k "Async", 3020, 99999, 0, "cuMemcpy" #k "Async_v2",           \
	  (CUdeviceptr d, S s, size_t n, CUstream st), (d, s, n, st))                                       \
	X(cuMemcpy##k##Async_v2_ptsz, "cuMemcpy" #k "Async", 7000, 99999, 1, "cuMemcpy" #k "Async_v2_ptsz", \
	  (CUdeviceptr d, S s, size_t n, CUstream st), (d, s, n, st))
#define SP_GUARDS(X)                                                                                               \
	X(cuLaunchHostFunc, "cuLaunchHostFunc", 10000, 99999, 0, "cuLaunchHostFunc", HF_PARAMS, HF_ARGS)           \
	X(cuLaunchHostFunc_ptsz, "cuLaunchHostFunc", 10000, 99999, 1, "cuLaunchHostFunc_ptsz", HF_PARAMS, HF_ARGS) \
	SP_GUARD_MEMSET(X, D8, unsigned char, MS_PARAMS, MS_ARGS)                                                  \
	SP_GUARD_MEMSET(X, D16, unsigned short, MS_PARAMS, MS_ARGS)                                                \
	SP_GUARD_MEMSET(X, D32, unsigned int, MS_PARAMS, MS_ARGS)                                                  \
	SP_GUARD_MEMSET(X, D2D8, unsigned char, M2_PARAMS, M2_ARGS)                                                \
	SP_GUARD_MEMSET(X, D2D16, unsigned short, M2_PARAMS, M2_ARGS)                                              \
	SP_GUARD_MEMSET(X, D2D32, unsigned int, M2_PARAMS, M2_ARGS)                                                \
	SP_GUARD_COPY(X, HtoD, const void *)                                                                       \
	SP_GUARD_COPY(X, DtoD, CUdeviceptr)

/* The allocation functions, with what sp_collector_devmem is told after a success (kind SP_MEM_*, free,
 * address or VMM handle, size, device): device memory is tracked while detached; calls CUPTI reports are
 * left to it. Versions from cuda.h (CUDA 13.0). */
#define DEV_CTX (-2)
#define P_DPTR(p) ((p) ? (uint64_t)*(p) : 0)
#define P_HPTR(p) ((p) ? (uint64_t)(uintptr_t)*(p) : 0)
#define SP_ALLOCS(X)                                                                                                   \
	X(cuMemAlloc_v2, "cuMemAlloc", 3020, 99999, ANY_PT, "cuMemAlloc_v2", (CUdeviceptr * p, size_t n), (p, n),      \
	  SP_MEM_DEVICE, 0, P_DPTR(p), n, DEV_CTX)                                                                     \
	X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 99999, ANY_PT, "cuMemAllocPitch_v2",                            \
	  (CUdeviceptr * p, size_t *pitch, size_t w, size_t h, unsigned e), (p, pitch, w, h, e), SP_MEM_PITCHED, 0,    \
	  P_DPTR(p), (pitch ? *pitch : w) * h, DEV_CTX)                                                                \
	X(cuMemFree_v2, "cuMemFree", 3020, 99999, ANY_PT, "cuMemFree_v2", (CUdeviceptr p), (p), SP_MEM_DEVICE, 1,      \
	  (uint64_t)p, 0, DEV_CTX)                                                                                     \
	X(cuMemAllocHost_v2, "cuMemAllocHost", 3020, 99999, ANY_PT, "cuMemAllocHost_v2", (void **p, size_t n), (p, n), \
	  SP_MEM_PINNED, 0, P_HPTR(p), n, DEV_CTX)                                                                     \
	X(cuMemHostAlloc, "cuMemHostAlloc", 2020, 99999, ANY_PT, "cuMemHostAlloc", (void **p, size_t n, unsigned f),   \
	  (p, n, f), SP_MEM_PINNED, 0, P_HPTR(p), n, DEV_CTX)                                                          \
	X(cuMemFreeHost, "cuMemFreeHost", 2000, 99999, ANY_PT, "cuMemFreeHost", (void *p), (p), SP_MEM_PINNED, 1,      \
	  (uint64_t)(uintptr_t)p, 0, DEV_CTX)                                                                          \
	X(cuMemAllocManaged, "cuMemAllocManaged", 6000, 99999, ANY_PT, "cuMemAllocManaged",                            \
	  (CUdeviceptr * p, size_t n, unsigned f), (p, n, f), SP_MEM_MANAGED, 0, P_DPTR(p), n, DEV_CTX)                \
	X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 99999, 0, "cuMemAllocAsync",                                      \
	  (CUdeviceptr * p, size_t n, CUstream s), (p, n, s), SP_MEM_DEVICE_ASYNC, 0, P_DPTR(p), n, DEV_CTX)           \
	X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 99999, 1, "cuMemAllocAsync_ptsz",                            \
	  (CUdeviceptr * p, size_t n, CUstream s), (p, n, s), SP_MEM_DEVICE_ASYNC, 0, P_DPTR(p), n, DEV_CTX)           \
	X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 99999, 0, "cuMemAllocFromPoolAsync",              \
	  (CUdeviceptr * p, size_t n, CUmemoryPool m, CUstream s), (p, n, m, s), SP_MEM_DEVICE_ASYNC, 0, P_DPTR(p), n, \
	  DEV_CTX)                                                                                                     \
	X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, 99999, 1, "cuMemAllocFromPoolAsync_ptsz",    \
	  (CUdeviceptr * p, size_t n, CUmemoryPool m, CUstream s), (p, n, m, s), SP_MEM_DEVICE_ASYNC, 0, P_DPTR(p), n, \
	  DEV_CTX)                                                                                                     \
	X(cuMemFreeAsync, "cuMemFreeAsync", 11020, 99999, 0, "cuMemFreeAsync", (CUdeviceptr p, CUstream s), (p, s),    \
	  SP_MEM_DEVICE, 1, (uint64_t)p, 0, DEV_CTX)                                                                   \
	X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 99999, 1, "cuMemFreeAsync_ptsz", (CUdeviceptr p, CUstream s),  \
	  (p, s), SP_MEM_DEVICE, 1, (uint64_t)p, 0, DEV_CTX)                                                           \
	X(cuMemCreate, "cuMemCreate", 10020, 99999, ANY_PT, "cuMemCreate",                                             \
	  (CUmemGenericAllocationHandle * h, size_t n, const CUmemAllocationProp *prop, unsigned long long f),         \
	  (h, n, prop, f), SP_MEM_VMM, 0, P_DPTR(h), n,                                                                \
	  prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : DEV_CTX)                    \
	X(cuMemRelease, "cuMemRelease", 10020, 99999, ANY_PT, "cuMemRelease", (CUmemGenericAllocationHandle h), (h),   \
	  SP_MEM_VMM, 1, (uint64_t)h, 0, DEV_CTX)
#define AL_ROW(hook, ask, v0, v1, pt, exp, params, args, kind, free, addr, size, dev) \
	X(hook, ask, v0, v1, pt, exp, params, args)
#endif
