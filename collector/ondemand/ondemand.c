/* SPDX-License-Identifier: MIT */
/* ondemand.c - on-demand windows (ondemand.h): a thread polls the request files every poll_ms and writes
 * HOST.PID.status; step windows bind through sp_od_action, time ranges open and close from the thread.
 * Never touches the program's signals; a failure warns once and leaves on-demand off. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "collector/base/clock.h"
#include "collector/collector.h"
#include "collector/hold/cupti_life.h"
#include "collector/base/intern.h"
#include "collector/internal.h"
#include "collector/base/log.h"
#include "collector/mem/memory.h"
#include "config/odctl.h"
#include "config/run.h"
#include "ondemand.h"
#include "collector/out/writer.h"

/* The change signature of a control file: read again only when it differs. */
struct sig {
	int exists;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim;
};

static struct {
	pthread_t thread;
	int started;                  /* the thread runs (joined at exit) */
	pthread_mutex_t mu;           /* stopping and the condition the thread sleeps on */
	pthread_cond_t cv;
	int stopping;
	int files;      /* control files are polled (the directory passed its checks) */
	char ctl[SP_CFG_PATH + 16];   /* OUTPUT/.stepprof */
	char name[2][128];            /* "trigger" and "trigger.HOST.PID" */
	char status_name[128];        /* "HOST.PID.status" */
	int ctl_fd;                   /* held open (O_PATH): `stepprof trigger PID` finds ctl in /proc/PID/fd */
	struct sig sig[2];            /* of each request file when last read */
	uint64_t seen[2];             /* the id last read from each */
	char status_text[1024];       /* what the status file holds now */
	struct sp_od_status st;       /* ... parsed (the thread fills it) */
	/* under sp_col.lock */
	uint64_t req;                 /* the request being served, 0 none */
	int64_t pending;              /* its steps, until a step binds them */
	uint64_t at;                  /* ... no step before this (CLOCK_REALTIME ns; 0 none) */
	int64_t first, last;          /* its steps once bound, first -1 none */
	int mk;         /* the phase (marker index) they belong to; -1: the next to step */
	int64_t timed_ms;             /* its milliseconds, until the window opens */
	uint64_t timed_end;           /* the open time range ends then (trace clock), 0 to the end */
	int timed_open;               /* a time range (request or [ondemand] range) records */
	int range;      /* [ondemand] range: 0 none or over, 1 waiting, 2 open */
	int uncounted;                /* re-attached after a detach for good: steps were not counted */
	uint32_t win;                 /* the request's window, once open */
	int have_win;
	int64_t win_first, win_last;  /* its steps: the request's, or a time range's at its ends */
} requests = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .ctl_fd = -1, .first = -1, .mk = -1 };

/* The marker index of phase `name` ([phase.NAME], case as in the file or not), -1 none. Under
 * sp_col.lock. */
static int phase_index(const char *name)
{
	for (int i = 0; i < sp_col.nmk; i++)
		if (sp_col.mk[i].name && !strcasecmp(sp_intern_lookup(sp_col.mk[i].name), name))
			return i;
	return -1;
}

/* Rewrites the status file if its text changed. Poll thread. This function can't fail (a write
 * that fails warns once: the request still runs, the CLI just cannot see it). */
static void say(const char *state, const char *note)
{
	char text[sizeof requests.status_text];
	snprintf(requests.st.state, sizeof requests.st.state, "%s", state);
	snprintf(requests.st.note, sizeof requests.st.note, "%s", note);
	if (!requests.files || sp_od_status_format(&requests.st, text, sizeof text) < 0 ||
	    !strcmp(text, requests.status_text))
		return;
	if (sp_od_write(requests.ctl, requests.status_name, text) < 0)
		sp_warn_once("cannot write %s/%s: %s; `stepprof trigger` will not see this process", requests.ctl,
			     requests.status_name, strerror(errno));
	else
		snprintf(requests.status_text, sizeof requests.status_text, "%s", text);
}

