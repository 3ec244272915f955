/* SPDX-License-Identifier: MIT */
/* activity.c - CUPTI's activity buffers: converts each GPU record into a ring event of the window its
 * correlation id falls in (others discarded or counted late), and the writer's tick that closes windows and
 * turns activity off once their records are in. CUPTI's and the writer's threads. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collector/base/clock.h"
#include "collector/hold/cupti_life.h"
#include "cupti_share.h"
#include "collector/internal.h"
#include "decide/life.h"
#include "collector/collector.h"
#include "collector/base/log.h"
#include "collector/hold/markhook.h"
#include "collector/ondemand/ondemand.h"
#include "collector/mem/memory.h"
#include "collector/out/writer.h"
#include "collector/out/tokrec.h"

/* Writer-thread state of closing windows. */
static struct {
	struct {
		uint32_t lo, hi;            /* the ids of its own calls: [lo, hi) */
		uint64_t missing;           /* its kernels said missing whose records did not come yet */
	} closed[SP_MAX_CLOSED]; /* written windows (sp_col.lock) */
	unsigned nclosed;                   /* windows written so far (closed[] is a ring) */
	uint64_t last_flush;                /* last forced CUPTI flush (writer thread) */
	struct {
		uint32_t id, last;          /* the window's id; the highest correlation id of a launch */
		uint32_t copy;              /* ... of a copy or set call */
		uint32_t top;               /* ... of any call */
		bool graph;                 /* a graph launch */
		uint64_t n;                 /* its launches drained since the last tick */
	} drained[SP_MAX_WINDOWS];          /* by window slot (writer thread) */
	uint64_t prev_tick;                 /* the writer's previous tick: every drain since began later */
	uint64_t outside;                   /* records of no window, discarded (under sp_col.lock) */
} win_records;

void sp_act_writer_seen(const struct sp_event *ev)
{
	if (ev->kind != SP_EV_API || !ev->u.api.win_slot || ev->u.api.win_slot > SP_MAX_WINDOWS)
		return;
	unsigned k = ev->u.api.win_slot - 1u;
	if (win_records.drained[k].id != ev->u.api.win_id || !win_records.drained[k].top) /* (stale: reset) */
		win_records.drained[k].id = ev->u.api.win_id, win_records.drained[k].n = 0,
		win_records.drained[k].last = win_records.drained[k].copy = win_records.drained[k].top = 0,
			win_records.drained[k].graph = false;
	if (ev->corr > win_records.drained[k].top)
		win_records.drained[k].top = ev->corr;
	if (ev->u.api.win_call == SP_WCALL_COPY && ev->corr > win_records.drained[k].copy)
		win_records.drained[k].copy = ev->corr;
	win_records.drained[k].graph |= ev->u.api.win_call == SP_WCALL_GRAPH;
	if (ev->u.api.win_call != SP_WCALL_LAUNCH)
		return;
	win_records.drained[k].n++;
	if (ev->corr > win_records.drained[k].last)
		win_records.drained[k].last = ev->corr;
}

/* Adds the launches drained since the last tick to their windows' counts (writer thread, under
 * sp_col.lock); those of a window already written are dropped. This function can't fail. */
static void count_drained(void)
{
	for (int k = 0; k < SP_MAX_WINDOWS; k++) {
		struct window *w = &sp_col.win[k];
		if (!win_records.drained[k].top)
			continue;
		if (w->used && w->id == win_records.drained[k].id) {
			w->launched += win_records.drained[k].n;
			if (win_records.drained[k].last > w->last_launch)
				w->last_launch = win_records.drained[k].last;
			if (win_records.drained[k].copy > w->last_copy)
				w->last_copy = win_records.drained[k].copy;
			if (win_records.drained[k].top > w->last_call)
				w->last_call = win_records.drained[k].top;
			w->graphs |= win_records.drained[k].graph;
		}
		win_records.drained[k].n = 0;
		win_records.drained[k].copy = win_records.drained[k].top = 0;
		win_records.drained[k].graph = false;
	}
}

/* ---- activity buffers (CUPTI's threads, or the writer thread when it flushes) ---- */

