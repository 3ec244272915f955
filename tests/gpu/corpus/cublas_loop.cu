// SPDX-License-Identifier: MIT
// cublas_loop.cu - corpus: a CUDA C program calling cuBLAS in a loop, without NVTX: per
// iteration a chain of SGEMMs (a 4-layer linear "forward" and "backward"), a custom update
// kernel, and a blocking copy of a scalar back to the host; the first 3 iterations also zero a
// scratch buffer and allocate (warm-up that differs). Every 40 iterations an "evaluation" of 10
// forward-only passes runs (another periodic regime). The truth is cuGetErrorName at the start
// of each training iteration (never a detector token).
//   nvcc -O2 -arch=sm_90 -o cublas_loop cublas_loop.cu -lcublas -lcuda
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s: %d\n", #x, (int)s_); exit(1); } } while (0)

__global__ void update(float *w, const float *g, int n, float lr)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) w[i] -= lr * g[i];
}

__global__ void reduce_sq(const float *x, int n, float *out)
{
	__shared__ float s[256];
	float acc = 0;
	for (int i = threadIdx.x; i < n; i += 256) acc += x[i] * x[i];
	s[threadIdx.x] = acc;
	__syncthreads();
	for (int k = 128; k > 0; k >>= 1) {
		if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0) *out = s[0];
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 200, n = 1024, L = 4;
	float *w[4], *act[5], *grad, *loss, one = 1, zero = 0, h;
	cublasHandle_t hb;
	CB(cublasCreate(&hb));
	for (int l = 0; l < L; l++) CK(cudaMalloc(&w[l], sizeof(float) * n * n));
	for (int l = 0; l <= L; l++) CK(cudaMalloc(&act[l], sizeof(float) * n * 64));
	CK(cudaMalloc(&grad, sizeof(float) * n * n));
	CK(cudaMalloc(&loss, sizeof(float)));
	for (int l = 0; l < L; l++) CK(cudaMemset(w[l], 0, sizeof(float) * n * n));
	CK(cudaMemset(act[0], 0, sizeof(float) * n * 64));
	const char *drvname;
	for (int it = 0; it < iters; it++) {
		if (it % 40 == 0) {              // evaluation: forward only, a host read each pass
			for (int e = 0; e < 10; e++) {
				for (int l = 0; l < L; l++)
					CB(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, n, 64, n, &one, w[l], n, act[l], n, &zero, act[l + 1], n));
				reduce_sq<<<1, 256>>>(act[L], n * 64, loss);
				CK(cudaMemcpy(&h, loss, sizeof(float), cudaMemcpyDeviceToHost));
			}
		}
		cuGetErrorName(CUDA_SUCCESS, &drvname); // truth: a training iteration begins
		if (it < 3) {                    // warm-up that differs
			float *tmp;
			CK(cudaMalloc(&tmp, 1 << 20));
			CK(cudaMemset(tmp, 0, 1 << 20));
			CK(cudaFree(tmp));
		}
		for (int l = 0; l < L; l++)      // forward
			CB(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, n, 64, n, &one, w[l], n, act[l], n, &zero, act[l + 1], n));
		for (int l = L - 1; l >= 0; l--) { // backward: weight gradient and update per layer
			CB(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_T, n, n, 64, &one, act[l + 1], n, act[l], n, &zero, grad, n));
			update<<<(n * n + 255) / 256, 256>>>(w[l], grad, n * n, 1e-3f);
		}
		reduce_sq<<<1, 256>>>(act[L], n * 64, loss);
		CK(cudaMemcpy(&h, loss, sizeof(float), cudaMemcpyDeviceToHost));
	}
	CK(cudaDeviceSynchronize());
	printf("cublas_loop ok iters=%d loss=%g\n", iters, h);
	return 0;
}