/* Refuses the request id with a reason (warned on stderr and said in the status file). Poll
 * thread, without sp_col.lock. This function can't fail. */
static void refuse(uint64_t id, const char *why)
{
	sp_warn("on-demand request %016llx refused: %s", (unsigned long long)id, why);
	requests.st.request = id;
	say("refused", why);
}

/* Reads request file i if it changed. Returns 1 with *r filled if it holds a request not seen
 * before, else 0 (absent, unchanged, already seen, or refused: warned). act: 0 only notes its id
 * (at start: a request older than this process is not for it). Poll thread. */
static int poll_file(int i, struct sp_od_req *r, int act)
{
	char path[sizeof requests.ctl + 130], buf[SP_OD_MAX_BYTES + 1], err[300];
	struct stat st;
	struct sig now = { 0 };
	snprintf(path, sizeof path, "%s/%s", requests.ctl, requests.name[i]);
	if (stat(path, &st) == 0)
		now = (struct sig){ 1, st.st_dev, st.st_ino, st.st_size, st.st_mtim };
	if (!memcmp(&now, &requests.sig[i], sizeof now))
		return 0;
	requests.sig[i] = now;
	if (!now.exists)
		return 0;
	ssize_t n = sp_od_read(path, buf, sizeof buf, err, sizeof err);
	if (n <= 0 || sp_od_req_parse(buf, (size_t)n, r, err, sizeof err) < 0) {
		if (n != 0 && act)
			sp_warn("ignoring the on-demand request in %s: %s", path, err);
		return 0;
	}
	if (r->id == requests.seen[i])
		return 0;
	requests.seen[i] = r->id;
	return act;
}

/* Takes request r. Poll thread, without sp_col.lock. This function can't fail. */
static void take(const struct sp_od_req *r)
{
	const char *why = NULL;
	char msg[200];
	int gone = atomic_load(&sp_hold.state) == SP_HOLD_GONE;
	pthread_mutex_lock(&sp_col.lock);
	if (sp_col.disabled)
		why = "this process is not profiled (its rank is not selected, or collection failed)";
	else if (r->phase[0] && phase_index(r->phase) < 0) {
		snprintf(msg, sizeof msg, "no phase '%s' in this process%s", r->phase,
			 sp_col.mk[0].name ? "" : ": it has a single phase (ask without --phase)");
		why = msg;
	} else if (requests.req) {
		snprintf(msg, sizeof msg, "request %016llx is still being served", (unsigned long long)requests.req);
		why = msg;
	} else if (r->steps && gone && sp_col.mk[sp_col.cur].kind == SP_MARK_NVTX)
		why = "the marker is NVTX, whose injection a new CUPTI subscription cannot re-arm after stepprof let "
		      "go of CUPTI at the end of its schedule (use --ms, or a schedule window)";
	if (!why) {
		requests.req = r->id;
		requests.pending = r->steps;
		requests.at = r->at;
		requests.timed_ms = r->ms;
		requests.first = -1;
		requests.mk = r->phase[0] ? phase_index(r->phase) : -1;
		requests.have_win = 0;
		sp_col.done = 0; /* the schedule may be done: the marker's callbacks are needed again */
		for (int i = 0; i < sp_col.nmk; i++)
			sp_col.rt[i].done = 0; /* each phase is done again at its next step (windows.c) */
		sp_cbset_apply(); /* nothing if detached: the re-attach's armed hook applies them */
	}
	pthread_mutex_unlock(&sp_col.lock);
	if (why)
		return refuse(r->id, why);
	sp_info("on-demand request %016llx: %lld %s", (unsigned long long)r->id,
		(long long)(r->steps ? r->steps : r->ms),
		r->steps ? "steps from the next step boundary" : "ms from now");
	requests.st.request = r->id;
	requests.st.window = 0;
	requests.st.first = requests.st.last = 0;
	say("armed", r->steps ? "waiting for the next step boundary" : "opening a time range");
}

