/* SPDX-License-Identifier: MIT */
/* cmd_memory.c - `stepprof memory TRACE [-o OUT.html] [--window N]`: the memory timeline page
 * of every recorded window (or one) and a short text summary of each on stdout (memtl.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "symbols.h"
#include "export.h"
#include "memtl.h"

#define SUMMARY_TOP 10 /* allocations alive at the peak listed per series */

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: stepprof memory TRACE [-o OUT.html] [--window N] [--no-symbols]\n"
		   "  writes a self-contained HTML page of live GPU and host memory per recorded window\n"
		   "  (default OUT: TRACE without .sptrace, plus .memory.html) and prints each window's peaks\n");
	return rc;
}

/* Exit status: 0 written; 1 unreadable trace, no (such) window, corrupt chunk (the page is still
 * written with the windows before it) or write error; 2 usage. */
int sp_cmd_memory(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "window", required_argument, NULL, 'w' },
		{ "no-symbols", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *trace, *out = NULL;
	char *def = NULL, *end, err[512];
	long long window = -1;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'w':
			window = strtoll(optarg, &end, 10);
			if (!*optarg || *end || window < 0) {
				fprintf(stderr, "stepprof memory: --window wants a window id, not '%s'\n", optarg);
				return usage(stderr, 2);
			}
			break;
		case 'N': /* open no file that the trace names */
			sp_sym_no_files();
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			sp_cli_bad_option("memory", c, argc, argv);
			return usage(stderr, 2);
		}
	}
	if (sp_cli_operands("memory", argc, argv, 1, 1))
		return usage(stderr, 2);
	trace = argv[optind];
	if (!out) {
		size_t n = strlen(trace);
		n -= n > 8 && !strcmp(trace + n - 8, ".sptrace") ? 8 : 0;
		if (asprintf(&def, "%.*s.memory.html", (int)n, trace) < 0)
			sp_oom();
		out = def;
	}

	struct sp_trace_reader *r = sp_trace_open(trace, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "stepprof memory: %s\n", err);
		free(def);
		return 1;
	}
	struct sp_sym *sym = sp_sym_open();
	struct sp_memtl_reader *m = sp_memtl_open(r, sym);
	struct sp_out *o = sp_out_open(out, err, sizeof(err));
	const struct sp_memtl *w;
	int rc, seen = 0, shown = 0, ret = 0;

	if (!o) {
		fprintf(stderr, "stepprof memory: %s\n", err);
		ret = 1;
		goto done;
	}
	sp_memtl_html_begin(o, trace, sp_trace_header(r));
	while ((rc = sp_memtl_next(m, &w)) == 1) {
		seen++;
		if (window >= 0 && w->id != window)
			continue;
		sp_memtl_html_window(o, w, r, sym);
		sp_memtl_summary(w, r, sym, SUMMARY_TOP, stdout);
		shown++;
	}
	sp_memtl_html_end(o);
	if (rc < 0) {
		fprintf(stderr, "stepprof memory: %s: %s\n", trace, sp_trace_error(r));
		ret = 1;
	} else if (!shown) {
		if (window >= 0)
			fprintf(stderr, "stepprof memory: %s has no window %lld (it has %d)\n", trace, window, seen);
		else
			fprintf(stderr, "stepprof memory: %s holds no recorded window\n", trace);
		ret = 1;
	}
	if (sp_out_close(o, shown > 0) != 0)
		ret = 1;
	else if (shown)
		printf("wrote %s: %d window%s\n", out, shown, shown == 1 ? "" : "s");
done:
	sp_memtl_close(m);
	sp_sym_close(sym);
	sp_trace_close_reader(r);
	free(def);
	return ret;
}
