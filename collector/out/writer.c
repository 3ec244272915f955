/* SPDX-License-Identifier: MIT */
/* writer.c - the writer thread behind writer.h: each pass runs the tick hook, drains the rings, sorts and
 * encodes, enforcing the window byte cap. The only thread that touches the trace file; an error warns once
 * and makes it a sink. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "collector/base/clock.h"
#include "collector/base/intern.h"
#include "collector/base/log.h"
#include "collector/mem/memory.h"
#include "ring.h"
#include "writer.h"
#include "writer_int.h"

#define PASS_NS 2000000           /* idle wait between passes */
#define MAX_STAGE 65536u          /* events sorted together at most */

#define RESCUE_ASKED 0x100         /* in g.rescue: a rescue was asked */
#define MAX_FILES 8                /* SP_MAX_PHASES: a trace per phase at most */
/* A window's records reach the file at least this often, whatever the chunk size: a process killed
 * outright (SIGKILL, the OOM killer), which runs no handler, keeps the window up to then
 * (docs/BENCHMARKS.md: what it costs; bench/open_flush.sh builds other values) */
#ifndef OPEN_FLUSH_NS
#define OPEN_FLUSH_NS 250000000ull
#endif

static struct {
	pthread_mutex_t ctl;            /* serialises start and stop */
	pthread_mutex_t lock;           /* guards kicked, stopping, tick */
	pthread_cond_t cond;            /* wakes the writer: kick or stop */
	bool kicked, stopping;
	void (*tick)(void *ctx);        /* run on the writer thread before each drain */
	void (*seen)(const struct sp_event *ev); /* shown every drained event (guarded like tick) */
	void (*pass_seen)(const struct sp_event *ev); /* seen, as this pass read it (writer thread) */
	void *tick_ctx;
	_Atomic uint64_t pass_ns;       /* idle wait between passes, 0 = PASS_NS */
	_Atomic int running;
	pthread_t thread;
	int owner;                      /* the process the thread runs in (a fork child inherits running) */
	_Atomic int rescue;             /* SP_RESCUE_* | RESCUE_ASKED from a signal handler, 0 none */
	_Atomic int rescued;            /* the writer thread wrote what the rescue asked */
	void (*rescue_fn)(void);        /* fetches the GPU records for SP_RESCUE_GPU (sp_writer_set_rescue) */
	int result;       /* of the last run: 0, or -1 if a file is incomplete */
	char path[1024];                /* the single file, or the first phase's (sp_writer_path) */
	char why[1200];                 /* why the last sp_writer_start failed, "" if it did not */
	/* writer thread only, from here on */
	struct file f[MAX_FILES];       /* f[0] alone without phases */
	int nf;
	bool phased;                    /* a file per phase (sp_writer_start_phases) */
	char dir[1024], base[256];      /* phased: DIR/PHASE/BASE is a phase's file */
	bool allow_foreign;             /* phased: [profile] allow_foreign_dir for the phase folders */
	struct sp_trace_meta meta;      /* phased: the header of every phase's file */
	struct sp_event *ctx_ev;        /* phased: THREAD and DEVICE records so far, for files made later */
	size_t nctx, ctx_cap;
	uint64_t cap;                   /* window_max_bytes, 0 none */
	struct sp_event *stage;         /* drained, not yet written */
	const struct sp_event **order;  /* stage sorted by start */
	uint32_t *stage_phase;          /* phased: the phase a staged record goes to, 0: by route() */
	uint32_t drain_phase;           /* phased: the phase of the latest WINDOW_BEGIN staged */
	size_t nstage, stage_cap;
	uint64_t ring_seen;             /* sp_ring_dropped() at the last window boundary */
	uint64_t ring_outside;          /* ring drops outside windows, written at stop */
} g = {
	.ctl = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static bool is_data(uint8_t kind)
{
	return kind >= SP_EV_KERNEL && kind <= SP_EV_MARKER;
}

/* 1 if a window of some file is open. */
static bool any_window(void)
{
	for (int i = 0; i < g.nf; i++)
		if (g.f[i].in_window)
			return true;
	return false;
}

/* Ring drops since the last boundary; those outside every window are kept for stop. (The rings
 * are the process's: with a file per phase, drops go to the window of whichever phase meets the
 * next boundary.) */
static uint64_t ring_drops_since_boundary(void)
{
	uint64_t now = sp_ring_dropped(), d = now - g.ring_seen;
	g.ring_seen = now;
	if (!any_window()) {
		g.ring_outside += d;
		return 0;
	}
	return d;
}

/* Writes a DROPPED record to f if count is nonzero. Errors go through sp_tf_fail(). */
static void write_dropped(struct file *f, uint8_t source, uint64_t count, uint64_t when)
{
	if (!count)
		return;
	struct sp_event d = { .kind = SP_EV_DROPPED,
			      .sub = source,
			      .device = SP_NO_DEVICE,
			      .start = when,
			      .end = when,
			      .u.dropped.count = count };
	sp_tf_write(f, &d);
}

/* Opens the window's byte and drop accounting in f and writes ev. Errors go through sp_tf_fail(). */
static void window_begin(struct file *f, const struct sp_event *ev)
{
	sp_tf_account(f, ev, 0);
	ring_drops_since_boundary();
	f->in_window = true;
	f->win_bytes = 0;
	f->win_cap_drops = 0;
	sp_tf_write(f, ev);
}

/* Writes the window's drop records, a clock anchor and the completed WINDOW_END to f, then
 * flushes f. */
static void window_end(struct file *f, const struct sp_event *ev)
{
	struct sp_event end = *ev, clk = { .kind = SP_EV_CLOCK, .device = SP_NO_DEVICE };
	uint64_t ring = ring_drops_since_boundary();
	end.u.window.bytes = f->win_bytes;
	end.u.window.dropped = f->win_cap_drops + ring;
	end.u.window.capped = f->win_cap_drops > 0;
	write_dropped(f, SP_DROP_CAP, f->win_cap_drops, ev->start);
	write_dropped(f, SP_DROP_RING, ring, ev->start);
	clk.start = clk.end = sp_now_ns();
	clk.u.clock.realtime_ns = sp_realtime_ns();
	sp_tf_write(f, &clk);
	sp_tf_write(f, &end);
	f->in_window = false;
	if (!f->failed && f->tw && sp_trace_flush(f->tw) < 0)
		sp_tf_fail(f, "writing", errno);
	sp_tf_check_there(f);
	sp_tf_account(f, ev, 1);
}

/* Phased: keeps a THREAD or DEVICE record for the phase files made later (each file names its
 * threads and GPUs itself). Without memory the record is only in the files made so far. */
static void keep_context(const struct sp_event *ev)
{
	if (g.nctx == g.ctx_cap) {
		size_t cap = g.ctx_cap ? 2 * g.ctx_cap : 64;
		struct sp_event *p = realloc(g.ctx_ev, cap * sizeof(*p));
		if (!p)
			return;
		g.ctx_ev = p;
		g.ctx_cap = cap;
	}
	g.ctx_ev[g.nctx++] = *ev;
}

/* Phased: the file of the phase whose interned name is `phase`, created (folder DIR/PHASE and its
 * trace, with the THREAD and DEVICE records so far) at its first window; the first phase's for an
 * unknown name. NULL if it could not be created (warned once: that phase's windows are lost). */
static struct file *phase_file(uint32_t phase)
{
	struct file *f = &g.f[0];
	for (int i = 0; i < g.nf; i++)
		if (g.f[i].phase == phase)
			f = &g.f[i];
	if (!f->tw && !f->failed) {
		char dir[sizeof g.dir + 64], path[sizeof dir + sizeof g.base + 1];
		snprintf(dir, sizeof dir, "%s/%s", g.dir, sp_intern_lookup(f->phase));
		snprintf(path, sizeof path, "%s/%s", dir, g.base);
		char why[1200];
		if (sp_writer_make_dir(dir, g.allow_foreign, why, sizeof why) < 0 ||
		    sp_tf_create(f, path, &g.meta, why, sizeof why) < 0) {
			snprintf(f->path, sizeof f->path, "%.*s", (int)sizeof f->path - 1, path);
			sp_warn("phase %s: %s; its windows are not written (the other phases' are)",
				sp_intern_lookup(f->phase), why);
			f->failed = true;
			return NULL;
		}
		sp_info("writing %s", f->path);
		for (size_t i = 0; i < g.nctx; i++)
			sp_tf_write(f, &g.ctx_ev[i]);
	}
	return f->failed ? NULL : f;
}

/* Phased: the file an event goes to: a GPU record to its window's phase (index + 1 in tid, cleared here),
 * any other to the phase whose window began last at or before it. NULL before any phase file exists. */
static struct file *route(struct sp_event *ev)
{
	struct file *best = NULL, *latest = NULL;
	if ((sp_ev_is_gpu(ev) || ev->kind == SP_EV_SYNC) && ev->tid) {
		uint32_t k = ev->tid - 1;
		ev->tid = 0;
		return k < (uint32_t)g.nf ? phase_file(g.f[k].phase) : NULL;
	}
	for (int i = 0; i < g.nf; i++) {
		struct file *f = &g.f[i];
		if (!f->tw || f->failed)
			continue;
		if (!latest || f->last_begin > latest->last_begin)
			latest = f;
		if (f->last_begin <= ev->start && (!best || f->last_begin > best->last_begin))
			best = f;
	}
	return best ? best : latest;
}

/* Writes ev to f, or counts it dropped by the window cap. A BEGIN waits until the same file's previous END
 * is written, so windows never overlap in a file. Errors go through sp_tf_fail(). */
static void process_in(struct file *f, const struct sp_event *ev)
{
	int k = 0;
	if (ev->kind == SP_EV_WINDOW_END) /* of a window still held? (it completed before the open one) */
		while (k < f->nheld && f->held[k].u.window.id != ev->u.window.id)
			k++;
	if (ev->kind == SP_EV_WINDOW_BEGIN && (f->in_window || f->nheld)) {
		if (f->nheld < MAX_HELD) {
			f->held_end[f->nheld].kind = 0;
			f->held[f->nheld++] = *ev;
		} else {
			window_begin(f, ev); /* not reached: the collector tracks at most 8 windows */
		}
	} else if (ev->kind == SP_EV_WINDOW_BEGIN) {
		window_begin(f, ev);
	} else if (ev->kind == SP_EV_WINDOW_END && k < f->nheld) {
		f->held_end[k] = *ev; /* written once its BEGIN is */
	} else if (ev->kind == SP_EV_WINDOW_END) {
		window_end(f, ev);
		while (f->nheld) { /* the next window begins; if it also ended already, it ends too */
			struct sp_event b = f->held[0], e = f->held_end[0];
			memmove(f->held, f->held + 1, (size_t)(f->nheld - 1) * sizeof f->held[0]);
			memmove(f->held_end, f->held_end + 1, (size_t)(f->nheld - 1) * sizeof f->held_end[0]);
			f->nheld--;
			window_begin(f, &b);
			if (!e.kind)
				break;
			window_end(f, &e);
		}
	} else if (f->in_window && g.cap && is_data(ev->kind) && f->win_bytes >= g.cap)
		f->win_cap_drops++;
	else
		sp_tf_write(f, ev);
}

/* Writes ev to its file: the single one, or (phased) its phase's: `phase` if not 0, else as
 * route() says; THREAD and DEVICE records go to every phase's file, made or to be made. This
 * function can't fail (errors go through sp_tf_fail()). */
static void process(const struct sp_event *in, uint32_t phase)
{
	struct sp_event ev = *in;
	struct file *f = &g.f[0];
	if (!g.phased) {
		process_in(f, in);
		return;
	}
	if (ev.kind == SP_EV_THREAD || ev.kind == SP_EV_DEVICE) {
		keep_context(&ev);
		for (int i = 0; i < g.nf; i++)
			sp_tf_write(&g.f[i], &ev);
		return;
	}
	if (ev.kind == SP_EV_WINDOW_BEGIN || ev.kind == SP_EV_WINDOW_END || (ev.kind == SP_EV_DROPPED && ev.name))
		f = phase_file(ev.name);
	else if (phase)
		f = phase_file(phase);
	else
		f = route(&ev);
	/* a BEGIN held behind its phase's previous window routes the events after it all the same */
	if (f && ev.kind == SP_EV_WINDOW_BEGIN && ev.start >= f->last_begin)
		f->last_begin = ev.start;
	if (f)
		process_in(f, &ev);
}

/* qsort order: by start, then by place in the stage. */
static int by_start(const void *a, const void *b)
{
	const struct sp_event *x = *(const struct sp_event *const *)a, *y = *(const struct sp_event *const *)b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x < y ? -1 : x > y; /* stage order: keeps the sort stable */
}

/* Sorts and writes the staged batch. This function can't fail (errors go through sp_tf_fail()). */
static void process_stage(void)
{
	if (!g.nstage)
		return;
	for (size_t i = 0; i < g.nstage; i++)
		g.order[i] = &g.stage[i];
	qsort(g.order, g.nstage, sizeof(*g.order), by_start);
	for (size_t i = 0; i < g.nstage; i++)
		process(g.order[i], g.phased ? g.stage_phase[g.order[i] - g.stage] : 0);
	g.nstage = 0;
}

/* Doubles the staging arrays up to MAX_STAGE. Returns false when full or out of memory. */
static bool grow_stage(void)
{
	size_t cap = g.stage_cap ? 2 * g.stage_cap : 1024;
	if (cap > MAX_STAGE)
		return false;
	struct sp_event *s = realloc(g.stage, cap * sizeof(*s));
	if (s)
		g.stage = s;
	const struct sp_event **o = s ? realloc(g.order, cap * sizeof(*o)) : NULL;
	if (o)
		g.order = o;
	uint32_t *ph = o ? realloc(g.stage_phase, cap * sizeof(*ph)) : NULL;
	if (!ph)
		return false;
	g.stage_phase = ph;
	g.stage_cap = cap;
	return true;
}

/* sp_ring_drain callback: stages ev, writing the batch first when staging is full. Phased: the
 * allocations alive at a window's start (SP_MEMF_SNAPSHOT, stamped with when they were made, so
 * before the window) go to the phase of the WINDOW_BEGIN staged before them (the opening thread
 * pushes them right after it, into its own ring). */
static void stage_one(void *ctx, const struct sp_event *ev)
{
	uint32_t phase = 0;
	if (g.pass_seen)
		g.pass_seen(ev);
	if (g.phased && ev->kind == SP_EV_WINDOW_BEGIN)
		g.drain_phase = ev->name;
	if (g.phased && ev->kind == SP_EV_ALLOC && (ev->u.mem.flags & SP_MEMF_SNAPSHOT))
		phase = g.drain_phase;
	if (g.nstage == g.stage_cap && !grow_stage()) {
		process_stage();
		if (!g.stage_cap) { /* no memory for any staging: write unsorted */
			process(ev, phase);
			return;
		}
	}
	g.stage_phase[g.nstage] = phase;
	g.stage[g.nstage++] = *ev;
}

/* Writes the chunk of every file (all: 1) or of those whose window has reached nothing to the file
 * for OPEN_FLUSH_NS (all: 0; a process killed outright keeps its window up to then). This function
 * can't fail (errors go through sp_tf_fail()). */
static void flush_files(int all, uint64_t now)
{
	for (int i = 0; i < g.nf; i++) {
		struct file *f = &g.f[i];
		if (f->failed || !f->tw)
			continue;
		uint64_t bytes = sp_trace_file_bytes(f->tw);
		if (!all && (bytes != f->flushed_bytes || !f->in_window)) { /* it grew, or no window: start over */
			f->flushed_bytes = bytes;
			f->flushed_at = now;
		} else if (all || now - f->flushed_at >= OPEN_FLUSH_NS) {
			if (sp_trace_flush(f->tw) < 0)
				sp_tf_fail(f, "writing", errno);
			f->flushed_bytes = sp_trace_file_bytes(f->tw);
			f->flushed_at = now;
		}
	}
}

/* The pass a signal handler asked for (sp_writer_rescue): without the tick (it takes locks the
 * signalled thread may hold), the rings drained and every file's chunk written; then, for
 * SP_RESCUE_GPU, the GPU records fetched and written too (after: if that hangs, the rest is in).
 * Writer thread. This function can't fail. */
static void rescue_pass(int how)
{
	sp_ring_drain(stage_one, NULL);
	process_stage();
	flush_files(1, sp_now_ns());
	if ((how & SP_RESCUE_GPU) && g.rescue_fn) {
		g.rescue_fn();
		sp_ring_drain(stage_one, NULL);
		process_stage();
		flush_files(1, sp_now_ns());
	}
}

/* Waits until the next pass is due, a kick or a stop. Writer thread. This function can't fail. */
static void wait_pass(void)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	uint64_t pass = atomic_load(&g.pass_ns) ? atomic_load(&g.pass_ns) : PASS_NS;
	until.tv_sec += (time_t)(pass / 1000000000u);
	until.tv_nsec += (long)(pass % 1000000000u);
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&g.lock);
	if (!g.kicked && !g.stopping)
		pthread_cond_clockwait(&g.cond, &g.lock, CLOCK_MONOTONIC, &until);
	pthread_mutex_unlock(&g.lock);
}

