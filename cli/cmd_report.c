/* SPDX-License-Identifier: MIT */
/* cmd_report.c - `stepprof report`: parses the arguments and prints the report of report.h
 * on stdout. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "opts.h"
#include "symbols.h"
#include "report.h"
#include "report_ops.h"
#include "bylines.h"
#include "windows.h"

#define SORT_KEYS                                                                                    \
	"total|avg|calls|max|min|name|self_cuda_time_total|cuda_time_total|self_device_time_total|"         \
	"device_time_total|cuda_time|device_time|self_cuda_time|self_device_time|count|flops"

const struct sp_cmd_spec sp_spec_report = {
	.name = "report",
	.fn = sp_cmd_report,
	.operands = "TRACE",
	.complete = "TRACE",
	.summary = "kernel, step, copy and NCCL tables and findings of one trace",
	.text = "  GPU kernel table of all recorded windows together (default) or of one window, the windows,\n"
		"  a per-step table, copies, NCCL calls, allocation sites and findings in plain words.\n"
		"  --sort takes torch's key_averages names too. --by op: GPU time by torch operator as\n"
		"  key_averages tables it (self CUDA time, CUDA total, calls, FLOPs, TFLOP/s; sorted by self CUDA\n"
		"  time unless --sort says cuda_time_total, count, avg, name or flops); --by module: a tree of\n"
		"  the nn.Module paths (both recorded in a PyTorch program whose steps come from its optimizer\n"
		"  or a python marker, [activities] ops and modules).\n",
	.opt = (const struct sp_opt[]){
		{ "sort", 's', 0, SORT_KEYS, "order of the kernel table (default total)" },
		{ "top", 't', 0, "N", "rows of the kernel table (default " SP_STR(SP_REPORT_TOP) ", 0 = all)" },
		{ "window", 'w', 0, "N|all", "only window N (default all, together)" },
		{ "phase", 'P', 0, "NAME", "only the windows of [phase.NAME]" },
		{ "by", 'b', 0, "kernel|line|frame|op|module", "line: kernel time by the program's own source line (needs stacks = python; a program whose own code is one entry point is shown by frame); frame: by the innermost Python frame outside torch and the standard library" },
		{ "shapes", 'S', 0, NULL, "with --by op: a row per operator and input shapes" },
		{ "wide", 'W', 0, NULL, "full kernel names (default: cut at " SP_STR(SP_REPORT_NAME_WIDTH) " characters)" },
		{ "json", 'j', 0, NULL, "everything as one JSON object (every kernel row)" },
		{ "peers", 'p', 0, "TRACE", "another rank's trace of the run (repeatable): NCCL time split into wait and transfer" },
		{ "no-symbols", 'N', 0, NULL, "open no file that the trace names (symbols from the trace only)" },
		{ 0 } },
};

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

/* --by's value into o; -1 if it is none of --by's. */
static int set_by(struct sp_report_opts *o, const char *arg)
{
	if (sp_opts_choice(&sp_spec_report, 'b', arg) < 0)
		return -1;
	o->by_line = !strcmp(arg, "line") ? SP_BYLINES_LINE : !strcmp(arg, "frame") ? SP_BYLINES_FRAME : 0;
	o->by_ops = !strcmp(arg, "op") ? SP_REPORT_BY_OP : !strcmp(arg, "module") ? SP_REPORT_BY_MODULE : 0;
	return 0;
}

/* Prints the usage to f and returns rc. */
static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_report, f);
	return rc;
}

/* The message for a report of path that did not go through (nothing for SP_REPORT_OK). */
static void say_status(enum sp_report_status st, const char *path, const struct sp_report_opts *o,
		       const struct sp_report_result *res)
{
	if (st == SP_REPORT_UNREADABLE)
		fprintf(stderr, "stepprof report: %s\n", res->why);
	else if (st == SP_REPORT_CORRUPT)
		fprintf(stderr, "stepprof report: %s: %s\n", path, res->why);
	else if (st == SP_REPORT_NO_WINDOW && o->phase)
		fprintf(stderr, "stepprof report: %s has no window%s of phase '%s' (%llu of other phases)\n", path,
			o->window >= 0 ? " of that id" : "", o->phase, res->other_phase);
	else if (st == SP_REPORT_NO_WINDOW)
		sp_cli_no_window("report", path, o->window, res->seen, res->ids, res->truncated);
	if (st == SP_REPORT_NO_WINDOW && !res->seen && res->outside)
		fprintf(stderr,
			"stepprof report: %s holds %llu records, none in a window: it was cut before its first window "
			"began, or holds no recorded step (`stepprof dump` shows them)\n",
			path, res->outside);
}

int sp_cmd_report(int argc, char **argv)
{
	struct sp_report_opts o = { .sort = SP_SORT_TOTAL, .top = SP_REPORT_TOP, .window = -1 };
	const char *sort = NULL;
	long long v;
	int c;

	optind = 0;
	while ((c = sp_opts_next(&sp_spec_report, argc, argv)) != -1) {
		switch (c) {
		case 's':
			if (sp_opts_choice(&sp_spec_report, c, optarg) < 0) {
				if (strstr(optarg, "cpu"))
					fprintf(stderr, "stepprof report: CPU operator time is not reported: the tables "
							"are of GPU time (--by op: by torch operator)\n");
				return usage(stderr, 2);
			}
			sort = optarg;
			o.sort = sp_report_sort_parse(optarg);
			if (o.sort < 0) /* flops: --by op's */
				o.sort = SP_SORT_TOTAL;
			break;
		case 't':
			if (sp_opts_count("report", "top", optarg, 0, 1000000000, &v) < 0)
				return usage(stderr, 2);
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
			if (set_by(&o, optarg) < 0)
				return usage(stderr, 2);
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
			return usage(stdout, 0);
		default:
			free(o.peers);
			return usage(stderr, 2);
		}
	}
	o.op_sort = op_sort(sort);
	int shapes_alone = o.shapes && o.by_ops != SP_REPORT_BY_OP;
	if (shapes_alone)
		fprintf(stderr, "stepprof report: --shapes goes with --by op\n");
	if (shapes_alone || sp_cli_operands("report", argc, argv, 1, 1)) {
		free(o.peers);
		return usage(stderr, 2);
	}
	struct sp_report_result res;
	const char *path = argv[optind];

	o.note = note;
	enum sp_report_status st = sp_report(path, &o, stdout, &res);
	free(o.peers);
	say_status(st, path, &o, &res);
	return st == SP_REPORT_OK ? 0 : 1;
}
