/* SPDX-License-Identifier: MIT */
/* phases_driver.c - a "CUDA program" with two phases for tests/e2e/phases.sh, run with libstepprof
 * preloaded and the fake libcupti (fakecupti.c): ROUNDS rounds of one inference call (a
 * cudaStreamSynchronize, enter and exit) followed by MICRO training micro-batches (each a
 * cudaDeviceSynchronize), STEP_US microseconds apart. Each call comes after its kernels: 2 launches
 * (cudaLaunchKernel, each with one fake kernel record) before an inference call, 3 before a
 * micro-batch. DRIVER_NESTED=1: each micro-batch first makes a cudaStreamSynchronize inside which a
 * kernel is launched through the driver (cuLaunchKernel), as a runtime call that launches kernels
 * internally does (stepprof counts launches at the outermost call: that kernel is not counted).
 * COPY_AFTER=1: each micro-batch's launches are followed by a cudaMemcpyAsync (one fake DtoD copy
 * record, fakecupti.c fake_cupti_copy: late or lost as FAKE_CUPTI_LATE_CORR / _LOSE_CORR say)
 * before its call.
 * CAPTURE=A:B: the launches of micro-batches A to B go into a CUDA stream capture (no kernel record):
 * a cudaStreamBeginCapture on the launches' stream before A's launches, a cudaStreamEndCapture
 * after B's, each a call of its own. Every launch names that stream in its parameters, but with
 * CAPTURE_JOIN=1 the captured ones name another stream (one that joined the capture through an
 * event) and CUPTI's GRAPHNODE_CREATED callback comes inside each of them.
 * Prints "driver: I infer, T train calls". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cupti.h>

#define CAPTURE_STREAM ((cudaStream_t)0x1000) /* the stream every launch names */
#define JOINED_STREAM ((cudaStream_t)0x2000)  /* CAPTURE_JOIN's: not the one that began the capture */

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3, micro = argc > 2 ? atoi(argv[2]) : 4;
	int step_us = argc > 3 ? atoi(argv[3]) : 3000, infer = 0, train = 0;
	int (*init)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
	if (!init) {
		fprintf(stderr, "driver: no InitializeInjection (preload libstepprof)\n");
		return 2;
	}
	init(); /* loads the fake libcupti, as the configuration names it */
	int (*fire)(int, unsigned, int, unsigned) =
		(int (*)(int, unsigned, int, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_fire");
	int (*kernel)(unsigned) = (int (*)(unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_kernel");
	int (*fire_p)(int, unsigned, int, unsigned, const void *) =
		(int (*)(int, unsigned, int, unsigned, const void *))dlsym(RTLD_DEFAULT, "fake_cupti_fire_params");
	if (!fire || !kernel || !fire_p) {
		fprintf(stderr, "driver: the fake libcupti is not loaded\n");
		return 2;
	}
	fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, 0, 0);
	unsigned corr = 1;
	int nested = getenv("DRIVER_NESTED") != NULL, copy_after = getenv("COPY_AFTER") != NULL;
	int (*copy)(unsigned) = (int (*)(unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_copy");
	int cap_from = -100, cap_to = -200, join = getenv("CAPTURE_JOIN") != NULL;
	if (getenv("CAPTURE") && sscanf(getenv("CAPTURE"), "%d:%d", &cap_from, &cap_to) != 2)
		cap_from = -100, cap_to = -200; /* none (m = -1 is the inference call) */
	cudaLaunchKernel_v7000_params lp = { .stream = CAPTURE_STREAM };
	cudaStreamBeginCapture_v10000_params bp = { .stream = CAPTURE_STREAM,
						    .mode = cudaStreamCaptureModeThreadLocal };
	cudaStreamEndCapture_v10000_params ep = { .stream = CAPTURE_STREAM };
	for (int r = 0; r < rounds; r++) {
		for (int m = -1; m < micro; m++) { /* m = -1: the inference call */
			unsigned cb = m < 0 ? CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020
					    : CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020;
			if (nested && m >= 0) { /* a runtime call that is not a launch, launching one kernel */
				unsigned sync = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
					 drv = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
				fire(CUPTI_CB_DOMAIN_RUNTIME_API, sync, 0, corr);
				fire(CUPTI_CB_DOMAIN_DRIVER_API, drv, 0, corr);
				kernel(corr);
				fire(CUPTI_CB_DOMAIN_DRIVER_API, drv, 1, corr);
				fire(CUPTI_CB_DOMAIN_RUNTIME_API, sync, 1, corr++);
			}
			int captured = r == 0 && m >= cap_from && m <= cap_to;
			if (r == 0 && m == cap_from) {
				unsigned c = CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000;
				fire_p(CUPTI_CB_DOMAIN_RUNTIME_API, c, 0, corr, &bp);
				fire_p(CUPTI_CB_DOMAIN_RUNTIME_API, c, 1, corr++, &bp);
			}
			lp.stream = captured && join ? JOINED_STREAM : CAPTURE_STREAM;
			for (int k = 0; k < (m < 0 ? 2 : 3); k++, corr++) {
				fire_p(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0,
				       corr, &lp);
				if (captured && join)
					fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, 0, 0);
				if (!captured) /* a captured launch runs nothing: no kernel record */
					kernel(corr);
				fire_p(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1,
				       corr, &lp);
			}
			if (r == 0 && m == cap_to) {
				unsigned c = CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000;
				fire_p(CUPTI_CB_DOMAIN_RUNTIME_API, c, 0, corr, &ep);
				fire_p(CUPTI_CB_DOMAIN_RUNTIME_API, c, 1, corr++, &ep);
			}
			if (copy_after && copy && m >= 0) {
				unsigned c = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
				fire(CUPTI_CB_DOMAIN_RUNTIME_API, c, 0, corr);
				copy(corr);
				fire(CUPTI_CB_DOMAIN_RUNTIME_API, c, 1, corr++);
			}
			fire(CUPTI_CB_DOMAIN_RUNTIME_API, cb, 0, corr);
			usleep(step_us);
			fire(CUPTI_CB_DOMAIN_RUNTIME_API, cb, 1, corr++);
			*(m < 0 ? &infer : &train) += 1;
		}
	}
	printf("driver: %d infer, %d train calls\n", infer, train);
	return 0;
}
