/* SPDX-License-Identifier: MIT */
/* cmd_steps.c - `stepprof steps [--json] TRACE [TRACE ...]`: the per-step table of steps.h for one
 * trace; for several (one per rank), their steps side by side (steps.h) and the cross-rank
 * diagnosis of ranks.h: arrivals at each collective, the per-rank breakdown, the straggler and
 * its cause. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include "cli.h"
#include "crossrank.h"

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: stepprof steps [--json [--arrivals]] [--phase NAME] TRACE [TRACE ...]\n"
		   "  one trace: a row per recorded step (kernel, NCCL and copy time, GPU busy, longest GPU idle);\n"
		   "  several (every rank's trace of one run, or some ranks'): each step's time across them, and\n"
		   "  the arrival at each collective (paired by communicator and sequence number, clocks aligned):\n"
		   "  per rank the medians of compute, exposed communication, wait for peers, host stall and\n"
		   "  copies, how often it arrives last, and the straggler with its cause (host, compute or\n"
		   "  communication) or none; --json: the same as one JSON object; --arrivals (implies --json):\n"
		   "  also every collective's calls with their arrivals, waits and transfers; --phase NAME: only\n"
		   "  the windows of [phase.NAME] (each phase numbers its steps from 0)\n");
	return rc;
}

/* Exit status: 0 printed; 1 a trace is unreadable or corrupt, or none holds a recorded step; 2 usage.
 * A trace without a recorded step is left out, with a note on stderr. */
int sp_cmd_steps(int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
					      { "arrivals", no_argument, NULL, 'a' },
					      { "phase", required_argument, NULL, 'P' },
					      { "help", no_argument, NULL, 'h' },
					      { 0 } };
	int c, json = 0, arrivals = 0;
	const char *phase = NULL;
	char err[512];

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
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
		sp_cli_bad_option("steps", c, argc, argv);
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
	for (size_t i = 0; i < n; i++) { /* a cut trace still gives its steps: said, exit 0 */
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
