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

/* Prints the usage to f and returns rc. */
static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: stepprof report TRACE [--sort total|avg|calls|max|min|name] [--top N] [--window N|all]"
			" [--wide] [--json] [--no-symbols]\n"
			"  GPU kernel table of all recorded windows together (default) or of one window;\n"
			"  --top N rows (default %d, 0 = all), --wide: full kernel names, --json: everything as one\n"
			"  JSON object (every kernel row)\n",
		SP_REPORT_TOP);
	return rc;
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
		{ "sort", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 't' },
		{ "window", required_argument, NULL, 'w' },
		{ "wide", no_argument, NULL, 'W' },
		{ "json", no_argument, NULL, 'j' },
		{ "no-symbols", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct sp_report_opts o = { .sort = SP_SORT_TOTAL, .top = SP_REPORT_TOP, .window = -1 };
	long long v;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.sort = sp_report_sort_parse(optarg);
			if (o.sort < 0) {
				fprintf(stderr, "stepprof report: unknown sort key '%s'\n", optarg);
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
			if (!strcmp(optarg, "all"))
				o.window = -1;
			else if (number(optarg, &v))
				o.window = v;
			else {
				fprintf(stderr, "stepprof report: --window wants a window id or 'all', not '%s'\n", optarg);
				return usage(stderr, 2);
			}
			break;
		case 'W':
			o.wide = 1;
			break;
		case 'j':
			o.json = 1;
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
	if (sp_cli_operands("report", argc, argv, 1, 1))
		return usage(stderr, 2);
	return sp_report(argv[optind], &o, stdout);
}
