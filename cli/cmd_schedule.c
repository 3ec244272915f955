/* SPDX-License-Identifier: MIT */
/* cmd_schedule.c - `stepprof schedule [-c FILE] [--steps N] [[--set] [schedule.]KEY=VALUE ...]`: dry run of
 * the [schedule] section. stdout is exactly one "STEP ACTION" line per step; the summary
 * (recorded windows, when recording stops) and warnings go to stderr as '#' lines. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "config/config.h"
#include "decide/stepdet.h"

#define MAX_STEPS 1000000       /* --steps limit */
#define DEFAULT_STEPS_CAP 1000  /* limit of the default step count */

static void usage(FILE *f)
{
	fprintf(f, "usage: stepprof schedule [-c|--config FILE] [--phase NAME] [-n|--count N | --steps A-B]\n"
		   "                         [[--set] [schedule.]KEY=VALUE ...]\n"
		   "  Prints torch.profiler.schedule's action for steps 0..N-1 (or A..B), one \"STEP ACTION\"\n"
		   "  line each (--steps: step numbers as convert takes them; --count: how many from step 0);\n"
		   "  a summary goes to stderr. KEY: skip_first, skip_first_wait, wait, warmup,\n"
		   "  active, repeat, profiling_frequency (wait=2, schedule.wait=2 and --set schedule.wait=2\n"
		   "  are the same), applied over FILE (else $STEPPROF_CONFIG, else the defaults) and the\n"
		   "  STEPPROF_* environment; options and KEY=VALUE in any order. --phase NAME: the schedule of\n"
		   "  [phase.NAME] (KEY=VALUE then sets that phase's keys); a configuration with phases needs it.\n"
		   "  Exits 2 on any error.\n");
}

/* Steps to show by default: skip_first, then `repeat` cycles (2 if it repeats forever), plus 2. */
static int64_t default_steps(const struct sp_schedule *s)
{
	int64_t cycle = s->wait + s->warmup + s->active;
	int64_t n = s->skip_first + cycle * (s->repeat > 0 ? s->repeat : 2) + 2;

	return n > DEFAULT_STEPS_CAP ? DEFAULT_STEPS_CAP : n;
}

