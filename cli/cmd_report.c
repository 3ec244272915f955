/* SPDX-License-Identifier: MIT */
/* cmd_report.c - `stepprof report`: parses the arguments and prints the report of report.h
 * on stdout. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "symbols.h"
#include "report.h"
#include "report_ops.h"
#include "bylines.h"
#include "windows.h"

/* Prints the usage to f and returns rc. */
static int usage(FILE *f, int rc)
{
	fprintf(f,
		"usage: stepprof report TRACE [--sort total|avg|calls|max|min|name] [--top N] [--window N|all]"
		" [--by kernel|line|frame|op|module] [--shapes] [--wide] [--json] [--no-symbols]\n"
		"       [--phase NAME] [--peers OTHER_RANK_TRACE ...]\n"
		"  GPU kernel table of all recorded windows together (default) or of one window;\n"
		"  --sort also takes torch's key_averages names (self_cuda_time_total, cuda_time_total,\n"
		"  cuda_time, device_time_total, count);\n"
		"  --top N rows (default %d, 0 = all), --wide: full kernel names, --json: everything as one\n"
		"  JSON object (every kernel row); --by line: kernel time by the source line of the program's\n"
		"  own code that launched it (needs stacks = python or both when recording; a program whose\n"
		"  own code is one entry point is shown by frame); --by frame: by the innermost Python frame\n"
		"  outside torch and the standard library (a model's code in an installed package); --peers\n"
		"  (repeatable): the other ranks' traces of the run, to split this rank's NCCL kernel time\n"
		"  into waiting for peers and transfer; --phase NAME: only the windows of [phase.NAME];\n"
		"  --by op: GPU time by torch operator as key_averages tables it (self CUDA time, CUDA total,\n"
		"  calls, FLOPs, TFLOP/s; --sort self_cuda_time_total (default), cuda_time_total, count, avg,\n"
		"  name, flops; --shapes: a row per input shapes); --by module: a tree of the nn.Module paths\n"
		"  (recorded in a PyTorch program whose steps come from its optimizer or a python marker)\n",
		SP_REPORT_TOP);
	return rc;
}

/* sp_report's notes (a peer left out), with the command's prefix. This function can't fail. */
static void note(const char *text)
{
	fprintf(stderr, "stepprof report: %s\n", text);
}

/* --by op's sort key from --sort's text (NULL: self CUDA time): torch's self_* names and total,
 * max, min sort by self CUDA time; cuda_time_total and device_time_total by CUDA total. */
static int op_sort(const char *s)
{
	if (!s)
		return SP_OPSORT_SELF;
	if (!strcmp(s, "cuda_time_total") || !strcmp(s, "device_time_total"))
		return SP_OPSORT_TOTAL;
	if (!strcmp(s, "calls") || !strcmp(s, "count"))
		return SP_OPSORT_CALLS;
	if (!strcmp(s, "avg") || !strcmp(s, "cuda_time") || !strcmp(s, "device_time") || !strcmp(s, "self_cuda_time") ||
	    !strcmp(s, "self_device_time"))
		return SP_OPSORT_AVG;
	return !strcmp(s, "name") ? SP_OPSORT_NAME : !strcmp(s, "flops") ? SP_OPSORT_FLOPS : SP_OPSORT_SELF;
}

static int number(const char *s, long long *v)
{
	char *end;
	*v = strtoll(s, &end, 10);
	return *s && !*end && *v >= 0;
}

