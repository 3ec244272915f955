/* SPDX-License-Identifier: MIT */
/* callbacks.c - the CUPTI subscriber's callback: dispatches each callback (resource, NVTX, API
 * entry, API exit) to a named handler that feeds marker detection, window splits, allocation
 * tracking and SP_EV_API events. Application threads; counted in flight (cupti_life.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <generated_nvtx_meta.h>
#include "collector/base/clock.h"
#include "capture.h"
#include "collector/hold/cupti_life.h"
#include "collector/hold/hooklearn.h"
#include "collector/base/intern.h"
#include "collector/internal.h"
#include "collector/hold/markhook.h"
#include "collector/stacks/stacks.h"
#include "decide/stepdet.h"
#include "collector/out/tokrec.h"

/* ---- CUPTI callbacks (application threads) ---- */

/* The message of an NVTX push/start call, or NULL (pop/end, or not an ASCII message). */
static const char *nvtx_message(CUpti_CallbackId cbid, const CUpti_NvtxData *nd)
{
	const nvtxEventAttributes_t *a = NULL;
	if (cbid == CUPTI_CBID_NVTX_nvtxRangePushA || cbid == CUPTI_CBID_NVTX_nvtxRangeStartA)
		return ((const nvtxRangePushA_params *)nd->functionParams)->message;
	if (cbid == CUPTI_CBID_NVTX_nvtxRangePushEx || cbid == CUPTI_CBID_NVTX_nvtxRangeStartEx)
		a = ((const nvtxRangePushEx_params *)nd->functionParams)->eventAttrib;
	else if (cbid == CUPTI_CBID_NVTX_nvtxDomainRangePushEx || cbid == CUPTI_CBID_NVTX_nvtxDomainRangeStartEx)
		a = ((const nvtxDomainRangePushEx_params *)nd->functionParams)->core.eventAttrib;
	return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : NULL;
}

static int nvtx_is_end(CUpti_CallbackId cbid)
{
	return cbid == CUPTI_CBID_NVTX_nvtxRangePop || cbid == CUPTI_CBID_NVTX_nvtxRangeEnd ||
	       cbid == CUPTI_CBID_NVTX_nvtxDomainRangePop || cbid == CUPTI_CBID_NVTX_nvtxDomainRangeEnd;
}

static int nvtx_is_range(CUpti_CallbackId cbid)
{
	return cbid == CUPTI_CBID_NVTX_nvtxRangeStartA || cbid == CUPTI_CBID_NVTX_nvtxRangeStartEx ||
	       cbid == CUPTI_CBID_NVTX_nvtxDomainRangeStartEx || cbid == CUPTI_CBID_NVTX_nvtxRangeEnd ||
	       cbid == CUPTI_CBID_NVTX_nvtxDomainRangeEnd;
}

/* An NVTX range call: the nvtx marker, and the recorded token stream. */
static void on_nvtx(CUpti_CallbackId cbid, const CUpti_NvtxData *nd)
{
	const char *msg = nvtx_message(cbid, nd);
	uint64_t t = sp_thr_ns(1);
	if (sp_tokrec_on) {
		uint8_t f = nvtx_is_range(cbid) ? SP_TOKF_RANGE : 0;
		if (nvtx_is_end(cbid)) {
			sp_tokrec_add(SP_TOK_NVTX_POP, f, 0, t - sp_col.credit, sp_coll_tid());
		} else {
			uint32_t id = msg ? sp_stepdet_nvtx_name(msg) : 0; /* digits folded: a bounded table */
			if (msg && sp_tokrec_truth_kind() == SP_TOK_NVTX_PUSH &&
			    sp_coll_glob(sp_tokrec_truth_pattern(), msg))
				sp_tokrec_add(SP_TOK_TRUTH, f, id, t - sp_col.credit, sp_coll_tid());
			sp_tokrec_add(SP_TOK_NVTX_PUSH, f, id, t - sp_col.credit, sp_coll_tid());
		}
	}
	for (int i = 0; i < sp_col.nmk; i++) {
		const struct sp_mk *m = &sp_col.mk[i];
		if (m->kind == SP_MARK_NVTX && msg && sp_coll_glob(m->pattern, msg))
			sp_win_detect(i, SP_TOK_NVTX_PUSH, SP_TOKF_MATCHED, 0, t, 0, 0,
				      0); /* matched here: nothing interned */
		else if (m->kind != SP_MARK_NVTX && (sp_stepdet_wants(m->det) & SP_WANT_NVTX))
			sp_win_detect(i, nvtx_is_end(cbid) ? SP_TOK_NVTX_POP : SP_TOK_NVTX_PUSH, 0,
				      msg && !nvtx_is_end(cbid) ? sp_stepdet_nvtx_name(msg) : 0, t, 0, 0, 0);
	}
}

