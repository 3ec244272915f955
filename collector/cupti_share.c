/* SPDX-License-Identifier: MIT */
/* cupti_share.c - serving the program's own CUPTI profiler while stepprof stays the only real
 * subscriber (see cupti_share.h). Keeps what each side enabled (callbacks, activity kinds) and
 * makes CUPTI hold the union; dispatches each callback to the side(s) that enabled it; copies
 * the program's activity records into buffers its own bufferRequested gives, converted to its
 * clock. Runs on the program's threads, CUPTI's threads and the writer thread. Never fails a
 * program's call because of stepprof, never changes what stepprof records. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "collector.h"
#include "cupti_api.h"
#include "cupti_life.h"
#include "cupti_share.h"
#include "internal.h"
#include "log.h"

#define NDOM CUPTI_CB_DOMAIN_SIZE
#define NKIND CUPTI_ACTIVITY_KIND_COUNT
#define CORR_STACK 16            /* nested API calls per thread the program's correlationData covers */
#define CAL_MIN_NS 2000000ull    /* shortest span between two clock samples for a rate */

/* Who wants a callback or a kind. */
enum { SIDE_SP = 1, SIDE_PROG = 2 };

/* The real entry points for stepprof's own calls (sp_cupti's table before sp_share_install). */
struct real_fns {
	__typeof__(cuptiEnableCallback) *enable_cb;
	__typeof__(cuptiEnableDomain) *enable_domain;
	__typeof__(cuptiActivityEnable) *act_enable;
	__typeof__(cuptiActivityDisable) *act_disable;
	__typeof__(cuptiUnsubscribe) *unsubscribe;
	__typeof__(cuptiFinalize) *finalize;
};

static struct {
	pthread_mutex_t lock;             /* wants and the real enable calls that follow them */
	struct real_fns real;             /* set once by sp_share_install */
	_Atomic bool installed;           /* sp_share_install ran */
	uint8_t all[NDOM];                /* SIDE_* bits: whole domain enabled */
	uint8_t cb[NDOM][SP_CBID_MAX];    /* SIDE_* bits: one callback id enabled */
	uint8_t kind[NKIND];              /* SIDE_* bits: activity kind enabled */
	bool sp_kind_ever[NKIND];         /* stepprof enabled this kind at some point */
	uint64_t on_at[NKIND], off_at[NKIND]; /* program's last enable / disable of a kind (trace clock; off 0 = on) */
	/* the program's profiler */
	_Atomic(CUpti_CallbackFunc) cb_fn; /* its subscriber callback, NULL if not subscribed */
	void *ud; /* its userdata */
	CUpti_BuffersCallbackRequestFunc req; /* its buffer callbacks (under buf_lock) */
	CUpti_BuffersCallbackCompleteFunc comp;
	_Atomic(CUpti_TimestampCallbackFunc) ts; /* its clock, NULL: CUPTI's default (CLOCK_REALTIME) */
	_Atomic int nkinds; /* kinds the program has on */
	_Atomic bool ever_on; /* the program enabled an activity kind at some point */
	/* its clock against the trace clock: p = p1 + (m - m1) * rate (under buf_lock) */
	uint64_t m0, p0, m1, p1;
	double rate;
	bool have0;
	/* the program's buffer being filled (under buf_lock) */
	pthread_mutex_t buf_lock;
	uint8_t *pbuf;
	size_t psize, pused;
	CUcontext pctx;
	uint32_t pstream;
	/* counts (for the messages) */
	_Atomic uint64_t passed, withheld, callbacks;
	_Atomic bool said; /* the "program subscribed" line was printed */
} S = { .lock = PTHREAD_MUTEX_INITIALIZER, .buf_lock = PTHREAD_MUTEX_INITIALIZER };

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

/* ---- activity records ---- */

/* Where the timestamps of the record kinds the program may get sit (first = the one compared
 * with the program's enabled stretch); n 0: a kind that is not passed on (unknown layout). */
struct stamps {
	uint8_t n;
	uint16_t off[5];
};
#define OFF(t, f) (uint16_t)offsetof(t, f)

