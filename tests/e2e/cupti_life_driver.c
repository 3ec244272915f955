/* SPDX-License-Identifier: MIT */
/* cupti_life_driver.c - a "CUDA program" for tests/e2e/cupti_life.sh, run with libstepprof
 * preloaded and the fake libcupti configured: it calls the injection entry as cuInit would, then
 * runs STEPS steps of STEP_US microseconds, each ending with a cudaDeviceSynchronize (enter and
 * exit callbacks through fake_cupti_fire; SYNC_US microseconds of the step pass inside it, as in a
 * GPU-bound loop); with GRAPH set it reports a CUDA graph's creation at step 2. Prints "driver: N
 * of M syncs seen" (callbacks stepprof had enabled). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cupti.h>

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 40, step_us = argc > 2 ? atoi(argv[2]) : 8000, seen = 0;
	int (*init)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
	if (!init) {
		fprintf(stderr, "driver: no InitializeInjection (preload libstepprof)\n");
		return 2;
	}
	init();
	int (*fire)(int, unsigned, int, unsigned) = (int (*)(int, unsigned, int, unsigned))dlsym(RTLD_DEFAULT,
												 "fake_cupti_fire");
	if (!fire) {
		fprintf(stderr, "driver: the fake libcupti is not loaded\n");
		return 2;
	}
	unsigned corr = 1;
	int sync_us = getenv("SYNC_US") ? atoi(getenv("SYNC_US")) : 0;
	fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, 0, 0);
	for (int i = 0; i < steps; i++) {
		if (i == 2 && getenv("GRAPH"))
			fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPH_CREATED, 0, 0);
		usleep(step_us - sync_us);
		seen += fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 0, corr);
		if (sync_us)
			usleep(sync_us);
		fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 1, corr);
		corr++;
	}
	printf("driver: %d of %d syncs seen\n", seen, steps);
	return 0;
}
