/* SPDX-License-Identifier: MIT */
/* allocs.c - memory allocations: device allocation calls seen through CUPTI callbacks (which
 * calls they are, how their parameters look) and host allocations from preload/malloc.c, both
 * forwarded to memory.c. The host entry points run inside malloc: they never allocate. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collector/base/clock.h"
#include "collector.h"
#include "internal.h"
#include "collector/mem/memory.h"
#include "collector/stacks/stacks.h"

struct p_ptr_size {
	void **ptr;
	size_t size;
};
struct p_pitch {
	void **ptr;
	size_t *pitch;
	size_t width;
	size_t height;
};
struct p_create {
	CUmemGenericAllocationHandle *handle;
	size_t size;
	const CUmemAllocationProp *prop;
};
struct p_free {
	void *ptr;
};

static const struct {
	const char *glob;
	uint8_t kind, shape;
} memops[] = {
	{ "cudaMalloc", SP_MEM_DEVICE, MEM_PTR_SIZE },
	{ "cudaMallocAsync*", SP_MEM_DEVICE_ASYNC, MEM_PTR_SIZE },
	{ "cudaMallocFromPoolAsync*", SP_MEM_DEVICE_ASYNC, MEM_PTR_SIZE },
	{ "cudaMallocManaged", SP_MEM_MANAGED, MEM_PTR_SIZE },
	{ "cudaMallocPitch", SP_MEM_PITCHED, MEM_PITCH },
	{ "cudaMallocHost", SP_MEM_PINNED, MEM_PTR_SIZE },
	{ "cudaHostAlloc", SP_MEM_PINNED, MEM_PTR_SIZE },
	{ "cudaFree", SP_MEM_DEVICE, MEM_FREE },
	{ "cudaFreeAsync*", SP_MEM_DEVICE, MEM_FREE },
	{ "cudaFreeHost", SP_MEM_PINNED, MEM_FREE },
	{ "cuMemAlloc", SP_MEM_DEVICE, MEM_PTR_SIZE },
	{ "cuMemAllocAsync*", SP_MEM_DEVICE_ASYNC, MEM_PTR_SIZE },
	{ "cuMemAllocFromPoolAsync*", SP_MEM_DEVICE_ASYNC, MEM_PTR_SIZE },
	{ "cuMemAllocManaged", SP_MEM_MANAGED, MEM_PTR_SIZE },
	{ "cuMemAllocPitch", SP_MEM_PITCHED, MEM_PITCH },
	{ "cuMemAllocHost", SP_MEM_PINNED, MEM_PTR_SIZE },
	{ "cuMemHostAlloc", SP_MEM_PINNED, MEM_PTR_SIZE },
	{ "cuMemFree", SP_MEM_DEVICE, MEM_FREE },
	{ "cuMemFreeAsync*", SP_MEM_DEVICE, MEM_FREE },
	{ "cuMemFreeHost", SP_MEM_PINNED, MEM_FREE },
	{ "cuMemCreate", SP_MEM_VMM, MEM_CREATE },
	{ "cuMemRelease", SP_MEM_VMM, MEM_FREE },
};

/* The allocation call a callback name is, in domain d (0 runtime, 1 driver): the last matching
 * row of memops, or { 0, MEM_NONE }. This function can't fail. */
struct memop sp_alloc_classify(int d, const char *name)
{
	struct memop op = { 0, MEM_NONE };
	for (size_t k = 0; k < sizeof memops / sizeof *memops; k++)
		if (!strncmp(memops[k].glob, "cuda", 4) == (d == 0) && sp_coll_glob(memops[k].glob, name))
			op = (struct memop){ memops[k].kind, memops[k].shape };
	return op;
}

