/* SPDX-License-Identifier: MIT */
/* cli.c - what the subcommands of cli.h share in parsing their arguments: the messages for a
 * bad option and for arguments beyond those a command takes, and the check that several traces
 * come from one run. Prints only to stderr. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "config/config.h"
#include "config/version.h"
#include "export.h"
#include "trace/trace.h"
#include "util.h"

void sp_cli_bad_option(const char *cmd, int c, int argc, char **argv)
{
	const char *arg = argv[optind - 1];
	char letter[3] = { '-', (char)optopt, 0 };

	/* A long option is the whole argument optind has just passed (optopt is 0 when unknown);
	 * a short one is the letter optopt, maybe inside a cluster (-xy) optind has not passed yet. */
	if (optopt && (strncmp(arg, "--", 2) || (optind < argc && argv[optind][0] == '-' && argv[optind][1] != '-' &&
						 strchr(argv[optind], optopt))))
		arg = letter;
	if (c == ':')
		fprintf(stderr, "stepprof %s: option '%s' wants a value\n", cmd, arg);
	else
		fprintf(stderr, "stepprof %s: unexpected argument '%s'\n", cmd, arg);
}

int sp_cli_operands(const char *cmd, int argc, char **argv, int min, int max)
{
	if (argc - optind > max) {
		const char *x = argv[optind + max];
		size_t n = strlen(x);
		if (max == 1 && n > 8 && !strcmp(x + n - 8, ".sptrace")) /* a glob matched several traces */
			fprintf(stderr,
				"stepprof %s: one trace at a time, got %d (%s, %s%s); for several ranks of one "
				"run: stepprof steps, stepprof convert --merge-ranks\n",
				cmd, argc - optind, argv[optind], x, argc - optind > 2 ? ", ..." : "");
		else
			fprintf(stderr, "stepprof %s: unexpected argument '%s'\n", cmd, x);
		return -1;
	}
	return argc - optind < min ? -1 : 0;
}

int sp_cli_window(const char *cmd, const char *arg, long long *window)
{
	char *end;
	long long v;

	if (!strcmp(arg, "all")) {
		*window = -1;
		return 0;
	}
	v = strtoll(arg, &end, 10);
	if (*arg < '0' || *arg > '9' || *end || v < 0 || v > UINT32_MAX) {
		fprintf(stderr, "stepprof %s: --window wants N (a window id) or all, not '%s'\n", cmd, arg);
		return -1;
	}
	*window = v;
	return 0;
}

char *sp_cli_out_path(const char *dir, const char *trace, const char *suffix)
{
	const char *base = strrchr(trace, '/') ? strrchr(trace, '/') + 1 : trace;
	size_t n = strlen(base), d = dir ? strlen(dir) : 0;
	char *name;

	n -= n > 8 && !strcmp(base + n - 8, ".sptrace") ? 8 : 0;
	while (d > 1 && dir[d - 1] == '/')
		d--;
	if (asprintf(&name, "%.*s%s%.*s%s", (int)d, d ? dir : "", d && dir[d - 1] != '/' ? "/" : "", (int)n, base,
		     suffix) < 0)
		sp_oom();
	return name;
}

int sp_cli_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

void sp_cli_ids_add(char *ids, size_t n, unsigned id)
{
	size_t len = strnlen(ids, n);

	if (len + 16 < n)
		snprintf(ids + len, n - len, "%s%u", len ? ", " : "", id);
	else if (len + 4 < n && strcmp(ids + len - 3, "..."))
		snprintf(ids + len, n - len, ", ...");
}

void sp_cli_no_window(const char *cmd, const char *trace, long long window, int seen, const char *ids,
		      int truncated)
{
	const char *cut = truncated ? ": the file was cut short (a killed job?) and holds only what came before"
				    : "";

	if (window >= 0 && seen)
		fprintf(stderr, "stepprof %s: %s has no window %lld; %s %s%s\n", cmd, trace, window,
			seen == 1 ? "its only window is" : "its windows:", ids, cut);
	else if (truncated)
		fprintf(stderr,
			"stepprof %s: %s holds no complete window: the file was cut short (a killed job?) before "
			"its first window was written; stepprof dump shows what it holds\n",
			cmd, trace);
	else
		fprintf(stderr,
			"stepprof %s: %s holds no recorded window (no step was recorded: check the schedule "
			"with stepprof schedule, and STEPPROF_VERBOSE=1 in the run)\n",
			cmd, trace);
}

