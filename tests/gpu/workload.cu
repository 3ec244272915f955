// SPDX-License-Identifier: MIT
/* workload.cu - GPU test program with a known launch pattern per iteration, for the GPU suite
 * (tests/gpu/run.sh). Every iteration launches the same ops through every launch path stepprof
 * must see (runtime <<<>>>, cuLaunchKernel, cudaLaunchKernelExC with a cluster, a CUDA graph,
 * an async copy and memset). It checks every CUDA call and exits 1 with a message on error.
 * Usage: workload N [--profiler-range] [--expect FILE] [--host-us US] [--no-graph]
 * --host-us: US microseconds of host work (a sleep) after each iteration's synchronisation, as a
 * data loader's: steps long enough for stepprof to detach between windows.
 * --no-graph: no CUDA graph (a program that made one keeps stepprof subscribed all run).
 * Build: nvcc -O2 -arch=sm_90 [-cudart shared] workload.cu -o workload -lcuda */
#include <cuda.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CK(call)                                                                              \
	do {                                                                                  \
		cudaError_t e_ = (call);                                                      \
		if (e_ != cudaSuccess) {                                                      \
			fprintf(stderr, "workload: %s:%d: %s failed: %s (%d)\n", __FILE__,    \
				__LINE__, #call, cudaGetErrorString(e_), (int)e_);            \
			exit(1);                                                              \
		}                                                                             \
	} while (0)

#define CU(call)                                                                              \
	do {                                                                                  \
		CUresult r_ = (call);                                                         \
		if (r_ != CUDA_SUCCESS) {                                                     \
			const char *s_ = "?";                                                 \
			cuGetErrorString(r_, &s_);                                            \
			fprintf(stderr, "workload: %s:%d: %s failed: %s (%d)\n", __FILE__,    \
				__LINE__, #call, s_, (int)r_);                                \
			exit(1);                                                              \
		}                                                                             \
	} while (0)

#define N_ELEMS (1 << 16)
#define BLOCK 256
#define GRID (N_ELEMS / BLOCK) /* even: a multiple of the cluster size 2 */
#define COPY_BYTES (64 << 10)

/* extern "C": CUPTI reports these names unmangled, so the checks match them exactly */
extern "C" __global__ void step_marker(int *flag, int it)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		*flag = it;
}

#define ELEMENTWISE(name, expr)                                                               \
	extern "C" __global__ void name(float *x, int n)                                      \
	{                                                                                     \
		int i = blockIdx.x * blockDim.x + threadIdx.x;                                \
		if (i < n)                                                                    \
			x[i] = (expr);                                                        \
	}
ELEMENTWISE(k_a, x[i] * 0.5f + 1.0f)
ELEMENTWISE(k_b, x[i] * 0.25f + 2.0f)
ELEMENTWISE(k_drv, x[i] + 3.0f)
ELEMENTWISE(k_ex, x[i] * 0.75f)
ELEMENTWISE(g_k1, x[i] + 1.0f)
ELEMENTWISE(g_k2, x[i] * 0.5f)
ELEMENTWISE(g_k3, x[i] - 1.0f)

/* The expected GPU ops of one iteration, as tests/gpu/check_workload.py reads them. */
static void write_expect(const char *path, int iters, int profiler_range, int graph)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	fprintf(f, "{\n  \"iterations\": %d,\n  \"profiler_range\": %s,\n", iters,
		profiler_range ? "true" : "false");
	fprintf(f, "  \"per_iteration\": {\"step_marker\": 1, \"k_a\": 1, \"k_b\": 1, \"k_drv\": 1, "
		   "\"k_ex\": 1, %s\"memcpy HtoD\": 1, \"memset\": 1},\n",
		graph ? "\"g_k1\": 1, \"g_k2\": 1, \"g_k3\": 1, " : "");
	fprintf(f, "  \"marker_kernel\": \"step_marker\",\n");
	fprintf(f, "  \"launchers\": {\"k_a\": \"cudaLaunchKernel\", \"k_b\": \"cudaLaunchKernel\", "
		   "\"step_marker\": \"cudaLaunchKernel\", \"k_drv\": \"cuLaunchKernel\", "
		   "\"k_ex\": \"cudaLaunchKernelExC\", %s"
		   "\"memcpy HtoD\": \"cudaMemcpyAsync\", \"memset\": \"cudaMemsetAsync\"},\n",
		graph ? "\"g_k1\": \"cudaGraphLaunch\", \"g_k2\": \"cudaGraphLaunch\", \"g_k3\": \"cudaGraphLaunch\", "
		      : "");
	fprintf(f, "  \"graph_kernels\": [%s],\n", graph ? "\"g_k1\", \"g_k2\", \"g_k3\"" : "");
	/* GPU ops of one stream run in launch order: their start times must say so */
	fprintf(f, "  \"stream_order\": [[\"step_marker\", \"k_a\", \"k_drv\", \"memset\"], "
		   "[\"k_b\", \"k_ex\", \"memcpy HtoD\"]%s],\n",
		graph ? ", [\"g_k1\", \"g_k2\", \"g_k3\"]" : "");
	fprintf(f, "  \"copy_bytes\": %d,\n  \"memset_bytes\": %d\n}\n", COPY_BYTES, COPY_BYTES);
	if (fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	int iters = -1, profiler_range = 0, host_us = 0, use_graph = 1;
	const char *expect = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--profiler-range"))
			profiler_range = 1;
		else if (!strcmp(argv[i], "--expect") && i + 1 < argc)
			expect = argv[++i];
		else if (!strcmp(argv[i], "--host-us") && i + 1 < argc)
			host_us = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-graph"))
			use_graph = 0;
		else if (iters < 0 && argv[i][0] >= '0' && argv[i][0] <= '9')
			iters = atoi(argv[i]);
		else {
			fprintf(stderr, "usage: workload N [--profiler-range] [--expect FILE] [--host-us US] [--no-graph]\n");
			return 2;
		}
	}
	if (iters <= 0) {
		fprintf(stderr, "usage: workload N [--profiler-range] [--expect FILE] [--host-us US] [--no-graph]\n");
		return 2;
	}
	if (expect)
		write_expect(expect, iters, profiler_range, use_graph);

	CK(cudaSetDevice(0));
	CK(cudaFree(0)); /* initialises CUDA: stepprof subscribes here, before the capture */

	cudaStream_t s1, s2, s3, cap;
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));

	float *da, *db, *dd, *de, *dg, *dm, *ds, *host;
	int *flag;
	size_t bytes = N_ELEMS * sizeof(float);
	CK(cudaMalloc(&da, bytes));
	CK(cudaMalloc(&db, bytes));
	CK(cudaMalloc(&dd, bytes));
	CK(cudaMalloc(&de, bytes));
	CK(cudaMalloc(&dg, bytes));
	CK(cudaMalloc(&dm, COPY_BYTES));
	CK(cudaMalloc(&ds, COPY_BYTES));
	CK(cudaMalloc(&flag, sizeof(int)));
	CK(cudaMallocHost(&host, COPY_BYTES));
	memset(host, 0, COPY_BYTES);

	/* the graph: three kernels in a row, captured once, replayed once per iteration */
	cudaGraph_t graph;
	cudaGraphExec_t graph_exec = NULL;
	int n = N_ELEMS;
	if (use_graph) {
		CK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal));
		g_k1<<<GRID, BLOCK, 0, cap>>>(dg, n);
		g_k2<<<GRID, BLOCK, 0, cap>>>(dg, n);
		g_k3<<<GRID, BLOCK, 0, cap>>>(dg, n);
		CK(cudaGetLastError());
		CK(cudaStreamEndCapture(cap, &graph));
		CK(cudaGraphInstantiate(&graph_exec, graph, 0));
	}

	cudaFunction_t drv_fn;
	CK(cudaGetFuncBySymbol(&drv_fn, (const void *)k_drv));

	cudaLaunchAttribute ex_attr[1];
	memset(ex_attr, 0, sizeof(ex_attr));
	ex_attr[0].id = cudaLaunchAttributeClusterDimension;
	ex_attr[0].val.clusterDim.x = 2;
	ex_attr[0].val.clusterDim.y = 1;
	ex_attr[0].val.clusterDim.z = 1;
	cudaLaunchConfig_t ex_cfg;
	memset(&ex_cfg, 0, sizeof(ex_cfg));
	ex_cfg.gridDim = dim3(GRID);
	ex_cfg.blockDim = dim3(BLOCK);
	ex_cfg.stream = s2;
	ex_cfg.attrs = ex_attr;
	ex_cfg.numAttrs = 1;

	/* no cudaDeviceSynchronize before the loop: the api-marker test counts them */
	CK(cudaStreamSynchronize(cap));

	for (int it = 0; it < iters; it++) {
		if (profiler_range)
			CK(cudaProfilerStart());
		step_marker<<<1, 32, 0, s1>>>(flag, it);
		k_a<<<GRID, BLOCK, 0, s1>>>(da, n);
		k_b<<<GRID, BLOCK, 0, s2>>>(db, n);
		CK(cudaGetLastError());
		void *drv_args[] = { &dd, &n };
		CU(cuLaunchKernel((CUfunction)drv_fn, GRID, 1, 1, BLOCK, 1, 1, 0, (CUstream)s1, drv_args,
				  NULL));
		void *ex_args[] = { &de, &n };
		CK(cudaLaunchKernelExC(&ex_cfg, (const void *)k_ex, ex_args));
		CK(cudaMemcpyAsync(dm, host, COPY_BYTES, cudaMemcpyHostToDevice, s2));
		CK(cudaMemsetAsync(ds, 0, COPY_BYTES, s1));
		if (use_graph)
			CK(cudaGraphLaunch(graph_exec, s3));
		CK(cudaStreamSynchronize(s1));
		CK(cudaDeviceSynchronize());
		if (profiler_range)
			CK(cudaProfilerStop());
		if (host_us > 0)
			usleep((useconds_t)host_us);
	}

	int last = -1;
	CK(cudaMemcpy(&last, flag, sizeof(int), cudaMemcpyDeviceToHost));
	if (last != iters - 1) {
		fprintf(stderr, "workload: step_marker wrote %d, expected %d\n", last, iters - 1);
		return 1;
	}
	if (use_graph) {
		CK(cudaGraphExecDestroy(graph_exec));
		CK(cudaGraphDestroy(graph));
	}
	CK(cudaFreeHost(host));
	CK(cudaFree(da));
	CK(cudaFree(db));
	CK(cudaFree(dd));
	CK(cudaFree(de));
	CK(cudaFree(dg));
	CK(cudaFree(dm));
	CK(cudaFree(ds));
	CK(cudaFree(flag));
	printf("workload ok %d\n", iters);
	return 0;
}
