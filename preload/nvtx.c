/* SPDX-License-Identifier: MIT */
/* nvtx.c - NVTX's injection: at each NVTX library's first call, puts this file's default-domain range push
 * and pop handlers in its table; a handler forwards to the collector, then to CUPTI's handler in the slot.
 * Holds no policy. */
#define NVTX_NO_IMPL /* a tool: the types, not NVTX's own implementation */
#include <nvtx3/nvToolsExt.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include "collector/collector.h"

#define SP_EXPORT __attribute__((visibility("default")))

typedef int(NVTX_API *push_a_fn)(const char *);
typedef int(NVTX_API *push_ex_fn)(const nvtxEventAttributes_t *);
typedef int(NVTX_API *pop_fn)(void);

/* What CUPTI's injection put in the slots (the first library's; CUPTI's handlers are the same for
 * every library), NULL where it put nothing. */
static struct {
	_Atomic(NvtxFunctionPointer) push_a, push_ex, pop;
} next;

static int NVTX_API range_push_a(const char *message)
{
	int depth = sp_collector_nvtx_push(message);
	push_a_fn f = (push_a_fn)atomic_load_explicit(&next.push_a, memory_order_relaxed);
	return f ? f(message) : depth;
}

static int NVTX_API range_push_ex(const nvtxEventAttributes_t *a)
{
	int ascii = a && a->messageType == NVTX_MESSAGE_TYPE_ASCII;
	int depth = sp_collector_nvtx_push(ascii ? a->message.ascii : NULL);
	push_ex_fn f = (push_ex_fn)atomic_load_explicit(&next.push_ex, memory_order_relaxed);
	return f ? f(a) : depth;
}

static int NVTX_API range_pop(void)
{
	int depth = sp_collector_nvtx_pop();
	pop_fn f = (pop_fn)atomic_load_explicit(&next.pop, memory_order_relaxed);
	return f ? f() : depth;
}

/* Puts fn in slot cbid of table (size slots); *saved takes what the chained tool put there, that
 * is what differs from before (what NVTX itself holds there during its initialisation must never
 * be called back). */
static void take(NvtxFunctionTable table, unsigned size, unsigned cbid, NvtxFunctionPointer before,
		 NvtxFunctionPointer fn, _Atomic(NvtxFunctionPointer) *saved)
{
	if (cbid >= size || !table[cbid])
		return;
	NvtxFunctionPointer now = *table[cbid];
	if (now && now != before && now != fn && !atomic_load(saved))
		atomic_store(saved, now);
	*table[cbid] = fn;
}

/* Called by NVTX (once per library that uses it) with its export table getter. Returns 1 (the
 * handlers are in), 0 if the table cannot be had (NVTX then makes every call a no-op). */
SP_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *cb = get ? (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS) : NULL;
	NvtxFunctionTable table = NULL;
	unsigned size = 0;
	if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable ||
	    !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table)
		return 0;
	NvtxFunctionPointer before[NVTX_CBID_CORE_SIZE] = { 0 };
	for (unsigned i = 0; i < size && i < NVTX_CBID_CORE_SIZE; i++)
		before[i] = table[i] ? *table[i] : NULL;
	int (*cupti)(NvtxGetExportTableFunc_t) = (int (*)(NvtxGetExportTableFunc_t))sp_collector_nvtx_chain();
	if (cupti)
		cupti(get); /* its handlers first: a failure leaves its slots as they were */
	take(table, size, NVTX_CBID_CORE_RangePushA, before[NVTX_CBID_CORE_RangePushA],
	     (NvtxFunctionPointer)range_push_a, &next.push_a);
	take(table, size, NVTX_CBID_CORE_RangePushEx, before[NVTX_CBID_CORE_RangePushEx],
	     (NvtxFunctionPointer)range_push_ex, &next.push_ex);
	take(table, size, NVTX_CBID_CORE_RangePop, before[NVTX_CBID_CORE_RangePop], (NvtxFunctionPointer)range_pop,
	     &next.pop);
	return 1;
}
