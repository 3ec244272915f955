/* SPDX-License-Identifier: MIT */
/* cupti_life_driver.c - a "CUDA program" for tests/e2e/cupti_life.sh, run with libstepprof
 * preloaded and the fake libcupti configured: it calls the injection entry as cuInit would, then
 * runs STEPS steps of STEP_US microseconds, each ending with a cudaDeviceSynchronize (enter and
 * exit callbacks through fake_cupti_fire; SYNC_US microseconds of the step pass inside it, as in a
 * GPU-bound loop); with GRAPH set it reports a CUDA graph's creation at step 2; THREADS=N more
 * threads fire resource callbacks all along (callbacks in flight while stepprof detaches). With PRINT_STEPS
 * set it prints "STEP i MS" as each step ends (bench/outside.py's format) and runs without stepprof
 * too. With VIA_CUDART=PATH it loads that stand-in libcudart (fakecudart.c) and makes each step's
 * cudaDeviceSynchronize through the dynamic linker, as libtorch does (stepprof's hook first); with
 * BYPASS_AT=i, step i's call goes straight to it (a caller the hook cannot see); GLAUNCH=hooked|direct
 * replays a CUDA graph from the graph's step on, through the linker or past the hooks. With VIA_DRIVER=PATH
 * it is a runtime linked in statically: it dlopens that stand-in libcuda (fakecuda.c) out of the
 * global scope, looks up cuGetProcAddress_v2 with dlsym, asks it for itself and for
 * cuCtxSynchronize, and each step's cudaDeviceSynchronize (its runtime callbacks) calls that in
 * between; BYPASS_AT=i leaves step i's driver call out, STRAY_AT=i adds one after step i's
 * marker call (STRAY_ALL: after every marker call from then on; STRAY_SAME: from the place the
 * runtime's own nested call comes from; with VIA_CUDART too: a runtime the
 * hooks see, beside driver calls of its own). With LAUNCHES=N each step first launches N kernels
 * "adam_fake_K" through the driver API (fake_cupti_launch: callbacks if enabled, a kernel record if
 * CONCURRENT_KERNEL is on; with RT_LAUNCH=1 each inside a runtime cudaLaunchKernel's callbacks,
 * as libtorch launches; RT_LAUNCH=2 the same callbacks and no kernel record, what stepprof's callbacks
 * alone cost), and from step CHANGE_AT on LAUNCHES2 kernels "eval_fake_K" (CHANGE_NAME_fake_K) in steps of
 * STEP2_US (the program's loop changes). Prints "driver: N of M syncs seen" (callbacks stepprof had
 * enabled), and with LAUNCHES "driver: K of L launches seen". With VIA_DRIVER and LAUNCHES the
 * launches go through the stand-in driver's cuLaunchKernel as cuGetProcAddress hands it out (a
 * runtime's launches, looked up at version 12000, at CUDA_VERSION + 20 with LAUNCH_NEWER set (from
 * step LAUNCH_NEWER_AT=i on: looked up again then, at that version); with
 * LAUNCH_DLSYM set found with dlsym on the driver's handle instead; LAUNCH_BYPASS_AT=i: step i's
 * through a launch function no lookup gives, a caller the hooks cannot see), and CAPTURE_AT=i begins a CUDA graph capture in step i (prints whether CUPTI had a
 * subscriber then). REUSE_NAMES set: from CHANGE_AT on the eval kernels are the CUfunctions the
 * first ones were (a module unloaded, another loaded at the same addresses). NO_CONTEXT_EVENT set: no CONTEXT_CREATED callback (a context made before any
 * subscriber). EXTRA_EVERY=K: every K-th step (steps K-1, 2K-1, ...) launches one kernel more
 * (an extra kernel every K iterations: a norm logged); EXTRA_SYNC_EVERY=K (with VIA_CUDART): every
 * K-th step makes one more cudaDeviceSynchronize two thirds into its launches (a norm read);
 * SYNC_EVERY=K: only every K-th step ends with the marker call (a loss read every K steps and
 * nothing else synchronises). LAUNCH_US=N: N microseconds after each launch, out of the step's
 * time (launches spread over the step, as in a launch-bound loop). PROF=...: a profiler inside the program, as torch.profiler's Kineto
 * drives CUPTI (kineto_like.h); then it also runs without stepprof (the stand-in libcupti preloaded
 * instead: the reference). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cupti.h>
#include "kineto_like.h"

static int (*fire)(int, unsigned, int, unsigned);
static atomic_int stop;

/* WATCHDOG=1: a thread that polls cudaEventQuery through the dynamic linker (stepprof's hook first)
 * all along, as PyTorch's NCCL watchdog does */
