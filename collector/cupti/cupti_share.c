/* SPDX-License-Identifier: MIT */
/* cupti_share.c - serving the program's own CUPTI profiler while stepprof stays the only subscriber
 * (cupti_share.h): keeps each side's wants, makes CUPTI hold the union and dispatches callbacks to the sides
 * that want them. Never fails a program's call; never changes what stepprof records. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "collector/base/clock.h"
#include "collector/collector.h"
#include "cupti_api.h"
#include "collector/hold/cupti_life.h"
#include "cupti_share.h"
#include "cupti_share_int.h"
#include "collector/hold/hooklearn.h"
#include "collector/internal.h"
#include "collector/base/log.h"
#include "collector/out/writer.h"

#define CORR_STACK 16            /* nested API calls per thread the program's correlationData covers */

struct share_globals sp_share = { .lock = PTHREAD_MUTEX_INITIALIZER, .buf_lock = PTHREAD_MUTEX_INITIALIZER };
char sp_share_fake_handle;

/* The program's correlationData slots: CUPTI gives each subscriber its own, and stepprof's
 * callbacks write stepprof's (callbacks.c). A stack per thread pairs an exit with its entry. */
static __thread struct {
	unsigned depth;
	struct {
		uint32_t dom, cbid;
		uint64_t v;
	} s[CORR_STACK];
	uint64_t spare;
} corr_stack;

/* ---- helpers ---- */

/* What (dom, cbid) wants now, as SIDE_* bits. */
static uint8_t want_cb(unsigned d, unsigned cbid)
{
	return d < NDOM && cbid < SP_CBID_MAX ? (uint8_t)(sp_share.all[d] | sp_share.cb[d][cbid]) : SIDE_SP;
}

/* The number of callback ids of a domain (those a domain-wide change walks). */
static unsigned domain_size(unsigned d)
{
	unsigned n = d == CUPTI_CB_DOMAIN_RUNTIME_API   ? CUPTI_RUNTIME_TRACE_CBID_SIZE
		     : d == CUPTI_CB_DOMAIN_DRIVER_API  ? CUPTI_DRIVER_TRACE_CBID_SIZE
		     : d == CUPTI_CB_DOMAIN_RESOURCE    ? CUPTI_CBID_RESOURCE_SIZE
		     : d == CUPTI_CB_DOMAIN_SYNCHRONIZE ? CUPTI_CBID_SYNCHRONIZE_SIZE
		     : d == CUPTI_CB_DOMAIN_NVTX        ? CUPTI_CBID_NVTX_SIZE
							: SP_CBID_MAX;
	return n < SP_CBID_MAX ? n : SP_CBID_MAX;
}

/* (cupti_share_int.h) sub is stepprof's real handle; CUPTI_SUCCESS also when CUPTI already held
 * what the union needs. */
CUptiResult sp_share_set_cb(int side, uint32_t on, CUpti_SubscriberHandle sub, unsigned d, unsigned cbid, bool all)
{
	CUptiResult r = CUPTI_SUCCESS;
	if (d >= NDOM)
		return side == SIDE_SP ? sp_share.real.enable_domain(on, sub, (CUpti_CallbackDomain)d)
				       : CUPTI_ERROR_INVALID_PARAMETER;
	if (!all && cbid >= SP_CBID_MAX)
		return side == SIDE_SP ? sp_share.real.enable_cb(on, sub, (CUpti_CallbackDomain)d, cbid)
				       : CUPTI_ERROR_INVALID_PARAMETER;
	if (all) {
		unsigned n = domain_size(d);
		if (on) {
			sp_share.all[d] |= (uint8_t)side;
			return sp_share.real.enable_domain(1, sub, (CUpti_CallbackDomain)d);
		}
		sp_share.all[d] &= (uint8_t)~side;
		bool other = sp_share.all[d] != 0;
		for (unsigned c = 0; c < SP_CBID_MAX; c++) {
			sp_share.cb[d][c] &= (uint8_t)~side;
			other |= sp_share.cb[d][c] != 0;
		}
		if (!other) /* nobody wants anything in this domain */
			return sp_share.real.enable_domain(0, sub, (CUpti_CallbackDomain)d);
		for (unsigned c = 0; c < n; c++) /* keep what the other side wants, one id at a time */
			if (!want_cb(d, c)) {
				CUptiResult e = sp_share.real.enable_cb(0, sub, (CUpti_CallbackDomain)d, c);
				if (e != CUPTI_SUCCESS && e != CUPTI_ERROR_INVALID_PARAMETER && r == CUPTI_SUCCESS)
					r = e;
			}
		return r;
	}
	if (on) {
		sp_share.cb[d][cbid] |= (uint8_t)side;
		return sp_share.real.enable_cb(1, sub, (CUpti_CallbackDomain)d, cbid);
	}
	sp_share.cb[d][cbid] &= (uint8_t)~side;
	if (want_cb(d, cbid))
		return CUPTI_SUCCESS; /* the other side still wants it */
	return sp_share.real.enable_cb(0, sub, (CUpti_CallbackDomain)d, cbid);
}

