/* SPDX-License-Identifier: MIT */
/* fakecuda.c - a stand-in libcuda.so.1 for tests/e2e/cupti_life.sh: what a CUDA runtime linked in
 * statically sees of the driver. It exports cuGetProcAddress and cuGetProcAddress_v2 and hands
 * out its functions by (name, version, flags) as the real one does (cuda.h: cuCtxSynchronize
 * before 13000, cuCtxSynchronize_v2 from 13000; the _ptsz variant with the per-thread flag).
 * With FAKE_CUDA_INTERNAL set it hands out unexported copies of cuCtxSynchronize and of
 * cuGetProcAddress_v2 itself (a driver whose entry points are not its exported symbols). Each call fires the driver API callbacks through
 * the fake libcupti, as the real driver does through CUPTI. FAKE_CUDA_LAUNCH=internal: lookups of
 * cuLaunchKernel get an unexported copy at every version (as the real driver's); =newabi: that
 * copy up to CUDA_VERSION, another one above (a newer ABI under the same name). Prints at exit how
 * many times it was asked a kernel's name. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cupti.h>

#define EXPORT __attribute__((visibility("default")))

static unsigned corr = 2000000, calls;

static void fire(unsigned cbid, int site)
{
	static int (*f)(int, unsigned, int, unsigned);
	if (!f)
		f = (int (*)(int, unsigned, int, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_fire");
	if (f)
		f(CUPTI_CB_DOMAIN_DRIVER_API, cbid, site, corr);
}

EXPORT CUresult cuCtxSynchronize(void)
{
	fire(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, 0);
	calls++;
	fire(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, 1);
	corr++;
	return CUDA_SUCCESS;
}

static CUresult ctx_sync_internal(void)
{
	return cuCtxSynchronize();
}

/* the CUDA 13 ABI: a context argument (the driver program checks that it arrives) */
EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	return ctx == (CUcontext)(uintptr_t)0x5eed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	(void)s;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
	(void)s;
	return CUDA_SUCCESS;
}

/* Kernel launches: a CUfunction is its kernel's name (cuFuncGetName hands it back); each fires
 * the driver launch callbacks through the fake libcupti (fake_cupti_launch), as the real driver
 * does. fake_cuda_launches_seen: how many stepprof's callbacks saw. */
static unsigned launch_corr = 3000000, launches_seen;

static CUresult launch(CUfunction f)
{
	static int (*fl)(const char *, unsigned);
	if (!fl)
		fl = (int (*)(const char *, unsigned))dlsym(RTLD_DEFAULT, "fake_cupti_launch");
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	launches_seen += fl ? (unsigned)fl((const char *)f, launch_corr++) : 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			       unsigned bz, unsigned sh, CUstream s, void **kp, void **ex)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s, (void)kp, (void)ex;
	return launch(f);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **kp, void **ex)
{
	(void)c, (void)kp, (void)ex;
	return launch(f);
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
					  unsigned bz, unsigned sh, CUstream s, void **kp)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s, (void)kp;
	return launch(f);
}

/* A call CUPTI's dispatch wraps while subscribed (fake_cupti_wrapped: a cuptiFinalize under it is
 * logged), FAKE_LAUNCH_US long: a host function queued on a stream, an asynchronous memset. */
static void dispatched(void)
{
	/* looked up until libcupti is there, by any launching thread: atomics, no race */
	static _Atomic(int (*)(void)) sub_a;
	static _Atomic(void (*)(int)) wrapped_a;
	int (*sub)(void) = atomic_load(&sub_a);
	void (*wrapped)(int) = atomic_load(&wrapped_a);
	if (!sub || !wrapped) {
		atomic_store(&wrapped_a, wrapped = (void (*)(int))dlsym(RTLD_DEFAULT, "fake_cupti_wrapped"));
		atomic_store(&sub_a, sub = (int (*)(void))dlsym(RTLD_DEFAULT, "fake_cupti_subscribed"));
	}
	if (sub && wrapped && sub()) {
		wrapped(1);
		const char *us = getenv("FAKE_LAUNCH_US");
		struct timespec ts = { 0, (us ? atoi(us) % 1000000 : 0) * 1000L };
		nanosleep(&ts, NULL);
		wrapped(-1);
	}
}

