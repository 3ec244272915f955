/* SPDX-License-Identifier: MIT */
/* cupti_share_prog.c - the program's CUPTI calls while stepprof serves them (cupti_share.h): its wants
 * are kept attached or not, one needing CUPTI now attaches stepprof on its thread, and the program gets
 * CUPTI itself once stepprof lets go for good. Never fails a program's call because of stepprof. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
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

/* ---- helpers ---- */

/* 1 if stepprof serves CUPTI calls in this process now. This function can't fail. */
static int serving(void)
{
	return atomic_load(&sp_share.installed) && sp_collector_owns_cupti();
}

static void say_once(const char *what)
{
	if (!atomic_exchange(&sp_share.said, true))
		sp_warn("the program uses CUPTI itself (%s: torch.profiler or another profiler); stepprof stays the "
			"only CUPTI subscriber and passes on the callbacks and activity records the program enables, "
			"and keeps its own windows (docs/OUTPUTS.md, 'Another profiler in the process')",
			what);
}

/* Not attached, and the program's profiler wants callbacks or records now: the writer re-attaches
 * (its passes are slow while parked); before the first window there is no writer, this thread
 * ticks. For what enter_attached could not attach (a detach under way). */
static void share_wake(void)
{
	sp_writer_kick();
	sp_act_early_tick();
}

/* Enters the hold for a program's want that needs CUPTI now, attaching first (this thread holds no stepprof
 * lock) if parked or learning. Returns what sp_cupti_life_enter returns (then leave). This function can't fail. */
static int enter_attached(void)
{
	if (sp_cupti_life_enter())
		return 1;
	sp_hooklearn_need_cupti("the program's profiler needs CUPTI");
	if (atomic_load(&sp_hold.state) != SP_HOLD_ATTACHED &&
	    sp_cupti_life_attach_now(&sp_col.sub, __atomic_load_n(&sp_col.step, __ATOMIC_RELAXED), false))
		sp_info("attached to CUPTI for the program's profiler");
	return sp_cupti_life_enter();
}

/* ---- the hand-over, once stepprof let go of CUPTI for good ---- */

/* Gives the program CUPTI itself (its callbacks, subscription and kinds), once; caller holds sp_share.lock,
 * stepprof gone for good. eager (the writer): only a program holding a subscription or kind. Can't fail (warned). */
static void hand_over_locked(bool eager)
{
	CUpti_CallbackFunc f = atomic_load(&sp_share.cb_fn);
	bool kinds = false;
	for (unsigned k = 0; k < NKIND; k++)
		kinds |= sp_share.prog_kind[k] != 0;
	if (sp_share.handed || (eager && !f && !kinds))
		return;
	sp_share.handed = true;
	if (!f && !sp_share.comp && !atomic_load(&sp_share.ts) && !kinds)
		return; /* the program never used CUPTI through stepprof */
	pthread_mutex_lock(&sp_share.buf_lock);
	sp_share_complete_pending(); /* what stepprof copied for it so far */
	CUpti_TimestampCallbackFunc ts = atomic_load(&sp_share.ts);
	CUpti_BuffersCallbackRequestFunc req = sp_share.req;
	CUpti_BuffersCallbackCompleteFunc comp = sp_share.comp;
	pthread_mutex_unlock(&sp_share.buf_lock);
	CUptiResult r = CUPTI_SUCCESS;
	if (ts)
		r = sp_cupti.cuptiActivityRegisterTimestampCallback(ts);
	if (req && comp && r == CUPTI_SUCCESS)
		r = sp_cupti.cuptiActivityRegisterCallbacks(req, comp);
	if (f && r == CUPTI_SUCCESS && (r = sp_cupti.cuptiSubscribe(&sp_share.real_sub, f,
								    sp_share.ud)) == CUPTI_SUCCESS)
		for (unsigned d = 0; d < NDOM; d++) {
			if (sp_share.prog_all[d])
				sp_share.real.enable_domain(1, sp_share.real_sub, (CUpti_CallbackDomain)d);
			for (unsigned c = 0; c < SP_CBID_MAX && !sp_share.prog_all[d]; c++)
				if (sp_share.prog_cb[d][c])
					sp_share.real.enable_cb(1, sp_share.real_sub, (CUpti_CallbackDomain)d, c);
		}
	for (unsigned k = 0; k < NKIND && r == CUPTI_SUCCESS; k++)
		if (sp_share.prog_kind[k])
			sp_share.real.act_enable((CUpti_ActivityKind)k);
	if (r != CUPTI_SUCCESS)
		sp_warn("stepprof let go of CUPTI but could not give it to the program's profiler (CUPTI error %d): "
			"its later CUPTI calls may fail",
			(int)r);
	else
		sp_info("stepprof let go of CUPTI for good: the program's profiler holds CUPTI itself from now on");
}

