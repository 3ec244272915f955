/* SPDX-License-Identifier: MIT */
/* writer.c - the writer thread behind writer.h: each pass runs the tick hook, drains every ring
 * into a staging batch, sorts it by start (stable) and encodes it; it enforces the per-window
 * byte cap and writes the window's drop counts. It is the only thread that touches the trace
 * file. An error warns once and turns the writer into a sink; it never stops the program. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "intern.h"
#include "log.h"
#include "memory.h"
#include "ring.h"
#include "pystack.h"
#include "stacks.h"
#include "writer.h"

#define PASS_NS 2000000           /* idle wait between passes */
#define MAX_STAGE 65536u          /* events sorted together at most */

static struct {
	pthread_mutex_t ctl;            /* serialises start and stop */
	pthread_mutex_t lock;           /* guards kicked, stopping, tick */
	pthread_cond_t cond;            /* wakes the writer: kick or stop */
	bool kicked, stopping;
	void (*tick)(void *ctx);        /* run on the writer thread before each drain */
	void *tick_ctx;
	_Atomic uint64_t pass_ns;       /* idle wait between passes, 0 = PASS_NS */
	_Atomic int running;
	pthread_t thread;
	int result;       /* of the last run: 0, or -1 if the file is incomplete */
	/* writer thread only, from here on */
	struct sp_trace_writer *tw;
	char path[1024];
	uint64_t cap;                   /* window_max_bytes, 0 none */
	bool failed;                    /* a write failed: events are discarded */
	struct sp_event *stage;         /* drained, not yet written */
	const struct sp_event **order;  /* stage sorted by start */
	size_t nstage, stage_cap;
	bool in_window;
	uint64_t win_bytes;             /* encoded bytes since WINDOW_BEGIN */
	uint64_t win_cap_drops;         /* data events dropped by the cap in this window */
	uint64_t ring_seen;             /* sp_ring_dropped() at the last window boundary */
	uint64_t ring_outside;          /* ring drops outside windows, written at stop */
	struct sp_event held[8];        /* WINDOW_BEGINs that came while a window was open, in order */
	struct sp_event held_end[8];    /* ... the WINDOW_END of each if it came too (kind 0: not yet) */
	int nheld;
} g = {
	.ctl = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

/* sp_string_lookup_fn over the process's intern table; NULL for an unknown id. */
static const char *lookup(void *ctx, uint32_t id)
{
	return sp_intern_lookup(id);
}

/* Warns once and discards everything from now on. This function can't fail. */
static void fail(const char *what, int err)
{
	if (!g.failed)
		sp_warn("%s trace %s failed (%s); dropping further events", what, g.path, strerror(err));
	g.failed = true;
}

static bool is_data(uint8_t kind)
{
	return kind >= SP_EV_KERNEL && kind <= SP_EV_MARKER;
}

/* Writes ev, counting its bytes in the open window. Errors go through fail(). */
static void write_event(const struct sp_event *ev)
{
	if (g.failed)
		return;
	int n = sp_trace_write(g.tw, ev);
	if (n < 0)
		fail("writing", errno);
	else if (g.in_window)
		g.win_bytes += (uint64_t)n;
}

/* Ring drops since the last boundary; those outside a window are kept for stop. */
static uint64_t ring_drops_since_boundary(void)
{
	uint64_t now = sp_ring_dropped(), d = now - g.ring_seen;
	g.ring_seen = now;
	if (!g.in_window) {
		g.ring_outside += d;
		return 0;
	}
	return d;
}

/* Writes a DROPPED record if count is nonzero. Errors go through fail(). */
static void write_dropped(uint8_t source, uint64_t count, uint64_t when)
{
	if (!count)
		return;
	struct sp_event d = { .kind = SP_EV_DROPPED,
			      .sub = source,
			      .device = SP_NO_DEVICE,
			      .start = when,
			      .end = when,
			      .u.dropped.count = count };
	write_event(&d);
}

/* Opens the window's byte and drop accounting and writes ev. Errors go through fail(). */
static void window_begin(const struct sp_event *ev)
{
	ring_drops_since_boundary();
	g.in_window = true;
	g.win_bytes = 0;
	g.win_cap_drops = 0;
	write_event(ev);
}

/* Writes the window's drop records, a clock anchor and the completed WINDOW_END, then flushes. */
static void window_end(const struct sp_event *ev)
{
	struct sp_event end = *ev, clk = { .kind = SP_EV_CLOCK, .device = SP_NO_DEVICE };
	uint64_t ring = ring_drops_since_boundary();
	end.u.window.bytes = g.win_bytes;
	end.u.window.dropped = g.win_cap_drops + ring;
	end.u.window.capped = g.win_cap_drops > 0;
	write_dropped(SP_DROP_CAP, g.win_cap_drops, ev->start);
	write_dropped(SP_DROP_RING, ring, ev->start);
	clk.start = clk.end = sp_now_ns();
	clk.u.clock.realtime_ns = sp_realtime_ns();
	write_event(&clk);
	write_event(&end);
	g.in_window = false;
	if (!g.failed && sp_trace_flush(g.tw) < 0)
		fail("writing", errno);
}

/* Writes ev, or counts it as dropped by the window cap. A window that begins while the previous
 * one still waits for its GPU records (back-to-back windows: every step its own window, or two
 * phases taking turns) has its BEGIN held until that END is written: windows never overlap in the
 * file (a reader takes a BEGIN before the previous END for a cut window; cli/windows.c places
 * the events written in between by their times). Errors go through fail(). */
static void process(const struct sp_event *ev)
{
	int k = 0;
	if (ev->kind == SP_EV_WINDOW_END) /* of a window still held? (it completed before the open one) */
		while (k < g.nheld && g.held[k].u.window.id != ev->u.window.id)
			k++;
	if (ev->kind == SP_EV_WINDOW_BEGIN && (g.in_window || g.nheld)) {
		if (g.nheld < (int)(sizeof g.held / sizeof g.held[0])) {
			g.held_end[g.nheld].kind = 0;
			g.held[g.nheld++] = *ev;
		} else {
			window_begin(ev); /* not reached: the collector tracks at most 8 windows */
		}
	} else if (ev->kind == SP_EV_WINDOW_BEGIN) {
		window_begin(ev);
	} else if (ev->kind == SP_EV_WINDOW_END && k < g.nheld) {
		g.held_end[k] = *ev; /* written once its BEGIN is */
	} else if (ev->kind == SP_EV_WINDOW_END) {
		window_end(ev);
		while (g.nheld) { /* the next window begins; if it also ended already, it ends too */
			struct sp_event b = g.held[0], e = g.held_end[0];
			memmove(g.held, g.held + 1, (size_t)(g.nheld - 1) * sizeof g.held[0]);
			memmove(g.held_end, g.held_end + 1, (size_t)(g.nheld - 1) * sizeof g.held_end[0]);
			g.nheld--;
			window_begin(&b);
			if (!e.kind)
				break;
			window_end(&e);
		}
	} else if (g.in_window && g.cap && is_data(ev->kind) && g.win_bytes >= g.cap)
		g.win_cap_drops++;
	else
		write_event(ev);
}

/* qsort order: by start, then by place in the stage. */
static int by_start(const void *a, const void *b)
{
	const struct sp_event *x = *(const struct sp_event *const *)a, *y = *(const struct sp_event *const *)b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x < y ? -1 : x > y; /* stage order: keeps the sort stable */
}

/* Sorts and writes the staged batch. This function can't fail (errors go through fail()). */
static void process_stage(void)
{
	if (!g.nstage)
		return;
	for (size_t i = 0; i < g.nstage; i++)
		g.order[i] = &g.stage[i];
	qsort(g.order, g.nstage, sizeof(*g.order), by_start);
	for (size_t i = 0; i < g.nstage; i++)
		process(g.order[i]);
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
	if (!o)
		return false;
	g.order = o;
	g.stage_cap = cap;
	return true;
}

/* sp_ring_drain callback: stages ev, writing the batch first when staging is full. */
static void stage_one(void *ctx, const struct sp_event *ev)
{
	if (g.nstage == g.stage_cap && !grow_stage()) {
		process_stage();
		if (!g.stage_cap) { /* no memory for any staging: write unsorted */
			process(ev);
			return;
		}
	}
	g.stage[g.nstage++] = *ev;
}

/* runs on the writer thread, all signals blocked */
static void *writer_main(void *arg)
{
	pthread_setname_np(pthread_self(), "stepprof-writer");
	sp_mem_self = 1; /* its staging, zstd and CUPTI-flush allocations are stepprof's, not the program's */
	for (;;) {
		pthread_mutex_lock(&g.lock);
		bool stopping = g.stopping, kicked = g.kicked;
		void (*tick)(void *) = g.tick;
		void *tick_ctx = g.tick_ctx;
		g.kicked = false;
		pthread_mutex_unlock(&g.lock);

		sp_fast_anchor();
		if (tick)
			tick(tick_ctx);
		uint64_t drained = sp_ring_drain(stage_one, NULL);
		process_stage();
		if ((kicked || stopping) && !g.failed && sp_trace_flush(g.tw) < 0)
			fail("writing", errno);
		if (stopping)
			break;
		if (drained >= MAX_STAGE / 4)
			continue; /* busy: rings are filling, go again at once */
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
	for (int i = 0; i < g.nheld; i++) { /* windows whose predecessor never ended: written as they are */
		write_event(&g.held[i]);
		if (g.held_end[i].kind)
			write_event(&g.held_end[i]);
	}
	g.nheld = 0;
	ring_drops_since_boundary();
	g.in_window = false;
	write_dropped(SP_DROP_RING, g.ring_outside, sp_now_ns());
	if (sp_trace_close(g.tw) < 0 && !g.failed)
		fail("closing", errno);
	g.tw = NULL;
	g.result = g.failed ? -1 : 0;
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

int sp_writer_start(const char *path, const struct sp_trace_meta *meta, uint64_t window_max_bytes)
{
	int rc = -1;
	pthread_mutex_lock(&g.ctl);
	if (atomic_load(&g.running)) {
		sp_warn("trace writer already running; not starting another for %s", path);
		goto out;
	}
	/* an existing file (a re-run with the same host and pid, a planted link) is never opened:
	 * the next free name STEM.1.sptrace ... STEM.99.sptrace is taken instead */
	snprintf(g.path, sizeof(g.path), "%s", path);
	size_t stem = strlen(g.path);
	if (stem > 8 && !strcmp(g.path + stem - 8, ".sptrace"))
		stem -= 8;
	for (int n = 1; !(g.tw = sp_trace_create(g.path, meta, lookup, NULL, 0)) && errno == EEXIST && n < 100; n++)
		snprintf(g.path, sizeof(g.path), "%.*s.%d%s", (int)stem, path, n, path[stem] ? path + stem : "");
	if (!g.tw) {
		sp_warn("cannot create trace %s: %s", g.path, strerror(errno));
		goto out;
	}
	if (strcmp(g.path, path))
		sp_warn("%s exists; writing %s instead", path, g.path);
	sp_trace_set_stack_lookup(g.tw, sp_stack_lookup, NULL);
	sp_trace_set_pyframe_lookup(g.tw, sp_pyframe_lookup, NULL);
	g.cap = window_max_bytes;
	g.failed = g.in_window = g.kicked = g.stopping = false;
	g.nheld = 0;
	g.ring_seen = sp_ring_dropped();
	g.ring_outside = 0;
	int err = sp_thread_start(&g.thread, writer_main, NULL);
	if (err) {
		sp_warn("cannot start the trace writer thread: %s", strerror(err));
		sp_trace_close(g.tw);
		g.tw = NULL;
		goto out;
	}
	atomic_store(&g.running, 1);
	rc = 0;
out:
	pthread_mutex_unlock(&g.ctl);
	return rc;
}

/* Returns 0, or -1 after warning once. */
int sp_writer_make_dir(char *dir, bool allow_foreign)
{
	struct stat st;
	for (char *p = dir + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(dir, 0750);
			*p = '/';
		}
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		sp_warn("cannot create output directory %s: %s; not profiling", dir, strerror(errno));
		return -1;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		sp_warn("output directory %s is not a directory; not profiling", dir);
		return -1;
	}
	if (st.st_uid != geteuid() && !allow_foreign) {
		sp_warn("output directory %s belongs to another user (uid %u; this process runs as uid %u), who could "
			"read or remove the traces; not profiling (set [profile] allow_foreign_dir = true, or "
			"STEPPROF_PROFILE_ALLOW_FOREIGN_DIR=1, if that is intended)",
			dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	return 0;
}

/* The file sp_writer_start created (its path, or the free name taken instead). Can't fail. */
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