/* An allocation call returned successfully: account for it (and record it in a window). */
void sp_alloc_call(const CUpti_CallbackData *cd, struct memop op, uint64_t t, uint32_t stack, int record)
{
	const void *p = cd->functionParams;
	uint32_t dev = UINT32_MAX;
	uint64_t addr = 0, size = 0;
	if (op.shape == MEM_FREE) {
		/* the pointer is the first parameter; frees of the four kinds share the key space but VMM */
		const struct p_free *f = p;
		int kind = op.kind == SP_MEM_VMM ? SP_MEM_VMM : SP_MEM_DEVICE;
		sp_mem_free(kind, (uint64_t)(uintptr_t)f->ptr, t, record);
		return;
	}
	if (op.shape == MEM_PTR_SIZE) {
		const struct p_ptr_size *a = p;
		addr = a->ptr ? (uint64_t)(uintptr_t)*a->ptr : 0;
		size = a->size;
	} else if (op.shape == MEM_PITCH) {
		const struct p_pitch *a = p;
		addr = a->ptr ? (uint64_t)(uintptr_t)*a->ptr : 0;
		size = (a->pitch ? *a->pitch : a->width) * a->height;
	} else if (op.shape == MEM_CREATE) {
		const struct p_create *a = p;
		addr = a->handle ? (uint64_t)*a->handle : 0;
		size = a->size;
		if (a->prop && a->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
			dev = (uint32_t)a->prop->location.id;
	}
	if (dev == UINT32_MAX && cd->context && sp_cupti.cuptiGetDeviceId(cd->context, &dev) != CUPTI_SUCCESS)
		dev = UINT32_MAX;
	if (addr)
		sp_mem_alloc(op.kind, dev == UINT32_MAX ? -1 : (int)dev, addr, size, stack, t, record);
}

/* ---- device allocations seen by the preload's hooks (preload/procaddr.c) ---- */

_Atomic int sp_devmem_want;

unsigned sp_collector_devmem_enter(void)
{
	return sp_thr.mem_seen;
}

/* 1 if from lies in the libcupti stepprof loaded: CUPTI's own device buffers are not the
 * program's (libcupti reaches the driver through cuGetProcAddress, so through the trampolines).
 * This function can't fail. */
static int from_cupti(const void *from)
{
	static _Atomic uintptr_t base; /* libcupti's load address; 0 not known yet, 1 none */
	uintptr_t b = atomic_load_explicit(&base, memory_order_relaxed);
	Dl_info di;
	if (!b) {
		b = sp_cupti.cuptiGetDeviceId && dladdr((void *)sp_cupti.cuptiGetDeviceId, &di) && di.dli_fbase
			    ? (uintptr_t)di.dli_fbase
			    : 1;
		atomic_store_explicit(&base, b, memory_order_relaxed);
	}
	return b != 1 && from && dladdr(from, &di) && (uintptr_t)di.dli_fbase == b;
}

int sp_collector_devmem_take(unsigned seen, const void *from)
{
	/* CUPTI's driver callback accounted for this call (a driver call outside any runtime call,
	 * while attached): its exit came since seen */
	return !sp_col.disabled && !sp_col.done && sp_col.cfg.device_memory && sp_thr.mem_seen == seen &&
	       !from_cupti(from);
}

void sp_collector_devmem(int kind, int free, uint64_t addr, uint64_t size, int dev)
{
	if (!addr)
		return;
	/* the hook is the one source of a driver call inside a runtime call: that call's exit, if
	 * CUPTI reports it (an allocation call), leaves it to the hook, so a detach or attach between
	 * the two loses or doubles nothing (callbacks.c on_api_exit) */
	if (sp_thr.in_rt)
		sp_thr.mem_hooked = 1;
	int rec = __atomic_load_n(&sp_col.open, __ATOMIC_ACQUIRE) != NULL;
	uint64_t t = sp_now_ns();
	if (free) { /* (a block stepprof never counted is not in the table: nothing happens) */
		sp_mem_free(kind == SP_MEM_VMM ? SP_MEM_VMM : SP_MEM_DEVICE, addr, t, rec);
		return;
	}
	if (sp_mem_self)
		return; /* stepprof's own (its writer thread's CUPTI calls) */
	sp_coll_saw_context(); /* a block */
	uint32_t stack = sp_col.cfg.stacks ? sp_stack_capture(sp_col.cfg.stack_depth,
							      (unsigned)sp_col.cfg.stacks | SP_STACK_NATIVE_FALLBACK)
					   : 0;
	sp_mem_alloc(kind, dev, addr, size, stack, t, rec);
}

/* ---- host allocations (called from preload/malloc.c, inside malloc: no allocation here) ---- */

volatile size_t sp_host_min_bytes = SIZE_MAX;

void sp_collector_malloc_hooks(void)
{
	sp_col.malloc_hooks = 1;
}

void sp_collector_host_alloc(void *p, size_t size)
{
	/* the hook checked p and size; outside a window the time only dates a later snapshot's entry;
	 * inside one, the counter-based clock (clock.h) spares a serialising clock_gettime per event */
	int rec = __atomic_load_n(&sp_col.open, __ATOMIC_ACQUIRE) != NULL;
	sp_mem_alloc(SP_MEM_HOST, -1, (uint64_t)(uintptr_t)p, size,
		     rec && sp_col.cfg.stacks ? sp_stack_capture(sp_col.cfg.stack_depth, (unsigned)sp_col.cfg.stacks)
					      : 0,
		     rec ? sp_fast_ns() : sp_coarse_ns(), rec);
}

void sp_collector_host_free(void *p)
{
	int rec = __atomic_load_n(&sp_col.open, __ATOMIC_ACQUIRE) != NULL;
	sp_mem_free(SP_MEM_HOST, (uint64_t)(uintptr_t)p, rec ? sp_fast_ns() : 0, rec);
}