/* Something wants CUPTI and stepprof let go of it: subscribes anew. Returns 0 if attached (or
 * about to be), -1 if that failed (said). Poll thread, without sp_col.lock. */
static int need_cupti(void)
{
	int st = atomic_load(&sp_hold.state);
	if (st == SP_HOLD_ATTACHED)
		return 0;
	if (st != SP_HOLD_GONE) {
		sp_writer_kick(); /* parked (the writer re-attaches: its passes are slow then), or a detach is under way */
		sp_act_early_tick(); /* parked before the first window: no writer yet, this thread re-attaches */
		return 1; /* next poll */
	}
	/* said before the re-attach: a window may begin at the first step boundary CUPTI reports, before
	 * this thread gets the lock back (on 2 x H200 the first trigger window came out unflagged) */
	pthread_mutex_lock(&sp_col.lock);
	int said = requests.uncounted;
	requests.uncounted |= sp_col.step >= 0;
	pthread_mutex_unlock(&sp_col.lock);
	CUptiResult r = sp_cupti_life_reattach(&sp_col.sub);
	if (r != CUPTI_SUCCESS) {
		const char *msg = "?";
		sp_cupti.cuptiGetResultString(r, &msg);
		sp_warn("cannot re-attach to CUPTI for an on-demand window (%s%s)", msg,
			r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? ": another profiler subscribed since"
									    : "");
		return -1;
	}
	sp_writer_set_pass_ns(0); /* windows close at the usual pace again */
	pthread_mutex_lock(&sp_col.lock);
	if (!said && requests.uncounted)
		sp_info("steps run while detached from CUPTI were not counted: step numbers continue from %lld",
			(long long)sp_col.step);
	if (sp_col.cfg.device_memory || sp_col.cfg.host_malloc) {
		/* levels are tracked from the start: allocations made while detached were not seen, so a
		 * snapshot or a peak now would be wrong; no memory records rather than wrong ones */
		sp_warn("device and host memory are not recorded in on-demand windows after stepprof let go of "
			"CUPTI (allocations made meanwhile were not seen)");
		sp_col.cfg.device_memory = sp_col.cfg.host_malloc = false;
		sp_cbset_apply();
	}
	pthread_mutex_unlock(&sp_col.lock);
	if (sp_cupti_life_enter()) { /* the activity callbacks, here rather than in the marker's callback */
		sp_cupti_life_activity_ready();
		sp_cupti_life_leave();
	}
	return 0;
}

/* Opens a time range now (ms > 0: for that long; 0: to the end). Returns 0, or -1 (no window).
 * Poll thread, without sp_col.lock, CUPTI attached. */
static int open_range(int64_t ms)
{
	uint64_t now = sp_now_ns();
	pthread_mutex_lock(&sp_col.lock);
	sp_col.done = 0;
	requests.timed_open = 1;
	requests.timed_end = ms ? now + (uint64_t)ms * 1000000u : 0;
	int rc = sp_win_open_now(now);
	if (rc < 0)
		requests.timed_open = 0;
	else if (requests.req && !requests.have_win &&
		 sp_col.open) { /* a scheduled window was open: it goes on as the range */
		requests.win = sp_col.open->id;
		requests.have_win = 1;
		requests.win_first = sp_col.step;
	}
	pthread_mutex_unlock(&sp_col.lock);
	sp_info("time range: %s (%lld ms)", rc < 0 ? "no window could open" : "recording", (long long)ms);
	return rc;
}

/* Re-attaches to CUPTI when a request, a trigger's time range or the [ondemand] range's delay
 * wants recording. Returns 0 if the caller goes on, -1 if not now: still re-attaching, or the
 * re-attach failed (the request is refused, the ranges dropped). Poll thread, without sp_col.lock. */
