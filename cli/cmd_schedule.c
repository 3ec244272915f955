/* SPDX-License-Identifier: MIT */
/* cmd_schedule.c - `stepprof schedule [--config FILE] [--steps N] [KEY=VALUE ...]`: dry run of
 * the [schedule] section. stdout is exactly one "STEP ACTION" line per step; the summary
 * (recorded windows, when recording stops) and warnings go to stderr as '#' lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "config/config.h"

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
	static struct sp_config cfg;
	static struct sp_cfg_errors errs;
	const char *path = getenv("STEPPROF_CONFIG");
	int64_t steps = -1;
	int i, bad = 0;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i], *v = NULL;
		char *end;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!strncmp(a, "--config=", 9) || !strncmp(a, "--steps=", 8))
			v = strchr(a, '=') + 1;
		else if ((!strcmp(a, "--config") || !strcmp(a, "--steps")) && i + 1 < argc)
			v = argv[++i];
		if (!v) {
			fprintf(stderr, "stepprof schedule: bad option '%s'\n", a);
			usage(stderr);
			return 2;
		}
		if (a[2] == 'c') {
			path = v;
			continue;
		}
		steps = strtoll(v, &end, 10);
		if (*v < '0' || *v > '9' || *end || steps < 1 || steps > MAX_STEPS) {
			fprintf(stderr, "stepprof schedule: --steps: '%s' is not an integer 1..%d\n", v, MAX_STEPS);
			return 2;
		}
	}
	sp_cfg_defaults(&cfg);
	if (path && *path)
		sp_cfg_load_file(&cfg, path, &errs);
	sp_cfg_load_env(&cfg, NULL, &errs);
	for (; i < argc; i++) {
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
	print_table(&cfg.schedule, steps > 0 ? steps : default_steps(&cfg.schedule));
	return 0;
}