/* Marker detection at an API entry (time t and correlation id corr of the outermost call). Driver
 * launches see every kernel (runtime launches nest in them); an API marker counts only the
 * outermost matching call on its thread, a profiler range's Stop at its exit (detect_exit). */
static void detect_enter(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, int launch,
			 uint64_t t, uint32_t corr)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	uint8_t kind, flags;
	uint32_t name;
	/* an API marker call counts once, at the outermost level, whichever phases it marks */
	int outer =
		cbid < SP_CBID_MAX && sp_col.api_marker[d][cbid] && !(d && sp_thr.in_nest) && sp_thr.mk_depth++ == 0;
	for (int i = 0; i < sp_col.nmk; i++) {
		const struct sp_mk *m = &sp_col.mk[i];
		switch (m->kind) {
		case SP_MARK_AUTO:
			if (launch && !(sp_stepdet_wants(m->det) & SP_WANT_LAUNCH))
				break; /* a launch seen for a window's sake: the detector would ignore it */
			/* the anchor call a hook counted already (parking on it, markhook.h) is not counted again */
			if (sp_tokglue_token_of(dom, cbid, cd, launch, &kind, &flags, &name) &&
			    !(kind == SP_TOK_API && sp_hook_cupti_anchor(name)))
				sp_win_detect(i, kind, flags, name, t, corr, cbid, d);
			break;
		case SP_MARK_KERNEL:
			if (launch && sp_stepdet_matches(m->det, name = sp_coll_name_id(cd->symbolName)))
				sp_win_detect(i, SP_TOK_KERNEL, 0, name, t, corr, cbid, d);
			break;
		case SP_MARK_API:
		case SP_MARK_PROFILER_RANGE:
			/* an api marker call a hook counted already (markhook.h) is not counted again */
			if (outer && sp_cbset_marks(m, sp_intern_lookup(sp_cbset_api_name(dom, cbid))) &&
			    (m->kind == SP_MARK_API
				     ? !sp_hook_cupti_marker()
				     : strstr(sp_intern_lookup(sp_cbset_api_name(dom, cbid)), "Start") != NULL))
				sp_win_detect(i, SP_TOK_API, 0, sp_cbset_api_name(dom, cbid), t, corr, cbid, d);
			break;
		default:
			break;
		}
	}
}

/* Marker detection at an API exit: a boundary at the end of its call, a profiler range's Stop. */
static void detect_exit(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, uint64_t t)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	if (sp_thr.after_pending && sp_thr.after_cb[d] == cbid)
		sp_win_after_exit(t); /* the iteration ended with this call */
	if (cbid < SP_CBID_MAX && sp_col.api_marker[d][cbid] && !(d && sp_thr.in_nest) && sp_thr.mk_depth > 0 &&
	    --sp_thr.mk_depth == 0) {
		if (sp_thr.hook_pending)
			sp_hook_cupti_marker_end(); /* the proof of a call no hook saw (markhook.h) */
		if (strstr(sp_intern_lookup(sp_cbset_api_name(dom, cbid)), "Stop"))
			for (int i = 0; i < sp_col.nmk; i++)
				if (sp_col.mk[i].kind == SP_MARK_PROFILER_RANGE)
					sp_win_detect(i, SP_TOK_API, 0, sp_cbset_api_name(dom, cbid), t,
						      cd->correlationId, cbid, d);
	}
}

/* A boundary happened outside a CUDA call (split_at): this call's correlation id splits there. */
static void fill_split(uint32_t corr)
{
	pthread_mutex_lock(&sp_col.lock);
	if (sp_col.split_lo && *sp_col.split_lo == SP_CORR_PENDING)
		*sp_col.split_lo = corr;
	if (sp_col.split_hi && *sp_col.split_hi == SP_CORR_PENDING)
		*sp_col.split_hi = corr;
	sp_col.split_lo = sp_col.split_hi = NULL;
	pthread_mutex_unlock(&sp_col.lock);
}

/* 1 if the callback of (d, cbid) is on only to see nesting (CLS_NEST): it must change nothing
 * else, so that recording does not change what the profile records. */
static int nest_only(int d, CUpti_CallbackId cbid)
{
	if (d || cbid >= SP_CBID_MAX || !(sp_col.cls[0][cbid] & CLS_NEST))
		return 0;
	return !(sp_col.cls[0][cbid] & ~CLS_NEST) && !sp_col.api_marker[0][cbid] && !sp_col.memop[0][cbid].shape &&
	       !sp_cbset_is_launch(CUPTI_CB_DOMAIN_RUNTIME_API, cbid) &&
	       !(sp_col.api_name[0][cbid] && sp_ph_anchor_is(sp_col.api_name[0][cbid]));
}

