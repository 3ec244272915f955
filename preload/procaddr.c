/* SPDX-License-Identifier: MIT */
/* procaddr.c - driver entry points handed out by cuGetProcAddress and dlsym, which markers.c cannot see:
 * hands out counting trampolines for the functions of collector/hookfns.h where it knows the ABI, passes
 * everything else through untouched (docs/ARCHITECTURE.md says how). Everything passes through when off. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "collector/collector.h"
#include "trace/event.h"
#include "entry.h"
#include "kname.h"
#include "procaddr_rows.h"
#include "resolve.h"

#define SP_EXPORT __attribute__((visibility("default")))

typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static const char *const drv_libs[] = { "libcuda.so.1", "libcuda.so", NULL };

/* (the order matters: every row from TR_cuLaunchKernel on is a kernel launch) */
enum {
#define TR_ENUM(hook, ask, v0, v1, pt, exp, params, args) TR_##hook,
#define X TR_ENUM
	SP_TRAMPOLINES(TR_ENUM) SP_GUARDS(TR_ENUM) SP_ALLOCS(AL_ROW) SP_LAUNCHES(TR_ENUM)
#undef X
#undef TR_ENUM
		TR_N
};

enum { SAID_UNHOOKED = 1, SAID_HOOKED = 2 }; /* a lookup of a name left unhooked; hooked by a new way */

static struct {
	int off;     /* stepprof is off in this process: pass everything through */
	void *(*real_dlsym)(void *, const char *); /* the next dlsym (libc's) */
	_Atomic(void *) real[TR_N];              /* the driver function behind each trampoline (one slot) */
	gpa1_fn real_gpa1;                       /* the driver's cuGetProcAddress (v1 ABI) */
	gpa2_fn real_gpa2;                       /* ... and cuGetProcAddress_v2 */
	_Atomic(gpa1_fn) alt_gpa1;               /* another one the driver handed out for itself (v1 ABI) */
	_Atomic(gpa2_fn) alt_gpa2;               /* ... (v2 ABI) */
	void *drv;          /* a handle on the driver that defines them (NOLOAD) */
	void *self;         /* a handle on this library (NOLOAD), NULL if none */
	pthread_mutex_t lock;                    /* learning the above */
	_Atomic unsigned char said[TR_N];        /* SAID_* for this row's name (each said once) */
	_Atomic(void *) ctx_get_device;          /* the driver's cuCtxGetDevice, (void *)-1 if none */
} drv_procs = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* dlsym's route runs before a sanitizer runtime has mapped its shadow memory (ASan looks its own
 * functions up with dlsym while it starts): not instrumented in a SAN=address build */
#define SP_NO_ASAN __attribute__((no_sanitize_address))
static __thread int in_resolve; /* finding the real dlsym on this thread: its allocations may call dlsym */
static __thread int raw; /* our own lookups on this thread: dlsym is the real one for them */

void sp_procaddr_raw(int on)
{
	raw += on ? 1 : -1;
}