void sp_share_detached(void)
{
	if (!atomic_load(&sp_share.installed) || !sp_collector_let_go_cupti())
		return;
	pthread_mutex_lock(&sp_share.lock);
	hand_over_locked(true);
	pthread_mutex_unlock(&sp_share.lock);
}

/* A program's call after stepprof let go of CUPTI for good: hands over first if not done yet. Returns 1 if
 * stepprof let go (the call reaches CUPTI itself), 0 if stepprof never held CUPTI here. */
static int handed_over(void)
{
	if (!atomic_load(&sp_share.installed) || !sp_collector_let_go_cupti())
		return 0;
	pthread_mutex_lock(&sp_share.lock);
	hand_over_locked(false);
	pthread_mutex_unlock(&sp_share.lock);
	return 1;
}

/* ---- the program's calls ---- */

int sp_share_subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud, CUptiResult *r)
{
	if (!serving()) {
		handed_over(); /* then CUPTI answers (one subscriber: the program's, if it had one) */
		return 0;
	}
	say_once("cuptiSubscribe");
	if (!sub) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	CUpti_CallbackFunc none = NULL;
	sp_share.ud = ud;
	if (!atomic_compare_exchange_strong(&sp_share.cb_fn, &none, cb)) {
		*r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; /* as CUPTI: one program subscriber */
		return 1;
	}
	*sub = FAKE;
	*r = CUPTI_SUCCESS;
	sp_info("the program subscribed to CUPTI: served by stepprof's subscription");
	return 1;
}

/* The program's real handle after the hand-over, for a call made with FAKE; NULL if it has none
 * (its calls then fail as they would on an unknown handle). Caller holds sp_share.lock. */
static CUpti_SubscriberHandle real_handle(void)
{
	return sp_share.handed && atomic_load(&sp_share.cb_fn) ? sp_share.real_sub : NULL;
}

int sp_share_unsubscribe(CUpti_SubscriberHandle sub, CUptiResult *r)
{
	if (sub != FAKE)
		return 0;
	if (!serving() && handed_over()) {
		pthread_mutex_lock(&sp_share.lock);
		CUpti_SubscriberHandle h = real_handle();
		*r = h ? sp_share.real.unsubscribe(h) : CUPTI_ERROR_INVALID_PARAMETER;
		memset(sp_share.prog_all, 0, sizeof sp_share.prog_all);
		memset(sp_share.prog_cb, 0, sizeof sp_share.prog_cb);
		atomic_store(&sp_share.cb_fn, NULL);
		pthread_mutex_unlock(&sp_share.lock);
		return 1;
	}
	int in = sp_cupti_life_enter();
	pthread_mutex_lock(&sp_share.lock);
	for (unsigned d = 0; d < NDOM; d++) {
		if (in)
			sp_share_set_cb(SIDE_PROG, 0, sp_col.sub, d, 0, true);
		sp_share.prog_all[d] = 0;
		memset(sp_share.prog_cb[d], 0, sizeof sp_share.prog_cb[d]);
	}
	sp_share_note_wants();
	atomic_store(&sp_share.cb_fn, NULL);
	pthread_mutex_unlock(&sp_share.lock);
	if (in)
		sp_cupti_life_leave();
	sp_info("the program unsubscribed from CUPTI (%llu callbacks passed on)",
		(unsigned long long)atomic_load(&sp_share.callbacks));
	*r = CUPTI_SUCCESS;
	return 1;
}

/* A callback change of the program's (cbid, or the whole domain if all): kept, and made real now
 * if stepprof is attached; one outside the resource domain attaches stepprof first. */
