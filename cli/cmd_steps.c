/* SPDX-License-Identifier: MIT */
/* cmd_steps.c - `stepprof steps TRACE [TRACE ...]`: the per-step table of steps.h for one trace;
 * for several (one per rank), their steps side by side: the spread of each step's time across
 * ranks, the slowest rank, and per rank the medians of step, compute, NCCL and idle time. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include "cli.h"
#include "steps.h"

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: stepprof steps TRACE [TRACE ...]\n"
		   "  one trace: a row per recorded step (kernel, NCCL and copy time, GPU busy, longest GPU idle);\n"
		   "  several (e.g. every rank's trace of one run): each step's time across them, the slowest\n"
		   "  rank, and per rank the medians of step, compute, NCCL and GPU idle time\n");
	return rc;
}

/* Reads every window of path into s; *rank gets the header's rank (-1 if none). Returns 0, or 1
 * (message on stderr) if the file is unreadable or corrupt. */
static int load(const char *path, struct sp_steps *s, int *rank)
{
	char err[512];
	const struct sp_window *w;
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	int rc;

	if (!r) {
		fprintf(stderr, "stepprof steps: %s\n", err);
		return 1;
	}
	*rank = sp_trace_header(r)->meta.rank;
	struct sp_windows *g = sp_windows_open(r);
	while ((rc = sp_windows_next(g, &w)) == 1)
		sp_steps_add_window(s, r, w);
	if (rc < 0)
		fprintf(stderr, "stepprof steps: %s: %s\n", path, sp_trace_error(r));
	sp_windows_close(g);
	sp_trace_close_reader(r);
	return rc < 0;
}

/* Exit status: 0 printed; 1 a trace is unreadable or corrupt, or none holds a recorded step; 2 usage.
 * A trace without a recorded step is left out, with a note on stderr. */
int sp_cmd_steps(int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, 'h' }, { 0 } };
	int c, ret = 0;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h')
			return usage(stdout, 0);
		sp_cli_bad_option("steps", c, argc, argv);
		return usage(stderr, 2);
	}
	if (sp_cli_operands("steps", argc, argv, 1, argc))
		return usage(stderr, 2);
	char **paths = argv + optind;
	size_t n = (size_t)(argc - optind);
	if (n > 1 && sp_cli_one_run("steps", paths, n))
		return 1;
	struct sp_steps *s = calloc(n, sizeof(*s));
	int *rank = calloc(n, sizeof(*rank));
	if (!s || !rank)
		sp_oom();
	size_t used = 0;
	for (size_t i = 0; i < n && !ret; i++) {
		ret |= load(paths[i], &s[used], &rank[used]);
		if (!ret && !s[used].n)
			fprintf(stderr, "stepprof steps: %s holds no recorded step; left out\n", paths[i]);
		else
			used++;
	}
	if (!ret && !used)
		ret = 1;
	else if (!ret && used == 1)
		sp_steps_print(&s[0], stdout);
	else if (!ret)
		sp_steps_compare(s, rank, used, stdout);
	for (size_t i = 0; i < n; i++)
		sp_steps_free(&s[i]);
	free(s);
	free(rank);
	return ret;
}