/* runs on the writer thread, all signals blocked */
static void *writer_main(void *arg)
{
	pthread_setname_np(pthread_self(), "stepprof-writer");
	sp_mem_self = 1; /* its staging, zstd and CUPTI-flush allocations are stepprof's, not the program's */
	for (;;) {
		int rescue = atomic_load(&g.rescue); /* before any lock: the signalled thread may hold one */
		if (rescue && !atomic_load(&g.rescued)) {
			rescue_pass(rescue);
			atomic_store(&g.rescued, 1);
			if (rescue & SP_RESCUE_FINAL)
				break; /* the process dies: the files are closed now */
		}
		pthread_mutex_lock(&g.lock);
		bool stopping = g.stopping, kicked = g.kicked;
		void (*tick)(void *) = g.tick;
		void *tick_ctx = g.tick_ctx;
		g.pass_seen = g.seen;
		g.kicked = false;
		pthread_mutex_unlock(&g.lock);

		sp_fast_anchor();
		if (tick)
			tick(tick_ctx);
		uint64_t drained = sp_ring_drain(stage_one, NULL);
		process_stage();
		flush_files(kicked || stopping, sp_now_ns());
		if (stopping)
			break;
		if (drained < MAX_STAGE / 4) /* else busy: rings are filling, go again at once */
			wait_pass();
	}
	struct file *last = NULL; /* the file of the latest window: ring drops outside windows go there */
	for (int k = 0; k < g.nf; k++) {
		struct file *f = &g.f[k];
		for (int i = 0; i < f->nheld; i++) { /* windows whose predecessor never ended: written as they are */
			sp_tf_write(f, &f->held[i]);
			if (f->held_end[i].kind)
				sp_tf_write(f, &f->held_end[i]);
		}
		f->nheld = 0;
		if (f->tw && (!last || f->last_begin > last->last_begin))
			last = f;
	}
	ring_drops_since_boundary();
	for (int k = 0; k < g.nf; k++)
		g.f[k].in_window = false;
	if (last)
		write_dropped(last, SP_DROP_RING, g.ring_outside, sp_now_ns());
	g.result = 0;
	for (int k = 0; k < g.nf; k++) {
		struct file *f = &g.f[k];
		sp_tf_check_there(f); /* removed after its last window: lost all the same */
		if (f->tw && sp_trace_close(f->tw) < 0 && !f->failed)
			sp_tf_fail(f, "closing", errno);
		f->tw = NULL;
		if (f->failed)
			g.result = -1;
		sp_tf_say_loss(f);
	}
	atomic_store(&g.rescued, 1); /* all written: a signal now has nothing left to wait for */
	return NULL;
}

