/* SPDX-License-Identifier: MIT */
/* hookfns.h - the CUDA functions the preload interposes so step markers are counted without CUPTI while
 * detached (preload/markers.c forwards, collector/hold/markhook.c counts). X(symbol, CUPTI's name, driver?,
 * graph?). A marker naming a function not listed keeps stepprof subscribed. */
#ifndef SP_HOOKFNS_H
#define SP_HOOKFNS_H

#define SP_HOOK_FNS(X)                                                      \
	X(cudaDeviceSynchronize, "cudaDeviceSynchronize", 0, 0)             \
	X(cudaStreamSynchronize, "cudaStreamSynchronize", 0, 0)             \
	X(cudaStreamSynchronize_ptsz, "cudaStreamSynchronize_ptsz", 0, 0)   \
	X(cudaEventSynchronize, "cudaEventSynchronize", 0, 0)               \
	X(cudaStreamQuery, "cudaStreamQuery", 0, 0)                         \
	X(cudaStreamQuery_ptsz, "cudaStreamQuery_ptsz", 0, 0)               \
	X(cudaEventQuery, "cudaEventQuery", 0, 0)                           \
	X(cudaEventRecord, "cudaEventRecord", 0, 0)                         \
	X(cudaEventRecord_ptsz, "cudaEventRecord_ptsz", 0, 0)               \
	X(cudaStreamWaitEvent, "cudaStreamWaitEvent", 0, 0)                 \
	X(cudaStreamWaitEvent_ptsz, "cudaStreamWaitEvent_ptsz", 0, 0)       \
	X(cudaMemcpy, "cudaMemcpy", 0, 0)                                   \
	X(cudaMemcpy_ptds, "cudaMemcpy_ptds", 0, 0)                         \
	X(cudaMemcpyAsync, "cudaMemcpyAsync", 0, 0)                         \
	X(cudaMemcpyAsync_ptsz, "cudaMemcpyAsync_ptsz", 0, 0)               \
	X(cudaGraphLaunch, "cudaGraphLaunch", 0, 0)                         \
	X(cudaGraphLaunch_ptsz, "cudaGraphLaunch_ptsz", 0, 0)               \
	X(cudaStreamBeginCapture, "cudaStreamBeginCapture", 0, 1)           \
	X(cudaStreamBeginCapture_ptsz, "cudaStreamBeginCapture_ptsz", 0, 1) \
	X(cudaGraphCreate, "cudaGraphCreate", 0, 1)                         \
	X(cuCtxSynchronize, "cuCtxSynchronize", 1, 0)                       \
	X(cuStreamSynchronize, "cuStreamSynchronize", 1, 0)                 \
	X(cuEventSynchronize, "cuEventSynchronize", 1, 0)                   \
	X(cuGraphLaunch, "cuGraphLaunch", 1, 0)                             \
	X(cuMemcpyDtoH_v2, "cuMemcpyDtoH", 1, 0)                            \
	X(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync", 1, 0)                  \
	X(cuGetErrorName, "cuGetErrorName", 1, 0)                           \
	X(cuStreamBeginCapture_v2, "cuStreamBeginCapture", 1, 1)            \
	X(cuGraphCreate, "cuGraphCreate", 1, 1)                             \
	X(cuCtxSynchronize_v2, "cuCtxSynchronize_v2", 1, 0)                 \
	X(cuStreamSynchronize_ptsz, "cuStreamSynchronize_ptsz", 1, 0)       \
	X(cuEventRecord, "cuEventRecord", 1, 0)                             \
	X(cuEventRecord_ptsz, "cuEventRecord_ptsz", 1, 0)                   \
	X(cuGraphLaunch_ptsz, "cuGraphLaunch_ptsz", 1, 0)                   \
	X(cuMemcpyDtoH_v2_ptds, "cuMemcpyDtoH_v2_ptds", 1, 0)               \
	X(cuMemcpyDtoHAsync_v2_ptsz, "cuMemcpyDtoHAsync_v2_ptsz", 1, 0)     \
	X(cuMemcpy, "cuMemcpy", 1, 0)                                       \
	X(cuMemcpy_ptds, "cuMemcpy_ptds", 1, 0)                             \
	X(cuMemcpyAsync, "cuMemcpyAsync", 1, 0)                             \
	X(cuMemcpyAsync_ptsz, "cuMemcpyAsync_ptsz", 1, 0)                   \
	X(cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture_v2_ptsz", 1, 1)

/* A runtime function and the driver function it calls, for runtimes the hooks cannot see (static ones):
 * X(runtime hook, driver hook). A candidate list measured on cudart 13.0 (docs/ARCHITECTURE.md); the
 * proof (markhook.h) checks it call by call on the real driver. */
#define SP_HOOK_NESTED(X)                                       \
	X(cudaDeviceSynchronize, cuCtxSynchronize)              \
	X(cudaDeviceSynchronize, cuCtxSynchronize_v2)           \
	X(cudaStreamSynchronize, cuStreamSynchronize)           \
	X(cudaStreamSynchronize, cuStreamSynchronize_ptsz)      \
	X(cudaStreamSynchronize_ptsz, cuStreamSynchronize)      \
	X(cudaStreamSynchronize_ptsz, cuStreamSynchronize_ptsz) \
	X(cudaEventSynchronize, cuEventSynchronize)             \
	X(cudaEventRecord, cuEventRecord)                       \
	X(cudaEventRecord, cuEventRecord_ptsz)                  \
	X(cudaEventRecord_ptsz, cuEventRecord)                  \
	X(cudaEventRecord_ptsz, cuEventRecord_ptsz)             \
	X(cudaGraphLaunch, cuGraphLaunch)                       \
	X(cudaGraphLaunch, cuGraphLaunch_ptsz)                  \
	X(cudaGraphLaunch_ptsz, cuGraphLaunch)                  \
	X(cudaGraphLaunch_ptsz, cuGraphLaunch_ptsz)             \
	X(cudaMemcpy, cuMemcpyDtoH_v2)                          \
	X(cudaMemcpy, cuMemcpyDtoH_v2_ptds)                     \
	X(cudaMemcpy, cuMemcpy)                                 \
	X(cudaMemcpy, cuMemcpy_ptds)                            \
	X(cudaMemcpy_ptds, cuMemcpyDtoH_v2)                     \
	X(cudaMemcpy_ptds, cuMemcpyDtoH_v2_ptds)                \
	X(cudaMemcpy_ptds, cuMemcpy)                            \
	X(cudaMemcpy_ptds, cuMemcpy_ptds)                       \
	X(cudaMemcpyAsync, cuMemcpyDtoHAsync_v2)                \
	X(cudaMemcpyAsync, cuMemcpyDtoHAsync_v2_ptsz)           \
	X(cudaMemcpyAsync, cuMemcpyAsync)                       \
	X(cudaMemcpyAsync, cuMemcpyAsync_ptsz)                  \
	X(cudaMemcpyAsync_ptsz, cuMemcpyDtoHAsync_v2)           \
	X(cudaMemcpyAsync_ptsz, cuMemcpyDtoHAsync_v2_ptsz)      \
	X(cudaMemcpyAsync_ptsz, cuMemcpyAsync)                  \
	X(cudaMemcpyAsync_ptsz, cuMemcpyAsync_ptsz)

enum sp_hook_fn {
#define SP_HOOK_ENUM(sym, name, drv, graph) SP_HOOK_##sym,
	SP_HOOK_FNS(SP_HOOK_ENUM)
#undef SP_HOOK_ENUM
		SP_HOOK_N
};

#endif
