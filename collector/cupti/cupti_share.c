/* SPDX-License-Identifier: MIT */
/* cupti_share.c - serving the program's own CUPTI profiler while stepprof stays the only real
 * subscriber (see cupti_share.h). Keeps what each side enabled (callbacks, activity kinds) and
 * makes CUPTI hold the union; dispatches each callback to the side(s) that enabled it; serves
 * the program's CUPTI calls (its records and clock: cupti_share_records.c). Runs on the
 * program's threads, CUPTI's threads and the writer thread. Never fails a
 * program's call because of stepprof, never changes what stepprof records. */
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

struct share_globals sp_share_S = { .lock = PTHREAD_MUTEX_INITIALIZER, .buf_lock = PTHREAD_MUTEX_INITIALIZER };

/* The handle the program gets from cuptiSubscribe: never dereferenced, compared only. */
static char fake_handle;
#define FAKE ((CUpti_SubscriberHandle) & fake_handle)

/* The program's correlationData slots: CUPTI gives each subscriber its own, and stepprof's
 * callbacks write stepprof's (callbacks.c). A stack per thread pairs an exit with its entry. */
static __thread struct {
	unsigned depth;
	struct {
		uint32_t dom, cbid;
		uint64_t v;
	} s[CORR_STACK];
	uint64_t spare;
} T;

/* ---- helpers ---- */

/* 1 if stepprof serves CUPTI calls in this process now. This function can't fail. */
static int serving(void)
{
	return atomic_load(&S.installed) && sp_collector_owns_cupti();
}

static void say_once(const char *what)
{
	if (!atomic_exchange(&S.said, true))
		sp_warn("the program uses CUPTI itself (%s: torch.profiler or another profiler); stepprof stays the "
			"only CUPTI subscriber and passes on the callbacks and activity records the program enables, "
			"and keeps its own windows (docs/OUTPUTS.md, 'Another profiler in the process')",
			what);
}