void CUPTIAPI sp_act_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	int self = sp_mem_self;
	sp_mem_self = 1; /* stepprof's buffer, not the program's host memory */
	*buf = aligned_alloc(8, sp_col.buffer_bytes);
	sp_mem_self = self;
	*size = *buf ? sp_col.buffer_bytes : 0;
	*max_records = 0;
}

/* The window a GPU record with this correlation id belongs to, or NULL (warmup or outside).
 * *closed gets the written window whose own call it is, or -1. Caller holds sp_col.lock. */
static struct window *window_of(uint32_t corr, int *closed)
{
	*closed = -1;
	for (int i = 0; i < SP_MAX_WINDOWS; i++) {
		struct window *w = &sp_col.win[i];
		if (w->used && w->corr_lo != SP_CORR_PENDING && corr >= w->corr_lo &&
		    (w->corr_hi == SP_CORR_PENDING || corr < w->corr_hi))
			return w;
	}
	for (unsigned i = 0; i < win_records.nclosed && i < SP_MAX_CLOSED; i++)
		if (corr >= win_records.closed[i].lo && corr < win_records.closed[i].hi)
			*closed = (int)i;
	return NULL;
}

/* The fields every GPU activity record kind shares. */
#define GPU_COMMON(ev, r)                                                                     \
	((ev).device = (uint16_t)(r)->deviceId, (ev).start = (r)->start, (ev).end = (r)->end, \
	 (ev).corr = sp_cupti_life_corr((r)->correlationId), (ev).stream = (r)->streamId,     \
	 (ev).context = (r)->contextId)

/* 1 if GPU record ev came incomplete: a forced flush hands over the records of work still running
 * with a timestamp unset, read through the clock's conversion as far in the past (docs/GPU-TESTS.md). */
static bool incomplete(const struct sp_event *ev, const struct window *w)
{
	if (ev->kind != SP_EV_KERNEL && ev->kind != SP_EV_MEMCPY && ev->kind != SP_EV_MEMSET)
		return false;
	return !ev->start || !ev->end || ev->end < ev->start ||
	       (w && ev->start + SP_INCOMPLETE_SLACK_NS < w->t_begin);
}

/* Pushes a converted GPU record if its window is open or closing (counting a kernel's arrival),
 * else counts it in *late if it is of a written window's own call and not already counted as
 * one of its missing kernels; anything else is of no window (discarded, no loss). This function
 * can't fail. */
static void deliver(struct sp_event *ev, uint64_t *late)
{
	int closed;
	pthread_mutex_lock(&sp_col.lock);
	struct window *w = window_of(ev->corr, &closed);
	if (incomplete(ev, w)) { /* never written: its kernel stays missing, said at the window's end */
		if (w && ev->kind == SP_EV_KERNEL && ev->u.kernel.graph_id)
			w->incomplete_graph++; /* not counted as launched: said missing on its own */
		else if (w)
			w->incomplete++;
		else if (closed >= 0 && !(ev->kind == SP_EV_KERNEL && !ev->u.kernel.graph_id &&
					  win_records.closed[closed].missing))
			++*late; /* of a written window, and not one of its kernels said missing: lost late */
		pthread_mutex_unlock(&sp_col.lock);
		return;
	}
	if (!w && closed >= 0) {
		uint64_t *missing = &win_records.closed[closed].missing;
		if (ev->kind == SP_EV_KERNEL && !ev->u.kernel.graph_id && *missing)
			--*missing; /* said missing when its window was written: no second count */
		else
			++*late;
	} else if (!w) {
		win_records.outside++;
	}
	if (w) {
		if (ev->kind == SP_EV_KERNEL && !ev->u.kernel.graph_id) {
			atomic_fetch_add_explicit(&w->arrived, 1, memory_order_relaxed);
			if (ev->corr > atomic_load_explicit(&w->last_arrived, memory_order_relaxed))
				atomic_store_explicit(&w->last_arrived, ev->corr,
						      memory_order_relaxed); /* under lock */
		}
		if ((ev->kind == SP_EV_MEMCPY || ev->kind == SP_EV_MEMSET) && !ev->u.copy.graph_id &&
		    ev->corr > w->last_copy_arrived)
			w->last_copy_arrived = ev->corr;
		w->last_record_ts = sp_now_ns();
		if (sp_col.mk[0].name) /* phases: the writer puts it in its phase's file (writer.h) */
			ev->tid = (uint32_t)w->mk + 1;
	}
	pthread_mutex_unlock(&sp_col.lock);
	if (w)
		sp_coll_push(ev);
}

