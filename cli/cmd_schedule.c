/* SPDX-License-Identifier: MIT */
/* cmd_schedule.c - `stepprof schedule [--config FILE] [--steps N] [KEY=VALUE ...]`: dry run of
 * the [schedule] section. stdout is exactly one "STEP ACTION" line per step; the summary
 * (recorded windows, when recording stops) and warnings go to stderr as '#' lines. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "config/config.h"
#include "collector/stepdet.h"

#define MAX_STEPS 1000000       /* --steps limit */
#define DEFAULT_STEPS_CAP 1000  /* limit of the default step count */

static void usage(FILE *f)
{
	fprintf(f, "usage: stepprof schedule [--config FILE] [--steps N] [KEY=VALUE ...]\n"
		   "  Prints torch.profiler.schedule's action for steps 0..N-1, one \"STEP ACTION\" line\n"
		   "  each; a summary goes to stderr. KEY: skip_first, skip_first_wait, wait, warmup,\n"
		   "  active, repeat, profiling_frequency, applied over FILE (else $STEPPROF_CONFIG, else\n"
		   "  the defaults) and the STEPPROF_* environment. Exits 2 on any error.\n");
}

/* Steps to show by default: skip_first, then `repeat` cycles (2 if it repeats forever), plus 2. */
static int64_t default_steps(const struct sp_schedule *s)
{
	int64_t cycle = s->wait + s->warmup + s->active;
	int64_t n = s->skip_first + cycle * (s->repeat > 0 ? s->repeat : 2) + 2;

	return n > DEFAULT_STEPS_CAP ? DEFAULT_STEPS_CAP : n;
}

/* Prints the table to stdout and the summary to stderr. Can't fail. */
static void print_table(const struct sp_schedule *s, int64_t steps)
{
	int64_t start = -1, nwin = 0;
	enum sp_action prev = SP_ACT_NONE;

	for (int64_t i = 0; i < steps; i++)
		printf("%lld %s\n", (long long)i, sp_action_name(sp_schedule_action(s, i)));
	fprintf(stderr, "# windows (recorded steps):");
	for (int64_t i = 0; i <= steps; i++) {
		enum sp_action a = i < steps ? sp_schedule_action(s, i) : SP_ACT_NONE;
		bool rec = a == SP_ACT_RECORD || a == SP_ACT_RECORD_AND_SAVE;
		if (rec && start < 0)
			start = i;
		if (start >= 0 && (a == SP_ACT_RECORD_AND_SAVE || (!rec && prev == SP_ACT_RECORD))) {
			int64_t end = rec ? i : i - 1;
			fprintf(stderr, "%s %lld", nwin++ ? "," : " steps", (long long)start);
			if (end > start)
				fprintf(stderr, "-%lld", (long long)end);
			if (a != SP_ACT_RECORD_AND_SAVE)
				fprintf(stderr, " (cut off by --steps)");
			start = -1;
		}
		prev = a;
	}
	fprintf(stderr, "%s\n", nwin ? "" : " none");
	if (s->repeat == 0)
		fprintf(stderr, "# repeat = 0: the cycle of %lld steps goes on forever\n",
			(long long)(s->wait + s->warmup + s->active));
	else {
		int64_t lo = 0, hi = INT64_MAX; /* the first step that is done: done() only turns on */
		while (lo < hi) {
			int64_t mid = lo + (hi - lo) / 2;
			if (sp_schedule_done(s, mid))
				hi = mid;
			else
				lo = mid + 1;
		}
		fprintf(stderr, "# nothing is recorded after step %lld\n", (long long)lo);
	}
}

/* Exits 0, or 2 for usage and configuration errors (all printed to stderr). */
int sp_cmd_schedule(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "steps", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static struct sp_config cfg;
	static struct sp_cfg_errors errs;
	const char *path = getenv("STEPPROF_CONFIG");
	int64_t steps = -1;
	int c, i, bad = 0;
	char *end;

	/* '+': the options stop at the first KEY=VALUE; every argument after it must be one too */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 's':
			steps = strtoll(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || steps < 1 || steps > MAX_STEPS) {
				fprintf(stderr, "stepprof schedule: --steps: '%s' is not an integer 1..%d\n", optarg,
					MAX_STEPS);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			sp_cli_bad_option("schedule", c, argc, argv);
			usage(stderr);
			return 2;
		}
	}
	sp_cfg_defaults(&cfg);
	if (path && *path)
		sp_cfg_load_file(&cfg, path, &errs);
	sp_cfg_load_env(&cfg, NULL, &errs);
	for (i = optind; i < argc; i++) {
		char key[64];
		const char *eq = strchr(argv[i], '=');
		if (!eq || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof(key)) {
			bad += fprintf(stderr, "command line: '%s': expected KEY=VALUE (KEY: a [schedule] key)\n",
				       argv[i]) > 0;
			continue;
		}
		snprintf(key, sizeof(key), "%.*s", (int)(eq - argv[i]), argv[i]);
		sp_cfg_set(&cfg, "schedule", key, eq + 1, "command line", 0, &errs);
	}
	sp_cfg_finish(&cfg, &errs);
	if (errs.count || bad) {
		sp_cfg_print_errors(&errs, stderr);
		return 2;
	}
	if (cfg.schedule.warmup == 0)
		fprintf(stderr, "stepprof schedule: warning: warmup = 0: the first recorded step is not "
				"warmed up (torch warns: \"Profiler won't be using warmup, this can skew "
				"profiler results\")\n");
	char msg[600];
	int w = cfg.marker_kind == SP_MARK_AUTO ? sp_stepdet_schedule_warning(&cfg.schedule, msg, sizeof msg) : 0;
	if (w)
		fprintf(stderr, "stepprof schedule: %s: %s\n", w == 1 ? "warning" : "note", msg);
	print_table(&cfg.schedule, steps > 0 ? steps : default_steps(&cfg.schedule));
	return 0;
}