/* Prints the table of steps first..first+steps-1 to stdout and the summary to stderr. Can't fail. */
static void print_table(const struct sp_schedule *s, int64_t first, int64_t steps)
{
	int64_t start = -1, nwin = 0;
	enum sp_action prev = SP_ACT_NONE;

	for (int64_t i = first; i < first + steps; i++)
		printf("%lld %s\n", (long long)i, sp_action_name(sp_schedule_action(s, i)));
	fprintf(stderr, "# windows (recorded steps):");
	for (int64_t i = first; i <= first + steps; i++) {
		enum sp_action a = i < first + steps ? sp_schedule_action(s, i) : SP_ACT_NONE;
		bool rec = a == SP_ACT_RECORD || a == SP_ACT_RECORD_AND_SAVE;
		if (rec && start < 0)
			start = i;
		if (start >= 0 && (a == SP_ACT_RECORD_AND_SAVE || (!rec && prev == SP_ACT_RECORD))) {
			int64_t end = rec ? i : i - 1;
			fprintf(stderr, "%s %lld", nwin++ ? "," : " steps", (long long)start);
			if (end > start)
				fprintf(stderr, "-%lld", (long long)end);
			if (a != SP_ACT_RECORD_AND_SAVE)
				fprintf(stderr, " (cut off by the end of the table)");
			start = -1;
		}
		prev = a;
	}
	fprintf(stderr, "%s\n", nwin ? "" : " none");
	if (s->repeat == 0)
		fprintf(stderr, "# repeat = 0: the cycle of %lld step%s goes on forever\n",
			(long long)(s->wait + s->warmup + s->active), s->wait + s->warmup + s->active == 1 ? "" : "s");
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
	static const struct option opts[] = { { "config", required_argument, NULL, 'c' },
					      { "steps", required_argument, NULL, 'r' },
					      { "count", required_argument, NULL, 'n' },
					      { "set", required_argument, NULL, 'S' },
					      { "phase", required_argument, NULL, 'p' },
					      { "help", no_argument, NULL, 'h' },
					      { 0 } };
	static struct sp_config cfg;
	static struct sp_cfg_errors errs;
	const char *path = getenv("STEPPROF_CONFIG"), *phase = NULL;
	char phase_section[64] = "";
	int64_t steps = -1, first = 0;
	int c, i, bad = 0, nsets = 0;
	char *end;
	const char **sets = calloc((size_t)argc + 1, sizeof(*sets)); /* --set values, in order */

	if (!sets)
		return 2;
	/* options and KEY=VALUE operands in any order (getopt permutes the operands to the end) */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hc:n:", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 'S':
			sets[nsets++] = optarg;
			break;
		case 'p':
			phase = optarg;
			snprintf(phase_section, sizeof(phase_section), "phase.%.50s", optarg);
			break;
		case 'n':
			steps = strtoll(optarg, &end, 10);
			first = 0;
			if (*optarg < '0' || *optarg > '9' || *end || steps < 1 || steps > MAX_STEPS) {
				fprintf(stderr, "stepprof schedule: --count: '%s' is not an integer 1..%d\n", optarg,
					MAX_STEPS);
				free(sets);
				return 2;
			}
			break;
		case 'r': /* A-B: step numbers, as convert --steps takes them */
			first = strtoll(optarg, &end, 10);
			steps = *end == '-' && end[1] >= '0' && end[1] <= '9' ? strtoll(end + 1, &end, 10) - first + 1
									      : 0;
			if (*optarg < '0' || *optarg > '9' || *end || first < 0 || steps < 1 || steps > MAX_STEPS ||
			    first > INT64_MAX - MAX_STEPS) {
				fprintf(stderr,
					"stepprof schedule: --steps wants step numbers A-B (at most %d steps), not "
					"'%s'%s\n",
					MAX_STEPS, optarg, *end ? "" : "; for the first N steps say --count N");
				free(sets);
				return 2;
			}
			break;
		case 'h':
			free(sets);
			usage(stdout);
			return 0;
		default:
			free(sets);
			sp_cli_bad_option("schedule", c, argc, argv);
			usage(stderr);
			return 2;
		}
	}
	sp_cfg_defaults(&cfg);
	if (path && *path)
		sp_cfg_load_file(&cfg, path, &errs);
	sp_cfg_load_env(&cfg, NULL, &errs);
	for (i = optind; i < argc; i++)
		sets[nsets++] = argv[i];
	for (i = 0; i < nsets; i++) {
		char section[64] = "schedule", key[64];
		const char *kv = sets[i], *eq = strchr(kv, '='), *dot = memchr(kv, '.', eq ? (size_t)(eq - kv) : 0);
		if (dot && (size_t)(dot - kv) < sizeof(section)) {
			snprintf(section, sizeof(section), "%.*s", (int)(dot - kv), kv);
			kv = dot + 1;
		}
		if (phase && !strcmp(section, "schedule")) /* with --phase, KEY=VALUE sets that phase's key */
			snprintf(section, sizeof(section), "%s", phase_section);
		if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key)) {
			bad += fprintf(stderr,
				       "command line: '%s': expected KEY=VALUE or SECTION.KEY=VALUE (KEY: a "
				       "[schedule] key, e.g. wait=2)\n",
				       sets[i]) > 0;
			continue;
		}
		snprintf(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
		sp_cfg_set(&cfg, section, key, eq + 1, "command line", 0, &errs);
	}
	free(sets);
	sp_cfg_finish(&cfg, &errs);
	if (errs.count || bad) {
		sp_cfg_print_errors(&errs, stderr);
		return 2;
	}
	const struct sp_phase *ph = phase ? sp_phase_find(&cfg, phase) : NULL;
	if ((phase && !ph) || (!phase && cfg.phases.n)) {
		fprintf(stderr, "stepprof schedule: %s%s%s: name one with --phase NAME:", phase ? "no phase '" : "",
			phase ? phase : "this configuration has phases", phase ? "' in this configuration" : "");
		for (i = 0; i < cfg.phases.n; i++)
			fprintf(stderr, " %s", cfg.phases.p[i].name);
		fprintf(stderr, "%s\n", cfg.phases.n ? "" : " (none: it has no [phase.NAME] section)");
		return 2;
	}
	if (ph) { /* the phase's schedule and marker stand for [schedule] and [marker] */
		cfg.schedule = ph->schedule;
		cfg.marker_kind = (enum sp_marker_kind)ph->marker_kind;
		fprintf(stderr, "# phase %s (its own step numbers)\n", ph->name);
	}
	if (cfg.schedule.warmup == 0)
		fprintf(stderr, "stepprof schedule: warning: warmup = 0: the first recorded step is not "
				"warmed up (torch warns: \"Profiler won't be using warmup, this can skew "
				"profiler results\")\n");
	char msg[600];
	if (sp_marker_explain(cfg.marker_kind, ph ? ph->marker_pattern : cfg.marker_pattern, msg, sizeof msg))
		fprintf(stderr, "stepprof schedule: note: %s\n", msg);
	int w = cfg.marker_kind == SP_MARK_AUTO ? sp_stepdet_schedule_warning(&cfg.schedule, msg, sizeof msg) : 0;
	if (w)
		fprintf(stderr, "stepprof schedule: %s: %s\n", w == 1 ? "warning" : "note", msg);
	print_table(&cfg.schedule, first, steps > 0 ? steps : default_steps(&cfg.schedule));
	return 0;
}