/* A resource callback: CONTEXT_CREATED (this process does GPU work), GRAPH_CREATED, or
 * GRAPHNODE_CREATED (inside the call that made the node: into a capture, if a launch or copy). */
static void on_resource(CUpti_CallbackId cbid)
{
	if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED)
		sp_thr.cap_node = 1;
	else if (cbid == CUPTI_CBID_RESOURCE_GRAPH_CREATED)
		sp_cupti_life_graph();
	else
		sp_coll_saw_context();
}

/* An API entry at time t (launch: it is a kernel launch): call state, tokens, a pending window
 * split, marker detection, and the start time kept for the exit's SP_EV_API. */
static void on_api_enter(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, int launch,
			 uint64_t t)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	sp_thr.cur_cb[d] = cbid;
	if (!(d && sp_thr.in_rt))
		sp_thr.cap_node = 0; /* an outermost call: no graph node made in it yet */
	if (!d) {
		sp_thr.in_rt = 1;
		sp_thr.in_rt_launch = launch;
		sp_thr.mem_hooked = 0;
		sp_thr.rt_t0 = t;
		sp_thr.rt_corr = cd->correlationId;
	}
	if (launch && d)
		sp_hooklearn_cupti_launch(cd->symbolName); /* the launch hooks' proof (hooklearn.h) */
	if (launch && sp_thr.in_nccl && !sp_thr.nccl_corr)
		sp_thr.nccl_corr = cd->correlationId; /* links the NCCL call to its kernel */
	/* a marker inside a runtime call begins its step where that call began */
	uint64_t mt = d && sp_thr.in_rt ? sp_thr.rt_t0 : t;
	uint32_t mc = d && sp_thr.in_rt ? sp_thr.rt_corr : cd->correlationId;
	if (sp_tokrec_on)
		sp_tokglue_api(dom, cbid, cd, launch, mt - sp_col.credit);
	if (atomic_load_explicit(&sp_col.split_pending, memory_order_relaxed) &&
	    atomic_exchange(&sp_col.split_pending, 0))
		fill_split(cd->correlationId);
	if (__builtin_expect(sp_thr.own_split, 0))
		sp_win_own_split(cd->correlationId); /* (after the fill: the bound is set) */
	if (!sp_col.done)
		detect_enter(dom, cbid, cd, launch, mt, mc);
	if (cd->correlationData)
		*cd->correlationData = t;
}

/* An API exit inside a window: writes its SP_EV_API event, marked with the window and what it is (launch,
 * copy or set, graph launch, captured, other) for the writer's drain count (activity.c). */
static void record_api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, struct window *w,
		       int launch, int captured, uint32_t stack, uint64_t t)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	struct sp_event ev = { .kind = SP_EV_API,
			       .sub = (uint8_t)((d ? SP_API_DRIVER : SP_API_RUNTIME) | (captured ? SP_API_CAPTURED : 0)),
			       .device = SP_NO_DEVICE,
			       .tid = sp_coll_tid(),
			       .end = t,
			       .corr = cd->correlationId,
			       .name = sp_cbset_api_name(dom, cbid) };
	ev.start = cd->correlationData && *cd->correlationData ? *cd->correlationData : t;
	ev.u.api.cbid = cbid;
	ev.u.api.status = cd->functionReturnValue ? *(const int *)cd->functionReturnValue : 0;
	ev.u.api.stack = stack;
	uint8_t cls = cbid < SP_CBID_MAX ? sp_col.cls[d][cbid] : 0;
	ev.u.api.win_id = w->id;
	ev.u.api.win_slot = (uint16_t)(w - sp_col.win + 1);
	ev.u.api.win_call = captured			     ? SP_WCALL_OTHER
			    : launch			     ? SP_WCALL_LAUNCH
			    : (cls & CLS_COPY) && !ev.u.api.status ? SP_WCALL_COPY
			    : cls & CLS_GRAPH			     ? SP_WCALL_GRAPH
								     : SP_WCALL_OTHER;
	sp_coll_push(&ev);
}

/* An API exit at time t: call state, deferred callback changes, its allocation (always), its
 * SP_EV_API event (in a window), then a boundary at its end. */