/* Converts one CUPTI activity record into a ring event (kinds stepprof does not record are
 * skipped). This function can't fail. */
static void convert_record(const CUpti_Activity *rec, uint64_t *late)
{
	struct sp_event ev = { .device = SP_NO_DEVICE };
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)rec;
		ev.kind = SP_EV_KERNEL;
		GPU_COMMON(ev, k);
		ev.name = sp_coll_name_id(k->name);
		if (sp_col.cfg.kernel_shapes) {
			ev.u.kernel.grid[0] = k->gridX, ev.u.kernel.grid[1] = k->gridY, ev.u.kernel.grid[2] = k->gridZ;
			ev.u.kernel.block[0] = k->blockX, ev.u.kernel.block[1] = k->blockY,
			ev.u.kernel.block[2] = k->blockZ;
			ev.u.kernel.static_smem = k->staticSharedMemory;
			ev.u.kernel.dynamic_smem = k->dynamicSharedMemory;
			ev.u.kernel.regs = k->registersPerThread;
		}
		ev.u.kernel.graph_id = k->graphId;
		if (k->graphId)
			sp_cupti_life_graph();
		ev.u.kernel.graph_node = k->graphNodeId;
		ev.u.kernel.launch = k->graphId                                      ? SP_LAUNCH_GRAPH
				     : k->launchType                                 ? SP_LAUNCH_COOPERATIVE
				     : (k->clusterX * k->clusterY * k->clusterZ > 1) ? SP_LAUNCH_CLUSTER
										     : SP_LAUNCH_NORMAL;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)rec;
		ev.kind = SP_EV_MEMCPY;
		ev.sub = m->copyKind;
		GPU_COMMON(ev, m);
		ev.u.copy.bytes = m->bytes;
		ev.u.copy.src_kind = m->srcKind;
		ev.u.copy.dst_kind = m->dstKind;
		ev.u.copy.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
		ev.u.copy.graph_id = m->graphId;
		ev.u.copy.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)rec;
		ev.kind = SP_EV_MEMSET;
		GPU_COMMON(ev, m);
		ev.u.copy.bytes = m->bytes;
		ev.u.copy.value = m->value;
		ev.u.copy.dst_kind = (uint8_t)m->memoryKind;
		ev.u.copy.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0;
		ev.u.copy.graph_id = m->graphId;
		ev.u.copy.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const void *)rec;
		ev.kind = SP_EV_SYNC;
		ev.sub = (uint8_t)s->type;
		ev.start = s->start;
		ev.end = s->end;
		ev.corr = sp_cupti_life_corr(s->correlationId);
		ev.stream = s->streamId == (uint32_t)-1 ? 0 : s->streamId;
		ev.context = s->contextId;
		ev.tid = 0;
		ev.u.sync.event = s->cudaEventId;
		break;
	}
	default:
		return;
	}
	deliver(&ev, late);
}

void CUPTIAPI sp_act_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	uint64_t late = 0;
	while (valid && sp_cupti.cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
		convert_record(rec, &late);
	if (late) {
		struct sp_event ev = { .kind = SP_EV_DROPPED, .sub = SP_DROP_LATE, .device = SP_NO_DEVICE };
		ev.start = ev.end = sp_now_ns();
		ev.u.dropped.count = late;
		sp_coll_push(&ev);
	}
	size_t dropped = 0;
	if (sp_cupti.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
		struct sp_event ev = { .kind = SP_EV_DROPPED, .sub = SP_DROP_CUPTI, .device = SP_NO_DEVICE };
		ev.start = ev.end = sp_now_ns();
		ev.u.dropped.count = dropped;
		sp_coll_push(&ev);
	}
	free(buf);
}

void sp_act_say_outside(void)
{
	pthread_mutex_lock(&sp_col.lock);
	uint64_t n = win_records.outside;
	pthread_mutex_unlock(&sp_col.lock);
	if (n)
		sp_info("%llu GPU records of no window were discarded (not a loss: warmup steps, steps after a "
			"window's end recorded while its records came in, the program's own profiler's)",
			(unsigned long long)n);
}

uint64_t CUPTIAPI sp_act_timestamp(void)
{
	return sp_now_ns();
}