/* Returns 0, or -1 after warning once (nothing running, no file left open). */
int sp_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/* Resets the per-run state and starts the thread. Under g.ctl. Returns 0, or -1 after warning
 * (the files made so far closed). */
static int start_thread(uint64_t window_max_bytes)
{
	g.cap = window_max_bytes;
	atomic_store(&g.rescue, 0);
	atomic_store(&g.rescued, 0);
	g.kicked = g.stopping = false;
	g.ring_seen = sp_ring_dropped();
	g.ring_outside = 0;
	g.nctx = 0;
	int err = sp_thread_start(&g.thread, writer_main, NULL);
	if (err) {
		sp_warn("cannot start the trace writer thread: %s", strerror(err));
		for (int i = 0; i < g.nf; i++)
			if (g.f[i].tw)
				sp_trace_close(g.f[i].tw);
		memset(g.f, 0, sizeof g.f);
		return -1;
	}
	g.owner = (int)getpid();
	atomic_store(&g.running, 1);
	return 0;
}

int sp_writer_start(const char *path, const struct sp_trace_meta *meta, uint64_t window_max_bytes)
{
	int rc = -1;
	pthread_mutex_lock(&g.ctl);
	if (atomic_load(&g.running)) {
		sp_warn("trace writer already running; not starting another for %s", path);
		goto out;
	}
	memset(g.f, 0, sizeof g.f);
	g.nf = 1;
	g.phased = false;
	g.why[0] = 0;
	if (sp_tf_create(&g.f[0], path, meta, g.why, sizeof g.why) < 0) {
		snprintf(g.path, sizeof g.path, "%s", g.f[0].path);
		sp_warn("%s; not profiling", g.why);
		goto out;
	}
	snprintf(g.path, sizeof g.path, "%s", g.f[0].path);
	rc = start_thread(window_max_bytes);
out:
	pthread_mutex_unlock(&g.ctl);
	return rc;
}

