/* SPDX-License-Identifier: MIT */
/* cbsets.c - which CUPTI callbacks and activity kinds are on: classifies each callback id by name once, then
 * enables what the phase needs. A callback nothing wants goes off at its call's next exit, so a call in
 * progress keeps its exit and a window's end reconfigures nothing (docs/BENCHMARKS.md). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <generated_nvtx_meta.h>
#include "capture.h"
#include "collector/hold/cupti_life.h"
#include "collector/base/intern.h"
#include "collector/internal.h"
#include "collector/base/log.h"
#include "collector/hold/markhook.h"
#include "collector/out/tokrec.h"

/* What is enabled in the current CUPTI instance. Under sp_col.lock. */
static struct {
	int nvtx_on;   /* NVTX callbacks enabled */
	int nest_marker;                    /* an api marker names a driver function: runtime calls are CLS_NEST */
	uint8_t cb_on[2][SP_CBID_MAX];      /* callbacks currently enabled */
} cb_sets;

/* API calls recorded inside windows: everything that launches, copies, sets, synchronises,
 * orders streams or allocates. Selected by name so new CUDA versions' variants are included. */
static const char *const recorded_api[2][14] = {
	{ "cudaLaunch*", "cudaGraphLaunch*", "cudaMemcpy*", "cudaMemset*", "cuda*Synchronize*", "cudaStreamWaitEvent*",
	  "cudaEventRecord*", "cudaMalloc*", "cudaFree*", "cudaProfilerSt*" },
	{ "cuLaunch*", "cuGraphLaunch*", "cuMemcpy*", "cuMemset*", "cu*Synchronize*", "cuStreamWaitEvent*",
	  "cuEventRecord*", "cuMemAlloc*", "cuMemFree*", "cuMemCreate*", "cuMemMap*", "cuMemUnmap*", "cuMemRelease*",
	  "cuProfilerSt*" },
};
/* Tokens the auto detector learns from besides kernel launches: once-per-iteration calls, each
 * counted at the outermost call (a runtime call, or a driver call made outside one), so that the
 * driver calls a runtime call makes inside (its implementation) are not tokens of their own. */
static const char *const auto_api[2][3] = { { "cuda*Synchronize*", "cudaMemcpy*", "cudaMemset*" },
					    { "cu*Synchronize*", "cuMemcpy*", "cuMemset*" } };

#define NGLOBS(a) (sizeof(a) / sizeof *(a)) /* rows of a pattern list (NULL-padded) */

static int name_in(const char *n, const char *const *globs, size_t k)
{
	for (size_t i = 0; i < k && globs[i]; i++)
		if (sp_coll_glob(globs[i], n))
			return 1;
	return 0;
}

/* Points NVTX's injection at libcupti so that NVTX ranges reach CUPTI's callbacks, or at this
 * library when it records ranges and torch operators itself (ops.c; it initialises CUPTI's
 * injection first). NVTX reads it at a library's first NVTX call: ranges opened before CUDA
 * initialises are not seen. */
static void nvtx_injection(void)
{
	const char *cur = getenv("NVTX_INJECTION64_PATH"), *want = sp_ops_nvtx_library();
	if (!want)
		want = sp_cupti.path;
	if (!cur || !*cur)
		setenv("NVTX_INJECTION64_PATH", want, 1);
	else if (strcmp(cur, want) && strcmp(cur, sp_cupti.path))
		sp_warn("NVTX_INJECTION64_PATH is %s: NVTX ranges and torch operators reach stepprof only if it is "
			"stepprof or libcupti",
			cur);
	else if (strcmp(cur, want))
		sp_info("NVTX_INJECTION64_PATH is libcupti (%s): NVTX ranges and torch operators are not recorded",
			cur);
}

/* Enables or disables CUPTI's NVTX callbacks on range starts and ends. Under sp_col.lock. */
static void set_nvtx(int on)
{
	static const CUpti_CallbackId ids[] = {
		CUPTI_CBID_NVTX_nvtxRangePushA,        CUPTI_CBID_NVTX_nvtxRangePushEx,
		CUPTI_CBID_NVTX_nvtxRangeStartA,       CUPTI_CBID_NVTX_nvtxRangeStartEx,
		CUPTI_CBID_NVTX_nvtxDomainRangePushEx, CUPTI_CBID_NVTX_nvtxDomainRangeStartEx,
		CUPTI_CBID_NVTX_nvtxRangePop,          CUPTI_CBID_NVTX_nvtxRangeEnd,
		CUPTI_CBID_NVTX_nvtxDomainRangePop,    CUPTI_CBID_NVTX_nvtxDomainRangeEnd
	};
	if (on == cb_sets.nvtx_on)
		return;
	cb_sets.nvtx_on = on;
	for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
		SP_CUPTI(cuptiEnableCallback(on, sp_col.sub, CUPTI_CB_DOMAIN_NVTX, ids[i]));
}

