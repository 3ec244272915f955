/* SPDX-License-Identifier: MIT */
/* cmd_trigger.c - `stepprof trigger`: asks running, preloaded processes (one, or every one of a
 * job's output directory) to record the next N steps or milliseconds, through the control files
 * of config/odctl.h; says which processes answered and, with --wait, which windows they wrote.
 * Never signals a process. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "opts.h"
#include "config/odctl.h"
#include "config/run.h"

#define MAX_PROCS 4096
#define REACH_SLACK_MS 1500 /* beyond two poll periods of the slowest process */

struct proc {
	char ctl[PATH_MAX];          /* its control directory */
	char status_name[128];       /* HOST.PID.status there (HOST.PID.TAG.status in a pid namespace) */
	struct sp_od_status st;      /* as last read */
	int local;     /* on this host and in this pid namespace: its liveness can be checked */
	int alive;     /* running when the request was written (or not checkable) */
	int reached, done;           /* answered the request; its window is written (or refused, exited) */
};

const struct sp_cmd_spec sp_spec_trigger = {
	.name = "trigger",
	.fn = sp_cmd_trigger,
	.operands = "PID ... | --job DIR",
	.complete = "",
	.summary = "record a window now in running processes, on demand",
	.text = "  Asks running processes that stepprof profiles (LD_PRELOAD, [ondemand] trigger = true, the\n"
		"  default) to record a window now, whatever their schedule says: the next N whole steps from\n"
		"  the next step boundary (--count, default 3), or MS milliseconds from now (--ms, for programs\n"
		"  without steps). PID: one process (its output directory is found through /proc/PID/fd);\n"
		"  --job DIR: every process writing into the output directory DIR (every selected rank, all\n"
		"  hosts sharing DIR). The request is a file in DIR/.stepprof, which each process checks every\n"
		"  [ondemand] poll_ms (500 ms) with one stat(); no signal is sent. Prints which processes\n"
		"  answered. Exit status: 0 every live process answered (and wrote its window, with --wait);\n"
		"  1 otherwise; 2 usage.\n",
	.opt = (const struct sp_opt[]){
		{ "count", 's', 0, "N", "record the next N steps (default 3)" },
		{ "steps", 's', 0, "N", NULL },
		{ "ms", 'm', 0, "MS", "record MS milliseconds instead of steps" },
		{ "job", 'j', 0, "DIR", "every process writing into the output directory DIR" },
		{ "phase", 'p', 0, "NAME", "count the steps of [phase.NAME]" },
		{ "wait", 'w', 0, NULL, "wait until each has written its window and name the trace files" },
		{ "timeout", 't', 0, "SEC", "with --wait: wait at most SEC seconds (default 600)" },
		{ 0 } },
};

static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_trigger, f);
	return rc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Reads p's status file. Returns 0, or -1 (unreadable or malformed: err says why). */
static int read_status(struct proc *p, char *err, size_t elen)
{
	char path[PATH_MAX + 160], buf[SP_OD_MAX_BYTES + 1];
	snprintf(path, sizeof path, "%s/%s", p->ctl, p->status_name);
	ssize_t n = sp_od_read(path, buf, sizeof buf, err, elen);
	if (n == 0)
		snprintf(err, elen, "%.300s is gone", p->status_name);
	if (n <= 0)
		return -1;
	return sp_od_status_parse(buf, (size_t)n, &p->st, err, elen);
}

