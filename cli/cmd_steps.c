/* SPDX-License-Identifier: MIT */
/* cmd_steps.c - `stepprof steps [--json] TRACE [TRACE ...]`: the per-step table of steps.h for one
 * trace; for several (one per rank), their steps side by side (steps.h) and the cross-rank
 * diagnosis of ranks.h: arrivals at each collective, the per-rank breakdown, the straggler and
 * its cause. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include "cli.h"
#include "opts.h"
#include "crossrank.h"

const struct sp_cmd_spec sp_spec_steps = {
	.name = "steps",
	.fn = sp_cmd_steps,
	.operands = "TRACE [TRACE ...]",
	.complete = "TRACE",
	.summary = "per-step table; several ranks side by side, the straggler and its cause",
	.text = "  One trace: a row per recorded step (kernel, NCCL and copy time, GPU busy, longest GPU idle).\n"
		"  Several (every rank's trace of one run, or some ranks'): each step's time across them, the\n"
		"  arrival at each collective (paired by communicator and sequence number, clocks aligned),\n"
		"  per rank the medians of compute, exposed communication, wait for peers, host stall and\n"
		"  copies, how often it arrives last, and the straggler with its cause (host, compute or\n"
		"  communication) or none.\n",
	.opt = (const struct sp_opt[]){
		{ "json", 'j', 0, NULL, "the same as one JSON object" },
		{ "arrivals", 'a', 0, NULL, "also every collective's calls, arrivals, waits and transfers (implies --json)" },
		{ "phase", 'P', 0, "NAME", "only the windows of [phase.NAME] (each phase numbers its steps from 0)" },
		{ 0 } },
};

static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_steps, f);
	return rc;
}

/* Says of trace i of a that it was cut short, if it was (its steps are still shown, exit 0). */
static void say_cut(const struct sp_xrank *a, size_t i)
{
	uint32_t win;
	int64_t step;
	int cut = sp_xrank_cut(a, i, &win, &step);
	if (cut == 2)
		fprintf(stderr,
			"stepprof steps: note: %s was cut short: window %u has no window end (cut at step "
			"%lld); what followed the cut is lost\n",
			sp_xrank_path(a, i), win, (long long)step);
	else if (cut)
		fprintf(stderr, "stepprof steps: note: %s was cut short; what followed the cut is lost\n",
			sp_xrank_path(a, i));
}

/* Exit status: 0 printed; 1 a trace is unreadable or corrupt, or none holds a recorded step; 2 usage.
 * A trace without a recorded step is left out, with a note on stderr. */
int sp_cmd_steps(int argc, char **argv)
{
	int c, json = 0, arrivals = 0;
	const char *phase = NULL;
	char err[512];

	optind = 0;
	while ((c = sp_opts_next(&sp_spec_steps, argc, argv)) != -1) {
		if (c == 'h')
			return usage(stdout, 0);
		if (c == 'j' || c == 'a') {
			json = 1; /* --arrivals is a part of the JSON output */
			arrivals |= c == 'a';
			continue;
		}
		if (c == 'P') {
			phase = optarg;
			continue;
		}
		return usage(stderr, 2);
	}
	if (sp_cli_operands("steps", argc, argv, 1, argc))
		return usage(stderr, 2);
	if (argc - optind > 1 && sp_cli_one_run("steps", argv + optind, (size_t)(argc - optind)))
		return 1;
	struct sp_xrank *a = sp_xrank_new();
	sp_xrank_set_phase(a, phase);
	for (int i = optind; i < argc; i++) {
		int rc = sp_xrank_load(a, argv[i], err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "stepprof steps: %s\n", err);
			sp_xrank_free(a);
			return 1;
		}
		if (!rc)
			fprintf(stderr, "stepprof steps: %s holds no recorded step%s%s%s; left out\n", argv[i],
				phase ? " of phase '" : "", phase ? phase : "", phase ? "'" : "");
	}
	size_t n = sp_xrank_count(a);
	if (!n) {
		sp_xrank_free(a);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		say_cut(a, i);
	if (sp_xrank_phases_mixed(a))
		fprintf(stderr, "stepprof steps: note: the windows belong to several phases, each numbering its own "
				"steps; --phase NAME shows one phase\n");
	sp_xrank_analyse(a);
	if (json) {
		sp_xrank_json(a, stdout, arrivals);
	} else if (n == 1) {
		sp_steps_print(sp_xrank_steps(a, 0), stdout);
	} else {
		struct sp_steps *s = malloc(n * sizeof(*s));
		int *rank = malloc(n * sizeof(*rank));
		if (!s || !rank)
			sp_oom();
		for (size_t i = 0; i < n; i++) {
			s[i] = *sp_xrank_steps(a, i);
			rank[i] = sp_xrank_rank(a, i);
		}
		sp_steps_compare(s, rank, n, stdout);
		sp_xrank_print(a, stdout);
		free(s);
		free(rank);
	}
	sp_xrank_free(a);
	return 0;
}
