/* SPDX-License-Identifier: MIT */
/* cmd_autostep.c - `stepprof autostep FILE [--json] [--check]`: reads a token stream recorded
 * with STEPPROF_RECORD_TOKENS and prints what it holds. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include "cli.h"
#include "tokstream.h"

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: stepprof autostep FILE [--json] [--check]\n"
		   "  FILE: a token stream recorded with STEPPROF_RECORD_TOKENS=FILE (and STEPPROF_RECORD_TRUTH=KIND:PATTERN);\n"
		   "  prints its statistics. --json: one JSON object\n");
	return rc;
}

/* Exit status: 0 printed; 1 unreadable or damaged file; 2 usage. */
int sp_cmd_autostep(int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'j' }, { "check", no_argument, NULL, 'c' },
					      { "help", no_argument, NULL, 'h' }, { 0 } };
	int c, json = 0;
	char err[512];
	struct sp_tokstream s;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		if (c == 'h')
			return usage(stdout, 0);
		if (c == 'j')
			json = 1;
		else if (c != 'c') {
			sp_cli_bad_option("autostep", c, argc, argv);
			return usage(stderr, 2);
		}
	}
	if (sp_cli_operands("autostep", argc, argv, 1, 1))
		return usage(stderr, 2);
	if (sp_tokstream_load(&s, argv[optind], err, sizeof err) < 0) {
		fprintf(stderr, "stepprof autostep: %s\n", err);
		return 1;
	}
	if (json)
		fputc('{', stdout);
	sp_tokstream_stats(&s, stdout, json);
	if (json)
		fputs("}\n", stdout);
	sp_tokstream_free(&s);
	return 0;
}