/* Adds the process of status file `name` in ctl to procs. Returns 0, or -1 (said on stderr). */
static int add_proc(struct proc *procs, int *n, const char *ctl, const char *name, const char *host)
{
	char err[400];
	if (*n >= MAX_PROCS) {
		fprintf(stderr, "stepprof trigger: more than %d processes in %s; the others are not asked\n", MAX_PROCS,
			ctl);
		return -1;
	}
	struct proc *p = &procs[*n];
	memset(p, 0, sizeof *p);
	snprintf(p->ctl, sizeof p->ctl, "%s", ctl);
	snprintf(p->status_name, sizeof p->status_name, "%s", name);
	if (read_status(p, err, sizeof err) < 0) {
		fprintf(stderr, "stepprof trigger: ignoring %s/%s: %s\n", ctl, name, err);
		return -1;
	}
	/* another pid namespace (a container) on a host of the same name: its pid is not ours to check */
	unsigned long long ns = sp_pidns();
	p->local = !strcmp(p->st.host, host) && (!p->st.pidns || !ns || p->st.pidns == ns);
	p->alive = strcmp(p->st.state, "exited") &&
		   (!p->local || (p->st.start && sp_od_proc_start(p->st.pid) == p->st.start));
	(*n)++;
	return 0;
}

/* Every process that ever wrote a status into ctl (live or not). Returns how many. */
static int scan_job(struct proc *procs, const char *ctl, const char *host)
{
	int n = 0;
	DIR *d = opendir(ctl);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (e->d_name[0] != '.' && l > 7 && l < 128 && !strcmp(e->d_name + l - 7, ".status"))
			add_proc(procs, &n, ctl, e->d_name, host);
	}
	if (d)
		closedir(d);
	return n;
}

/* The status file name in ctl of the live process pid on this host (HOST.PID.status, or
 * HOST.PID.TAG.status in a pid namespace: the one whose start time is pid's), into name. Returns 0,
 * or -1 (err says why). */
static int find_status(const char *ctl, const char *host, long pid, char *name, size_t len, char *err, size_t elen)
{
	char path[PATH_MAX + 160], buf[SP_OD_MAX_BYTES + 1], prefix[128];
	struct sp_od_status st;
	uint64_t start = sp_od_proc_start((int)pid);
	snprintf(name, len, "%s.%ld.status", host, pid);
	snprintf(path, sizeof path, "%s/%s", ctl, name);
	if (!access(path, F_OK))
		return 0;
	int n = snprintf(prefix, sizeof prefix, "%s.%ld.", host, pid), found = -1;
	DIR *d = opendir(ctl);
	struct dirent *e;
	while (d && found < 0 && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (strncmp(e->d_name, prefix, (size_t)n) || l < 8 || l >= len || strcmp(e->d_name + l - 7, ".status"))
			continue;
		snprintf(path, sizeof path, "%s/%s", ctl, e->d_name);
		ssize_t k = sp_od_read(path, buf, sizeof buf, err, elen);
		if (k > 0 && !sp_od_status_parse(buf, (size_t)k, &st, err, elen) && st.pid == pid && st.start == start) {
			snprintf(name, len, "%s", e->d_name);
			found = 0;
		}
	}
	if (d)
		closedir(d);
	if (found < 0)
		snprintf(err, elen, "no status file %s.%ld[.TAG].status in %.300s", host, pid, ctl);
	return found;
}