/* What (dom, cbid) wants now, as SIDE_* bits. */
static uint8_t want_cb(unsigned d, unsigned cbid)
{
	return d < NDOM && cbid < SP_CBID_MAX ? (uint8_t)(S.all[d] | S.cb[d][cbid]) : SIDE_SP;
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

/* One side's change to one callback id (cbid) or a whole domain (all): records it and makes CUPTI
 * hold the union. Caller holds S.lock; sub is stepprof's real handle. Returns the real call's
 * result, or CUPTI_SUCCESS when CUPTI already held what the union needs. */
static CUptiResult set_cb(int side, uint32_t on, CUpti_SubscriberHandle sub, unsigned d, unsigned cbid, bool all)
{
	CUptiResult r = CUPTI_SUCCESS;
	if (d >= NDOM)
		return side == SIDE_SP ? S.real.enable_domain(on, sub, (CUpti_CallbackDomain)d)
				       : CUPTI_ERROR_INVALID_PARAMETER;
	if (!all && cbid >= SP_CBID_MAX)
		return side == SIDE_SP ? S.real.enable_cb(on, sub, (CUpti_CallbackDomain)d, cbid)
				       : CUPTI_ERROR_INVALID_PARAMETER;
	if (all) {
		unsigned n = domain_size(d);
		if (on) {
			S.all[d] |= (uint8_t)side;
			return S.real.enable_domain(1, sub, (CUpti_CallbackDomain)d);
		}
		S.all[d] &= (uint8_t)~side;
		bool other = S.all[d] != 0;
		for (unsigned c = 0; c < SP_CBID_MAX; c++) {
			S.cb[d][c] &= (uint8_t)~side;
			other |= S.cb[d][c] != 0;
		}
		if (!other) /* nobody wants anything in this domain */
			return S.real.enable_domain(0, sub, (CUpti_CallbackDomain)d);
		for (unsigned c = 0; c < n; c++) /* keep what the other side wants, one id at a time */
			if (!want_cb(d, c)) {
				CUptiResult e = S.real.enable_cb(0, sub, (CUpti_CallbackDomain)d, c);
				if (e != CUPTI_SUCCESS && e != CUPTI_ERROR_INVALID_PARAMETER && r == CUPTI_SUCCESS)
					r = e;
			}
		return r;
	}
	if (on) {
		S.cb[d][cbid] |= (uint8_t)side;
		return S.real.enable_cb(1, sub, (CUpti_CallbackDomain)d, cbid);
	}
	S.cb[d][cbid] &= (uint8_t)~side;
	if (want_cb(d, cbid))
		return CUPTI_SUCCESS; /* the other side still wants it */
	return S.real.enable_cb(0, sub, (CUpti_CallbackDomain)d, cbid);
}

/* One side's change to an activity kind; caller holds S.lock. Returns the real call's result. */
static CUptiResult set_kind(int side, CUpti_ActivityKind k, int on)
{
	if ((unsigned)k >= NKIND)
		return on ? S.real.act_enable(k) : S.real.act_disable(k);
	if (on) {
		CUptiResult r = S.real.act_enable(k);
		if (r == CUPTI_SUCCESS)
			S.kind[k] |= (uint8_t)side;
		return r;
	}
	S.kind[k] &= (uint8_t)~side;
	return S.kind[k] ? CUPTI_SUCCESS : S.real.act_disable(k);
}

/* ---- stepprof's own calls, through sp_cupti's table ---- */

static CUptiResult CUPTIAPI sp_enable_cb(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d,
					 CUpti_CallbackId cbid)
{
	pthread_mutex_lock(&S.lock);
	CUptiResult r = set_cb(SIDE_SP, on, sub, d, cbid, false);
	pthread_mutex_unlock(&S.lock);
	return r;
}

static CUptiResult CUPTIAPI sp_enable_domain(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d)
{
	pthread_mutex_lock(&S.lock);
	CUptiResult r = set_cb(SIDE_SP, on, sub, d, 0, true);
	pthread_mutex_unlock(&S.lock);
	return r;
}

static CUptiResult CUPTIAPI sp_act_enable(CUpti_ActivityKind k)
{
	pthread_mutex_lock(&S.lock);
	if ((unsigned)k < NKIND)
		S.sp_kind_ever[k] = true;
	CUptiResult r = set_kind(SIDE_SP, k, 1);
	pthread_mutex_unlock(&S.lock);
	return r;
}

static CUptiResult CUPTIAPI sp_act_disable(CUpti_ActivityKind k)
{
	pthread_mutex_lock(&S.lock);
	CUptiResult r = set_kind(SIDE_SP, k, 0);
	pthread_mutex_unlock(&S.lock);
	return r;
}

/* CUPTI forgets every enabled callback (unsubscribe) or everything (finalize): so do the wants. */
static void forget_real_state(bool kinds)
{
	pthread_mutex_lock(&S.lock);
	memset(S.all, 0, sizeof S.all);
	memset(S.cb, 0, sizeof S.cb);
	if (kinds)
		memset(S.kind, 0, sizeof S.kind); /* the program's wants come back at sp_share_armed */
	pthread_mutex_unlock(&S.lock);
}

/* The program's wants survive a stepprof detach: kept apart while CUPTI forgets them. */
static struct {
	uint8_t all[NDOM], cb[NDOM][SP_CBID_MAX], kind[NKIND];
} keep;

static void keep_program_wants(void)
{
	pthread_mutex_lock(&S.lock);
	for (unsigned d = 0; d < NDOM; d++) {
		keep.all[d] = S.all[d] & SIDE_PROG;
		for (unsigned c = 0; c < SP_CBID_MAX; c++)
			keep.cb[d][c] = S.cb[d][c] & SIDE_PROG;
	}
	for (unsigned k = 0; k < NKIND; k++)
		keep.kind[k] = S.kind[k] & SIDE_PROG;
	pthread_mutex_unlock(&S.lock);
}

static CUptiResult CUPTIAPI sp_unsubscribe(CUpti_SubscriberHandle sub)
{
	keep_program_wants();
	CUptiResult r = S.real.unsubscribe(sub);
	forget_real_state(false);
	return r;
}

static CUptiResult CUPTIAPI sp_finalize(void)
{
	CUptiResult r = S.real.finalize();
	forget_real_state(true);
	return r;
}

void sp_share_install(void)
{
	if (atomic_load(&S.installed))
		return;
	S.real = (struct real_fns){ sp_cupti.cuptiEnableCallback, sp_cupti.cuptiEnableDomain,
				    sp_cupti.cuptiActivityEnable, sp_cupti.cuptiActivityDisable,
				    sp_cupti.cuptiUnsubscribe,    sp_cupti.cuptiFinalize };
	sp_cupti.cuptiEnableCallback = sp_enable_cb;
	sp_cupti.cuptiEnableDomain = sp_enable_domain;
	sp_cupti.cuptiActivityEnable = sp_act_enable;
	sp_cupti.cuptiActivityDisable = sp_act_disable;
	sp_cupti.cuptiUnsubscribe = sp_unsubscribe;
	sp_cupti.cuptiFinalize = sp_finalize;
	atomic_store(&S.installed, true);
}

/* After each (re)subscription: stepprof's hook, then what the program had enabled before a detach
 * between windows. Writer or init thread, outside callbacks. Can't fail (a failure is warned). */
void sp_share_armed(void)
{
	sp_cbset_armed();
	bool kinds = false;
	for (unsigned k = 0; k < NKIND; k++)
		kinds |= keep.kind[k] != 0;
	if (kinds && sp_cupti_life_activity_ready() < 0)
		kinds = false; /* warned */
	pthread_mutex_lock(&S.lock);
	for (unsigned d = 0; d < NDOM; d++) {
		if (keep.all[d])
			S.real.enable_domain(1, sp_col.sub, (CUpti_CallbackDomain)d);
		S.all[d] |= keep.all[d];
		for (unsigned c = 0; c < SP_CBID_MAX; c++)
			if (keep.cb[d][c] && !keep.all[d]) {
				S.cb[d][c] |= SIDE_PROG;
				S.real.enable_cb(1, sp_col.sub, (CUpti_CallbackDomain)d, c);
			}
	}
	for (unsigned k = 0; k < NKIND && kinds; k++)
		if (keep.kind[k] && set_kind(SIDE_PROG, (CUpti_ActivityKind)k, 1) != CUPTI_SUCCESS)
			sp_warn_once("cannot enable the program's CUPTI activity kind %u again after re-attaching", k);
	memset(&keep, 0, sizeof keep);
	pthread_mutex_unlock(&S.lock);
}

int sp_share_busy(void)
{
	return atomic_load(&S.cb_fn) != NULL || atomic_load(&S.nkinds) > 0 || S.pbuf != NULL;
}

/* ---- callbacks ---- */

/* Calls the program's callback with its own correlationData slot (API domains). */
static void to_program(CUpti_CallbackFunc f, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	atomic_fetch_add_explicit(&S.callbacks, 1, memory_order_relaxed);
	if ((dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API) || !data) {
		f(S.ud, dom, cbid, data);
		return;
	}
	CUpti_CallbackData cd = *(const CUpti_CallbackData *)data;
	uint64_t *slot = &T.spare;
	if (cd.callbackSite == CUPTI_API_ENTER) {
		if (T.depth < CORR_STACK) {
			T.s[T.depth].dom = dom, T.s[T.depth].cbid = cbid, T.s[T.depth].v = 0;
			slot = &T.s[T.depth].v;
		}
		T.depth++;
	} else if (T.depth) {
		unsigned i = T.depth - 1;
		if (i < CORR_STACK && T.s[i].dom == (uint32_t)dom && T.s[i].cbid == cbid) {
			slot = &T.s[i].v;
			T.depth--;
		} else if (i >= CORR_STACK) {
			T.depth--;
		}
	}
	if (slot == &T.spare)
		T.spare = 0;
	cd.correlationData = slot;
	f(S.ud, dom, cbid, &cd);
}

/* runs on the program's threads (CUPTI calls it inside their API calls) */
void CUPTIAPI sp_share_on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	CUpti_CallbackFunc f = atomic_load_explicit(&S.cb_fn, memory_order_acquire);
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

/* ---- the program's calls ---- */

int sp_share_subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud, CUptiResult *r)
{
	if (!serving())
		return 0;
	say_once("cuptiSubscribe");
	if (!sub) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	CUpti_CallbackFunc none = NULL;
	S.ud = ud;
	if (!atomic_compare_exchange_strong(&S.cb_fn, &none, cb)) {
		*r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; /* as CUPTI: one program subscriber */
		return 1;
	}
	*sub = FAKE;
	*r = CUPTI_SUCCESS;
	sp_info("the program subscribed to CUPTI: served by stepprof's subscription");
	sp_hooklearn_need_cupti("the program subscribed to CUPTI"); /* (no writer tick to do it yet) */
	return 1;
}