static struct stamps stamps_of(unsigned k)
{
	switch (k) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return (struct stamps){ 5,
					{ OFF(CUpti_ActivityKernel10, start), OFF(CUpti_ActivityKernel10, end),
					  OFF(CUpti_ActivityKernel10, completed), OFF(CUpti_ActivityKernel10, queued),
					  OFF(CUpti_ActivityKernel10, submitted) } };
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return (struct stamps){ 2, { OFF(CUpti_ActivityMemcpy6, start), OFF(CUpti_ActivityMemcpy6, end) } };
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		return (struct stamps){ 2,
					{ OFF(CUpti_ActivityMemcpyPtoP4, start),
					  OFF(CUpti_ActivityMemcpyPtoP4, end) } };
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return (struct stamps){ 2, { OFF(CUpti_ActivityMemset4, start), OFF(CUpti_ActivityMemset4, end) } };
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
	case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API:
		return (struct stamps){ 2, { OFF(CUpti_ActivityAPI, start), OFF(CUpti_ActivityAPI, end) } };
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return (struct stamps){ 2,
					{ OFF(CUpti_ActivitySynchronization2, start),
					  OFF(CUpti_ActivitySynchronization2, end) } };
	case CUPTI_ACTIVITY_KIND_OVERHEAD:
		return (struct stamps){ 2, { OFF(CUpti_ActivityOverhead3, start), OFF(CUpti_ActivityOverhead3, end) } };
	case CUPTI_ACTIVITY_KIND_MEMORY2:
		return (struct stamps){ 1, { OFF(CUpti_ActivityMemory4, timestamp) } };
	case CUPTI_ACTIVITY_KIND_MARKER:
		return (struct stamps){ 1, { OFF(CUpti_ActivityMarker2, timestamp) } };
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
		return (struct stamps){ 0xff, { 0 } }; /* no timestamp */
	default:
		return (struct stamps){ 0, { 0 } };
	}
}

static uint64_t program_now(void)
{
	CUpti_TimestampCallbackFunc f = atomic_load(&S.ts);
	if (f)
		return f();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One pair (trace clock, program clock) read as close together as three tries allow. */
static void sample(uint64_t *m, uint64_t *p)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t a = sp_now_ns(), q = program_now(), b = sp_now_ns();
		if (b - a < best)
			best = b - a, *m = a + (b - a) / 2, *p = q;
	}
}

/* Brings the clock mapping up to date; caller holds buf_lock. This function can't fail. */
static void calibrate(void)
{
	if (!S.have0) {
		sample(&S.m0, &S.p0);
		S.have0 = true;
	}
	uint64_t m, p;
	sample(&m, &p);
	while (m - S.m0 < CAL_MIN_NS) { /* the first conversion: a rate needs some span (once) */
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
		sample(&m, &p);
	}
	S.rate = (double)(int64_t)(p - S.p0) / (double)(m - S.m0);
	S.m1 = m, S.p1 = p;
}

static uint64_t to_program_clock(uint64_t t)
{
	return S.p1 + (uint64_t)(int64_t)((double)(int64_t)(t - S.m1) * S.rate);
}

/* Hands the program's buffer being filled to its bufferCompleted; caller holds buf_lock. */
static void complete_pending(void)
{
	if (!S.pbuf)
		return;
	uint8_t *b = S.pbuf;
	S.pbuf = NULL;
	if (S.comp)
		S.comp(S.pctx, S.pstream, b, S.psize, S.pused);
}

/* Copies one record of len bytes into the program's buffer (a new one from its bufferRequested
 * when full). Caller holds buf_lock. Returns the copy, or NULL if the program gave no room. */
static uint8_t *room_for(size_t len, CUcontext ctx, uint32_t stream)
{
	if (S.pbuf && (S.pused + len > S.psize || S.pctx != ctx || S.pstream != stream))
		complete_pending();
	if (!S.pbuf) {
		uint8_t *b = NULL;
		size_t size = 0, maxrec = 0;
		if (!S.req)
			return NULL;
		S.req(&b, &size, &maxrec);
		if (!b || size < len)
			return NULL; /* the program stopped giving buffers (Kineto's limit): as CUPTI drops */
		S.pbuf = b, S.psize = size, S.pused = 0, S.pctx = ctx, S.pstream = stream;
	}
	uint8_t *at = S.pbuf + S.pused;
	S.pused += len;
	return at;
}