CUptiResult sp_share_set_kind(int side, CUpti_ActivityKind k, int on)
{
	if ((unsigned)k >= NKIND)
		return on ? sp_share.real.act_enable(k) : sp_share.real.act_disable(k);
	if (on) {
		CUptiResult r = sp_share.real.act_enable(k);
		if (r == CUPTI_SUCCESS)
			sp_share.kind[k] |= (uint8_t)side;
		return r;
	}
	sp_share.kind[k] &= (uint8_t)~side;
	return sp_share.kind[k] ? CUPTI_SUCCESS : sp_share.real.act_disable(k);
}

/* ---- stepprof's own calls, through sp_cupti's table ---- */

static CUptiResult CUPTIAPI sp_enable_cb(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d,
					 CUpti_CallbackId cbid)
{
	pthread_mutex_lock(&sp_share.lock);
	CUptiResult r = sp_share_set_cb(SIDE_SP, on, sub, d, cbid, false);
	pthread_mutex_unlock(&sp_share.lock);
	return r;
}

static CUptiResult CUPTIAPI sp_enable_domain(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d)
{
	pthread_mutex_lock(&sp_share.lock);
	CUptiResult r = sp_share_set_cb(SIDE_SP, on, sub, d, 0, true);
	pthread_mutex_unlock(&sp_share.lock);
	return r;
}

static CUptiResult CUPTIAPI sp_act_enable(CUpti_ActivityKind k)
{
	pthread_mutex_lock(&sp_share.lock);
	if ((unsigned)k < NKIND)
		sp_share.sp_kind_ever[k] = true;
	CUptiResult r = sp_share_set_kind(SIDE_SP, k, 1);
	pthread_mutex_unlock(&sp_share.lock);
	return r;
}

static CUptiResult CUPTIAPI sp_act_disable(CUpti_ActivityKind k)
{
	pthread_mutex_lock(&sp_share.lock);
	CUptiResult r = sp_share_set_kind(SIDE_SP, k, 0);
	pthread_mutex_unlock(&sp_share.lock);
	return r;
}

/* CUPTI forgets every enabled callback (unsubscribe) or everything (finalize): so do the wants. */
static void forget_real_state(bool kinds)
{
	pthread_mutex_lock(&sp_share.lock);
	memset(sp_share.all, 0, sizeof sp_share.all);
	memset(sp_share.cb, 0, sizeof sp_share.cb);
	if (kinds)
		memset(sp_share.kind, 0, sizeof sp_share.kind); /* the program's come back at sp_share_armed */
	pthread_mutex_unlock(&sp_share.lock);
}

static CUptiResult CUPTIAPI sp_unsubscribe(CUpti_SubscriberHandle sub)
{
	CUptiResult r = sp_share.real.unsubscribe(sub);
	forget_real_state(false);
	return r;
}

static CUptiResult CUPTIAPI sp_finalize(void)
{
	CUptiResult r = sp_share.real.finalize();
	forget_real_state(true);
	return r;
}

void sp_share_install(void)
{
	if (atomic_load(&sp_share.installed))
		return;
	sp_share.real = (struct real_fns){ sp_cupti.cuptiEnableCallback, sp_cupti.cuptiEnableDomain,
				    sp_cupti.cuptiActivityEnable, sp_cupti.cuptiActivityDisable,
				    sp_cupti.cuptiUnsubscribe,    sp_cupti.cuptiFinalize };
	sp_cupti.cuptiEnableCallback = sp_enable_cb;
	sp_cupti.cuptiEnableDomain = sp_enable_domain;
	sp_cupti.cuptiActivityEnable = sp_act_enable;
	sp_cupti.cuptiActivityDisable = sp_act_disable;
	sp_cupti.cuptiUnsubscribe = sp_unsubscribe;
	sp_cupti.cuptiFinalize = sp_finalize;
	atomic_store(&sp_share.installed, true);
}