/* fn runs at once */
EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *u)
{
	(void)s;
	dispatched();
	if (fn)
		fn(u);
	return CUDA_SUCCESS;
}

/* writes n bytes of v at d (a host address here): the trampoline must pass the arguments through */
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
	(void)s;
	dispatched();
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	memset((void *)(uintptr_t)d, v, n);
	return CUDA_SUCCESS;
}

/* h rows of w bytes of v at d, pitch p */
EXPORT CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s)
{
	(void)s;
	dispatched();
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t r = 0; r < h; r++)
		memset((char *)(uintptr_t)d + r * p, v, w);
	return CUDA_SUCCESS;
}

/* n bytes from s to d (a host address here) */
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *src, size_t n, CUstream s)
{
	(void)s;
	dispatched();
	if (!d || !src)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy((void *)(uintptr_t)d, src, n);
	return CUDA_SUCCESS;
}

static CUresult launch_internal(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				unsigned bz, unsigned sh, CUstream s, void **kp, void **ex)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s, (void)kp, (void)ex;
	return launch(f);
}

static CUresult launch_newabi(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			      unsigned bz, unsigned sh, CUstream s, void **kp, void **ex)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s, (void)kp, (void)ex;
	return launch(f);
}

/* a launch by a way no lookup of a driver function gives (a caller the hooks cannot see) */
EXPORT CUresult fake_cuda_launch_raw(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				     unsigned bz, unsigned sh, CUstream s, void **kp, void **ex)
{
	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s, (void)kp, (void)ex;
	return launch(f);
}

static unsigned name_calls; /* cuFuncGetName and cuKernelGetName calls, told at exit */

__attribute__((destructor)) static void tell_names(void)
{
	if (name_calls)
		printf("fakecuda: %u kernel name lookups\n", name_calls);
}

/* FAKE_CUDA_NO_NAMES: a driver that cannot name kernels (before CUDA 12.3); FAKE_CUDA_KERNELS:
 * every launch names a CUkernel (cudart 12+'s lazy loading), which only cuKernelGetName names */
EXPORT CUresult cuFuncGetName(const char **name, CUfunction f)
{
	__atomic_add_fetch(&name_calls, 1, __ATOMIC_RELAXED);
	if (getenv("FAKE_CUDA_NO_NAMES"))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!name || !f)
		return CUDA_ERROR_INVALID_VALUE;
	if (getenv("FAKE_CUDA_KERNELS"))
		return CUDA_ERROR_INVALID_HANDLE;
	*name = (const char *)f;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetName(const char **name, CUkernel k)
{
	__atomic_add_fetch(&name_calls, 1, __ATOMIC_RELAXED);
	if (getenv("FAKE_CUDA_NO_NAMES") || !getenv("FAKE_CUDA_KERNELS"))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!name || !k)
		return CUDA_ERROR_INVALID_VALUE;
	*name = (const char *)k;
	return CUDA_SUCCESS;
}

/* Device memory: addresses handed out in order, never reused; each call fires the driver's
 * allocation callbacks with its parameters (fake_cupti_fire_params), as the real driver does. */
static CUdeviceptr next_ptr = 0x7f0000000000ull;

static void fire_params(unsigned cbid, int site, const void *params)
{
	static int (*f)(int, unsigned, int, unsigned, const void *);
	if (!f)
		f = (int (*)(int, unsigned, int, unsigned, const void *))dlsym(RTLD_DEFAULT, "fake_cupti_fire_params");
	if (f)
		f(CUPTI_CB_DOMAIN_DRIVER_API, cbid, site, corr, params);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	struct {
		CUdeviceptr *p;
		size_t n;
	} prm = { p, n };
	fire_params(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 0, &prm);
	*p = next_ptr;
	next_ptr += (n + 0xfff) & ~(CUdeviceptr)0xfff;
	fire_params(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 1, &prm);
	corr++;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	struct {
		CUdeviceptr p;
	} prm = { p };
	fire_params(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, 0, &prm);
	fire_params(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, 1, &prm);
	corr++;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
	*d = 0;
	return CUDA_SUCCESS;
}

EXPORT unsigned fake_cuda_launches_seen(void)
{
	return launches_seen;
}