/* 1 if a record of kind k stamped t (trace clock) is the program's: of a kind it enabled, and,
 * where stepprof enabled the kind too, stamped within the program's stretch. */
static int is_programs(unsigned k, uint64_t t, bool timed)
{
	if (k >= NKIND || !S.on_at[k])
		return 0;
	if (!S.sp_kind_ever[k])
		return 1; /* only the program enabled this kind: every record is its own */
	if (!timed)
		return S.kind[k] & SIDE_PROG ? 1 : 0;
	return t >= S.on_at[k] && (!S.off_at[k] || t <= S.off_at[k]);
}

/* Copies the program's records of one completed buffer into its buffers. CUPTI's thread. */
static void pass_records(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t valid)
{
	CUpti_Activity *rec = NULL, *next = NULL;
	uint64_t passed = 0, withheld = 0;
	unsigned bad_kind = 0;
	pthread_mutex_lock(&S.buf_lock);
	if (!S.comp) { /* no buffer callbacks registered: CUPTI would have nowhere to put them either */
		pthread_mutex_unlock(&S.buf_lock);
		return;
	}
	bool cal = false;
	if (sp_cupti.cuptiActivityGetNextRecord(buf, valid, &next) != CUPTI_SUCCESS)
		next = NULL;
	while ((rec = next) != NULL) {
		if (sp_cupti.cuptiActivityGetNextRecord(buf, valid, &next) != CUPTI_SUCCESS)
			next = NULL;
		size_t len = (size_t)((next ? (uint8_t *)next : buf + valid) - (uint8_t *)rec);
		unsigned k = (unsigned)rec->kind;
		struct stamps st = stamps_of(k);
		uint64_t t0 = 0;
		if (st.n && st.n != 0xff && st.off[0] + sizeof t0 <= len)
			memcpy(&t0, (uint8_t *)rec + st.off[0], sizeof t0);
		if (!is_programs(k, t0, st.n != 0xff))
			continue;
		size_t need = 0; /* the record must hold every timestamp field rewritten below */
		for (unsigned i = 0; st.n != 0xff && i < st.n; i++)
			need = st.off[i] + sizeof t0 > need ? st.off[i] + sizeof t0 : need;
		if (!st.n || need > len) {
			withheld++, bad_kind = k;
			continue;
		}
		uint8_t *to = room_for(len, ctx, stream);
		if (!to) {
			withheld++;
			continue;
		}
		memcpy(to, rec, len);
		if (!cal && st.n != 0xff) {
			calibrate();
			cal = true;
		}
		for (unsigned i = 0; st.n != 0xff && i < st.n; i++) {
			uint64_t v;
			memcpy(&v, to + st.off[i], sizeof v);
			if (v != CUPTI_TIMESTAMP_UNKNOWN && v != UINT64_MAX) {
				v = to_program_clock(v);
				memcpy(to + st.off[i], &v, sizeof v);
			}
		}
		passed++;
	}
	pthread_mutex_unlock(&S.buf_lock);
	atomic_fetch_add(&S.passed, passed);
	if (withheld) {
		atomic_fetch_add(&S.withheld, withheld);
		if (bad_kind)
			sp_warn_once("the program enabled CUPTI activity kind %u, whose records stepprof cannot pass "
				     "on "
				     "(unknown timestamp layout): they are missing from the program's profile",
				     bad_kind);
		else
			sp_warn_once("the program's profiler gave no buffer for some of its activity records: %llu "
				     "dropped, as CUPTI would",
				     (unsigned long long)withheld);
	}
}

/* CUPTI's buffer thread, or a thread that flushes. The program's copies first: the records stay
 * valid only until stepprof's handler frees the buffer. */
void CUPTIAPI sp_share_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	if (valid && atomic_load(&S.ever_on))
		pass_records(ctx, stream, buf, valid);
	sp_act_buffer_completed(ctx, stream, buf, size, valid);
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
		complete_pending(); /* the old callbacks get their buffer back */
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
	sample(&S.m0, &S.p0);
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
	*t = program_now();
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
	if (on && !stamps_of(k).n)
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
	complete_pending();
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
	complete_pending();
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