int sp_writer_start_phases(const char *dir, const char *base, int n, const uint32_t *phases,
			   const struct sp_trace_meta *meta, uint64_t window_max_bytes, bool allow_foreign)
{
	int rc = -1;
	pthread_mutex_lock(&g.ctl);
	if (atomic_load(&g.running)) {
		sp_warn("trace writer already running; not starting another for %s", dir);
		goto out;
	}
	if (n < 1 || n > MAX_FILES || strlen(dir) >= sizeof g.dir || strlen(base) >= sizeof g.base) {
		sp_warn("cannot write %d phases under %s; not profiling", n, dir);
		goto out;
	}
	memset(g.f, 0, sizeof g.f);
	g.nf = n;
	g.phased = true;
	for (int i = 0; i < n; i++)
		g.f[i].phase = phases[i];
	snprintf(g.dir, sizeof g.dir, "%s", dir);
	snprintf(g.base, sizeof g.base, "%s", base);
	snprintf(g.path, sizeof g.path, "%s/%s/%s", dir, sp_intern_lookup(phases[0]), base);
	g.allow_foreign = allow_foreign;
	g.meta = *meta;
	rc = start_thread(window_max_bytes);
out:
	pthread_mutex_unlock(&g.ctl);
	return rc;
}

/* Why the last sp_writer_start failed ("" if it did not). This function can't fail. */
const char *sp_writer_failure(void)
{
	return g.why;
}