static void *watchdog(void *arg)
{
	int (*query)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "cudaEventQuery");
	(void)arg;
	while (query && !atomic_load(&stop)) {
		query(NULL);
		usleep(30);
	}
	return NULL;
}

/* LAUNCHER=N (with VIA_DRIVER and LAUNCHES): N threads (1 to 8) that launch kernels through the
 * driver's cuLaunchKernel as cuGetProcAddress handed it out (stepprof's trampoline) all along, as
 * PyTorch's autograd thread does while the main thread makes the marker calls */
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			      CUstream, void **, void **);
typedef CUresult (*coop_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
			    void **);
static launch_fn launcher_lk;
static coop_fn launcher_coop; /* LAUNCH_COOP=1: the launchers' cuLaunchCooperativeKernel instead */
/* The guarded calls (LAUNCH_HOSTFN=1: cuLaunchHostFunc; LAUNCH_MEMSET=1: cuMemsetD8Async, and on
 * threads 2 and 3 cuMemsetD2D8Async; LAUNCH_COPY=1: cuMemcpyHtoDAsync), each looked up as legacy
 * (even threads) and per-thread (odd threads: the _ptsz rows), each checked for what it did (the
 * trampolines pass the arguments through); [0] legacy, [1] per-thread */
typedef CUresult (*hostfn_fn)(CUstream, CUhostFn, void *);
typedef CUresult (*memset_fn)(CUdeviceptr, unsigned char, size_t, CUstream);
typedef CUresult (*memset2_fn)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t, CUstream);
static hostfn_fn launcher_host[2];
static memset_fn launcher_memset[2];
static memset2_fn launcher_memset2[2];
static htod_fn launcher_htod[2];
static _Atomic int guarded_bad; /* a guarded call that did not do what it was asked to */
static _Atomic int guarded_made; /* a guarded call was made */
static void host_mark(void *u)
{
	*(int *)u = 1;
}
/* One guarded call of thread i's kind, checked. Returns 0 if none is set. */
static int guarded_call(int i)
{
	unsigned char buf[64] = { 0 }, src[16];
	int pt = i & 1, ok = 1, seen = 0;
	if (launcher_memset[pt] && !(i & 2)) {
		ok = launcher_memset[pt]((CUdeviceptr)(uintptr_t)(buf + 8), 0x5a, 48, NULL) == CUDA_SUCCESS &&
		     !buf[7] && buf[8] == 0x5a && buf[55] == 0x5a && !buf[56];
	} else if (launcher_memset2[pt] && launcher_memset[pt]) { /* 3 rows of 4 bytes, pitch 16 */
		ok = launcher_memset2[pt]((CUdeviceptr)(uintptr_t)buf, 16, 0x33, 4, 3, NULL) == CUDA_SUCCESS &&
		     buf[3] == 0x33 && !buf[4] && buf[19] == 0x33 && !buf[20] && buf[35] == 0x33 && !buf[36] &&
		     !buf[48];
	} else if (launcher_htod[pt]) {
		memset(src, 0x77, sizeof src);
		ok = launcher_htod[pt]((CUdeviceptr)(uintptr_t)(buf + 1), src, 16, NULL) == CUDA_SUCCESS && !buf[0] &&
		     buf[1] == 0x77 && buf[16] == 0x77 && !buf[17];
	} else if (launcher_host[pt]) {
		ok = launcher_host[pt](NULL, host_mark, &seen) == CUDA_SUCCESS && seen;
	} else {
		return 0;
	}
	if (!ok)
		atomic_store(&guarded_bad, 1);
	return 1;
}
static void *launcher(void *arg)
{
	static const char sym[] = "bwd_fake";
	int i = (int)(intptr_t)arg;
	while (!atomic_load(&stop)) {
		if (guarded_call(i))
			atomic_store(&guarded_made, 1);
		else if (launcher_coop)
			launcher_coop((CUfunction)sym, 1, 1, 1, 1, 1, 1, 0, NULL, NULL);
		else
			launcher_lk((CUfunction)sym, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
		usleep(5);
	}
	return NULL;
}

/* RACE_SPLIT=1 (FAKE_CUPTI_ONE_CORR, launches through fake_cupti_launch): each step's first launch
 * takes its correlation id, then another thread's launch (a later id) reaches the callbacks before
 * it does, as two threads racing into CUPTI; the first call after a boundary at a marker's exit */
static int (*race_launch)(const char *, unsigned);
static atomic_int race_go;
static void *racer(void *arg)
{
	(void)arg;
	for (unsigned c = 5000000; !atomic_load(&stop); usleep(20)) {
		if (atomic_load(&race_go) != 1)
			continue;
		race_launch("race_fake", c++);
		atomic_store(&race_go, 2);
	}
	return NULL;
}

static void *noise(void *arg)
{
	while (!atomic_load(&stop)) {
		fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, 0, 0);
		usleep(20);
	}
	return NULL;
}