/* ---- the writer thread's tick: finish closing windows, let go of CUPTI ---- */

/* Flushes CUPTI's activity buffers if attached (their records arrive in sp_act_buffer_completed):
 * forced, every buffer, records of work still running incomplete; else only buffers whose records
 * are all complete. This function can't fail. */
void sp_act_flush(bool forced)
{
	if (sp_cupti_life_enter()) {
		sp_cupti.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
		sp_cupti_life_leave();
	}
}

/* 1 if closing window w has its records: a drain begun after its end counted its launches, and as many
 * kernel records came, the last launch's and last copy's among them. *missing: kernels without a record.
 * Under sp_col.lock. This function can't fail. */
static int records_in(const struct window *w, uint64_t prev, uint64_t *missing)
{
	/* the counts alone are not enough: a kernel whose launch is not counted (a driver launch
	 * inside a runtime call that is not a launch) would stand in for the last launch's kernel,
	 * still on its way; so its record (the highest id counted, if inside the window) must have come */
	uint32_t ll = w->last_launch;
	int last_ok = !ll || atomic_load(&w->last_arrived) >= ll || (w->corr_hi != SP_CORR_PENDING && ll >= w->corr_hi);
	uint64_t launched = w->launched, arrived = atomic_load(&w->arrived);
	/* the last copy or set call's record too (copies trail kernels: an all-reduce bucket's DtoD
	 * copies after its last kernel were lost at a DDP window's end); not counted as missing: a copy
	 * that makes no record (zero bytes, captured) only delays the close to the quiet rule */
	int copies_ok = !w->last_copy || w->last_copy_arrived >= w->last_copy ||
			(w->corr_hi != SP_CORR_PENDING && w->last_copy >= w->corr_hi);
	*missing = arrived < launched ? launched - arrived : !last_ok;
	return arrived >= launched && last_ok && copies_ok && prev > w->close_ts;
}

/* Writes closing window w: its END, and a DROPPED 'missing' record and a warning if kernels are
 * missing; keeps its own calls' ids for late records and frees its slot. Writer thread, under
 * sp_col.lock. This function can't fail. */
static void write_window(struct window *w, uint64_t missing, uint64_t age)
{
	missing += w->incomplete_graph; /* graph kernels are not counted as launches: their loss is said here */
	struct sp_event ev = {
		.kind = SP_EV_WINDOW_END, .sub = w->origin, .device = SP_NO_DEVICE, .start = w->t_end, .end = w->t_end
	};
	ev.name = sp_col.mk[w->mk].name; /* the phase, 0 without phases */
	ev.u.window.id = w->id;
	ev.u.window.first_step = w->first_step;
	ev.u.window.last_step = w->last_step;
	if (missing) { /* said in the trace and on stderr: never a silent loss */
		struct sp_event d = { .kind = SP_EV_DROPPED,
				      .sub = SP_DROP_MISSING,
				      .device = SP_NO_DEVICE,
				      .start = w->t_end,
				      .end = w->t_end };
		d.u.dropped.count = missing;
		d.name = sp_col.mk[w->mk].name; /* its phase's: the phase's file (writer.h) */
		sp_writer_emit(&d);
		char graphs[96] = "";
		if (w->incomplete_graph)
			snprintf(graphs, sizeof graphs, ", and %llu kernels of its CUDA graphs came incomplete",
				 (unsigned long long)w->incomplete_graph);
		sp_warn("window %u (steps %lld-%lld): %llu of its %llu kernel launches had no kernel record after %.1f "
			"ms%s; written without them (counted as dropped 'missing')%s",
			w->id, (long long)w->first_step, (long long)w->last_step,
			(unsigned long long)(missing - w->incomplete_graph), (unsigned long long)w->launched, age / 1e6,
			graphs,
			w->incomplete || w->incomplete_graph
				? "; some came from CUPTI incomplete (their work was still running at a forced flush)"
				: "");
	}
	sp_writer_emit(&ev);
	sp_info("window %u (steps %lld-%lld) closed after %.1f ms", w->id, (long long)w->first_step,
		(long long)w->last_step, age / 1e6);
	/* the next window began before this one was written (it may have ended already: a tick
	 * between windows need not come while the next one is close, so say it here) */
	if ((sp_col.collecting || sp_col.next_window_id > w->id + 1) && sp_col.cfg.detach_between != SP_DETACH_NEVER)
		sp_cupti_life_overlap();
	/* late records: of its own calls only (a top still pending ends at its last call: the next
	 * step's records are no window's), and not its kernels said missing, counted already */
	unsigned c = win_records.nclosed++ % SP_MAX_CLOSED;
	win_records.closed[c].lo = w->corr_lo;
	win_records.closed[c].hi = w->corr_hi != SP_CORR_PENDING ? w->corr_hi :
				   w->last_call ? w->last_call + 1 : w->corr_lo;
	win_records.closed[c].missing = missing;
	if (sp_col.split_hi == &w->corr_hi) /* its top still pending: no later call fills a freed slot */
		sp_col.split_hi = NULL;
	if (sp_col.split_lo == &w->corr_lo)
		sp_col.split_lo = NULL;
	w->used = 0;
}