static void on_api_exit(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, int launch,
			uint64_t t)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	int hooked = !d && sp_thr.mem_hooked; /* an allocation hook accounted inside this runtime call */
	if (!d)
		sp_thr.in_rt = sp_thr.in_rt_launch = sp_thr.mem_hooked = 0;
	sp_thr.cur_cb[d] = 0;
	/* the window this call was made in, before a boundary at its exit ends it: an automatic step
	 * that ends after its anchor call (a cudaMemcpy to the host) keeps that call, and waits for its copy */
	struct window *w = __atomic_load_n(&sp_col.open, __ATOMIC_ACQUIRE);
	struct memop mop = cbid < SP_CBID_MAX ? sp_col.memop[d][cbid] : (struct memop){ 0, 0 };
	uint8_t cls = cbid < SP_CBID_MAX ? sp_col.cls[d][cbid] : 0;
	int ok = cd->functionReturnValue && *(const int *)cd->functionReturnValue == 0;
	if (__builtin_expect(cls & CLS_CAPTURE, 0))
		sp_cap_call(dom, cbid, cd, ok); /* a stream begins or ends a capture */
	uint32_t stack = 0;
	/* launches in a window; allocations always (they are rare, and a window's memory peak needs
	 * the sites of blocks made long before it), but those an allocation hook accounted */
	int alloc = mop.shape && mop.shape != MEM_FREE && ok && sp_col.cfg.device_memory && !hooked;
	if (sp_col.cfg.stacks && !(d && sp_thr.in_rt) && (w ? launch || mop.shape : alloc))
		stack = sp_stack_capture(sp_col.cfg.stack_depth,
					 (unsigned)sp_col.cfg.stacks | (alloc ? SP_STACK_NATIVE_FALLBACK : 0));
	if (mop.shape && ok && !(d && sp_thr.in_rt) && sp_col.cfg.device_memory && !hooked) {
		sp_alloc_call(cd, mop, t, stack, w != NULL);
		sp_thr.mem_seen++; /* an allocation hook around this driver call leaves it to CUPTI */
	}
	/* in a window, not nested in a runtime call, and wanted; the window by correlation id as its GPU records
	 * are, so a launch from before the window is not waited for */
	uint32_t lo = w ? __atomic_load_n(&w->corr_lo, __ATOMIC_RELAXED) : SP_CORR_PENDING;
	if (w && !(d && sp_thr.in_rt) && (d ? sp_col.cfg.driver_api : sp_col.cfg.runtime_api) &&
	    lo != SP_CORR_PENDING && cd->correlationId >= lo) {
		/* a launch that failed made no kernel, nor one captured into a graph (its replays do):
		 * neither is waited for (nor said missing) */
		int captured = (launch || (cls & CLS_COPY)) && sp_cap_into(dom, cbid, cd);
		record_api(dom, cbid, cd, w, launch && !captured && (ok || !cd->functionReturnValue), captured, stack,
			   t);
	}
	detect_exit(dom, cbid, cd, t);
}

/* A call whose callback nothing wants any more (sp_col.cb_lazy): as if it were off already, but a
 * pending window split takes its id (the window's top is the first call after its end), and its
 * exit ends the call state an entry seen in full set up, then turns the callback off. */
static void lazy_call(int d, CUpti_CallbackId cbid, const CUpti_CallbackData *cd)
{
	if (cd->callbackSite == CUPTI_API_ENTER) {
		if (atomic_load_explicit(&sp_col.split_pending, memory_order_relaxed) &&
		    atomic_exchange(&sp_col.split_pending, 0))
			fill_split(cd->correlationId);
		if (__builtin_expect(sp_thr.own_split, 0))
			sp_win_own_split(cd->correlationId);
		return;
	}
	if (sp_thr.cur_cb[d] == cbid) /* its entry was a wanted one's */
		sp_thr.cur_cb[d] = 0;
	if (!d) /* runtime calls do not nest: none is in progress on this thread now */
		sp_thr.in_rt = sp_thr.in_rt_launch = sp_thr.mem_hooked = sp_thr.in_nest = 0;
	sp_cbset_lazy_off(d, cbid);
}

/* Dispatches one callback to its handler by domain and site. */
static void callback_body(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	if (sp_col.disabled)
		return;
	if (dom == CUPTI_CB_DOMAIN_NVTX) {
		on_nvtx(cbid, data);
		return;
	}
	if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
		on_resource(cbid);
		return;
	}
	if (dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API)
		return;
	const CUpti_CallbackData *cd = data;
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	if (__builtin_expect(cbid < SP_CBID_MAX && __atomic_load_n(&sp_col.cb_lazy[d][cbid], __ATOMIC_RELAXED), 0)) {
		lazy_call(d, cbid, cd);
		return;
	}
	if (nest_only(d, cbid)) {
		sp_thr.in_nest = cd->callbackSite == CUPTI_API_ENTER;
		return;
	}
	/* a kernel launch counts once: at the runtime call, or at a driver call made outside one */
	int launch = sp_cbset_is_launch(dom, cbid);
	if (launch && d && sp_thr.in_rt_launch)
		return; /* the driver launch inside a runtime launch: that one is counted and recorded */
	/* a marker call's times are step boundaries: the precise clock; any other call's, the counter
	 * clock (clock.h: tens of ns from it, a third of the cost; two reads a launch in a window) */
	uint64_t t = sp_thr_ns(sp_thr.marking);
	if (cd->callbackSite == CUPTI_API_ENTER)
		on_api_enter(dom, cbid, cd, launch, t);
	else
		on_api_exit(dom, cbid, cd, launch, t);
}