static int attach_if_wanted(uint64_t now, uint64_t t0)
{
	int want;
	pthread_mutex_lock(&sp_col.lock);
	want = requests.pending || requests.timed_ms ||
	       (requests.range == 1 && now >= t0 + (uint64_t)sp_col.cfg.ondemand_delay_ms * 1000000u);
	pthread_mutex_unlock(&sp_col.lock);
	if (want && need_cupti() < 0) {
		uint64_t id;
		pthread_mutex_lock(&sp_col.lock);
		id = requests.req;
		requests.req = 0;
		requests.pending = requests.timed_ms = 0;
		requests.range = 0;
		pthread_mutex_unlock(&sp_col.lock);
		if (id)
			refuse(id, "cannot re-attach to CUPTI (see the process's stderr)");
		return -1;
	}
	if (want && atomic_load(&sp_hold.state) != SP_HOLD_ATTACHED)
		return -1;
	return 0;
}

/* Opens the [ondemand] range once its delay passed, or a trigger's time range. Returns 0, or -1
 * when the trigger's range could not open (its request refused). Poll thread, without sp_col.lock. */
static int open_due_range(uint64_t now, uint64_t t0)
{
	int64_t ms = 0;
	int open = 0;
	pthread_mutex_lock(&sp_col.lock);
	if (requests.range == 1 && now >= t0 + (uint64_t)sp_col.cfg.ondemand_delay_ms * 1000000u &&
	    !requests.timed_open &&
	    !requests.req) {
		requests.range = 2;
		ms = sp_col.cfg.ondemand_duration_ms;
		open = 1;
	} else if (requests.timed_ms && !requests.timed_open) {
		ms = requests.timed_ms;
		requests.timed_ms = 0;
		open = 2;
	}
	pthread_mutex_unlock(&sp_col.lock);
	if (open && open_range(ms) < 0 && open == 2) {
		pthread_mutex_lock(&sp_col.lock);
		uint64_t id = requests.req;
		requests.req = 0;
		pthread_mutex_unlock(&sp_col.lock);
		refuse(id, "no window could open (see the process's stderr)");
		return -1;
	}
	return 0;
}

/* Closes a time range that ran its length, and moves the request on (recording, written) with its
 * state file. This function can't fail. Poll thread, without sp_col.lock. */
static void settle_request(void)
{
	pthread_mutex_lock(&sp_col.lock);
	if (requests.timed_open && requests.timed_end && sp_now_ns() >= requests.timed_end) {
		requests.win_last = sp_col.step;
		sp_win_close_now(sp_now_ns());
		requests.timed_open = 0;
		if (requests.range == 2)
			requests.range = 0;
	}
	/* the request's window: recording while its slot is used, written once the writer let it go */
	int used = 0;
	for (int i = 0; requests.have_win && i < SP_MAX_WINDOWS; i++)
		used |= sp_col.win[i].used && sp_col.win[i].id == requests.win;
	if (requests.have_win && requests.first >= 0) {
		requests.win_first = requests.first;
		requests.win_last = requests.last;
	}
	uint64_t id = requests.req;
	int state = !id ? 0 : !requests.have_win ? 1 : used || requests.timed_open ? 2 : 3;
	const char *note = requests.uncounted ? "steps run while stepprof was detached from CUPTI were not counted: "
					  "the step numbers continue the count from before"
					: "";
	if (state == 1 && requests.first >= 0 && sp_col.step > requests.last) {
		/* its steps passed without a window of its own: a scheduled window held them, or none
		 * could open (warned) */
		state = 3;
		requests.win = sp_col.next_window_id ? sp_col.next_window_id - 1 : 0;
		requests.win_first = requests.first;
		requests.win_last = requests.last;
		note = sp_col.next_window_id ? "the steps fell inside a window the schedule had opened (this one)"
					     : "no window could open (see the process's stderr)";
	}
	int64_t wf = requests.win_first, wl = requests.win_last;
	uint32_t win = requests.win;
	if (state == 3) {
		requests.req = 0;
		requests.first = -1;
		requests.have_win = 0;
	}
	if (sp_col.writer_started > 0 && !requests.st.trace[0])
		snprintf(requests.st.trace, sizeof requests.st.trace, "%s", sp_writer_path());
	int rank = sp_col.ri.rank;
	pthread_mutex_unlock(&sp_col.lock);
	requests.st.rank = rank;
	if (state == 2 && strcmp(requests.st.state, "recording"))
		say("recording", "");
	if (state == 3) {
		requests.st.window = win;
		requests.st.first = wf;
		requests.st.last = wl;
		say("written", note);
	}
	if (state == 0 && !strcmp(requests.st.state, "idle"))
		say("idle", ""); /* a rank learned late */
}

