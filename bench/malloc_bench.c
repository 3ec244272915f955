/* SPDX-License-Identifier: MIT */
/* malloc_bench.c - a malloc-heavy CUDA program for bench/malloc_bench.sh: it initialises CUDA
 * (cuInit + the primary context, so stepprof profiles it), then runs STEPS steps of OPS
 * operations on a table of live blocks; each operation frees one block and allocates another
 * (malloc, calloc, realloc or posix_memalign; mostly small sizes, ~5% of at least 64 KiB: see
 * malloc_mix.h, MIX_LARGE_PERMILLE sets the share), and
 * each step ends with cuCtxSynchronize() (the step marker). The sequence is the same in every
 * run (fixed seed). Prints "step_us T0 T1 ..." (each step boundary to boundary) and
 * "malloc_bench ok steps=S ops=M median_us=X". Any CUDA or allocation error exits 1 naming it.
 *
 * Paired mode (PAIRED = 1): blocks of 6 steps take turns between the program's allocator functions
 * (those a preloaded profiler interposes) and libc's own, looked up in libc past any hooks; the
 * line "step_libc 0 0 0 0 0 0 1 1 ..." says which steps called libc directly. In one process,
 * the ratio of the two kinds of step is what the hooks cost, without the drift of a machine whose
 * speed differs from one process to the next.
 *
 * usage: malloc_bench [STEPS [OPS [SLOTS [PAIRED]]]]     (defaults 60, 20000, 4096, 0)
 * Build with -DMALLOC_BENCH_NO_CUDA for a CUDA-free variant (see below). */
#include <dlfcn.h>
#include <malloc.h>
#ifndef MALLOC_BENCH_NO_CUDA
#include <cuda.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "malloc_mix.h"

#ifdef MALLOC_BENCH_NO_CUDA
/* Built with -DMALLOC_BENCH_NO_CUDA: no CUDA at all, so stepprof's collector never starts and only
 * the hooks' cost with tracking off remains (runs on any machine). */
typedef int CUresult;
#define CUDA_SUCCESS 0
#define cuInit(f) 0
#define cuDeviceGet(d, i) (*(d) = 0)
#define cuDevicePrimaryCtxRetain(c, d) (*(c) = 0)
#define cuCtxSetCurrent(c) 0
#define cuCtxSynchronize() 0
#define cuDevicePrimaryCtxRelease(d) 0
#define cuGetErrorString(r, s) (void)(r)
typedef int CUdevice;
typedef int CUcontext;
#endif

/* Exits 1 naming the call if a CUDA call failed. */
static void cu_check(CUresult r, const char *what)
{
	if (r != CUDA_SUCCESS) {
		const char *s = NULL;
		cuGetErrorString(r, &s);
		fprintf(stderr, "malloc_bench: %s failed: %d (%s)\n", what, (int)r, s ? s : "?");
		exit(1);
	}
}

#define PAIR_BLOCK 6 /* paired mode: steps per turn */

/* Points the mix at libc's own functions (past any preloaded hooks) when libc is 1, else back at
 * the program's. Exits 1 if libc's cannot be found. */
static void use_libc(int libc)
{
	static struct mix_fns own, real;
	if (!own.malloc) {
		void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
		own = F;
		real = (struct mix_fns){ h ? dlsym(h, "malloc") : NULL, h ? dlsym(h, "calloc") : NULL,
					 h ? dlsym(h, "realloc") : NULL, h ? dlsym(h, "free") : NULL,
					 h ? dlsym(h, "posix_memalign") : NULL };
		if (!real.malloc || !real.calloc || !real.realloc || !real.free || !real.posix_memalign) {
			fprintf(stderr, "malloc_bench: cannot find libc's allocator functions\n");
			exit(1);
		}
	}
	F = libc ? real : own;
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 60, ops = argc > 2 ? atoi(argv[2]) : 20000;
	B.nslots = argc > 3 ? (unsigned)atoi(argv[3]) : 4096;
	int paired = argc > 4 && atoi(argv[4]) == 1;
	if (steps < 1 || ops < 1 || B.nslots < 1) {
		fprintf(stderr, "usage: malloc_bench [STEPS [OPS [SLOTS [PAIRED]]]]\n");
		return 2;
	}
	mix_read_settings();
	mix_fix_allocator();
	mix_prefault_heap();
	CUdevice dev;
	CUcontext ctx;
	cu_check(cuInit(0), "cuInit");
	cu_check(cuDeviceGet(&dev, 0), "cuDeviceGet");
	cu_check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	cu_check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	B.slot = calloc(B.nslots, sizeof(*B.slot));
	double *t = malloc((size_t)steps * sizeof(*t)), *sorted = malloc((size_t)steps * sizeof(*sorted));
	if (!B.slot || !t || !sorted) {
		fprintf(stderr, "malloc_bench: no memory for the tables\n");
		return 1;
	}
	if (paired)
		use_libc(0);
	double prev = now_us();
	for (int s = 0; s < steps; s++) {
		if (paired)
			use_libc(s / PAIR_BLOCK % 2);
		for (int k = 0; k < ops; k++)
			operate();
		cu_check(cuCtxSynchronize(), "cuCtxSynchronize");
		double x = now_us();
		t[s] = x - prev;
		prev = x;
	}
	printf("step_us");
	for (int s = 0; s < steps; s++)
		printf(" %.2f", t[s]);
	if (paired) {
		printf("\nstep_libc");
		for (int s = 0; s < steps; s++)
			printf(" %d", s / PAIR_BLOCK % 2);
	}
	memcpy(sorted, t, (size_t)steps * sizeof(*t));
	qsort(sorted, (size_t)steps, sizeof(*sorted), cmp_double);
	printf("\nmalloc_bench ok steps=%d ops=%d median_us=%.2f\n", steps, ops,
	       steps % 2 ? sorted[steps / 2] : (sorted[steps / 2 - 1] + sorted[steps / 2]) / 2);
	for (unsigned i = 0; i < B.nslots; i++)
		free(B.slot[i]);
	free(B.slot);
	free(t);
	free(sorted);
	cu_check(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
	return 0;
}
