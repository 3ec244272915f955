/* SPDX-License-Identifier: MIT */
/* hookfns.h - the CUDA runtime and driver functions the preload library interposes so that step
 * markers can be counted without CUPTI while stepprof is detached between windows
 * (preload/markers.c forwards them; collector/markhook.c counts). X(symbol, CUPTI's name without
 * its version suffix, 1 for the driver API, 1 for a CUDA graph capture or creation). A marker
 * naming a function not listed here keeps stepprof subscribed between windows. */
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
	X(cuGraphCreate, "cuGraphCreate", 1, 1)

enum sp_hook_fn {
#define SP_HOOK_ENUM(sym, name, drv, graph) SP_HOOK_##sym,
	SP_HOOK_FNS(SP_HOOK_ENUM)
#undef SP_HOOK_ENUM
		SP_HOOK_N
};

#endif