/* What one trace's header says about its run, for sp_cli_one_run. */
struct run_of {
	const char *path;
	char run[64];           /* "" for a version-1 trace */
	int rank, pid;
	int group;              /* index of the first trace with the same run id */
};

/* Returns 0, or 1 after printing the runs found or the rank given twice. A trace that can't be
 * opened is skipped here: the command's own reading reports it. */
int sp_cli_one_run(const char *cmd, char *const *paths, size_t n)
{
	struct run_of *t = calloc(n ? n : 1, sizeof(*t));
	size_t ngroups = 0;
	char err[512];
	int rc = 0;

	if (!t)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct sp_trace_reader *r = sp_trace_open(paths[i], err, sizeof(err));
		t[i] = (struct run_of){ .path = paths[i], .rank = -2, .group = -1 };
		if (!r)
			continue;
		const struct sp_trace_meta *m = &sp_trace_header(r)->meta;
		snprintf(t[i].run, sizeof(t[i].run), "%s", m->run_id);
		t[i].rank = m->rank;
		t[i].pid = m->pid;
		sp_trace_close_reader(r);
		for (size_t j = 0; j < i && t[i].group < 0; j++)
			if (t[j].group >= 0 && !strcmp(t[j].run, t[i].run))
				t[i].group = t[j].group;
		if (t[i].group < 0)
			t[i].group = (int)i, ngroups++;
	}
	if (ngroups > 1) {
		fprintf(stderr,
			"stepprof %s: these traces come from %zu different runs; give the traces of one "
			"run (one folder, stepprof-traces/RUN/):\n",
			cmd, ngroups);
		for (size_t g = 0; g < n; g++) {
			if (t[g].group != (int)g)
				continue;
			fprintf(stderr, "  run %s:", t[g].run[0] ? t[g].run : "(none: written before stepprof 0.2)");
			for (size_t i = g; i < n; i++)
				if (t[i].group == (int)g)
					fprintf(stderr, " %s", t[i].path);
			fputc('\n', stderr);
		}
		rc = 1;
	}
	for (size_t i = 0; i < n && !rc; i++)
		for (size_t j = 0; j < i && !rc; j++)
			if (t[i].group >= 0 && t[i].group == t[j].group && t[i].rank >= 0 && t[i].rank == t[j].rank) {
				fprintf(stderr,
					"stepprof %s: %s and %s are both rank %d of run %s (a restarted "
					"worker, or two runs without a run id?); give one trace per rank\n",
					cmd, t[j].path, t[i].path, t[i].rank, t[i].run[0] ? t[i].run : "(none)");
				rc = 1;
			}
	free(t);
	return rc;
}

void sp_cli_json_head(struct sp_out *x, const char *cmd)
{
	sp_out_printf(x, "\"schema\":\"stepprof.%s\",\"schema_version\":%d,\"stepprof_version\":\"%s\",", cmd,
		      SP_JSON_SCHEMA_VERSION, SP_VERSION);
}

int sp_cli_set_split(const char *typed, const char *section, char *sec, size_t slen, char *key, size_t klen,
		     const char **value)
{
	const char *kv = typed, *eq, *dot = NULL;

	if (!strncmp(kv, "--ranks ", 8)) {
		snprintf(sec, slen, "ranks");
		snprintf(key, klen, "ranks");
		*value = kv + 8;
		return 0;
	}
	if (!strncmp(kv, "--set ", 6))
		kv += 6;
	eq = strchr(kv, '=');
	for (const char *p = kv; eq && p < eq; p++) /* the last dot: a phase's section has one too */
		dot = *p == '.' ? p : dot;
	if (!eq || (!dot && !section) || (dot ? eq - dot - 1 : eq - kv) < 1 || (dot && dot == kv) ||
	    (size_t)(eq - kv) >= klen || (dot && (size_t)(dot - kv) >= slen))
		return -1;
	snprintf(sec, slen, "%.*s", dot ? (int)(dot - kv) : (int)strlen(section), dot ? kv : section);
	snprintf(key, klen, "%.*s", dot ? (int)(eq - dot - 1) : (int)(eq - kv), dot ? dot + 1 : kv);
	*value = eq + 1;
	return 0;
}

