/* SPDX-License-Identifier: MIT */
/* kname.c - see kname.h. Any application thread, inside a launch hook: lock-free, never allocates
 * but through the collector's interning. */
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>
#include "collector/collector.h"
#include "kname.h"
#include "resolve.h"

#define NAME_SLOTS 4096 /* kernels named (open addressing; past a full run of probes: asked each time) */
#define NAME_PROBES 16

static struct {
	_Atomic(void *) func_get_name;   /* the driver's cuFuncGetName, (void *)-1 if none */
	_Atomic(void *) kernel_get_name; /* the driver's cuKernelGetName, (void *)-1 if none */
	struct {
		_Atomic uintptr_t fn; /* a CUfunction, 0 free */
		_Atomic uint32_t id; /* its name's interned id (the last one the driver gave), 0 while being filled */
		_Atomic uint8_t how; /* the getter that named it (fn_name) */
	} names[NAME_SLOTS]; /* kernel names by CUfunction (lock-free) */
} knames;

/* The mangled name of what a launch names: a CUfunction (cuFuncGetName, how 1), or a CUkernel,
 * which cudart 12+ passes as one (lazy, context-free loading: cuKernelGetName, how 2); *how (in:
 * the getter that named it before, 0 none; out: the one that did, 0 none), NULL if neither names it. */
static const char *fn_name(CUfunction f, uint8_t *how)
{
	const char *n = NULL;
	if (*how != 2) {
		CUresult (*get)(const char **, CUfunction) =
			(CUresult(*)(const char **, CUfunction))sp_procaddr_driver_fn(&knames.func_get_name,
										      "cuFuncGetName");
		if (get && get(&n, f) == CUDA_SUCCESS && n) {
			*how = 1;
			return n;
		}
	}
	CUresult (*kget)(const char **, CUkernel) =
		(CUresult(*)(const char **, CUkernel))sp_procaddr_driver_fn(&knames.kernel_get_name, "cuKernelGetName");
	n = NULL;
	if (kget && kget(&n, (CUkernel)f) == CUDA_SUCCESS && n) {
		*how = 2;
		return n;
	}
	if (*how == 2) { /* no longer a CUkernel: a CUfunction at its address? */
		*how = 0;
		return fn_name(f, how);
	}
	*how = 0;
	return NULL;
}

uint32_t sp_kname(CUfunction f)
{
	uintptr_t k = (uintptr_t)f;
	if (!k)
		return 0;
	size_t h = (size_t)((k >> 4) * 0x9E3779B97F4A7C15ull >> 52);
	for (int i = 0; i < NAME_PROBES; i++) {
		size_t j = (h + (size_t)i) & (NAME_SLOTS - 1);
		uintptr_t cur = atomic_load_explicit(&knames.names[j].fn, memory_order_acquire);
		if (cur && cur != k)
			continue;
		uint32_t id = cur ? atomic_load_explicit(&knames.names[j].id, memory_order_acquire) : 0;
		uint8_t how = cur ? atomic_load_explicit(&knames.names[j].how, memory_order_relaxed) : 0;
		uint8_t was = how;
		const char *n = fn_name(f, &how);
		if (!n)
			return 0;
		if (id && sp_collector_kernel_named(id, n)) {
			if (how != was) /* a CUkernel's address now holds a CUfunction (or back): ask that first */
				atomic_store_explicit(&knames.names[j].how, how, memory_order_relaxed);
			return id;
		}
		if ((id = sp_collector_kernel_name(n)) &&
		    (cur || atomic_compare_exchange_strong(&knames.names[j].fn, &cur, k) || cur == k)) {
			atomic_store_explicit(&knames.names[j].how, how, memory_order_relaxed);
			atomic_store_explicit(&knames.names[j].id, id, memory_order_release);
		}
		return id;
	}
	uint8_t how = 0;
	const char *n = fn_name(f, &how);
	return n ? sp_collector_kernel_name(n) : 0;
}