/* Moves the request and the time range on at time now. Poll thread, without sp_col.lock. */
static void advance(uint64_t now, uint64_t t0)
{
	if (attach_if_wanted(now, t0) < 0 || open_due_range(now, t0) < 0)
		return;
	settle_request();
}

/* Finds and checks the control directory and names the files. Returns 0, or -1 (warned). */
static int set_up_files(void)
{
	char dir[SP_CFG_PATH], host[64], err[600];
	if (sp_out_dir(dir, sizeof dir) < 0)
		return -1; /* said once: the traces cannot be written either */
	snprintf(requests.ctl, sizeof requests.ctl, "%s/" SP_OD_DIR, dir);
	if (sp_od_check_dir(requests.ctl, 1, err, sizeof err) < 0) {
		sp_warn("%s; no on-demand windows (stepprof trigger) in this process", err);
		return -1;
	}
	sp_od_host_name(host, sizeof host);
	char tag[16];
	int pid = sp_name_pid(tag, sizeof tag); /* the trace's: a tag in a pid namespace */
	snprintf(requests.name[0], sizeof requests.name[0], SP_OD_JOB);
	snprintf(requests.name[1], sizeof requests.name[1], SP_OD_JOB ".%s.%d%s", host, pid, tag);
	snprintf(requests.status_name, sizeof requests.status_name, "%s.%d%s.status", host, pid, tag);
	requests.ctl_fd = open(requests.ctl, O_PATH | O_DIRECTORY | O_CLOEXEC);
	requests.st.pid = (int)getpid();
	requests.st.rank = sp_col.ri.rank;
	snprintf(requests.st.host, sizeof requests.st.host, "%s", host);
	requests.st.start = sp_od_proc_start(0);
	requests.st.pidns = sp_pidns();
	requests.st.poll_ms = sp_col.cfg.ondemand_poll_ms;
	requests.files = 1;
	return 0;
}

/* The thread: polls, takes requests, moves windows on. All signals blocked. Until the process
 * creates a CUDA context it only waits (a launcher that merely counts GPUs writes nothing). */
static void *od_main(void *arg)
{
	struct sp_od_req r;
	uint64_t t0 = sp_now_ns();
	int ready = 0;
	pthread_setname_np(pthread_self(), "stepprof-od");
	sp_mem_self = 1;
	pthread_mutex_lock(&requests.mu);
	while (!requests.stopping) {
		if (!ready && atomic_load_explicit(&sp_col.had_context, memory_order_relaxed)) {
			ready = 1;
			pthread_mutex_unlock(&requests.mu);
			if (sp_col.cfg.ondemand_trigger && set_up_files() == 0) {
				for (int i = 0; i < 2; i++)
					poll_file(i, &r, 0); /* requests older than this process are not for it */
				say("idle", "");
			}
			pthread_mutex_lock(&requests.mu);
		}
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		uint64_t ns = (uint64_t)sp_col.cfg.ondemand_poll_ms * 1000000u;
		if (requests.range == 1 || requests.timed_open)
			ns = ns > 20000000u ? 20000000u : ns; /* a range's edges: 20 ms at worst */
		until.tv_sec += (time_t)(ns / 1000000000u);
		until.tv_nsec += (long)(ns % 1000000000u);
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_clockwait(&requests.cv, &requests.mu, CLOCK_MONOTONIC, &until);
		if (requests.stopping)
			break;
		if (!ready)
			continue;
		pthread_mutex_unlock(&requests.mu);
		for (int i = 0; requests.files && i < 2; i++)
			if (poll_file(i, &r, 1))
				take(&r);
		advance(sp_now_ns(), t0);
		pthread_mutex_lock(&requests.mu);
	}
	pthread_mutex_unlock(&requests.mu);
	return NULL;
}