/* The file sp_writer_start created (its path, or the free name taken instead), or the first
 * phase's file as sp_writer_start_phases would name it. Can't fail. */
const char *sp_writer_path(void)
{
	return g.path;
}

/* Sets the hook run on the writer thread at the start of every pass (NULL: none); it takes
 * effect from the next pass. This function can't fail. */
void sp_writer_set_tick(void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&g.lock);
	g.tick = fn;
	g.tick_ctx = ctx;
	pthread_mutex_unlock(&g.lock);
}

void sp_writer_set_seen(void (*fn)(const struct sp_event *ev))
{
	pthread_mutex_lock(&g.lock);
	g.seen = fn;
	pthread_mutex_unlock(&g.lock);
}

/* This function can't fail. */
void sp_writer_set_pass_ns(uint64_t ns)
{
	atomic_store(&g.pass_ns, ns);
}

/* Only from inside the tick: the writer thread owns a ring like any producer, so this is a
 * push into it, drained in the same pass. Returns 0, or -1 if the ring was full (counted). */
int sp_writer_emit(const struct sp_event *ev)
{
	return sp_ring_push(ev);
}

/* Async-signal-safe: atomics, getpid and nanosleep only. */
int sp_writer_rescue(int how, unsigned wait_ms)
{
	int none = 0;
	if (!atomic_load(&g.running) || g.owner != (int)getpid())
		return 0; /* no writer thread here */
	if (pthread_equal(pthread_self(), g.thread))
		return -1;
	atomic_compare_exchange_strong(&g.rescue, &none, how | RESCUE_ASKED); /* the first asker's */
	for (unsigned waited = 0; !atomic_load(&g.rescued); waited++) {
		struct timespec ms = { 0, 1000000 };
		if (waited >= wait_ms || !atomic_load(&g.running))
			return atomic_load(&g.rescued) ? 1 : -1;
		nanosleep(&ms, NULL);
	}
	return 1;
}