/* Enables exactly the callbacks the current phase needs: marker detection always (until the
 * schedule is done), plus the recorded API set while collecting. Runs under sp_col.lock. */
void sp_cbset_apply(void)
{
	static const CUpti_CallbackDomain doms[2] = { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API };
	static const uint32_t sizes[2] = { CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE };
	unsigned wants = sp_ph_wants();
	int all_auto = 1;
	for (int i = 0; i < sp_col.nmk; i++)
		all_auto &= sp_col.mk[i].kind == SP_MARK_AUTO;
	int rec_rt = sp_col.collecting && sp_col.cfg.runtime_api, rec_drv = sp_col.collecting && sp_col.cfg.driver_api;
	if (!sp_cupti_life_enter())
		return; /* not attached: the next attach applies them (sp_cbset_armed) */
	for (int d = 0; d < 2; d++) {
		for (uint32_t cb = 1; cb < sizes[d] && cb < SP_CBID_MAX; cb++) {
			int want = 0;
			/* learning (auto): every launch reaches a driver launch call (runtime launches nest in
			 * one), so the driver ids alone give every kernel as a token with half the callbacks of
			 * both domains; a kernel marker needs the runtime call, where its step begins */
			if (!sp_col.done)
				want = ((wants & SP_WANT_LAUNCH) && sp_cbset_is_launch(doms[d], cb) &&
					(d == 1 || !all_auto)) ||
				       ((wants & SP_WANT_API) && (sp_col.cls[d][cb] & CLS_AUTO)) ||
				       ((wants & SP_WANT_GRAPH) && (sp_col.cls[d][cb] & CLS_GRAPH)) ||
				       ((wants & SP_WANT_ANCHOR) && sp_col.api_name[d][cb] &&
					sp_ph_anchor_is(sp_col.api_name[d][cb])) ||
				       ((wants & SP_WANT_MARKER) && sp_col.api_marker[d][cb]);
			/* with graphs: whether each graph launch comes through a hook (cupti_life.h) */
			if (d == 1 && (sp_col.cls[d][cb] & CLS_GRAPH) && sp_cupti_life_graphs())
				want = 1;
			if (!sp_col.done && sp_col.cfg.device_memory && sp_col.memop[d][cb].shape)
				want = 1; /* levels are tracked from process start */
			if (!sp_col.done && cb_sets.nest_marker && (sp_col.cls[d][cb] & CLS_NEST))
				want = 1; /* a driver API marker: see the runtime calls it may be made inside */
			if (sp_tokrec_on && (sp_cbset_is_launch(doms[d], cb) ||
					     (sp_col.cls[d][cb] & (CLS_AUTO | CLS_GRAPH | CLS_TRUTH | CLS_NEST))))
				want = 1; /* recording the detector's tokens: for the whole run */
			/* the streams under capture, known from before any window: a launch into one runs
			 * nothing and is not waited for (capture.h); rare calls, so on whatever the phase */
			if ((!sp_col.done || rec_rt || rec_drv) && (sp_col.cls[d][cb] & CLS_CAPTURE))
				want = 1;
			/* driver recording also needs the runtime set: its depth counter hides nested driver calls */
			if ((d == 0 ? rec_rt || rec_drv : rec_drv) && (sp_col.cls[d][cb] & CLS_RECORDED))
				want = 1;
			if (cb_sets.cb_on[d][cb]) {
				/* not wanted: off at its call's next exit (sp_cbset_lazy_off), most never come
				 * again, and one in progress keeps its exit (disabled now, CUPTI then never
				 * moves on to a new correlation id); wanted again before that, it stays on */
				if (sp_col.cb_lazy[d][cb] != !want)
					__atomic_store_n(&sp_col.cb_lazy[d][cb], (uint8_t)!want, __ATOMIC_RELAXED);
				continue;
			}
			if (want) {
				CUptiResult r = sp_cupti.cuptiEnableCallback(want, sp_col.sub, doms[d], cb);
				if (r == CUPTI_SUCCESS)
					cb_sets.cb_on[d][cb] = (uint8_t)want;
				else
					sp_warn_once("cuptiEnableCallback(%d, %s) failed: %d", want,
						     sp_intern_lookup(sp_cbset_api_name(doms[d], cb)), (int)r);
			}
		}
	}
	set_nvtx(sp_tokrec_on || (!sp_col.done && (wants & SP_WANT_NVTX)));
	sp_cupti_life_leave();
}

