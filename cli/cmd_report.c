/* SPDX-License-Identifier: MIT */
/* cmd_report.c - `stepprof report`: parses the arguments and prints the report of report.h
 * on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "report.h"

static int usage(void)
{
	fprintf(stderr, "usage: stepprof report TRACE [--sort total|avg|calls|max|min|name] [--top N] [--window N|all]"
			" [--wide] [--json]\n"
			"  GPU kernel table of all recorded windows together (default) or of one window;\n"
			"  --top N rows (default %d, 0 = all), --wide: full kernel names, --json: everything as one\n"
			"  JSON object (every kernel row)\n",
		SP_REPORT_TOP);
	return 2;
}

static int number(const char *s, long long *v)
{
	char *end;
	*v = strtoll(s, &end, 10);
	return *s && !*end && *v >= 0;
}

int sp_cmd_report(int argc, char **argv)
{
	struct sp_report_opts o = { .sort = SP_SORT_TOTAL, .top = SP_REPORT_TOP, .window = -1 };
	const char *trace = NULL;
	long long v;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--sort") && val) {
			o.sort = sp_report_sort_parse(val);
			if (o.sort < 0) {
				fprintf(stderr, "stepprof report: unknown sort key '%s'\n", val);
				return usage();
			}
			i++;
		} else if (!strcmp(a, "--top") && val) {
			if (!number(val, &v) || v > 1000000000) {
				fprintf(stderr, "stepprof report: --top wants a count, not '%s'\n", val);
				return usage();
			}
			o.top = (int)v;
			i++;
		} else if (!strcmp(a, "--window") && val) {
			if (!strcmp(val, "all"))
				o.window = -1;
			else if (number(val, &v))
				o.window = v;
			else {
				fprintf(stderr, "stepprof report: --window wants a window id or 'all', not '%s'\n", val);
				return usage();
			}
			i++;
		} else if (!strcmp(a, "--wide")) {
			o.wide = 1;
		} else if (!strcmp(a, "--json")) {
			o.json = 1;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			return 0;
		} else if (a[0] == '-' || trace) {
			fprintf(stderr, "stepprof report: unexpected argument '%s'\n", a);
			return usage();
		} else {
			trace = a;
		}
	}
	if (!trace)
		return usage();
	return sp_report(trace, &o, stdout);
}
