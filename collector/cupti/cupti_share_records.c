/* SPDX-License-Identifier: MIT */
/* cupti_share_records.c - the program's activity records (cupti_share.h): copies the kinds it enabled out of
 * stepprof's buffers into its own and converts their timestamps to its clock. CUPTI's buffer thread or a
 * flushing thread; stepprof's records are copied, never moved. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include "collector/base/clock.h"
#include "cupti_api.h"
#include "cupti_share.h"
#include "cupti_share_int.h"
#include "collector/internal.h"
#include "collector/base/log.h"

#define CAL_MIN_NS 2000000ull    /* shortest span between two clock samples for a rate */

#define OFF(t, f) (uint16_t)offsetof(t, f)

struct stamps sp_share_stamps_of(unsigned k)
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

uint64_t sp_share_program_now(void)
{
	CUpti_TimestampCallbackFunc f = atomic_load(&sp_share.ts);
	if (f)
		return f();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One pair (trace clock, program clock) read as close together as three tries allow. */
void sp_share_sample(uint64_t *m, uint64_t *p)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t a = sp_now_ns(), q = sp_share_program_now(), b = sp_now_ns();
		if (b - a < best)
			best = b - a, *m = a + (b - a) / 2, *p = q;
	}
}

/* Brings the clock mapping up to date; caller holds buf_lock. This function can't fail. */
static void calibrate(void)
{
	if (!sp_share.have0) {
		sp_share_sample(&sp_share.m0, &sp_share.p0);
		sp_share.have0 = true;
	}
	uint64_t m, p;
	sp_share_sample(&m, &p);
	while (m - sp_share.m0 < CAL_MIN_NS) { /* the first conversion: a rate needs some span (once) */
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
		sp_share_sample(&m, &p);
	}
	sp_share.rate = (double)(int64_t)(p - sp_share.p0) / (double)(m - sp_share.m0);
	sp_share.m1 = m, sp_share.p1 = p;
}

static uint64_t to_program_clock(uint64_t t)
{
	return sp_share.p1 + (uint64_t)(int64_t)((double)(int64_t)(t - sp_share.m1) * sp_share.rate);
}

/* Hands the program's buffer being filled to its bufferCompleted; caller holds buf_lock. */
void sp_share_complete_pending(void)
{
	if (!sp_share.pbuf)
		return;
	uint8_t *b = sp_share.pbuf;
	sp_share.pbuf = NULL;
	if (sp_share.comp)
		sp_share.comp(sp_share.pctx, sp_share.pstream, b, sp_share.psize, sp_share.pused);
}

/* Asks the program's bufferRequested for a buffer if none is out. Caller holds buf_lock.
 * Returns 0, or -1 if the program gave none (it stopped giving buffers: Kineto's limit). */
static int take_buffer(void)
{
	uint8_t *b = NULL;
	size_t size = 0, maxrec = 0;
	if (sp_share.pbuf)
		return 0;
	if (!sp_share.req)
		return -1;
	sp_share.req(&b, &size, &maxrec);
	if (!b || !size) {
		if (b && sp_share.comp) /* an empty one goes back at once */
			sp_share.comp(NULL, 0, b, size, 0);
		return -1;
	}
	sp_share.pbuf = b, sp_share.psize = size, sp_share.pused = 0, sp_share.pctx = NULL, sp_share.pstream = 0;
	return 0;
}

void sp_share_hold_buffer(void)
{
	if (atomic_load(&sp_share.nkinds) > 0 && sp_share.comp)
		(void)take_buffer();
}

/* Copies one record of len bytes into the program's buffer (a new one from its bufferRequested
 * when full; an empty one takes the record's context and stream). Caller holds buf_lock.
 * Returns the copy, or NULL if the program gave no room. */
static uint8_t *room_for(size_t len, CUcontext ctx, uint32_t stream)
{
	if (sp_share.pbuf && sp_share.pused && (sp_share.pused + len > sp_share.psize || sp_share.pctx != ctx ||
						sp_share.pstream != stream))
		sp_share_complete_pending();
	if (take_buffer() < 0 || sp_share.psize - sp_share.pused < len)
		return NULL; /* as CUPTI drops what finds no buffer */
	sp_share.pctx = ctx, sp_share.pstream = stream;
	uint8_t *at = sp_share.pbuf + sp_share.pused;
	sp_share.pused += len;
	return at;
}

/* 1 if a record of kind k stamped t (trace clock) is the program's: of a kind it enabled, and,
 * where stepprof enabled the kind too, stamped within the program's stretch. */
static int is_programs(unsigned k, uint64_t t, bool timed)
{
	if (k >= NKIND || !sp_share.on_at[k])
		return 0;
	if (!sp_share.sp_kind_ever[k])
		return 1; /* only the program enabled this kind: every record is its own */
	if (!timed)
		return sp_share.prog_kind[k] ? 1 : 0;
	return t >= sp_share.on_at[k] && (!sp_share.off_at[k] || t <= sp_share.off_at[k]);
}

/* Copies the program's records of one completed buffer into its buffers. CUPTI's thread. */
static void pass_records(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t valid)
{
	CUpti_Activity *rec = NULL, *next = NULL;
	uint64_t passed = 0, withheld = 0;
	unsigned bad_kind = 0;
	pthread_mutex_lock(&sp_share.buf_lock);
	if (!sp_share.comp) { /* no buffer callbacks registered: CUPTI would have nowhere to put them either */
		pthread_mutex_unlock(&sp_share.buf_lock);
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
		struct stamps st = sp_share_stamps_of(k);
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
	pthread_mutex_unlock(&sp_share.buf_lock);
	atomic_fetch_add(&sp_share.passed, passed);
	if (withheld) {
		atomic_fetch_add(&sp_share.withheld, withheld);
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
	if (valid && atomic_load(&sp_share.ever_on))
		pass_records(ctx, stream, buf, valid);
	sp_act_buffer_completed(ctx, stream, buf, size, valid);
}