enum sp_action sp_od_action(int64_t step)
{
	if (requests.timed_open)
		return SP_ACT_RECORD;
	if (requests.pending && step > sp_col.step && (!requests.at || sp_realtime_ns() >= requests.at) &&
	    (requests.mk < 0 || requests.mk == sp_col.cur)) {
		requests.mk = sp_col.cur; /* steps of the phase that steps first, unless the request named one */
		requests.first = step;
		requests.last = step + requests.pending - 1;
		requests.pending = 0;
		sp_info("on-demand window: steps %lld-%lld", (long long)requests.first, (long long)requests.last);
	}
	const struct sp_mk *m = &sp_col.mk[sp_col.cur];
	/* the schedule counts the preferred regime's steps only (docs/STEPS.md, "Regimes") */
	enum sp_action sched = sp_schedule_action(m->schedule, sp_stepdet_sched_step(m->det, step));
	if (requests.first >= 0 && requests.mk == sp_col.cur && step >= requests.first && step <= requests.last &&
	    !sp_win_is_record(sched))
		return step == requests.last ? SP_ACT_RECORD_AND_SAVE : SP_ACT_RECORD;
	return sched; /* a scheduled window goes on as planned: the request's steps are inside it */
}

int sp_od_busy(void)
{
	return requests.pending || requests.timed_ms || requests.timed_open || requests.range == 1 ||
		(requests.first >= 0 && sp_col.step < requests.last);
}

uint8_t sp_od_window_origin(uint32_t id, int64_t step)
{
	uint8_t o = SP_WIN_SCHEDULE;
	if (requests.timed_open)
		o = SP_WIN_TIMED;
	else if (requests.first >= 0 && step >= requests.first && step <= requests.last)
		o = SP_WIN_TRIGGER;
	if (o != SP_WIN_SCHEDULE && requests.req && !requests.have_win) {
		requests.win = id;
		requests.have_win = 1;
		requests.win_first = requests.win_last = step;
	}
	return (uint8_t)(o | (requests.uncounted ? SP_WIN_UNCOUNTED : 0));
}

int sp_od_start(void)
{
	const struct sp_config *c = &sp_col.cfg;
	int range = c->ondemand_delay_ms > 0 || c->ondemand_duration_ms > 0;
	if (!c->ondemand_trigger && !range)
		return 0;
	requests.range = range;
	int err = sp_thread_start(&requests.thread, od_main, NULL);
	if (err) {
		sp_warn("cannot start the on-demand thread: %s; no on-demand windows", strerror(err));
		return -1;
	}
	requests.started = 1;
	return 0;
}

void sp_od_stop(void)
{
	if (!requests.started)
		return;
	pthread_mutex_lock(&requests.mu);
	requests.stopping = 1;
	pthread_cond_signal(&requests.cv);
	pthread_mutex_unlock(&requests.mu);
	pthread_join(requests.thread, NULL);
	requests.started = 0;
	pthread_mutex_lock(&sp_col.lock);
	uint64_t id = requests.req;
	int bound = requests.have_win;
	pthread_mutex_unlock(&sp_col.lock);
	if (id)
		say("exited", bound ? "the process exited inside the window: it ends at the exit"
				    : "the process exited before a step boundary came");
	else
		say("exited", "");
	if (requests.ctl_fd >= 0)
		close(requests.ctl_fd);
	requests.ctl_fd = -1;
}