/* A graph capture: notes whether CUPTI had a subscriber when it began (it must, to see the graph). */
static int capture_subscribed = -1;

EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m)
{
	int (*sub)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fake_cupti_subscribed");
	(void)s, (void)m;
	capture_subscribed = sub ? sub() : 0;
	return CUDA_SUCCESS;
}

EXPORT int fake_cuda_capture_subscribed(void)
{
	return capture_subscribed;
}

/* driver calls made so far (the driver program compares it with its own count) */
EXPORT unsigned fake_cuda_calls(void)
{
	return calls;
}

EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *st);

static CUresult gpa_internal(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
	return cuGetProcAddress_v2(sym, pfn, ver, flags, st);
}

static void *lookup(const char *sym, int ver, cuuint64_t flags)
{
	int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	if (!strcmp(sym, "cuGetProcAddress"))
		return ver < 12000                    ? dlsym(RTLD_DEFAULT, "cuGetProcAddress")
		       : getenv("FAKE_CUDA_INTERNAL") ? (void *)gpa_internal
						      : (void *)cuGetProcAddress_v2;
	if (!strcmp(sym, "cuCtxSynchronize") && ver >= 13000)
		return (void *)cuCtxSynchronize_v2;
	if (!strcmp(sym, "cuCtxSynchronize") && ver >= 2000)
		return getenv("FAKE_CUDA_INTERNAL") ? (void *)ctx_sync_internal : (void *)cuCtxSynchronize;
	const char *lmode = getenv("FAKE_CUDA_LAUNCH");
	if (!strcmp(sym, "cuLaunchKernel") && ver >= 4000 && lmode) /* (no _ptsz copy: one serves both) */
		return !strcmp(lmode, "newabi") && ver > CUDA_VERSION ? (void *)launch_newabi : (void *)launch_internal;
	if (!strcmp(sym, "cuLaunchKernel") && ver >= 4000)
		return (void *)cuLaunchKernel;
	if (!strcmp(sym, "cuLaunchKernelEx") && ver >= 11060)
		return (void *)cuLaunchKernelEx;
	if (!strcmp(sym, "cuLaunchCooperativeKernel") && ver >= 9000)
		return (void *)cuLaunchCooperativeKernel;
	if (!strcmp(sym, "cuLaunchHostFunc") && ver >= 10000)
		return (void *)cuLaunchHostFunc;
	if (!strcmp(sym, "cuMemsetD8Async") && ver >= 3020)
		return (void *)cuMemsetD8Async;
	if (!strcmp(sym, "cuMemsetD2D8Async") && ver >= 3020)
		return (void *)cuMemsetD2D8Async;
	if (!strcmp(sym, "cuMemcpyHtoDAsync") && ver >= 3020)
		return (void *)cuMemcpyHtoDAsync_v2;
	if (!strcmp(sym, "cuFuncGetName") && ver >= 12030 && !getenv("FAKE_CUDA_NO_NAMES"))
		return (void *)cuFuncGetName;
	if (!strcmp(sym, "cuKernelGetName") && ver >= 12030 && !getenv("FAKE_CUDA_NO_NAMES"))
		return (void *)cuKernelGetName;
	if (!strcmp(sym, "cuMemAlloc") && ver >= 3020)
		return (void *)cuMemAlloc_v2;
	if (!strcmp(sym, "cuMemFree") && ver >= 3020)
		return (void *)cuMemFree_v2;
	if (!strcmp(sym, "cuCtxGetDevice") && ver >= 2000)
		return (void *)cuCtxGetDevice;
	if (!strcmp(sym, "cuStreamBeginCapture") && ver >= 10010)
		return (void *)cuStreamBeginCapture_v2;
	if (!strcmp(sym, "cuStreamSynchronize") && ver >= 2000)
		return pt && ver >= 7000 ? (void *)cuStreamSynchronize_ptsz : (void *)cuStreamSynchronize;
	return NULL;
}

EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *st)
{
	if (!sym || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = lookup(sym, ver, flags);
	if (st)
		*st = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

#undef cuGetProcAddress
EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
	return cuGetProcAddress_v2(sym, pfn, ver, flags, NULL);
}
