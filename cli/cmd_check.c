/* SPDX-License-Identifier: MIT */
/* cmd_check.c - `stepprof check [FILE]`: loads the configuration exactly as the profiled
 * process will (FILE, else $STEPPROF_CONFIG, else built-in defaults; then STEPPROF_* overrides)
 * and prints it as an INI file that loads back to the same configuration, or every error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "opts.h"
#include "util.h"
#include "config/config.h"
#include "decide/stepdet.h"

/* One comment line per phase: its marker, its first window and whether it repeats; warnings for
 * an automatic phase. The rules between phases (docs/CONFIG.md) go with them. Can't fail. */
static void print_phases(const struct sp_config *cfg)
{
	char msg[600];

	for (int i = 0; i < cfg->phases.n; i++) {
		const struct sp_phase *p = &cfg->phases.p[i];
		int64_t lo = -1, hi = -1;
		for (int64_t k = 0; k < 100000 && hi < 0; k++) {
			enum sp_action a = sp_schedule_action(&p->schedule, k);
			if (lo < 0 && (a == SP_ACT_RECORD || a == SP_ACT_RECORD_AND_SAVE))
				lo = k;
			if (a == SP_ACT_RECORD_AND_SAVE)
				hi = k;
		}
		printf("# phase %s: %s marker%s%s%s, every %d; steps numbered from 0 in this phase; first window: ",
		       p->name, sp_marker_kind_name((enum sp_marker_kind)p->marker_kind),
		       p->marker_pattern[0] ? " '" : "", p->marker_pattern, p->marker_pattern[0] ? "'" : "",
		       p->marker_every);
		if (hi >= 0)
			printf("steps %lld-%lld", (long long)lo, (long long)hi);
		else
			printf("none in the first 100000 steps");
		if (p->schedule.repeat)
			printf("; %lld window%s in all\n", (long long)p->schedule.repeat,
			       p->schedule.repeat == 1 ? "" : "s");
		else
			printf("; repeats forever\n");
		if (sp_marker_explain(p->marker_kind, p->marker_pattern, msg, sizeof msg))
			fprintf(stderr, "stepprof check: phase %s: note: %s\n", p->name, msg);
		if (p->marker_kind == SP_MARK_AUTO) {
			int w = sp_stepdet_schedule_warning(&p->schedule, msg, sizeof msg);
			if (w)
				fprintf(stderr, "stepprof check: phase %s: %s: %s\n", p->name,
					w == 1 ? "warning" : "note", msg);
			if (cfg->phases.n > 1)
				fprintf(stderr,
					"stepprof check: phase %s: note: automatic detection learns from every CUDA "
					"call, those of the other phases too: it finds this phase's loop only if it is "
					"the "
					"program's repeating loop\n",
					p->name);
		}
	}
	if (cfg->phases.n > 1)
		printf("# phases: a step of one phase ends the open step of the others, and their window with it: "
		       "one window records at a time (docs/CONFIG.md)\n");
}

const struct sp_cmd_spec sp_spec_check = {
	.name = "check",
	.fn = sp_cmd_check,
	.operands = "[FILE]",
	.complete = "INI",
	.summary = "print the effective configuration, or every error",
	.text = "  Checks FILE (else $STEPPROF_CONFIG, else the built-in defaults) with the STEPPROF_*\n"
		"  environment overrides and --set applied, as the profiled process will. Prints the effective\n"
		"  configuration and exits 0, or prints every error to stderr and exits 2. Keys: docs/CONFIG.md.\n",
	.opt = (const struct sp_opt[]){
		{ "config", 'c', 'c', "INI", "the configuration file (the same as FILE)" },
		{ "set", 'S', 0, "SECTION.KEY=VALUE", "override one key (repeatable), as stepprof run --set" },
		{ "ranks", 'r', 0, "LIST", "short for --set ranks.ranks=LIST" },
		{ 0 } },
};

static void usage(FILE *f)
{
	sp_opts_usage(&sp_spec_check, f);
}

/* The note on what automatic step detection learns from until it locks, as a comment line on
 * stdout, when the configuration uses automatic detection. This function can't fail. */
static void print_learn(const struct sp_config *cfg)
{
	int is_auto = !cfg->phases.n && cfg->marker_kind == SP_MARK_AUTO;
	for (int i = 0; i < cfg->phases.n; i++)
		is_auto |= cfg->phases.p[i].marker_kind == SP_MARK_AUTO;
	if (!is_auto || cfg->marker_learn == SP_LEARN_CUPTI)
		return;
	const char *why = sp_cfg_learn_cupti_why(cfg), *learn = cfg->marker_learn == SP_LEARN_HOOKS ? "hooks" : "auto";
	if (why)
		printf("# [marker] learn = %s: automatic detection learns with CUPTI here (%s)\n", learn, why);
	else
		printf("# [marker] learn = %s: automatic detection learns from stepprof's hooks, not subscribed to "
		       "CUPTI until it locks (docs/CONFIG.md)\n",
		       learn);
}

