// SPDX-License-Identifier: MIT
// procaddr_probe.cu - for tests/gpu/procaddr_probe.sh: a loop built with nvcc's default static
// runtime, one tiny kernel and one marker call per step (argv[2] names which), so that each runtime
// marker's driver call - got through cuGetProcAddress, the only way a static runtime reaches the
// driver - can be checked to stand for it (stepprof parks between windows, steps exact). argv[3]:
// host work (a sleep) per step in microseconds, 20000 by default: a window takes ~5 ms to be
// written, so much shorter steps leave nothing to detach for.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <unistd.h>

__global__ void bump(int *p) { p[0]++; }

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "probe: %s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 40, h = 0, *d;
	const char *which = argc > 2 ? argv[2] : "device";
	int host_us = argc > 3 ? atoi(argv[3]) : 20000;
	cudaStream_t s;
	cudaEvent_t ev;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaEventCreate(&ev));
	CK(cudaMalloc(&d, sizeof(int)));
	CK(cudaMemset(d, 0, sizeof(int)));
	cudaGraphExec_t ge = NULL;
	if (!strcmp(which, "graph")) {
		cudaGraph_t g;
		CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
		bump<<<1, 1, 0, s>>>(d);
		CK(cudaStreamEndCapture(s, &g));
		CK(cudaGraphInstantiate(&ge, g, 0));
	}
	CK(cudaStreamSynchronize(s));
	for (int i = 0; i < iters; i++) {
		if (!ge)
			bump<<<1, 1, 0, s>>>(d);
		if (!strcmp(which, "device")) {
			CK(cudaDeviceSynchronize());
		} else if (!strcmp(which, "stream")) {
			CK(cudaStreamSynchronize(s));
		} else if (!strcmp(which, "event")) {
			CK(cudaEventRecord(ev, s));
			CK(cudaEventSynchronize(ev));
		} else if (!strcmp(which, "memcpy")) {
			CK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
		} else if (!strcmp(which, "memcpyasync")) {
			CK(cudaMemcpyAsync(&h, d, sizeof(int), cudaMemcpyDeviceToHost, s));
			CK(cudaStreamSynchronize(s));
		} else if (!strcmp(which, "graph")) {
			CK(cudaGraphLaunch(ge, s));
			CK(cudaStreamSynchronize(s));
		}
		if (host_us > 0)
			usleep((useconds_t)host_us);
	}
	CK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
	printf("probe ok %d %d\n", iters, h);
	return 0;
}