/* The trampolines: count the call as markers.c's hooks do, call what the driver handed out. */
#define TR_FN(hook, ask, v0, v1, pt, exp, params, args)                                                     \
	static CUresult tr_##hook params                                                                    \
	{                                                                                                   \
		CUresult(*real) params =                                                                    \
			(CUresult(*) params)atomic_load_explicit(&drv_procs.real[TR_##hook], memory_order_relaxed); \
		int h = sp_collector_hook_enter_at(SP_HOOK_##hook, __builtin_return_address(0));            \
		CUresult r = real args;                                                                     \
		sp_collector_hook_exit(h);                                                                  \
		return r;                                                                                   \
	}
SP_TRAMPOLINES(TR_FN)
#undef TR_FN

static void *(*real_dlsym(void))(void *, const char *);

void *sp_procaddr_driver_fn(_Atomic(void *) *slot, const char *sym)
{
	void *f = atomic_load_explicit(slot, memory_order_acquire);
	if (!f) {
		CUdriverProcAddressQueryResult st;
		if (!drv_procs.real_gpa2 || drv_procs.real_gpa2(sym, &f, 12030, 0, &st) != CUDA_SUCCESS)
			f = NULL;
		if (!f && drv_procs.real_gpa1 && drv_procs.real_gpa1(sym, &f, 12030, 0) != CUDA_SUCCESS)
			f = NULL;
		if (!f) { /* a caller linked with libcuda that never asked cuGetProcAddress (XLA) */
			raw++;
			f = real_dlsym() ? sp_resolve(sym, drv_libs) : NULL;
			raw--;
		}
		f = f ? f : (void *)-1;
		atomic_store_explicit(slot, f, memory_order_release);
	}
	return f == (void *)-1 ? NULL : f;
}

/* 1 while a launch must go through the collector: it wants launches, or stepprof is subscribed. */
static inline bool launch_watched(void)
{
	return (atomic_load_explicit(&sp_launch_want, memory_order_relaxed) |
		atomic_load_explicit(&sp_launch_guard, memory_order_acquire)) != 0;
}

/* A watched launch of f begins: fed to the collector if it wants launches, then counted in flight
 * while subscribed (a detach waits for it), in that order because feeding it may attach to CUPTI
 * (automatic detection locking while it learns from the hooks). What launch_end takes. */
struct launch_ctx {
	int hook, guard;
};
static inline struct launch_ctx launch_begin(CUfunction f)
{
	struct launch_ctx c = { 0, 0 };
	if (atomic_load_explicit(&sp_launch_want, memory_order_relaxed))
		c.hook = sp_collector_launch_enter(sp_kname(f));
	c.guard = sp_collector_launch_guard();
	return c;
}

static inline void launch_end(struct launch_ctx c)
{
	if (c.hook)
		sp_collector_launch_exit(c.hook);
	if (c.guard)
		sp_collector_launch_unguard(c.guard);
}

/* The launch trampolines: a tail call to the driver while no launch is watched, else (out of line)
 * the collector around the call. */
#define TR_LAUNCH(hook, ask, v0, v1, pt, exp, params, args)                                                      \
	static __attribute__((noinline)) CUresult slow_##hook params                                             \
	{                                                                                                        \
		CUresult(*real) params =                                                                         \
			(CUresult(*) params)atomic_load_explicit(&drv_procs.real[TR_##hook],                     \
								 memory_order_relaxed);                          \
		struct launch_ctx lc = launch_begin(f);                                                          \
		CUresult r = real args;                                                                          \
		launch_end(lc);                                                                                  \
		return r;                                                                                        \
	}                                                                                                        \
	static CUresult tr_##hook params                                                                         \
	{                                                                                                        \
		if (__builtin_expect(launch_watched(), 0))                                                       \
			return slow_##hook args;                                                                 \
		return ((CUresult(*) params)atomic_load_explicit(&drv_procs.real[TR_##hook],                     \
								 memory_order_relaxed))args;                     \
	}
SP_LAUNCHES(TR_LAUNCH)
#undef TR_LAUNCH

/* The guarded trampolines: a tail call to the driver while stepprof is not subscribed, else (out
 * of line) the call counted in flight. */
#define TR_GUARD(hook, ask, v0, v1, pt, exp, params, args)                                                       \
	static __attribute__((noinline)) CUresult slow_##hook params                                             \
	{                                                                                                        \
		CUresult(*real) params =                                                                         \
			(CUresult(*) params)atomic_load_explicit(&drv_procs.real[TR_##hook],                     \
								 memory_order_relaxed);                          \
		int g = sp_collector_launch_guard();                                                             \
		CUresult r = real args;                                                                          \
		if (g)                                                                                           \
			sp_collector_launch_unguard(g);                                                          \
		return r;                                                                                        \
	}                                                                                                        \
	static CUresult tr_##hook params                                                                         \
	{                                                                                                        \
		if (__builtin_expect(atomic_load_explicit(&sp_launch_guard, memory_order_acquire) != 0, 0))      \
			return slow_##hook args;                                                                 \
		return ((CUresult(*) params)atomic_load_explicit(&drv_procs.real[TR_##hook],                     \
								 memory_order_relaxed))args;                     \
	}
SP_GUARDS(TR_GUARD)
#undef TR_GUARD

/* The device an allocation (not a free) is on: dev, or for DEV_CTX the calling thread's current
 * context's; -1 if none. This function can't fail. */
static int alloc_dev(int free, int dev)
{
	if (free || dev != DEV_CTX)
		return free ? -1 : dev;
	CUdevice d = -1;
	CUresult (*get)(CUdevice *) =
		(CUresult(*)(CUdevice *))sp_procaddr_driver_fn(&drv_procs.ctx_get_device, "cuCtxGetDevice");
	return get && get(&d) == CUDA_SUCCESS ? (int)d : -1;
}

static __thread const void *alloc_from; /* the caller of the allocation trampoline in progress */

/* The allocation trampolines: one relaxed load and a tail call while stepprof tracks no device
 * memory, else (out of line) the call, then what it did told to the collector. */
#define TR_ALLOC(hook, ask, v0, v1, pt, exp, params, args, kind, free, addr, size, dev)                          \
	static __attribute__((noinline)) CUresult slow_##hook params                                             \
	{                                                                                                        \
		CUresult(*real) params =                                                                         \
			(CUresult(*) params)atomic_load_explicit(&drv_procs.real[TR_##hook],                     \
								 memory_order_relaxed);                          \
		const void *from = alloc_from;                                                                   \
		unsigned seen = sp_collector_devmem_enter();                                                     \
		CUresult r = real args;                                                                          \
		if (r == CUDA_SUCCESS && sp_collector_devmem_take(seen, from))                                   \
			sp_collector_devmem(kind, free, addr, size, alloc_dev(free, dev));                       \
		return r;                                                                                        \
	}                                                                                                        \
	static CUresult tr_##hook params                                                                         \
	{                                                                                                        \
		if (__builtin_expect(atomic_load_explicit(&sp_devmem_want, memory_order_relaxed) != 0, 0)) {     \
			alloc_from = __builtin_return_address(0);                                                \
			return slow_##hook args;                                                                 \
		}                                                                                                \
		return ((CUresult(*) params)atomic_load_explicit(&drv_procs.real[TR_##hook],                     \
								 memory_order_relaxed))args;                     \
	}
SP_ALLOCS(TR_ALLOC)
#undef TR_ALLOC

static const struct {
	const char *ask, *exp; /* the name looked up; the driver's exported symbol of this ABI */
	int v0, v1, pt;
	void *tramp;
} tr[TR_N] = {
#define TR_ROW(hook, ask, v0, v1, pt, exp, params, args) { ask, exp, v0, v1, pt, (void *)tr_##hook },
#define X TR_ROW
	SP_TRAMPOLINES(TR_ROW) SP_GUARDS(TR_ROW) SP_ALLOCS(AL_ROW) SP_LAUNCHES(TR_ROW)
#undef X
#undef TR_ROW
};

/* The real dlsym: libc's, found by version (2.34 moved it into libc; older x86-64 and aarch64
 * have it at their base version). NULL if none: then no lookup is wrapped. Can't fail otherwise. */
static SP_NO_ASAN void *(*real_dlsym(void))(void *, const char *)
{
	static const char *const vers[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", NULL };
	void *(*f)(void *, const char *) = drv_procs.real_dlsym;
	if (f)
		return f;
	in_resolve++;
	for (int i = in_resolve > 1 ? 1 : 0; !f && vers[i]; i++)
		f = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", vers[i]);
	in_resolve--;
	if (f)
		drv_procs.real_dlsym = f;
	return f;
}

/* Whether f is in this library (one of our own definitions). Can't fail: false if unknown. */
static bool ours(void *f)
{
	Dl_info di, me;
	return f && dladdr(f, &di) && dladdr((void *)ours, &me) && di.dli_fbase == me.dli_fbase;
}

/* The driver's cuGetProcAddress pair, learned from the object that defines f (one of them, or
 * anything of libcuda). Caller holds drv_procs.lock. Leaves them and drv_procs.drv NULL when f's object has
 * neither (not a driver: any library may define a cu* name). */
static void learn_driver(void *f)
{
	Dl_info di;
	if (drv_procs.drv || !f || ours(f) || !dladdr(f, &di) ||
	    !di.dli_fname) /* our cuGetProcAddress is not the driver's */
		return;
	void *h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return;
	gpa1_fn g1 = (gpa1_fn)drv_procs.real_dlsym(h, "cuGetProcAddress");
	gpa2_fn g2 = (gpa2_fn)drv_procs.real_dlsym(h, "cuGetProcAddress_v2");
	if (!g1 && !g2) {
		dlclose(h);
		return;
	}
	drv_procs.real_gpa1 = g1;
	drv_procs.real_gpa2 = g2;
	drv_procs.drv = h; /* kept: the driver is never unloaded */
}

static CUresult gpa1_wrap(const char *sym, void **pfn, int ver, cuuint64_t flags);
static CUresult gpa2_wrap(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st);
static CUresult gpa1_alt(const char *sym, void **pfn, int ver, cuuint64_t flags);
static CUresult gpa2_alt(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st);

/* What to hand out for f, the driver's answer to a lookup of cuGetProcAddress itself at version
 * ver: our wrapper of the same ABI (its exported symbols; else one other function per ABI, by the
 * versions cuda.h gives: v1 from 11030, v2 from 12000), else f. Can't fail. */
static void *wrap_self(void *f, int ver)
{
	if (f == (void *)drv_procs.real_gpa1)
		return (void *)gpa1_wrap;
	if (f == (void *)drv_procs.real_gpa2)
		return (void *)gpa2_wrap;
	if (ver > CUDA_VERSION || ver < 11030)
		return f;
	if (ver < 12000) {
		gpa1_fn old = NULL;
		return atomic_compare_exchange_strong(&drv_procs.alt_gpa1, &old, (gpa1_fn)f) || old == (gpa1_fn)f
			       ? (void *)gpa1_alt
			       : f;
	}
	gpa2_fn old = NULL;
	return atomic_compare_exchange_strong(&drv_procs.alt_gpa2, &old, (gpa2_fn)f) ||
		old == (gpa2_fn)f ? (void *)gpa2_alt
												  : f;
}

/* A lookup of a trampolined name, once per name and kind (SAID_*): left unhooked (forwarded to the
 * collector with why) or hooked by more than the table (said with STEPPROF_VERBOSE). This function can't fail. */
static void tell(int said, const char *sym, int ver, cuuint64_t flags, const char *why)
{
	int k = -1;
	for (int i = 0; i < TR_N && k < 0; i++)
		if (!strcmp(sym, tr[i].ask) || !strcmp(sym, tr[i].exp))
			k = i;
	if (k < 0 || (atomic_fetch_or(&drv_procs.said[k], (unsigned char)said) & said))
		return;
	char what[128];
	if (ver < 0)
		snprintf(what, sizeof what, "%s by dlsym on a library's handle", sym);
	else
		snprintf(what, sizeof what, "%s at version %d%s", sym, ver,
			 flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ? " (per-thread stream)" : "");
	if (said == SAID_HOOKED)
		sp_info("%s is hooked: %s", what, why);
	else
		sp_collector_lookup_unhooked(what, why,
					     k >= TR_cuLaunchKernel  ? SP_UNHOOKED_LAUNCH
					     : k >= TR_cuMemAlloc_v2 ? SP_UNHOOKED_ALLOC
								     : SP_UNHOOKED_OTHER);
}

/* f, the driver's answer to a lookup (sym, ver, flags), into row k's slot: the row's trampoline,
 * or f itself when the slot holds another function already (one slot per ABI variant: the second
 * is not counted; said). Can't fail. */
static void *install(int k, void *f, const char *sym, int ver, cuuint64_t flags)
{
	void *old = NULL;
	if (atomic_compare_exchange_strong(&drv_procs.real[k], &old, f) || old == f)
		return tr[k].tramp;
	tell(SAID_UNHOOKED, sym, ver, flags,
	     "the driver handed out a second function for one hook (the first one is hooked)");
	return f;
}

/* The function the driver's lookup (g1 or g2, the one a call came through) answers for (sym, ver,
 * flags); NULL if none. */
static void *ask_again(gpa1_fn g1, gpa2_fn g2, const char *sym, int ver, cuuint64_t flags)
{
	void *p = NULL;
	CUdriverProcAddressQueryResult st;
	CUresult r = g2 ? g2(sym, &p, ver, flags, &st) : g1 ? g1(sym, &p, ver, flags) : CUDA_ERROR_NOT_FOUND;
	return r == CUDA_SUCCESS ? p : NULL;
}

/* What to hand out for f, returned by the driver's lookup for (sym, ver, flags): a trampoline when f's ABI
 * is known (cuda.h's version ranges, or the exported symbol itself), else f (said once per name). Can't fail. */
static void *wrap(const char *sym, void *f, int ver, cuuint64_t flags, gpa1_fn g1, gpa2_fn g2)
{
	if (!f || !sym || drv_procs.off)
		return f;
	pthread_mutex_lock(&drv_procs.lock);
	learn_driver(f);
	pthread_mutex_unlock(&drv_procs.lock);
	if (!strcmp(sym, "cuGetProcAddress")) /* asked of the driver itself, as cudart does */
		return wrap_self(f, ver);
	int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0, k = -1, known = 0, row = -1;
	for (int i = 0; i < TR_N && k < 0; i++) /* the exported symbol itself: its name says the ABI */
		if (!strcmp(sym, tr[i].ask) && drv_procs.drv && drv_procs.real_dlsym(drv_procs.drv, tr[i].exp) == f)
			k = i;
	for (int i = 0; i < TR_N && k < 0; i++) {
		if (strcmp(sym, tr[i].ask) || (tr[i].pt != ANY_PT && tr[i].pt != pt))
			continue;
		if (ver >= tr[i].v0 && ver < tr[i].v1 && ver <= CUDA_VERSION)
			k = i;
		int v = tr[i].v1 - 1 < CUDA_VERSION ? tr[i].v1 - 1 : CUDA_VERSION; /* the newest it covers */
		if (v >= tr[i].v0 && v > known)
			known = v, row = i;
	}
	if (k >= 0)
		return install(k, f, sym, ver, flags);
	if (!known) /* not a name of ours */
		return f;
	char why[128];
	if (ver <= CUDA_VERSION) {
		snprintf(why, sizeof why, "no ABI stepprof knows at this version");
	} else if (ask_again(g1, g2, sym, known, flags) == f) { /* the ABI of version `known` */
		snprintf(why, sizeof why, "the driver answers the same function as at version %d", known);
		void *t = install(row, f, sym, ver, flags);
		if (t != f)
			tell(SAID_HOOKED, sym, ver, flags, why);
		return t;
	} else {
		snprintf(why, sizeof why,
			 "the driver answers another function there than at version %d, the newest "
			 "stepprof was built for",
			 known);
	}
	tell(SAID_UNHOOKED, sym, ver, flags, why);
	return f;
}

/* The wrappers: the driver's lookup, then its answer wrapped. */
static CUresult gpa1_call(gpa1_fn real, const char *sym, void **pfn, int ver, cuuint64_t flags)
{
	CUresult r = real(sym, pfn, ver, flags);
	if (r == CUDA_SUCCESS && pfn)
		*pfn = wrap(sym, *pfn, ver, flags, real, NULL);
	return r;
}

static CUresult gpa2_call(gpa2_fn real, const char *sym, void **pfn, int ver, cuuint64_t flags,
			  CUdriverProcAddressQueryResult *st)
{
	CUresult r = real(sym, pfn, ver, flags, st);
	if (r == CUDA_SUCCESS && pfn)
		*pfn = wrap(sym, *pfn, ver, flags, NULL, real);
	return r;
}

static CUresult gpa1_wrap(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
	return gpa1_call(drv_procs.real_gpa1, sym, pfn, ver, flags);
}

static CUresult gpa2_wrap(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
	return gpa2_call(drv_procs.real_gpa2, sym, pfn, ver, flags, st);
}

static CUresult gpa1_alt(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
	return gpa1_call(atomic_load(&drv_procs.alt_gpa1), sym, pfn, ver, flags);
}

static CUresult gpa2_alt(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
	return gpa2_call(atomic_load(&drv_procs.alt_gpa2), sym, pfn, ver, flags, st);
}

/* dlsym of a cuGetProcAddress* name (the stub below sends only those here): the driver's, then
 * wrapped (as it is when stepprof is off). RTLD_DEFAULT and RTLD_NEXT search past this library (where our own definitions are),
 * which for these names is what the caller's would find. NULL as dlsym would. */
static void *dlsym_gpa(void *h, const char *name)
{
	void *(*rd)(void *, const char *) = real_dlsym();
	if (!rd)
		return NULL;
	raw++;
	void *f = h == RTLD_DEFAULT || h == RTLD_NEXT ? sp_resolve(name, drv_libs) : rd(h, name);
	raw--;
	if (!f)
		return NULL;
	if (drv_procs.off)
		return f;
	pthread_mutex_lock(&drv_procs.lock);
	learn_driver(f);
	pthread_mutex_unlock(&drv_procs.lock);
	return f == (void *)drv_procs.real_gpa1 ? (void *)gpa1_wrap :
	       f == (void *)drv_procs.real_gpa2 ? (void *)gpa2_wrap : f;
}

/* The row whose driver symbol is name (an exported name of the trampolines), -1 if none. */
static SP_NO_ASAN int exp_row(const char *name)
{
	if (name[0] != 'c' || name[1] != 'u') /* (most names dlsym is asked for: at once) */
		return -1;
	for (int i = 0; i < TR_N; i++)
		if (!strcmp(name, tr[i].exp))
			return i;
	return -1;
}

/* dlsym on a library's handle of a trampolined function's exported name: where the real lookup found the
 * driver's own symbol, our definition or the row's trampoline; else what it found. NULL as dlsym would. */
static void *dlsym_tramp(void *h, const char *name)
{
	void *(*rd)(void *, const char *) = real_dlsym();
	if (!rd)
		return NULL;
	raw++;
	void *f = rd(h, name);
	raw--;
	if (!f || drv_procs.off)
		return f;
	pthread_mutex_lock(&drv_procs.lock);
	learn_driver(f);
	pthread_mutex_unlock(&drv_procs.lock);
	int k = exp_row(name);
	if (k >= 0 && drv_procs.drv && drv_procs.real_dlsym(drv_procs.drv, name) == f) {
		void *own = drv_procs.self ? drv_procs.real_dlsym(drv_procs.self, name) : NULL;
		own = own && ours(own) ? own : NULL;
		void *t = own ? own : install(k, f, name, -1, 0);
		if (t != f)
			tell(SAID_HOOKED, name, -1, 0,
			     own ? "the driver's own symbol, handed out as stepprof's definition of it"
				 : "the driver's own symbol");
		return t;
	}
	if (k >= 0 && !ours(f))
		tell(SAID_UNHOOKED, name, -1, 0, "it is not the driver's own symbol");
	return f;
}

/* What dlsym does when libc's cannot be found (not glibc): finds nothing, as a failed lookup. */
static void *no_dlsym(void *h, const char *name)
{
	(void)h;
	(void)name;
	return NULL;
}

/* Called by the dlsym stub: where to jump with its arguments untouched (so RTLD_NEXT keeps the caller's
 * meaning); the base version without recursion inside our own resolution. Never returns NULL. */
__attribute__((used, visibility("hidden"))) SP_NO_ASAN void *sp_dlsym_route(void *h, const char *name)
{
	(void)h;
	if (__builtin_expect(in_resolve > 0, 0)) {
		void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
		f = f ? f : dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
		return f ? f : (void *)no_dlsym;
	}
	void *(*rd)(void *, const char *) = real_dlsym();
	if (!rd)
		return (void *)no_dlsym;
	if (!raw && name && !strncmp(name, "cuGetProcAddress", 16))
		return (void *)dlsym_gpa;
	if (!raw && name && !drv_procs.off && h != RTLD_DEFAULT && h != RTLD_NEXT && exp_row(name) >= 0)
		return (void *)dlsym_tramp;
	return (void *)rd;
}

/* dlsym itself: saves the arguments, asks sp_dlsym_route where to go, and jumps there with the
 * caller's return address in place (a C wrapper calling the real dlsym would make RTLD_NEXT
 * relative to this library, whatever the compiler's tail-call choices). */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	".cfi_startproc\n"
	"endbr64\n"
	"pushq %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"pushq %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"subq $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"call sp_dlsym_route\n"
	"addq $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"popq %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"popq %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"jmp *%rax\n"
	".cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, %function\n"
	"dlsym:\n"
	".cfi_startproc\n"
	"stp x29, x30, [sp, #-32]!\n"
	".cfi_def_cfa_offset 32\n"
	".cfi_offset 29, -32\n"
	".cfi_offset 30, -24\n"
	"mov x29, sp\n"
	"stp x0, x1, [sp, #16]\n"
	"bl sp_dlsym_route\n"
	"mov x16, x0\n"
	"ldp x0, x1, [sp, #16]\n"
	"ldp x29, x30, [sp], #32\n"
	".cfi_def_cfa_offset 0\n"
	"br x16\n"
	".cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#endif
/* (elsewhere dlsym is not interposed: only a caller linked with libcuda is seen, below) */

/* The driver's cuGetProcAddress pair for a caller linked with libcuda: found once, past this
 * library. Leaves them NULL if the driver is not loaded. */
static void find_driver(const char *name)
{
	raw++;
	void *f = real_dlsym() ? sp_resolve(name, drv_libs) : NULL;
	raw--;
	pthread_mutex_lock(&drv_procs.lock);
	learn_driver(f);
	pthread_mutex_unlock(&drv_procs.lock);
}

/* The driver's own symbols, for a caller linked with libcuda. */
#undef cuGetProcAddress
SP_EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
	if (!drv_procs.real_gpa1)
		find_driver("cuGetProcAddress");
	if (!drv_procs.real_gpa1)
		return CUDA_ERROR_NOT_INITIALIZED;
	return drv_procs.off ? drv_procs.real_gpa1(sym, pfn, ver, flags) : gpa1_wrap(sym, pfn, ver, flags);
}

SP_EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
				       CUdriverProcAddressQueryResult *st)
{
	if (!drv_procs.real_gpa2)
		find_driver("cuGetProcAddress_v2");
	if (!drv_procs.real_gpa2)
		return CUDA_ERROR_NOT_INITIALIZED;
	return drv_procs.off ? drv_procs.real_gpa2(sym, pfn, ver, flags, st) : gpa2_wrap(sym, pfn, ver, flags, st);
}

/* In an exported definition: `real`, the driver's own symbol exp, resolved once past this library;
 * the definition returns CUDA_ERROR_NOT_INITIALIZED while there is none. */
#define EXP_RESOLVE(exp, params)                                                              \
	static CUresult(*real) params;                                                        \
	if (!real) {                                                                          \
		raw++;                                                                        \
		real = (CUresult(*) params)(real_dlsym() ? sp_resolve(exp, drv_libs) : NULL); \
		raw--;                                                                        \
	}                                                                                     \
	if (!real)                                                                            \
		return CUDA_ERROR_NOT_INITIALIZED;                                            \
	(void)0

/* The driver's launch symbols, for a caller linked with libcuda (XLA) or finding them with
 * dlsym(RTLD_DEFAULT): as the trampolines, the real one resolved once past this library. */
#define EXP_LAUNCH(hook, ask, v0, v1, pt, exp, params, args) \
	SP_EXPORT CUresult hook params                       \
	{                                                    \
		EXP_RESOLVE(exp, params);                    \
		if (__builtin_expect(!launch_watched(), 1))  \
			return real args;                    \
		struct launch_ctx lc = launch_begin(f);      \
		CUresult r = real args;                      \
		launch_end(lc);                              \
		return r;                                    \
	}
#undef cuLaunchKernel
#undef cuLaunchKernelEx
#undef cuLaunchCooperativeKernel
SP_LAUNCHES(EXP_LAUNCH)
#undef EXP_LAUNCH

/* The driver's guarded symbols, for a caller linked with libcuda: as their trampolines. */
#define EXP_GUARD(hook, ask, v0, v1, pt, exp, params, args)                                                 \
	SP_EXPORT CUresult hook params                                                                      \
	{                                                                                                   \
		EXP_RESOLVE(exp, params);                                                                   \
		if (__builtin_expect(atomic_load_explicit(&sp_launch_guard, memory_order_acquire) == 0, 1)) \
			return real args;                                                                   \
		int g = sp_collector_launch_guard();                                                        \
		CUresult r = real args;                                                                     \
		if (g)                                                                                      \
			sp_collector_launch_unguard(g);                                                     \
		return r;                                                                                   \
	}
#undef cuLaunchHostFunc
#undef cuMemsetD8Async
#undef cuMemsetD16Async
#undef cuMemsetD32Async
#undef cuMemsetD2D8Async
#undef cuMemsetD2D16Async
#undef cuMemsetD2D32Async
#undef cuMemcpyHtoDAsync
#undef cuMemcpyDtoDAsync
SP_GUARDS(EXP_GUARD)
#undef EXP_GUARD

/* The driver's allocation symbols, for a caller linked with libcuda: as their trampolines. */
#define EXP_ALLOC(hook, ask, v0, v1, pt, exp, params, args, kind, free, addr, size, dev)                   \
	SP_EXPORT CUresult hook params                                                                     \
	{                                                                                                  \
		EXP_RESOLVE(exp, params);                                                                  \
		if (__builtin_expect(atomic_load_explicit(&sp_devmem_want, memory_order_relaxed) == 0, 1)) \
			return real args;                                                                  \
		const void *from = __builtin_return_address(0);                                            \
		unsigned seen = sp_collector_devmem_enter();                                               \
		CUresult r = real args;                                                                    \
		if (r == CUDA_SUCCESS && sp_collector_devmem_take(seen, from))                             \
			sp_collector_devmem(kind, free, addr, size, alloc_dev(free, dev));                 \
		return r;                                                                                  \
	}
#undef cuMemHostAlloc
#undef cuMemFreeHost
#undef cuMemAllocManaged
#undef cuMemAllocAsync
#undef cuMemAllocFromPoolAsync
#undef cuMemFreeAsync
#undef cuMemCreate
#undef cuMemRelease
SP_ALLOCS(EXP_ALLOC)
#undef EXP_ALLOC

/* Off when stepprof is (STEPPROF_PROFILE_ENABLED, read by entry.c before us). */
__attribute__((constructor)) static void procaddr_init(void)
{
	drv_procs.off = !sp_preload_enabled();
	real_dlsym();
	Dl_info me;
	if (!drv_procs.off && dladdr((void *)ours, &me) && me.dli_fname)
		drv_procs.self = dlopen(me.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
}