/* The comment lines that say where the configuration came from (file or defaults, environment
 * overrides, --set and --ranks) and whether this process's rank is selected. Can't fail. */
static void print_origin(const struct sp_config *cfg, char **sets, int nsets, const struct sp_rank_info *ri)
{
	bool env_header = false;

	if (cfg->source[0])
		printf("# stepprof: %s is valid\n", cfg->source);
	else
		printf("# stepprof: built-in defaults\n");
	for (int i = 0; i < SP_CFG_NKEYS; i++) {
		if (strncmp(cfg->origin[i].name, "STEPPROF_", 9))
			continue;
		printf("%s %s", env_header ? "," : "# environment overrides applied:", cfg->origin[i].name);
		env_header = true;
	}
	if (env_header)
		printf("\n");
	for (int i = 0; i < nsets; i++)
		printf("%s %s%s", i ? "," : "# set on the command line:", sets[i], i == nsets - 1 ? "\n" : "");
	if (ri->rank >= 0 && ri->world_size > 0)
		printf("# this process: rank %d of %d (%s): %s\n", ri->rank, ri->world_size, ri->source,
		       sp_rankset_has(&cfg->ranks, ri->rank) ? "selected" : "not selected");
	else if (ri->rank >= 0)
		printf("# this process: rank %d (%s): %s\n", ri->rank, ri->source,
		       sp_rankset_has(&cfg->ranks, ri->rank) ? "selected" : "not selected");
	else
		printf("# this process: no rank in the environment (counts as rank 0): %s\n",
		       sp_rankset_has(&cfg->ranks, ri->rank) ? "selected" : "not selected");
}

/* Exits 0 (valid), 2 (usage or configuration errors, or a malformed STEPPROF_RANK or
 * STEPPROF_WORLD_SIZE; any malformed rank variable is reported once on stderr). */
int sp_cmd_check(int argc, char **argv)
{
	static struct sp_config cfg;
	static struct sp_cfg_errors errs;
	struct sp_rank_info ri;
	const char *file = NULL;
	char **sets = calloc((size_t)argc + 1, sizeof(*sets));
	int c, nsets = 0, rc = 2;

	if (!sets)
		sp_oom();
	/* options anywhere on the line */
	optind = 0;
	while ((c = sp_opts_next(&sp_spec_check, argc, argv)) != -1) {
		if (c == 'h') {
			usage(stdout);
			rc = 0;
			goto out;
		}
		if (c == 'c') { /* -c FILE, as run and schedule take it */
			file = optarg;
			continue;
		}
		if (c == 'S' || c == 'r') {
			if (asprintf(&sets[nsets++], "%s %s", c == 'S' ? "--set" : "--ranks", optarg) < 0)
				sp_oom();
			continue;
		}
		usage(stderr);
		goto out;
	}
	if (sp_cli_operands("check", argc, argv, 0, file ? 0 : 1)) {
		usage(stderr);
		goto out;
	}
	if (!file && optind < argc)
		file = argv[optind];
	sp_ranks_detect(&ri, NULL);
	if (ri.problem[0])
		fprintf(stderr, "stepprof check: %s\n", ri.problem);
	if (sp_cli_config(&cfg, file, sets, nsets, NULL, &errs) || ri.explicit_bad) {
		sp_cli_config_errors("check", &errs);
		goto out;
	}
	print_origin(&cfg, sets, nsets, &ri);
	print_phases(&cfg);
	print_learn(&cfg);
	sp_cfg_print(&cfg, stdout);
	char msg[600];
	int w = cfg.marker_kind == SP_MARK_AUTO && !cfg.phases.n
			? sp_stepdet_schedule_warning(&cfg.schedule, msg, sizeof msg)
			: 0;
	if (w)
		fprintf(stderr, "stepprof check: %s: %s\n", w == 1 ? "warning" : "note", msg);
	if (!cfg.phases.n && sp_marker_explain(cfg.marker_kind, cfg.marker_pattern, msg, sizeof msg))
		fprintf(stderr, "stepprof check: note: %s\n", msg);
	rc = 0;
out:
	for (int i = 0; i < nsets; i++)
		free(sets[i]);
	free(sets);
	return rc;
}