/* Drops every callback the program enabled. Caller holds S.lock and is inside the hold. */
static void drop_program_callbacks(bool attached)
{
	for (unsigned d = 0; d < NDOM; d++) {
		bool any = S.all[d] & SIDE_PROG;
		for (unsigned c = 0; c < SP_CBID_MAX && !any; c++)
			any = S.cb[d][c] & SIDE_PROG;
		if (!any)
			continue;
		if (attached)
			set_cb(SIDE_PROG, 0, sp_col.sub, d, 0, true);
		else {
			S.all[d] &= (uint8_t)~SIDE_PROG;
			for (unsigned c = 0; c < SP_CBID_MAX; c++)
				S.cb[d][c] &= (uint8_t)~SIDE_PROG;
		}
	}
}

int sp_share_unsubscribe(CUpti_SubscriberHandle sub, CUptiResult *r)
{
	if (sub != FAKE)
		return 0;
	int in = sp_cupti_life_enter();
	pthread_mutex_lock(&S.lock);
	drop_program_callbacks(in);
	pthread_mutex_unlock(&S.lock);
	if (in)
		sp_cupti_life_leave();
	atomic_store(&S.cb_fn, NULL);
	sp_info("the program unsubscribed from CUPTI (%llu callbacks passed on)",
		(unsigned long long)atomic_load(&S.callbacks));
	*r = CUPTI_SUCCESS;
	return 1;
}