/* Once every closing window has its records, activity kinds go off, so steps after a window are not
 * recorded during its settle time; not with sync records, nor after a graph launch. Writer, under
 * sp_col.lock. Can't fail. */
static void activities_done(bool all_in)
{
	if (!all_in || sp_col.collecting || !sp_col.activities_on || sp_col.cfg.sync)
		return;
	for (int i = 0; i < SP_MAX_WINDOWS; i++)
		if (sp_col.win[i].used && (!sp_col.win[i].closing || sp_col.win[i].graphs))
			return;
	sp_win_activities_due_off(); /* the CUPTI calls after the lock (sp_win_activities_off) */
}

/* Kinds due off go off, unless the program's graphs want them on until the detach turns them off with
 * graph launches held (cupti_life.h). Writer thread, without sp_col.lock. Can't fail. */
static void kinds_off(uint64_t now)
{
	if (!sp_cupti_life_hold_kinds(now, sp_win_activities_due()))
		sp_win_activities_off();
}

void sp_act_writer_tick(void *ctx)
{
	uint64_t now = sp_now_ns(), prev = win_records.prev_tick;
	int closing = 0;
	bool old = false; /* a closing window waits past the quiet age */
	win_records.prev_tick = now;
	pthread_mutex_lock(&sp_col.lock);
	count_drained();
	for (int i = 0; i < SP_MAX_WINDOWS; i++) {
		closing |= sp_col.win[i].used && sp_col.win[i].closing;
		old |= sp_col.win[i].used && sp_col.win[i].closing && now > sp_col.win[i].close_ts &&
		       now - sp_col.win[i].close_ts > SP_WINDOW_QUIET_AGE_NS;
	}
	if (!closing)
		sp_win_activities_idle();
	pthread_mutex_unlock(&sp_col.lock);
	kinds_off(now);
	if (!closing) {
		sp_life_tick(now);
		return;
	}
	if (now - win_records.last_flush >= SP_FLUSH_EVERY_NS) {
		/* only complete buffers: a forced flush hands over the window's running kernels incomplete; but a
		 * GPU that never idles keeps every buffer incomplete, so past the quiet age it is forced */
		sp_act_flush(old);
		win_records.last_flush = sp_now_ns();
	}
	pthread_mutex_lock(&sp_col.lock);
	now = sp_now_ns(); /* a window may have begun closing since the first read (its age was negative) */
	bool all_in = true;
	for (int i = 0; i < SP_MAX_WINDOWS; i++) {
		struct window *w = &sp_col.win[i];
		if (!w->used || !w->closing)
			continue;
		uint64_t last = w->last_record_ts > w->close_ts ? w->last_record_ts : w->close_ts;
		uint64_t age = now > w->close_ts ? now - w->close_ts : 0, quiet = now > last ? now - last : 0;
		uint64_t missing;
		int in = records_in(w, prev, &missing);
		all_in &= in != 0;
		if ((in && age > SP_WINDOW_SETTLE_NS) || (age > SP_WINDOW_QUIET_AGE_NS && quiet > SP_WINDOW_QUIET_NS) ||
		    age > SP_WINDOW_GIVE_UP_NS)
			write_window(w, missing, age);
	}
	activities_done(all_in);
	pthread_mutex_unlock(&sp_col.lock);
	kinds_off(now);
}