/* 1 if this API call is a step marker's: an api marker, profiler range or auto anchor call, or
 * the launch of the marker (or auto anchor) kernel. Its calls time the detaches (cupti_life.h). */
static int marker_call(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	if (cbid < SP_CBID_MAX && sp_col.api_marker[d][cbid])
		return 1;
	/* automatic, locked on a call: that call (a kernel anchor has no marker call) */
	if (sp_col.mk_auto && cbid < SP_CBID_MAX && sp_col.api_name[d][cbid] &&
	    sp_ph_anchor_is(sp_col.api_name[d][cbid]))
		return 1;
	for (int i = 0; sp_col.mk_kernel && i < sp_col.nmk; i++)
		if (sp_col.mk[i].kind == SP_MARK_KERNEL && sp_cbset_is_launch(dom, cbid) &&
		    sp_stepdet_matches(sp_col.mk[i].det, sp_coll_name_id(cd->symbolName)))
			return 1;
	return 0;
}

/* The subscriber's callback (application threads): counted in flight so a detach never tears CUPTI down
 * under it; marker calls timed for detaches between windows (cupti_life.h); stale call state reset after a
 * re-attach. */
void CUPTIAPI sp_cb_on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	int api = dom == CUPTI_CB_DOMAIN_RUNTIME_API || dom == CUPTI_CB_DOMAIN_DRIVER_API;
	int site = api ? (int)((const CUpti_CallbackData *)data)->callbackSite : -1;
	int mk = api && !sp_thr.hook_counted && marker_call(dom, cbid, data); /* a hook counted it */
	if (!sp_cupti_life_enter_as(mk ? SP_ENTER_MARKER : SP_ENTER_CALLBACK))
		return;
	unsigned gen = sp_cupti_life_generation();
	if (__builtin_expect(sp_thr.gen != gen, 0)) {
		/* a static runtime's marker call whose nested driver call the hooks counted while parked:
		 * stepprof re-attached before the call returned (the hook kicks the writer near a window) */
		if (mk && site == CUPTI_API_EXIT && !sp_thr.nested_counted)
			sp_cupti_life_missed("a marker call began while detached");
		sp_thr.nested_counted = 0;
		sp_thr.gen = gen;
		sp_thr.in_rt = sp_thr.in_rt_launch = sp_thr.mk_depth = sp_thr.after_pending = sp_thr.marking =
			sp_thr.hook_pending = sp_thr.mem_hooked = 0;
		sp_thr.cur_cb[0] = sp_thr.cur_cb[1] = 0;
	}
	if (mk && site == CUPTI_API_ENTER)
		sp_thr.nested_counted = 0; /* a call CUPTI sees whole */
	if (dom == CUPTI_CB_DOMAIN_DRIVER_API && site == CUPTI_API_ENTER && cbid < SP_CBID_MAX &&
	    (sp_col.cls[1][cbid] & CLS_GRAPH))
		sp_cupti_life_glaunch(sp_thr.graph_hooked > 0);
	if (mk && site == CUPTI_API_ENTER && sp_thr.marking++ == 0)
		sp_cupti_life_mark_begin(sp_now_ns());
	if (api)
		atomic_store_explicit(&sp_hold.corr_last, ((const CUpti_CallbackData *)data)->correlationId,
				      memory_order_relaxed);
	if (api && atomic_load_explicit(&sp_hold.corr_base, memory_order_relaxed)) {
		CUpti_CallbackData cd = *(const CUpti_CallbackData *)data; /* CUPTI's is const */
		cd.correlationId = sp_cupti_life_corr(cd.correlationId);
		callback_body(dom, cbid, &cd);
	} else {
		callback_body(dom, cbid, data);
	}
	if (mk && site == CUPTI_API_EXIT && sp_thr.marking > 0 && --sp_thr.marking == 0)
		sp_cupti_life_mark_end(sp_now_ns());
	sp_cupti_life_leave();
}