/* The runtime's own call of a driver function, always from this one place (as cudart makes the
 * driver call inside its cudaDeviceSynchronize): STRAY_SAME=1 makes the strays from here too. */
static __attribute__((noinline)) CUresult from_runtime(CUresult (*f)(void))
{
	CUresult r = f();
	__asm__ volatile("" ::: "memory"); /* not a tail call: the return address stays here */
	return r;
}

/* 1 if list (numbers separated by commas) holds n. */
static int in_list(const char *list, int n)
{
	for (const char *p = list; *p;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			return 0;
		if (v == n)
			return 1;
		p = *end == ',' ? end + 1 : end;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 40, step_us = argc > 2 ? atoi(argv[2]) : 8000, seen = 0;
	int print = getenv("PRINT_STEPS") != NULL;
	typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	CUresult (*ctx_sync)(void) = NULL, (*ctx_sync2)(CUcontext) = NULL;
	/* RT_CBID: the runtime call each step makes (a callback id the fake names cuda_other_N: a call
	 * stepprof watches only for what it nests) */
	unsigned rt_cbid = getenv("RT_CBID") ? (unsigned)atoi(getenv("RT_CBID"))
					     : CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020;
	int stray_at = getenv("STRAY_AT") ? atoi(getenv("STRAY_AT")) : -1, stray_all = getenv("STRAY_ALL") != NULL;
	int stray_same = getenv("STRAY_SAME") != NULL;
	if (getenv("VIA_DRIVER")) {
		void *h = dlopen(getenv("VIA_DRIVER"), RTLD_NOW | RTLD_LOCAL), *p = NULL;
		gpa_t gpa = h ? (gpa_t)dlsym(h, "cuGetProcAddress_v2") : NULL;
		CUdriverProcAddressQueryResult st;
		if (!gpa || gpa("cuGetProcAddress", &p, 12000, 0, &st) || !p) {
			fprintf(stderr, "driver: no cuGetProcAddress in %s\n", getenv("VIA_DRIVER"));
			return 2;
		}
		Dl_info di;
		printf("driver: cuGetProcAddress_v2 from %s\n", dladdr(p, &di) && di.dli_fname ? di.dli_fname : "?");
		gpa = (gpa_t)p;
		if (gpa("cuCtxSynchronize", (void **)&ctx_sync, 2000, 0, &st) ||
		    gpa("cuCtxSynchronize", (void **)&ctx_sync2, 13000, 0, &st) || ctx_sync2((CUcontext)0x5eed)) {
			fprintf(stderr, "driver: cuCtxSynchronize (2000) or cuCtxSynchronize_v2 (13000) failed\n");
			return 2;
		}
	}
	/* launches through the driver's cuLaunchKernel as a runtime gets it (VIA_DRIVER and LAUNCHES) */
	CUresult (*lk)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
		       void **, void **) = NULL,
				     (*lk_direct)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
						  unsigned, unsigned, CUstream, void **, void **) = NULL,
				     (*capture)(CUstream, CUstreamCaptureMode) = NULL;
	unsigned (*drv_seen)(void) = NULL;
	int (*cap_sub)(void) = NULL;
	gpa_t lgpa = NULL; /* the driver's cuGetProcAddress_v2 as it hands it out */
	/* ALLOC_AT=i,j,...: a block of ALLOC_BYTES (1 MiB) more each time, by the driver's cuMemAlloc as
	 * cuGetProcAddress hands it out; FREE_AT=k: the first of them freed */
	CUresult (*mem_alloc)(CUdeviceptr *, size_t) = NULL;
	CUresult (*mem_free)(CUdeviceptr) = NULL;
	CUdeviceptr blocks[16];
	int nblocks = 0;
	const char *alloc_at = getenv("ALLOC_AT");
	int free_at = getenv("FREE_AT") ? atoi(getenv("FREE_AT")) : -1;
	size_t alloc_bytes = getenv("ALLOC_BYTES") ? (size_t)atol(getenv("ALLOC_BYTES")) : 1u << 20;
	CUdriverProcAddressQueryResult lst;
	int newer_at = getenv("LAUNCH_NEWER_AT") ? atoi(getenv("LAUNCH_NEWER_AT")) : -1;
	if (getenv("VIA_DRIVER") && getenv("LAUNCHES")) {
		void *h = dlopen(getenv("VIA_DRIVER"), RTLD_NOW | RTLD_LOCAL);
		gpa_t gpa = h ? (gpa_t)dlsym(h, "cuGetProcAddress_v2") : NULL;
		void *p = NULL;
		if (gpa && !gpa("cuGetProcAddress", &p, 12000, 0, &lst) && p) {
			lgpa = (gpa_t)p;
			int lver = getenv("LAUNCH_NEWER") ? CUDA_VERSION + 20 : 12000;
			lgpa("cuLaunchKernel", (void **)&lk, lver, 0, &lst);
			printf("driver: cuLaunchKernel looked up at version %d\n", lver);
			lgpa("cuStreamBeginCapture", (void **)&capture, 12000, 0, &lst);
			if (getenv("LAUNCH_COOP"))
				lgpa("cuLaunchCooperativeKernel", (void **)&launcher_coop, 12000, 0, &lst);
			for (int pt = 0; pt < 2; pt++) {
				cuuint64_t fl = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
				if (getenv("LAUNCH_HOSTFN"))
					lgpa("cuLaunchHostFunc", (void **)&launcher_host[pt], 12000, fl, &lst);
				if (getenv("LAUNCH_MEMSET")) {
					lgpa("cuMemsetD8Async", (void **)&launcher_memset[pt], 12000, fl, &lst);
					lgpa("cuMemsetD2D8Async", (void **)&launcher_memset2[pt], 12000, fl, &lst);
				}
				if (getenv("LAUNCH_COPY"))
					lgpa("cuMemcpyHtoDAsync", (void **)&launcher_htod[pt], 12000, fl, &lst);
			}
			lgpa("cuMemAlloc", (void **)&mem_alloc, 12000, 0, &lst);
			lgpa("cuMemFree", (void **)&mem_free, 12000, 0, &lst);
		}
		if (h && getenv("LAUNCH_DLSYM"))
			lk = dlsym(h, "cuLaunchKernel");
		lk_direct = h ? dlsym(h, "fake_cuda_launch_raw") : NULL;
		drv_seen = h ? (unsigned (*)(void))dlsym(h, "fake_cuda_launches_seen") : NULL;
		cap_sub = h ? (int (*)(void))dlsym(h, "fake_cuda_capture_subscribed") : NULL;
		if (!lk || !lk_direct || !drv_seen || !capture || !cap_sub) {
			fprintf(stderr, "driver: no cuLaunchKernel or cuStreamBeginCapture in %s\n",
				getenv("VIA_DRIVER"));
			return 2;
		}
	}
	int lbypass_at = getenv("LAUNCH_BYPASS_AT") ? atoi(getenv("LAUNCH_BYPASS_AT")) : -1;
	int capture_at = getenv("CAPTURE_AT") ? atoi(getenv("CAPTURE_AT")) : -1;
	static char knames[2][256][32]; /* a CUfunction of the fake driver is its name */
	int reuse = getenv("REUSE_NAMES") != NULL; /* the changed kernels in the first ones' CUfunctions */
	const char *change_name = getenv("CHANGE_NAME") ? getenv("CHANGE_NAME") : "eval";
	int (*init)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
	if (!init && !print && !getenv("PROF")) {
		fprintf(stderr, "driver: no InitializeInjection (preload libstepprof)\n");
		return 2;
	}
	if (init)
		init();
	fire = (int (*)(int, unsigned, int, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_fire");
	kl_setup(); /* (after the injection: stepprof loads the stand-in libcupti there) */
	if (!fire && !print && !KL.on) {
		fprintf(stderr, "driver: the fake libcupti is not loaded\n");
		return 2;
	}
	int (*sync)(void) = NULL, (*direct)(void) = NULL, (*glaunch)(void *, void *) = NULL;
	unsigned (*cudart_seen)(void) = NULL;
	int bypass_at = getenv("BYPASS_AT") ? atoi(getenv("BYPASS_AT")) : -1;
	int (*launch)(const char *, unsigned) =
		(int (*)(const char *, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_launch");
	int extra_every = getenv("EXTRA_EVERY") ? atoi(getenv("EXTRA_EVERY")) : 0;
	int xsync_every = getenv("EXTRA_SYNC_EVERY") ? atoi(getenv("EXTRA_SYNC_EVERY")) : 0;
	int sync_every = getenv("SYNC_EVERY") ? atoi(getenv("SYNC_EVERY")) : 1;
	int nl = getenv("LAUNCHES") ? atoi(getenv("LAUNCHES")) : 0,
	    nl2 = getenv("LAUNCHES2") ? atoi(getenv("LAUNCHES2")) : nl;
	int change_at = getenv("CHANGE_AT") ? atoi(getenv("CHANGE_AT")) : -1;
	int rt_launch = getenv("RT_LAUNCH") ? atoi(getenv("RT_LAUNCH")) : 0;
	int step2_us = getenv("STEP2_US") ? atoi(getenv("STEP2_US")) : step_us;
	int launch_us = getenv("LAUNCH_US") ? atoi(getenv("LAUNCH_US")) : 0;
	unsigned lcorr = 2000000, lseen = 0, lall = 0;
	if (getenv("VIA_CUDART")) {
		/* CUDART_LOCAL: as Python loads a wheel's renamed libcudart, out of the global scope */
		void *h = dlopen(getenv("VIA_CUDART"), RTLD_NOW | (getenv("CUDART_LOCAL") ? RTLD_LOCAL : RTLD_GLOBAL));
		sync = (int (*)(void))dlsym(RTLD_DEFAULT, "cudaDeviceSynchronize"); /* the first definition */
		direct = h ? (int (*)(void))dlsym(h, "cudaDeviceSynchronize") : NULL;
		cudart_seen = h ? (unsigned (*)(void))dlsym(h, "fake_cudart_seen") : NULL;
		/* GLAUNCH=hooked: a graph replay each step through the dynamic linker (stepprof's hook
		 * first); GLAUNCH=direct: from the stand-in runtime's handle, past the hooks */
		const char *gl = getenv("GLAUNCH");
		if (gl && h)
			glaunch = (int (*)(void *, void *))dlsym(strcmp(gl, "direct") ? RTLD_DEFAULT : h, "cudaGraphLaunch");
		if (!sync || !direct || !cudart_seen) {
			fprintf(stderr, "driver: cannot load %s: %s\n", getenv("VIA_CUDART"), dlerror());
			return 2;
		}
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned corr = 1;
	int sync_us = getenv("SYNC_US") ? atoi(getenv("SYNC_US")) : 0;
	int head_us = getenv("HEAD_US") ? atoi(getenv("HEAD_US")) : 0;
	pthread_t th[16];
	int nth = fire && getenv("THREADS") ? atoi(getenv("THREADS")) : 0;
	nth = nth < 0 ? 0 : nth > 16 ? 16 : nth;
	if (fire && !getenv("NO_CONTEXT_EVENT")) /* NO_CONTEXT_EVENT: made before anyone subscribed */
		fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, 0, 0);
	for (int i = 0; i < nth; i++)
		pthread_create(&th[i], NULL, noise, NULL);
	pthread_t wd;
	int wd_on = getenv("WATCHDOG") && !pthread_create(&wd, NULL, watchdog, NULL);
	unsigned (*take)(unsigned) = (unsigned (*)(unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_take_corr");
	void (*release)(unsigned) = (void (*)(unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_release_corr");
	pthread_t rt_th;
	race_launch = launch;
	int race_on = getenv("RACE_SPLIT") && take && release && launch && !pthread_create(&rt_th, NULL, racer, NULL);
	pthread_t lt[8];
	launcher_lk = lk;
	int nlt = getenv("LAUNCHER") && lk ? atoi(getenv("LAUNCHER")) : 0, lt_on = 0;
	nlt = nlt < 0 ? 0 : nlt > 8 ? 8 : nlt;
	while (lt_on < nlt && !pthread_create(&lt[lt_on], NULL, launcher, (void *)(intptr_t)lt_on))
		lt_on++;
	for (int i = 0; i < steps; i++) {
		kl_begin_step(i);
		int graph_at = getenv("GRAPH_AT") ? atoi(getenv("GRAPH_AT")) : 2;
		if (fire && i == graph_at && getenv("GRAPH"))
			fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPH_CREATED, 0, 0);
		if (glaunch && i >= graph_at)
			glaunch(NULL, NULL);
		if (getenv("PROG_KIND")) { /* the program's profiler (cupti_share.h) */
			int pa = -1, pb = -1;
			sscanf(getenv("PROG_KIND"), "%d,%d", &pa, &pb);
			CUptiResult (*pk)(CUpti_ActivityKind) = NULL;
			if (i == pa)
				pk = (CUptiResult(*)(CUpti_ActivityKind))dlsym(RTLD_DEFAULT, "cuptiActivityEnable");
			if (i == pb)
				pk = (CUptiResult(*)(CUpti_ActivityKind))dlsym(RTLD_DEFAULT, "cuptiActivityDisable");
			if (pk)
				printf("driver: step %d program kind %s: %d\n", i, i == pa ? "on" : "off",
				       (int)pk(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
		}
		int changed = change_at >= 0 && i >= change_at;
		if (capture && i == capture_at)
			capture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL);
		if (mem_alloc && alloc_at && nblocks < 16 && in_list(alloc_at, i)) {
			/* ALLOC_RT: inside a runtime cudaMalloc, as libcudart makes it (CUPTI reports both) */
			struct {
				void **p;
				size_t n;
			} rp = { (void **)&blocks[nblocks], alloc_bytes * (size_t)(nblocks + 1) };
			int (*firep)(int, unsigned, int, unsigned, const void *) =
				getenv("ALLOC_RT")
					? (int (*)(int, unsigned, int, unsigned,
						   const void *))dlsym(RTLD_DEFAULT, "fake_cupti_fire_params")
					: NULL;
			if (firep)
				firep(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 0, corr,
				      &rp);
			if (mem_alloc(&blocks[nblocks], rp.n) == CUDA_SUCCESS)
				printf("driver: step %d allocated %zu bytes\n", i, alloc_bytes * (size_t)(++nblocks));
			if (firep)
				firep(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 1, corr++,
				      &rp);
		}
		if (mem_free && i == free_at && nblocks > 0 && mem_free(blocks[0]) == CUDA_SUCCESS)
			printf("driver: step %d freed the first block\n", i);
		if (lgpa && i == newer_at) { /* a library loaded late (cuBLAS at the first GEMM) */
			lgpa("cuLaunchKernel", (void **)&lk, CUDA_VERSION + 20, 0, &lst);
			printf("driver: cuLaunchKernel looked up at version %d in step %d\n", CUDA_VERSION + 20, i);
		}
		int extra = extra_every > 0 && i % extra_every == extra_every - 1;
		int xsync = xsync_every > 0 && i % xsync_every == xsync_every - 1;
		for (int k = 0, n = changed ? nl2 : nl + extra; (launch || lk) && k < n; k++) {
			if (xsync && sync && k == n * 2 / 3)
				sync();
			/* (the fake libcupti's launches keep the name in one stack buffer: the name cache by
			 * address (collector.c sp_coll_name_id) must check the name; a CUfunction needs its own) */
			char buf[32], *sym = lk ? knames[changed && !reuse][k & 255] : buf;
			snprintf(sym, sizeof buf, "%s_fake_%d", changed ? change_name : "adam", k & 255);
			if (lk)
				(i == lbypass_at ? lk_direct : lk)((CUfunction)sym, 1, 1, 1, 1, 1, 1, 0, NULL, NULL,
								   NULL);
			else if (rt_launch) { /* cudaLaunchKernel around the driver's launch, as libtorch's */
				unsigned c = lcorr++;
				fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0,
				     c);
				if (rt_launch == 2) { /* callbacks only: no kernel record (bench/callback_cost.sh) */
					lseen += (unsigned)fire(CUPTI_CB_DOMAIN_DRIVER_API,
								CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0, c);
					fire(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, c);
				} else {
					lseen += (unsigned)launch(sym, c);
				}
				fire(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1,
				     c);
			} else if (race_on && k == 0) { /* taken, overtaken, then in the callbacks */
				unsigned c = lcorr++;
				take(c);
				atomic_store(&race_go, 1);
				while (atomic_load(&race_go) != 2)
					usleep(20);
				atomic_store(&race_go, 0);
				lseen += (unsigned)launch(sym, c);
				release(c);
			} else
				lseen += (unsigned)launch(sym, lcorr++);
			lall++;
			if (launch_us) /* spread over the step, as a launch-bound loop's launches are */
				usleep(launch_us);
		}
		usleep((changed ? step2_us : step_us) - sync_us - head_us -
		       launch_us * (changed ? nl2 : nl + extra));
		if (sync_every > 1 && i % sync_every != sync_every - 1)
			goto timed; /* no marker call in this step */
		if (sync) {
			(i == bypass_at ? direct : sync)();
			if (ctx_sync && (i == stray_at || (stray_all && i > stray_at && stray_at >= 0)))
				(void)(stray_same ? from_runtime(ctx_sync) : ctx_sync());
			goto timed;
		}
		seen += fire && fire(CUPTI_CB_DOMAIN_RUNTIME_API, rt_cbid, 0, corr);
		if (head_us) /* HEAD_US: the runtime call's time before its driver call */
			usleep(head_us);
		if (ctx_sync && i != bypass_at)
			from_runtime(ctx_sync);
		if (sync_us)
			usleep(sync_us);
		if (fire)
			fire(CUPTI_CB_DOMAIN_RUNTIME_API, rt_cbid, 1, corr);
		if (ctx_sync && (i == stray_at || (stray_all && i > stray_at && stray_at >= 0)))
			(void)(stray_same ? from_runtime(ctx_sync) : ctx_sync());
		corr++;
	timed:
		kl_end_step(i);
		if (print) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			printf("STEP %d %.4f\n", i, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
			fflush(stdout);
			t0 = t1;
		}
	}
	atomic_store(&stop, 1);
	if (wd_on)
		pthread_join(wd, NULL);
	for (int i = 0; i < lt_on; i++)
		pthread_join(lt[i], NULL);
	if (atomic_load(&guarded_made))
		printf("driver: guarded calls did %s\n",
		       atomic_load(&guarded_bad) ? "something else" : "what they were asked to");
	if (race_on)
		pthread_join(rt_th, NULL);
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	if (cudart_seen)
		seen = (int)cudart_seen();
	if (drv_seen)
		lseen = drv_seen();
	if (cap_sub && capture_at >= 0)
		printf("driver: graph capture with CUPTI subscribed: %d\n", cap_sub());
	kl_report();
	printf("driver: %d of %d syncs seen\n", seen, steps);
	if (nl)
		printf("driver: %u of %u launches seen\n", lseen, lall);
	return 0;
}