void sp_share_note_wants(void)
{
	bool api = false;
	for (unsigned d = 0; d < NDOM && !api; d++) {
		if (d == CUPTI_CB_DOMAIN_RESOURCE)
			continue; /* context and stream creation: given at the next attach */
		api = sp_share.prog_all[d] != 0;
		for (unsigned c = 0; c < SP_CBID_MAX && !api; c++)
			api = sp_share.prog_cb[d][c] != 0;
	}
	atomic_store(&sp_share.prog_api, api);
}

/* After each (re)subscription: stepprof's hook, then whatever the program asked for, attached or
 * not. Writer or application thread, outside callbacks. Can't fail (a failure is warned). */
void sp_share_armed(void)
{
	sp_cbset_armed();
	bool kinds = false;
	pthread_mutex_lock(&sp_share.lock);
	for (unsigned k = 0; k < NKIND; k++)
		kinds |= sp_share.prog_kind[k] != 0;
	pthread_mutex_unlock(&sp_share.lock);
	if (kinds && sp_cupti_life_activity_ready() < 0)
		kinds = false; /* warned */
	pthread_mutex_lock(&sp_share.lock);
	for (unsigned d = 0; d < NDOM; d++) {
		if (sp_share.prog_all[d])
			sp_share_set_cb(SIDE_PROG, 1, sp_col.sub, d, 0, true);
		for (unsigned c = 0; c < SP_CBID_MAX && !sp_share.prog_all[d]; c++)
			if (sp_share.prog_cb[d][c])
				sp_share_set_cb(SIDE_PROG, 1, sp_col.sub, d, c, false);
	}
	for (unsigned k = 0; k < NKIND && kinds; k++)
		if (sp_share.prog_kind[k] && !(sp_share.kind[k] & SIDE_PROG) &&
		    sp_share_set_kind(SIDE_PROG, (CUpti_ActivityKind)k, 1) != CUPTI_SUCCESS)
			sp_warn_once("cannot enable the program's CUPTI activity kind %u again after re-attaching", k);
	if (kinds)
		sp_cupti_life_dirty();
	pthread_mutex_unlock(&sp_share.lock);
}

int sp_share_busy(void)
{
	/* a subscription with nothing but resource callbacks does not hold stepprof: its wants come
	 * back at the next attach, and it gets CUPTI itself when stepprof lets go for good */
	return (atomic_load(&sp_share.cb_fn) && atomic_load(&sp_share.prog_api)) || atomic_load(&sp_share.nkinds) > 0 ||
	       __atomic_load_n(&sp_share.pbuf, __ATOMIC_RELAXED) != NULL;
}

/* ---- callbacks ---- */

/* Calls the program's callback with its own correlationData slot (API domains). */
static void to_program(CUpti_CallbackFunc f, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	atomic_fetch_add_explicit(&sp_share.callbacks, 1, memory_order_relaxed);
	if ((dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API) || !data) {
		f(sp_share.ud, dom, cbid, data);
		return;
	}
	CUpti_CallbackData cd = *(const CUpti_CallbackData *)data;
	uint64_t *slot = &corr_stack.spare;
	if (cd.callbackSite == CUPTI_API_ENTER) {
		if (corr_stack.depth < CORR_STACK) {
			corr_stack.s[corr_stack.depth].dom = dom, corr_stack.s[corr_stack.depth].cbid = cbid,
				corr_stack.s[corr_stack.depth].v = 0;
			slot = &corr_stack.s[corr_stack.depth].v;
		}
		corr_stack.depth++;
	} else if (corr_stack.depth) {
		unsigned i = corr_stack.depth - 1;
		if (i < CORR_STACK && corr_stack.s[i].dom == (uint32_t)dom && corr_stack.s[i].cbid == cbid) {
			slot = &corr_stack.s[i].v;
			corr_stack.depth--;
		} else if (i >= CORR_STACK) {
			corr_stack.depth--;
		}
	}
	if (slot == &corr_stack.spare)
		corr_stack.spare = 0;
	cd.correlationData = slot;
	f(sp_share.ud, dom, cbid, &cd);
}

/* runs on the program's threads (CUPTI calls it inside their API calls) */
void CUPTIAPI sp_share_on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	CUpti_CallbackFunc f = atomic_load_explicit(&sp_share.cb_fn, memory_order_acquire);
	if (!f) { /* nobody else: stepprof gets what it enabled, as before */
		sp_cb_on_callback(ud, dom, cbid, data);
		return;
	}
	uint8_t w = want_cb(dom, cbid);
	if (w & SIDE_SP)
		sp_cb_on_callback(ud, dom, cbid, data);
	if (w & SIDE_PROG)
		to_program(f, dom, cbid, data);
}