int sp_cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sort", required_argument, NULL, 's' },   { "top", required_argument, NULL, 't' },
		{ "window", required_argument, NULL, 'w' }, { "wide", no_argument, NULL, 'W' },
		{ "json", no_argument, NULL, 'j' },         { "peers", required_argument, NULL, 'p' },
		{ "by", required_argument, NULL, 'b' },     { "phase", required_argument, NULL, 'P' },
		{ "shapes", no_argument, NULL, 'S' },       { "no-symbols", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },         { 0 }
	};
	struct sp_report_opts o = { .sort = SP_SORT_TOTAL, .top = SP_REPORT_TOP, .window = -1 };
	const char *sort = NULL;
	long long v;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sort = optarg;
			o.sort = sp_report_sort_parse(optarg);
			if (o.sort < 0 && !strcmp(optarg, "flops"))
				o.sort = SP_SORT_TOTAL; /* --by op's */
			if (o.sort < 0) {
				fprintf(stderr,
					"stepprof report: unknown sort key '%s' (known: total, avg, calls, max, "
					"min, name; torch's self_cuda_time_total, cuda_time_total, cuda_time, "
					"device_time_total, count%s)\n",
					optarg,
					strstr(optarg, "cpu") ? "; CPU operator time is not recorded: stepprof sees "
								"CUDA calls and GPU work, not torch operators"
							      : "");
				return usage(stderr, 2);
			}
			break;
		case 't':
			if (!number(optarg, &v) || v > 1000000000) {
				fprintf(stderr, "stepprof report: --top wants a count, not '%s'\n", optarg);
				return usage(stderr, 2);
			}
			o.top = (int)v;
			break;
		case 'w':
			if (sp_cli_window("report", optarg, &o.window) < 0)
				return usage(stderr, 2);
			break;
		case 'W':
			o.wide = 1;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'p':
			o.peers = sp_xrealloc(o.peers, (size_t)(o.npeers + 1) * sizeof(*o.peers));
			o.peers[o.npeers++] = optarg;
			break;
		case 'b':
			if (strcmp(optarg, "kernel") && strcmp(optarg, "line") && strcmp(optarg, "frame") &&
			    strcmp(optarg, "op") && strcmp(optarg, "module")) {
				fprintf(stderr,
					"stepprof report: --by wants kernel, line, frame, op or module, not '%s'\n",
					optarg);
				return usage(stderr, 2);
			}
			o.by_line = !strcmp(optarg, "line")    ? SP_BYLINES_LINE
				    : !strcmp(optarg, "frame") ? SP_BYLINES_FRAME
							       : 0;
			o.by_ops = !strcmp(optarg, "op")       ? SP_REPORT_BY_OP
				   : !strcmp(optarg, "module") ? SP_REPORT_BY_MODULE
							       : 0;
			break;
		case 'S':
			o.shapes = 1;
			break;
		case 'P':
			o.phase = optarg;
			break;
		case 'N': /* open no file that the trace names */
			sp_sym_no_files();
			break;
		case 'h':
			usage(stdout, 0);
			return 0;
		default:
			sp_cli_bad_option("report", c, argc, argv);
			return usage(stderr, 2);
		}
	}
	if (o.shapes && o.by_ops != SP_REPORT_BY_OP) {
		fprintf(stderr, "stepprof report: --shapes goes with --by op\n");
		return usage(stderr, 2);
	}
	o.op_sort = op_sort(sort);
	if (sp_cli_operands("report", argc, argv, 1, 1)) {
		free(o.peers);
		return usage(stderr, 2);
	}
	struct sp_report_result res;
	const char *path = argv[optind];

	o.note = note;
	enum sp_report_status st = sp_report(path, &o, stdout, &res);
	free(o.peers);
	if (st == SP_REPORT_UNREADABLE)
		fprintf(stderr, "stepprof report: %s\n", res.why);
	else if (st == SP_REPORT_CORRUPT)
		fprintf(stderr, "stepprof report: %s: %s\n", path, res.why);
	else if (st == SP_REPORT_NO_WINDOW && o.phase)
		fprintf(stderr, "stepprof report: %s has no window%s of phase '%s' (%llu of other phases)\n", path,
			o.window >= 0 ? " of that id" : "", o.phase, res.other_phase);
	else if (st == SP_REPORT_NO_WINDOW)
		sp_cli_no_window("report", path, o.window, res.seen);
	return st == SP_REPORT_OK ? 0 : 1;
}