/* This function can't fail. */
void sp_writer_set_rescue(void (*fn)(void))
{
	g.rescue_fn = fn;
}

/* This function can't fail. */
void sp_writer_kick(void)
{
	pthread_mutex_lock(&g.lock);
	g.kicked = true;
	pthread_cond_signal(&g.cond);
	pthread_mutex_unlock(&g.lock);
}

/* Returns the result of the last run (0 also if never started), or -1 when called on the
 * writer thread itself (it can't join itself; nothing done). */
int sp_writer_stop(void)
{
	pthread_mutex_lock(&g.ctl);
	if (atomic_load(&g.running) && pthread_equal(pthread_self(), g.thread)) {
		pthread_mutex_unlock(&g.ctl);
		sp_warn("trace writer stop called on the writer thread; ignored");
		return -1;
	}
	if (atomic_load(&g.running)) {
		pthread_mutex_lock(&g.lock);
		g.stopping = true;
		pthread_cond_signal(&g.cond);
		pthread_mutex_unlock(&g.lock);
		pthread_join(g.thread, NULL);
		atomic_store(&g.running, 0);
	}
	int rc = g.result;
	pthread_mutex_unlock(&g.ctl);
	return rc;
}

/* This function can't fail. */
int sp_writer_running(void)
{
	return atomic_load(&g.running);
}
