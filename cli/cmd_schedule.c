/* SPDX-License-Identifier: MIT */
/* cmd_schedule.c - `stepprof schedule [-c FILE] [--count N | --steps A[-B]] [[--set] [schedule.]KEY=VALUE ...]`: dry run of
 * the [schedule] section. stdout is exactly one "STEP ACTION" line per step; the summary
 * (recorded windows, when recording stops) and warnings go to stderr as '#' lines. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "opts.h"
#include "util.h"
#include "config/config.h"
#include "decide/stepdet.h"

#define MAX_STEPS 1000000       /* --steps limit */
#define DEFAULT_STEPS_CAP 1000  /* limit of the default step count */

const struct sp_cmd_spec sp_spec_schedule = {
	.name = "schedule",
	.fn = sp_cmd_schedule,
	.operands = "[[SECTION.]KEY=VALUE ...]",
	.complete = "",
	.summary = "dry-run the schedule: which steps are recorded (torch's numbering)",
	.text = "  Prints torch.profiler.schedule's action for each step, one \"STEP ACTION\" line each; a\n"
		"  summary goes to stderr. KEY=VALUE sets a [schedule] key (wait=2, schedule.wait=2 and\n"
		"  --set schedule.wait=2 are the same), over FILE (else $STEPPROF_CONFIG, else the defaults)\n"
		"  and the STEPPROF_* environment; options and KEY=VALUE in any order. A configuration with\n"
		"  phases needs --phase. Exits 2 on any error.\n",
	.opt = (const struct sp_opt[]){
		{ "config", 'c', 'c', "INI", "the configuration file" },
		{ "set", 'S', 0, "SECTION.KEY=VALUE", "override one key (repeatable), as stepprof run --set" },
		{ "count", 'n', 'n', "N", "steps 0..N-1 (default: the whole schedule and 2 more)" },
		{ "steps", 'r', 0, "A[-B]", "steps A..B (A-: from A, as many as --count or the default)" },
		{ "phase", 'p', 0, "NAME", "the schedule of [phase.NAME] (KEY=VALUE then sets that phase's keys)" },
		{ 0 } },
};

static void usage(FILE *f)
{
	sp_opts_usage(&sp_spec_schedule, f);
}

static void free_sets(char **sets, int n)
{
	for (int i = 0; i < n; i++)
		free(sets[i]);
	free(sets);
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

/* With --phase NAME, puts that phase's schedule and marker in place of [schedule] and [marker]
 * (*ph: the phase; NULL without --phase). Returns 0, or 2 after a message when the phase is not
 * there, or when the configuration has phases and none was named. */
static int use_phase(struct sp_config *cfg, const char *phase, const struct sp_phase **ph)
{
	*ph = phase ? sp_phase_find(cfg, phase) : NULL;
	if ((phase && !*ph) || (!phase && cfg->phases.n)) {
		fprintf(stderr, "stepprof schedule: %s%s%s: name one with --phase NAME:", phase ? "no phase '" : "",
			phase ? phase : "this configuration has phases", phase ? "' in this configuration" : "");
		for (int i = 0; i < cfg->phases.n; i++)
			fprintf(stderr, " %s", cfg->phases.p[i].name);
		fprintf(stderr, "%s\n", cfg->phases.n ? "" : " (none: it has no [phase.NAME] section)");
		return 2;
	}
	if (*ph) { /* the phase's schedule and marker stand for [schedule] and [marker] */
		cfg->schedule = (*ph)->schedule;
		cfg->marker_kind = (enum sp_marker_kind)(*ph)->marker_kind;
		fprintf(stderr, "# phase %s (its own step numbers)\n", (*ph)->name);
	}
	return 0;
}

/* The warnings and notes on the schedule and on the marker (pattern: its pattern) to stderr.
 * This function can't fail. */
static void print_warnings(const struct sp_config *cfg, const char *pattern)
{
	if (cfg->schedule.warmup == 0)
		fprintf(stderr, "stepprof schedule: warning: warmup = 0: the first recorded step is not "
				"warmed up (torch warns: \"Profiler won't be using warmup, this can skew "
				"profiler results\")\n");
	char msg[600];
	if (sp_marker_explain(cfg->marker_kind, pattern, msg, sizeof msg))
		fprintf(stderr, "stepprof schedule: note: %s\n", msg);
	int w = cfg->marker_kind == SP_MARK_AUTO ? sp_stepdet_schedule_warning(&cfg->schedule, msg, sizeof msg) : 0;
	if (w)
		fprintf(stderr, "stepprof schedule: %s: %s\n", w == 1 ? "warning" : "note", msg);
}

/* Exits 0, or 2 for usage and configuration errors (all printed to stderr). */
int sp_cmd_schedule(int argc, char **argv)
{
	static struct sp_config cfg;
	static struct sp_cfg_errors errs;
	const char *path = NULL, *phase = NULL;
	char phase_section[64] = "schedule";
	int64_t last = -1, first = 0;
	long long count = -1;
	int c, i, nsets = 0, ranged = 0;
	char **sets = calloc((size_t)argc + 1, sizeof(*sets)); /* as typed, in order */

	if (!sets)
		sp_oom();
	/* options and KEY=VALUE operands in any order (getopt permutes the operands to the end) */
	optind = 0;
	while ((c = sp_opts_next(&sp_spec_schedule, argc, argv)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 'S':
			if (asprintf(&sets[nsets++], "--set %s", optarg) < 0)
				sp_oom();
			break;
		case 'p':
			phase = optarg;
			snprintf(phase_section, sizeof(phase_section), "phase.%.50s", optarg);
			break;
		case 'n':
			if (sp_opts_count("schedule", "count", optarg, 1, MAX_STEPS, &count) < 0)
				goto bad;
			break;
		case 'r': /* step numbers, as convert --steps takes them */
			if (sp_opts_steps("schedule", optarg, &first, &last) < 0)
				goto bad;
			ranged = 1;
			if (last != INT64_MAX && last - first >= MAX_STEPS) {
				fprintf(stderr, "stepprof schedule: --steps %s: at most %d steps at a time\n", optarg,
					MAX_STEPS);
				goto bad;
			}
			break;
		case 'h':
			usage(stdout);
			free_sets(sets, nsets);
			return 0;
		default:
			usage(stderr);
			goto bad;
		}
	}
	for (i = optind; i < argc; i++)
		sets[nsets++] = sp_xstrdup(argv[i]);
	i = sp_cli_config(&cfg, path, sets, nsets, phase_section, &errs);
	free_sets(sets, nsets);
	if (i) {
		sp_cli_config_errors("schedule", &errs);
		return 2;
	}
	const struct sp_phase *ph;
	if (use_phase(&cfg, phase, &ph))
		return 2;
	print_warnings(&cfg, ph ? ph->marker_pattern : cfg.marker_pattern);
	int64_t steps = count > 0 ? count : default_steps(&cfg.schedule);
	if (ranged && last != INT64_MAX)
		steps = last - first + 1;
	else if (!ranged)
		first = 0;
	print_table(&cfg.schedule, first, steps);
	return 0;
bad:
	free_sets(sets, nsets);
	return 2;
}