/* A callback change of the program's (cbid, or the whole domain if all). */
/* Detached, the program's profiler wants callbacks or records: the writer re-attaches now (its
 * passes are slow while parked); before the first window there is no writer, this thread does. */
static void share_wake(void)
{
	sp_writer_kick();
	sp_act_early_tick();
}

static int program_cb(uint32_t on, CUpti_SubscriberHandle sub, unsigned d, unsigned cbid, bool all, CUptiResult *r)
{
	if (sub != FAKE)
		return 0;
	if (!atomic_load(&S.cb_fn)) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	if (d >= NDOM || (!all && cbid >= SP_CBID_MAX)) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	int in = sp_cupti_life_enter();
	pthread_mutex_lock(&S.lock);
	if (in) {
		*r = set_cb(SIDE_PROG, on, sp_col.sub, d, cbid, all);
	} else { /* detached between windows: sp_share_armed enables it at the re-attach */
		uint8_t *w = all ? &keep.all[d] : &keep.cb[d][cbid];
		*w = on ? SIDE_PROG : 0;
		*r = CUPTI_SUCCESS;
	}
	pthread_mutex_unlock(&S.lock);
	if (in)
		sp_cupti_life_leave();
	else if (on)
		share_wake();
	return 1;
}

int sp_share_enable_callback(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d, CUpti_CallbackId cbid,
			     CUptiResult *r)
{
	return program_cb(on, sub, d, cbid, false, r);
}

int sp_share_enable_domain(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d, CUptiResult *r)
{
	return program_cb(on, sub, d, 0, true, r);
}

int sp_share_enable_all(uint32_t on, CUpti_SubscriberHandle sub, CUptiResult *r)
{
	if (sub != FAKE)
		return 0;
	*r = CUPTI_SUCCESS;
	for (unsigned d = 1; d < NDOM; d++) {
		CUptiResult e = CUPTI_SUCCESS;
		program_cb(on, sub, d, 0, true, &e);
		if (e != CUPTI_SUCCESS && *r == CUPTI_SUCCESS)
			*r = e;
	}
	return 1;
}

int sp_share_callback_state(uint32_t *on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d, CUpti_CallbackId cbid,
			    CUptiResult *r)
{
	if (sub != FAKE)
		return 0;
	if (!on || (unsigned)d >= NDOM || cbid >= SP_CBID_MAX) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	*on = (want_cb(d, cbid) & SIDE_PROG) != 0;
	*r = CUPTI_SUCCESS;
	return 1;
}

int sp_share_register_buffers(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc comp,
			      CUptiResult *r)
{
	if (!serving())
		return 0;
	say_once("cuptiActivityRegisterCallbacks");
	if (!req || !comp) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	pthread_mutex_lock(&S.buf_lock);
	if (S.req != req || S.comp != comp)
		sp_share_complete_pending(); /* the old callbacks get their buffer back */
	S.req = req, S.comp = comp;
	pthread_mutex_unlock(&S.buf_lock);
	*r = CUPTI_SUCCESS;
	return 1;
}