static int program_cb(uint32_t on, CUpti_SubscriberHandle sub, unsigned d, unsigned cbid, bool all, CUptiResult *r)
{
	if (sub != FAKE)
		return 0;
	if (d >= NDOM || (!all && cbid >= SP_CBID_MAX)) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	if (!serving() && handed_over()) {
		pthread_mutex_lock(&sp_share.lock);
		CUpti_SubscriberHandle h = real_handle();
		*r = !h	   ? CUPTI_ERROR_INVALID_PARAMETER
		     : all ? sp_share.real.enable_domain(on, h, (CUpti_CallbackDomain)d)
			   : sp_share.real.enable_cb(on, h, (CUpti_CallbackDomain)d, cbid);
		pthread_mutex_unlock(&sp_share.lock);
		return 1;
	}
	if (!atomic_load(&sp_share.cb_fn)) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	int in = on && d != CUPTI_CB_DOMAIN_RESOURCE ? enter_attached() : sp_cupti_life_enter();
	pthread_mutex_lock(&sp_share.lock);
	*r = CUPTI_SUCCESS;
	if (in)
		*r = sp_share_set_cb(SIDE_PROG, on, sp_col.sub, d, cbid, all);
	if (*r == CUPTI_SUCCESS && all) {
		sp_share.prog_all[d] = (uint8_t)(on != 0);
		if (!on)
			memset(sp_share.prog_cb[d], 0, sizeof sp_share.prog_cb[d]);
	} else if (*r == CUPTI_SUCCESS) {
		sp_share.prog_cb[d][cbid] = (uint8_t)(on != 0);
	}
	sp_share_note_wants();
	pthread_mutex_unlock(&sp_share.lock);
	if (in)
		sp_cupti_life_leave();
	else if (on && d != CUPTI_CB_DOMAIN_RESOURCE)
		share_wake(); /* a detach was under way: the re-attach gives it (sp_share_armed) */
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
	pthread_mutex_lock(&sp_share.lock);
	*on = sp_share.prog_all[d] || sp_share.prog_cb[d][cbid];
	pthread_mutex_unlock(&sp_share.lock);
	*r = CUPTI_SUCCESS;
	return 1;
}

int sp_share_register_buffers(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc comp,
			      CUptiResult *r)
{
	if (!serving()) {
		handed_over();
		return 0;
	}
	say_once("cuptiActivityRegisterCallbacks");
	if (!req || !comp) {
		*r = CUPTI_ERROR_INVALID_PARAMETER;
		return 1;
	}
	pthread_mutex_lock(&sp_share.buf_lock);
	if (sp_share.req != req || sp_share.comp != comp)
		sp_share_complete_pending(); /* the old callbacks get their buffer back */
	sp_share.req = req, sp_share.comp = comp;
	sp_share_hold_buffer();
	pthread_mutex_unlock(&sp_share.buf_lock);
	*r = CUPTI_SUCCESS;
	return 1;
}