/* The control directory process pid holds open (collector/ondemand/ondemand.c), into ctl. Returns 0 or -1. */
static int find_ctl(int pid, char *ctl, size_t len)
{
	char fds[64], link[PATH_MAX + 64], target[PATH_MAX];
	snprintf(fds, sizeof fds, "/proc/%d/fd", pid);
	DIR *d = opendir(fds);
	struct dirent *e;
	int rc = -1;
	while (d && rc < 0 && (e = readdir(d))) {
		snprintf(link, sizeof link, "%s/%s", fds, e->d_name);
		ssize_t n = readlink(link, target, sizeof target - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		size_t l = strlen(target), s = strlen("/" SP_OD_DIR);
		if (l > s && !strcmp(target + l - s, "/" SP_OD_DIR)) {
			snprintf(ctl, len, "%s", target);
			rc = 0;
		}
	}
	if (d)
		closedir(d);
	return rc;
}

/* Polls the status files until every live process answered request id (phase 0) or finished its
 * window (phase 1), or until the deadline. Prints each change. */
static void watch(struct proc *procs, int n, uint64_t id, int phase, uint64_t deadline)
{
	char err[400];
	for (;;) {
		int pending = 0;
		for (int i = 0; i < n; i++) {
			struct proc *p = &procs[i];
			if (!p->alive || (phase == 0 ? p->reached : p->done || !p->reached))
				continue;
			if (read_status(p, err, sizeof err) < 0 || p->st.request != id) {
				pending++;
				continue;
			}
			int fin = !strcmp(p->st.state, "written") || !strcmp(p->st.state, "refused") ||
				  !strcmp(p->st.state, "exited");
			if (phase == 0) {
				p->reached = 1;
				printf("  rank %d pid %d on %s: reached (%s%s%s)\n", p->st.rank, p->st.pid, p->st.host,
				       p->st.state, p->st.note[0] ? ": " : "", p->st.note);
				if (!strcmp(p->st.state, "refused"))
					p->done = 1;
			} else if (fin) {
				p->done = 1;
				if (!strcmp(p->st.state, "written"))
					printf("  rank %d pid %d on %s: window %u written, steps %" PRId64 "-%" PRId64
					       ", in %s%s%s\n",
					       p->st.rank, p->st.pid, p->st.host, p->st.window, p->st.first, p->st.last,
					       p->st.trace, p->st.note[0] ? "; " : "", p->st.note);
				else
					printf("  rank %d pid %d on %s: %s%s%s\n", p->st.rank, p->st.pid, p->st.host,
					       p->st.state, p->st.note[0] ? ": " : "", p->st.note);
			}
			if (phase == 0 ? !p->reached : !p->done)
				pending++;
		}
		fflush(stdout);
		if (!pending || now_ms() >= deadline)
			return;
		usleep(50000);
	}
}

/* The longest poll period of the live processes, in ms. This function can't fail. */
static int slowest_poll(const struct proc *procs, int n)
{
	int poll = 0;
	for (int i = 0; i < n; i++)
		poll = procs[i].alive && procs[i].st.poll_ms > poll ? procs[i].st.poll_ms : poll;
	return poll;
}

/* Several processes: their windows begin at the first step boundary after a moment all of them
 * will have read the request by (two of the slowest poll periods and a margin, wall clock), so
 * that the ranks of a job that step together record the same steps. Rewrites text. Returns 0, or
 * -1 (said). */
static int set_at(struct sp_od_req *r, const struct proc *procs, int n, char *text, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	r->at = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
		(2u * (uint64_t)slowest_poll(procs, n) + 200u) * 1000000u;
	if (sp_od_req_format(r, text, len) < 0) {
		fprintf(stderr, "stepprof trigger: request too long\n");
		return -1;
	}
	return 0;
}

/* Reads the options into r (steps or ms, phase), *job, *wait and *timeout. Returns -1 to go on, or
 * the exit status: 0 after --help, 2 after a message (a bad value, --count with --ms, neither or
 * both of PID and --job). */
static int read_options(int argc, char **argv, struct sp_od_req *r, const char **job, int *wait, long long *timeout)
{
	int c;

	optind = 0;
	while ((c = sp_opts_next(&sp_spec_trigger, argc, argv)) != -1) {
		long long v = 0;
		if (c == 'h')
			return usage(stdout, 0);
		if ((c == 's' && sp_opts_count("trigger", "count", optarg, 1, SP_OD_MAX_STEPS, &v) < 0) ||
		    (c == 'm' && sp_opts_count("trigger", "ms", optarg, 1, SP_OD_MAX_MS, &v) < 0) ||
		    (c == 't' && sp_opts_count("trigger", "timeout", optarg, 1, 86400, &v) < 0))
			return 2;
		if (c == 's')
			r->steps = v;
		else if (c == 'm')
			r->ms = v;
		else if (c == 't')
			*timeout = v;
		else if (c == 'w')
			*wait = 1;
		else if (c == 'j')
			*job = optarg;
		else if (c == 'p') {
			if (strlen(optarg) >= sizeof r->phase) {
				fprintf(stderr, "stepprof trigger: --phase: longer than %zu characters\n",
					sizeof r->phase - 1);
				return 2;
			}
			strcpy(r->phase, optarg);
		} else {
			return usage(stderr, 2);
		}
	}
	if (r->steps && r->ms) {
		fprintf(stderr, "stepprof trigger: --count and --ms exclude each other\n");
		return 2;
	}
	if (!r->steps && !r->ms)
		r->steps = 3;
	if (!*job == (optind >= argc)) {
		fprintf(stderr, "stepprof trigger: name processes (PID ...) or a job's output directory (--job DIR), "
				"one of the two\n");
		return usage(stderr, 2);
	}
	return -1;
}

/* Formats r into text and reads it back as the processes will. Returns 0, or -1 after a message. */
static int format_request(const struct sp_od_req *r, char *text, size_t len)
{
	struct sp_od_req back;
	char err[600];
	int n = sp_od_req_format(r, text, len);
	if (n < 0 || sp_od_req_parse(text, (size_t)n, &back, err, sizeof err) < 0) { /* what processes accept */
		fprintf(stderr, "stepprof trigger: %s\n",
			n < 0                    ? "request too long"
			: strstr(err, "'phase'") ? "--phase: not a phase name ([A-Za-z0-9_.-], at most 63 characters)"
						 : err);
		return -1;
	}
	return 0;
}

/* --job: writes the request (text, rewritten with a common start for several processes) for every
 * live process of the output directory job, whose processes go into procs (*n). Returns 0, or -1
 * after a message (no control directory, no live process, the request not written). */
static int ask_job(struct proc *procs, int *n, struct sp_od_req *r, const char *job, const char *host, char *text,
		   size_t len, const char *what)
{
	char ctl[PATH_MAX], err[600];
	snprintf(ctl, sizeof ctl, "%s/" SP_OD_DIR, job);
	if (sp_od_check_dir(ctl, 0, err, sizeof err) < 0) {
		fprintf(stderr,
			"stepprof trigger: %s (is %s the output directory of a running job, started with "
			"[ondemand] trigger = true?)\n",
			err, job);
		return -1;
	}
	*n = scan_job(procs, ctl, host);
	int live = 0;
	for (int i = 0; i < *n; i++)
		live += procs[i].alive;
	if (live > 1 && r->steps && set_at(r, procs, *n, text, len) < 0)
		return -1;
	if (!live) {
		fprintf(stderr, "stepprof trigger: no running process in %s (%d exited)\n", job, *n);
		return -1;
	}
	if (sp_od_write(ctl, SP_OD_JOB, text) < 0) {
		fprintf(stderr, "stepprof trigger: cannot write %s/%s: %s\n", ctl, SP_OD_JOB, strerror(errno));
		return -1;
	}
	printf("stepprof trigger: request %016" PRIx64 " (%s) to %d running process%s in %s\n", r->id, what, live,
	       live == 1 ? "" : "es", job);
	return 0;
}

/* PID ...: writes the request text for each of the npids processes pids names; those asked go into
 * procs (*n). Returns 0, 1 when one could not be asked (said on stdout), or 2 after a message for
 * an operand that is not a process id. */
static int ask_pids(struct proc *procs, int *n, char **pids, int npids, uint64_t id, const char *host,
		    const char *text, const char *what)
{
	char err[600], *end;
	int rc = 0;

	printf("stepprof trigger: request %016" PRIx64 " (%s) to %d process%s\n", id, what, npids,
	       npids == 1 ? "" : "es");
	for (int i = 0; i < npids; i++) {
		long pid = strtol(pids[i], &end, 10);
		char ctl[PATH_MAX], name[160];
		if (*end || end == pids[i] || pid <= 0 || pid > INT_MAX) {
			fprintf(stderr, "stepprof trigger: '%s' is not a process id\n", pids[i]);
			return 2;
		}
		if (find_ctl((int)pid, ctl, sizeof ctl) < 0) {
			printf("  pid %ld: not reached (not running, another user's, not preloaded with "
			       "stepprof, "
			       "CUDA not initialised yet, or [ondemand] trigger = false)\n",
			       pid);
			rc = 1;
			continue;
		}
		if (sp_od_check_dir(ctl, 0, err, sizeof err) < 0 ||
		    find_status(ctl, host, pid, name, sizeof name, err, sizeof err) < 0 ||
		    add_proc(procs, n, ctl, name, host) < 0) {
			printf("  pid %ld: not reached (%s)\n", pid, err);
			rc = 1;
			continue;
		}
		char req[160]; /* trigger.HOST.PID[.TAG]: the status file's name less .status */
		snprintf(req, sizeof req, SP_OD_JOB ".%.*s", (int)(strlen(name) - 7), name);
		snprintf(name, sizeof name, "%s", req);
		if (sp_od_write(ctl, name, text) < 0) {
			printf("  pid %ld: not reached (cannot write %s/%s: %s)\n", pid, ctl, name, strerror(errno));
			procs[--*n].alive = 0;
			rc = 1;
		}
	}
	return rc;
}

/* Waits for the n processes asked to answer request id, and with wait for their windows (at most
 * timeout seconds), naming each. Returns 0 when every live one answered (and wrote its window,
 * with wait), else 1. */
static int await_answers(struct proc *procs, int n, uint64_t id, int wait, long long timeout)
{
	int rc = 0, poll = slowest_poll(procs, n);
	fflush(stdout);
	watch(procs, n, id, 0, now_ms() + 2u * (uint64_t)poll + REACH_SLACK_MS);
	for (int i = 0; i < n; i++)
		if (procs[i].alive && !procs[i].reached) {
			printf("  rank %d pid %d on %s: not reached within %.1f s%s\n", procs[i].st.rank,
			       procs[i].st.pid, procs[i].st.host, (2.0 * poll + REACH_SLACK_MS) / 1e3,
			       procs[i].local ? "" : " (on another host: the output directory must be shared)");
			rc = 1;
		} else if (procs[i].reached && !strcmp(procs[i].st.state, "refused"))
			rc = 1;
	if (wait) {
		watch(procs, n, id, 1, now_ms() + (uint64_t)timeout * 1000u);
		for (int i = 0; i < n; i++)
			if (procs[i].reached && !procs[i].done) {
				printf("  rank %d pid %d on %s: no window written within %lld s (%s)\n",
				       procs[i].st.rank, procs[i].st.pid, procs[i].st.host, timeout, procs[i].st.state);
				rc = 1;
			} else if (procs[i].reached && strcmp(procs[i].st.state, "written"))
				rc = 1;
	}
	return rc;
}

/* Exit status: 0 every live process answered (and wrote its window, with --wait); 1 a process
 * could not be asked or did not answer; 2 usage. */
int sp_cmd_trigger(int argc, char **argv)
{
	struct sp_od_req r = { 0 };
	const char *job = NULL;
	int wait = 0, n = 0, rc;
	long long timeout = 600;
	char host[64], text[SP_OD_MAX_BYTES], what[64];

	rc = read_options(argc, argv, &r, &job, &wait, &timeout);
	if (rc >= 0)
		return rc;
	struct proc *procs = calloc(MAX_PROCS, sizeof *procs);
	if (!procs) {
		fprintf(stderr, "stepprof trigger: out of memory\n");
		return 1;
	}
	sp_od_host_name(host, sizeof host);
	r.id = sp_od_new_id();
	if (format_request(&r, text, sizeof text) < 0) {
		free(procs);
		return 2;
	}
	snprintf(what, sizeof what, "%" PRId64 " %s", r.steps ? r.steps : r.ms, r.steps ? "steps" : "ms");
	if (job)
		rc = ask_job(procs, &n, &r, job, host, text, sizeof text, what) < 0 ? 1 : 0;
	else
		rc = ask_pids(procs, &n, argv + optind, argc - optind, r.id, host, text, what);
	if ((job && rc) || rc == 2) {
		free(procs);
		return rc;
	}
	if (await_answers(procs, n, r.id, wait, timeout))
		rc = 1;
	free(procs);
	return rc;
}