int sp_share_register_timestamp(CUpti_TimestampCallbackFunc f, CUptiResult *r)
{
	if (!serving())
		return 0;
	/* stepprof's clock stays registered (a second registration corrupts records): the program's
	 * records are converted to this one */
	pthread_mutex_lock(&S.buf_lock);
	atomic_store(&S.ts, f);
	S.have0 = false;
	sp_share_sample(&S.m0, &S.p0);
	S.have0 = true;
	pthread_mutex_unlock(&S.buf_lock);
	*r = CUPTI_SUCCESS;
	return 1;
}

int sp_share_get_timestamp(uint64_t *t, CUptiResult *r)
{
	if (!serving())
		return 0;
	if (!t) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	*t = sp_share_program_now();
	*r = CUPTI_SUCCESS;
	return 1;
}

int sp_share_activity(CUpti_ActivityKind k, int on, CUptiResult *r)
{
	if (!serving())
		return 0;
	say_once(on ? "cuptiActivityEnable" : "cuptiActivityDisable");
	if ((unsigned)k >= NKIND) {
		*r = CUPTI_ERROR_INVALID_KIND;
		return 1;
	}
	if (on && !sp_share_stamps_of(k).n)
		sp_warn_once("the program enabled CUPTI activity kind %u, whose records stepprof cannot pass on "
			     "(unknown timestamp layout): they will be missing from the program's profile",
			     (unsigned)k);
	int in = sp_cupti_life_enter();
	if (in && on && sp_cupti_life_activity_ready() < 0) {
		sp_cupti_life_leave();
		*r = CUPTI_ERROR_UNKNOWN; /* warned */
		return 1;
	}
	pthread_mutex_lock(&S.lock);
	bool was = S.kind[k] & SIDE_PROG;
	if (in) {
		if (on)
			sp_cupti_life_dirty();
		*r = set_kind(SIDE_PROG, k, on);
	} else {
		keep.kind[k] = on ? SIDE_PROG : 0;
		*r = CUPTI_SUCCESS;
	}
	bool now = in ? (S.kind[k] & SIDE_PROG) != 0 : on;
	if (*r == CUPTI_SUCCESS && now != was) {
		uint64_t t = sp_now_ns();
		if (now)
			S.on_at[k] = t, S.off_at[k] = 0, atomic_store(&S.ever_on, true);
		else
			S.off_at[k] = t;
		atomic_fetch_add(&S.nkinds, now ? 1 : -1);
	}
	pthread_mutex_unlock(&S.lock);
	if (in)
		sp_cupti_life_leave();
	else if (on)
		share_wake();
	return 1;
}

int sp_share_flush(uint32_t flag, CUptiResult *r)
{
	if (!serving())
		return 0;
	*r = CUPTI_SUCCESS;
	if (sp_cupti_life_enter()) { /* the records come through sp_share_buffer_completed */
		*r = sp_cupti.cuptiActivityFlushAll(flag);
		sp_cupti_life_leave();
	}
	pthread_mutex_lock(&S.buf_lock);
	sp_share_complete_pending();
	pthread_mutex_unlock(&S.buf_lock);
	return 1;
}

int sp_share_finalize(CUptiResult *r)
{
	if (!serving())
		return 0;
	/* the program's CUPTI state ends, as a real cuptiFinalize ends it; stepprof's goes on */
	for (unsigned k = 0; k < NKIND; k++)
		if (S.kind[k] & SIDE_PROG) {
			CUptiResult e;
			sp_share_activity((CUpti_ActivityKind)k, 0, &e);
		}
	/* no CUPTI flush here: Kineto calls cuptiFinalize from inside a callback (TEARDOWN_CUPTI=1)
	 * after flushing itself; what was copied for it so far is handed over */
	CUptiResult e;
	pthread_mutex_lock(&S.buf_lock);
	sp_share_complete_pending();
	pthread_mutex_unlock(&S.buf_lock);
	if (atomic_load(&S.cb_fn))
		sp_share_unsubscribe(FAKE, &e);
	pthread_mutex_lock(&S.buf_lock);
	S.req = NULL, S.comp = NULL;
	atomic_store(&S.ts, NULL);
	S.have0 = false;
	pthread_mutex_unlock(&S.buf_lock);
	sp_info("the program finalised CUPTI: %llu activity records passed on to it, %llu withheld",
		(unsigned long long)atomic_load(&S.passed), (unsigned long long)atomic_load(&S.withheld));
	*r = CUPTI_SUCCESS;
	return 1;
}