int sp_cli_config(struct sp_config *cfg, const char *file, char *const *sets, int nsets, const char *section,
		  struct sp_cfg_errors *errs)
{
	const char *path = file && *file ? file : getenv("STEPPROF_CONFIG");
	char sec[64], key[64], msg[320];
	const char *value;

	errs->count = 0;
	sp_cfg_defaults(cfg);
	if (path && *path)
		sp_cfg_load_file(cfg, path, errs);
	sp_cfg_load_env(cfg, NULL, errs);
	for (int i = 0; i < nsets; i++) {
		if (sp_cli_set_split(sets[i], section, sec, sizeof sec, key, sizeof key, &value) < 0) {
			snprintf(msg, sizeof msg, "%s: expected %sSECTION.KEY=VALUE (e.g. %s)", sets[i],
				 section ? "KEY=VALUE or " : "", section ? "wait=2" : "schedule.wait=20");
			sp_cfg_error(errs, msg);
			continue;
		}
		if (section && !strncmp(section, "phase.", 6) && !strcmp(sec, "schedule")) /* schedule --phase */
			snprintf(sec, sizeof sec, "%s", section);
		sp_cfg_set(cfg, sec, key, value, sets[i], 0, errs);
	}
	sp_cfg_finish(cfg, errs);
	return errs->count;
}

void sp_cli_config_errors(const char *cmd, const struct sp_cfg_errors *errs)
{
	for (int i = 0; i < errs->count && i < SP_CFG_MAX_ERRORS; i++)
		fprintf(stderr, "stepprof %s: %s\n", cmd, errs->msg[i]);
	if (errs->count > SP_CFG_MAX_ERRORS)
		fprintf(stderr, "stepprof %s: ... and %d more errors\n", cmd, errs->count - SP_CFG_MAX_ERRORS);
}

const char *sp_cli_cmd = "";
const char *sp_cli_argv0 = "stepprof";

/* Progress line state: one line for the whole process. */
static struct {
	struct timespec start;  /* first call */
	double last;            /* seconds since start of the last print */
	unsigned calls;
	int shown;              /* a line is on the terminal */
	int tty;                /* -1 unknown, 0 no, 1 stderr is a terminal */
	double after;           /* seconds before the first line: 1, or $STEPPROF_PROGRESS_AFTER (tests) */
} prog = { .tty = -1, .after = 1.0 };

static double since_start(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - prog.start.tv_sec) + (now.tv_nsec - prog.start.tv_nsec) / 1e9;
}

static void progress_erase(void)
{
	if (prog.shown)
		fputs("\r\033[K", stderr);
	prog.shown = 0;
}

void sp_cli_progress(const struct sp_trace_reader *r)
{
	uint64_t done, total;
	double t;

	if (prog.tty < 0) {
		const char *after = getenv("STEPPROF_PROGRESS_AFTER");
		prog.tty = isatty(STDERR_FILENO) && !getenv("STEPPROF_NO_PROGRESS");
		if (after && *after)
			prog.after = atof(after);
		clock_gettime(CLOCK_MONOTONIC, &prog.start);
		if (prog.tty)
			atexit(progress_erase);
	}
	if (!prog.tty || prog.calls++ % 4096)
		return;
	t = since_start();
	if (t < prog.after || (prog.shown && t - prog.last < 0.2))
		return;
	prog.last = t;
	sp_trace_progress(r, &done, &total);
	fprintf(stderr, "\r\033[Kstepprof %s: reading the trace: %.0f%% of %.2f%s", sp_cli_cmd,
		total ? 100.0 * (double)done / (double)total : 0.0,
		(double)total / (total >= (1u << 30) ? (1u << 30) : (1u << 20)), total >= (1u << 30) ? "GiB" : "MiB");
	prog.shown = 1;
}