void sp_cbset_lazy_off(int d, CUpti_CallbackId cbid)
{
	static const CUpti_CallbackDomain doms[2] = { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API };
	pthread_mutex_lock(&sp_col.lock);
	if (cbid < SP_CBID_MAX && sp_col.cb_lazy[d][cbid] && cb_sets.cb_on[d][cbid]) {
		CUptiResult r = sp_cupti.cuptiEnableCallback(0, sp_col.sub, doms[d], cbid);
		if (r == CUPTI_SUCCESS)
			cb_sets.cb_on[d][cbid] = 0;
		else
			sp_warn_once("cuptiEnableCallback(0, %s) failed: %d",
				     sp_intern_lookup(sp_cbset_api_name(doms[d], cbid)), (int)r);
		__atomic_store_n(&sp_col.cb_lazy[d][cbid], 0, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&sp_col.lock);
}

void sp_cbset_kinds(int on)
{
	const struct {
		int want;
		CUpti_ActivityKind k;
	} kinds[] = {
		{ sp_col.cfg.kernels, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL },
		{ sp_col.cfg.memcpy, CUPTI_ACTIVITY_KIND_MEMCPY },
		{ sp_col.cfg.memset, CUPTI_ACTIVITY_KIND_MEMSET },
		{ sp_col.cfg.sync, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION },
	};
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
		if (kinds[i].want)
			on ? SP_CUPTI(cuptiActivityEnable(kinds[i].k)) : SP_CUPTI(cuptiActivityDisable(kinds[i].k));
}

void sp_cbset_activities(int on)
{
	if (!sp_cupti_life_enter())
		return; /* not attached: the next attach applies them (sp_cbset_armed) */
	if (on && sp_cupti_life_activity_ready() < 0) {
		sp_cupti_life_leave();
		return; /* warned: this window records no GPU activity */
	}
	if (on)
		sp_cupti_life_dirty();
	else
		sp_cupti_life_kinds_off();
	sp_cbset_kinds(on);
	sp_cupti_life_leave();
}

/* 1 if the API function nm is one of marker m's calls (api, profiler_range). Can't fail. */
int sp_cbset_marks(const struct sp_mk *m, const char *nm)
{
	if (m->kind == SP_MARK_API)
		return sp_coll_glob(m->pattern, nm);
	if (m->kind == SP_MARK_PROFILER_RANGE)
		return !strcmp(nm, "cudaProfilerStart") || !strcmp(nm, "cudaProfilerStop") ||
		       !strcmp(nm, "cuProfilerStart") || !strcmp(nm, "cuProfilerStop");
	return 0;
}

int sp_cbset_arm(void)
{
	static const CUpti_CallbackDomain doms[2] = { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API };
	static const uint32_t sizes[2] = { CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE };
	int n[SP_MAX_PHASES] = { 0 }, any_api = 0, nvtx = 0;
	for (int d = 0; d < 2; d++)
		for (uint32_t cb = 1; cb < sizes[d] && cb < SP_CBID_MAX; cb++) {
			const char *nm = sp_intern_lookup(sp_cbset_api_name(doms[d], cb));
			int hit = 0;
			for (int i = 0; i < sp_col.nmk; i++)
				if (sp_cbset_marks(&sp_col.mk[i], nm)) {
					n[i]++;
					hit = 1;
				}
			sp_col.api_marker[d][cb] = hit;
			sp_col.cls[d][cb] =
				(name_in(nm, recorded_api[d], NGLOBS(recorded_api[d])) ? CLS_RECORDED : 0) |
				(!sp_cbset_is_launch(doms[d], cb) && name_in(nm, auto_api[d], NGLOBS(auto_api[d]))
					 ? CLS_AUTO
					 : 0) |
				(sp_coll_glob(d ? "cuGraphLaunch*" : "cudaGraphLaunch*", nm) ? CLS_GRAPH : 0) |
				(sp_coll_glob(d ? "cuMemcpy*" : "cudaMemcpy*", nm) ||
						 sp_coll_glob(d ? "cuMemset*" : "cudaMemset*", nm)
					 ? CLS_COPY
					 : 0) |
				(sp_tokrec_truth_kind() == SP_TOK_API && sp_coll_glob(sp_tokrec_truth_pattern(), nm)
					 ? CLS_TRUTH
					 : 0) |
				(sp_tokrec_truth_kind() == SP_TOK_API && d == 0 ? CLS_NEST : 0) |
				(sp_cap_is_call(doms[d], cb) ? CLS_CAPTURE : 0);
			sp_col.memop[d][cb] = sp_alloc_classify(d, nm);
			sp_col.api_sync[d][cb] =
				d ? sp_coll_glob("cu*Synchronize*", nm) ||
						(sp_coll_glob("cuMemcpyDtoH*", nm) && !strstr(nm, "Async"))
				  : sp_coll_glob("cuda*Synchronize*", nm) || !strcmp(nm, "cudaMemcpy");
		}
	for (int i = 0; i < sp_col.nmk; i++) {
		const struct sp_mk *m = &sp_col.mk[i];
		any_api |= m->kind == SP_MARK_API;
		nvtx |= m->kind == SP_MARK_NVTX || m->kind == SP_MARK_AUTO;
		if (m->kind == SP_MARK_API && !n[i]) {
			sp_warn("[%s%s] pattern '%s' names no CUDA runtime or driver API function; not profiling",
				m->name ? "phase." : "marker", m->name ? sp_intern_lookup(m->name) : "", m->pattern);
			return -1;
		}
		if (m->kind == SP_MARK_NCCL)
			sp_info("NCCL marker '%s': steps come from the NCCL hooks", m->pattern);
	}
	for (uint32_t cb = 1; cb < SP_CBID_MAX && any_api; cb++)
		cb_sets.nest_marker |= sp_col.api_marker[1][cb];
	for (uint32_t cb = 1; cb < SP_CBID_MAX && cb_sets.nest_marker; cb++)
		sp_col.cls[0][cb] |= CLS_NEST; /* a driver marker counts outside runtime calls only */
	sp_hook_arm();
	if (nvtx || sp_tokrec_on || sp_ops_nvtx_library())
		nvtx_injection();
	return 0;
}

/* CUPTI was (re)initialised with nothing enabled in it: enables what the current phase needs
 * (context, graph and graph node creation, NVTX markers, the callbacks sp_cbset_apply picks, and activity
 * kinds if a window is collecting). Init or writer thread, outside callbacks. Can't fail. */
void sp_cbset_armed(void)
{
	pthread_mutex_lock(&sp_col.lock);
	SP_CUPTI(cuptiEnableCallback(1, sp_col.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
	SP_CUPTI(cuptiEnableCallback(1, sp_col.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPH_CREATED));
	/* a node made inside a launch or copy: it went into a capture (capture.h), whatever its stream */
	SP_CUPTI(cuptiEnableCallback(1, sp_col.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED));
	memset(cb_sets.cb_on, 0, sizeof cb_sets.cb_on);
	memset(sp_col.cb_lazy, 0, sizeof sp_col.cb_lazy);
	cb_sets.nvtx_on = 0; /* a new instance: sp_cbset_apply enables NVTX again if wanted */
	sp_win_activities_armed();
	sp_col.activities_on = sp_col.collecting;
	if (sp_col.collecting)
		sp_cbset_activities(1);
	sp_cbset_apply();
	pthread_mutex_unlock(&sp_col.lock);
}

/* Name of a callback id without CUPTI's version suffix ("cudaLaunchKernel_v7000" -> "cudaLaunchKernel"). */
uint32_t sp_cbset_api_name(CUpti_CallbackDomain dom, CUpti_CallbackId cbid)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	if (cbid >= SP_CBID_MAX)
		return 0;
	if (!sp_col.api_name[d][cbid]) {
		const char *n = NULL;
		char buf[128];
		if (sp_cupti.cuptiGetCallbackName(dom, cbid, &n) != CUPTI_SUCCESS || !n)
			n = "?";
		snprintf(buf, sizeof buf, "%s", n);
		char *v = strstr(buf, "_v");
		if (v && v[2] >= '0' && v[2] <= '9' && strspn(v + 2, "0123456789") == strlen(v + 2))
			*v = 0;
		sp_col.api_name[d][cbid] = sp_intern(buf);
	}
	return sp_col.api_name[d][cbid];
}

int sp_cbset_token_kind(const char *name, int drv)
{
	return name_in(name, auto_api[drv != 0], NGLOBS(auto_api[0])) ? SP_TOK_API
	       : sp_coll_glob(drv ? "cuGraphLaunch*" : "cudaGraphLaunch*", name) ? SP_TOK_GRAPH
										 : 0;
}

int sp_cbset_is_launch(CUpti_CallbackDomain dom, CUpti_CallbackId cbid)
{
	if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
		switch (cbid) {
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
			return 1;
		}
		return 0;
	}
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
		return 1;
	}
	return 0;
}