int sp_share_register_timestamp(CUpti_TimestampCallbackFunc f, CUptiResult *r)
{
	if (!serving()) {
		handed_over();
		return 0;
	}
	/* stepprof's clock stays registered (a second registration corrupts records): the program's
	 * records are converted to this one */
	pthread_mutex_lock(&sp_share.buf_lock);
	atomic_store(&sp_share.ts, f);
	sp_share.have0 = false;
	sp_share_sample(&sp_share.m0, &sp_share.p0);
	sp_share.have0 = true;
	pthread_mutex_unlock(&sp_share.buf_lock);
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

/* The program's kind k went on or off (its last enable or disable, on the trace clock: records of a
 * kind both sides enabled go to it by their start). Caller holds sp_share.lock. */
static void note_kind(CUpti_ActivityKind k, bool now)
{
	if (now == (sp_share.prog_kind[k] != 0))
		return;
	sp_share.prog_kind[k] = now;
	uint64_t t = sp_now_ns();
	if (now)
		sp_share.on_at[k] = t, sp_share.off_at[k] = 0, atomic_store(&sp_share.ever_on, true);
	else
		sp_share.off_at[k] = t;
	atomic_fetch_add(&sp_share.nkinds, now ? 1 : -1);
}

int sp_share_activity(CUpti_ActivityKind k, int on, CUptiResult *r)
{
	if (!serving()) {
		handed_over();
		return 0;
	}
	say_once(on ? "cuptiActivityEnable" : "cuptiActivityDisable");
	if ((unsigned)k >= NKIND) {
		*r = CUPTI_ERROR_INVALID_KIND;
		return 1;
	}
	if (on && !sp_share_stamps_of(k).n)
		sp_warn_once("the program enabled CUPTI activity kind %u, whose records stepprof cannot pass on "
			     "(unknown timestamp layout): they will be missing from the program's profile",
			     (unsigned)k);
	int in = on ? enter_attached() : sp_cupti_life_enter();
	if (in && on && sp_cupti_life_activity_ready() < 0) {
		sp_cupti_life_leave();
		*r = CUPTI_ERROR_UNKNOWN; /* warned */
		return 1;
	}
	pthread_mutex_lock(&sp_share.lock);
	*r = CUPTI_SUCCESS;
	if (in && on)
		sp_cupti_life_dirty();
	bool went_off = false;
	if (in && on != ((sp_share.kind[k] & SIDE_PROG) != 0)) {
		*r = sp_share_set_kind(SIDE_PROG, k, on);
		went_off = !on && *r == CUPTI_SUCCESS && !sp_share.kind[k];
	}
	if (*r == CUPTI_SUCCESS)
		note_kind(k, on); /* detached: the next attach enables it (sp_share_armed) */
	pthread_mutex_unlock(&sp_share.lock);
	if (went_off) /* off while subscribed: graphs replayed now fail after a cuptiFinalize (cupti_life.h) */
		sp_cupti_life_kinds_off();
	if (in)
		sp_cupti_life_leave();
	else if (on)
		share_wake();
	pthread_mutex_lock(&sp_share.buf_lock);
	sp_share_hold_buffer();
	pthread_mutex_unlock(&sp_share.buf_lock);
	return 1;
}

int sp_share_flush(uint32_t flag, CUptiResult *r)
{
	if (!serving()) {
		handed_over();
		return 0;
	}
	*r = CUPTI_SUCCESS;
	if (sp_cupti_life_enter()) { /* the records come through sp_share_buffer_completed */
		*r = sp_cupti.cuptiActivityFlushAll(flag);
		sp_cupti_life_leave();
	}
	pthread_mutex_lock(&sp_share.buf_lock);
	sp_share_complete_pending();
	sp_share_hold_buffer(); /* its kinds still on: CUPTI would take a new buffer at the next record */
	pthread_mutex_unlock(&sp_share.buf_lock);
	return 1;
}

int sp_share_finalize(CUptiResult *r)
{
	if (!serving()) {
		handed_over();
		return 0;
	}
	/* the program's CUPTI state ends, as a real cuptiFinalize ends it; stepprof's goes on */
	for (unsigned k = 0; k < NKIND; k++)
		if (sp_share.prog_kind[k]) {
			CUptiResult e;
			sp_share_activity((CUpti_ActivityKind)k, 0, &e);
		}
	/* no CUPTI flush here: Kineto calls cuptiFinalize from inside a callback (TEARDOWN_CUPTI=1)
	 * after flushing itself; what was copied for it so far is handed over */
	CUptiResult e;
	pthread_mutex_lock(&sp_share.buf_lock);
	sp_share_complete_pending();
	pthread_mutex_unlock(&sp_share.buf_lock);
	if (atomic_load(&sp_share.cb_fn))
		sp_share_unsubscribe(FAKE, &e);
	pthread_mutex_lock(&sp_share.buf_lock);
	sp_share.req = NULL, sp_share.comp = NULL;
	atomic_store(&sp_share.ts, NULL);
	sp_share.have0 = false;
	pthread_mutex_unlock(&sp_share.buf_lock);
	sp_info("the program finalised CUPTI: %llu activity records passed on to it, %llu withheld",
		(unsigned long long)atomic_load(&sp_share.passed), (unsigned long long)atomic_load(&sp_share.withheld));
	*r = CUPTI_SUCCESS;
	return 1;
}
