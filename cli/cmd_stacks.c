/* SPDX-License-Identifier: MIT */
/* cmd_stacks.c - `stepprof stacks TRACE [--weight bytes|calls] [--kind alloc|launch|nccl|all]
 * [-o FILE]`: folded call stacks of the trace's allocation, launch and NCCL call sites
 * (stackagg.h), symbolised offline against the trace's module records. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "opts.h"
#include "outfile.h"
#include "symbols.h"
#include "stackagg.h"

const struct sp_cmd_spec sp_spec_stacks = {
	.name = "stacks",
	.fn = sp_cmd_stacks,
	.operands = "TRACE",
	.complete = "TRACE",
	.summary = "folded call stacks (flamegraph.pl, speedscope) of allocations, launches, NCCL calls",
	.text = "  Folded stacks (\"root;...;leaf weight\", for flamegraph.pl or speedscope) of allocation\n"
		"  sites (default), launch sites or NCCL call sites, from a trace recorded with\n"
		"  [activities] stacks = native, python or both.\n",
	.opt = (const struct sp_opt[]){
		{ "kind", 'k', 0, "alloc|launch|nccl|all", "which call sites (default alloc)" },
		{ "weight", 'b', 0, "bytes|calls", "the weight of a stack (default bytes for alloc, else calls)" },
		{ "by", 'b', 0, "bytes|calls", NULL },
		{ "output", 'o', 'o', "FILE", "write FILE instead of stdout" },
		{ "no-symbols", 'N', 0, NULL, "open no file that the trace names (symbols from the trace only)" },
		{ 0 } },
};

static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_stacks, f);
	return rc;
}

/* Exit status: 0 written (also when nothing matched: then no line); 1 unreadable or corrupt
 * trace, or write error; 2 usage. */
int sp_cmd_stacks(int argc, char **argv)
{
	static const unsigned masks[] = { SP_FOLD_ALLOC, SP_FOLD_LAUNCH, SP_FOLD_NCCL, SP_FOLD_ALL };
	static const char *const kinds[] = { "alloc", "launch", "nccl", "all" };
	const char *trace, *outpath = NULL;
	unsigned mask = SP_FOLD_ALLOC;
	const char *kind = "alloc";
	int by_bytes = -1, c, k;
	char err[512];

	optind = 0;
	while ((c = sp_opts_next(&sp_spec_stacks, argc, argv)) != -1) {
		switch (c) {
		case 'b':
			if ((k = sp_opts_choice(&sp_spec_stacks, c, optarg)) < 0)
				return usage(stderr, 2);
			by_bytes = k == 0;
			break;
		case 'k':
			if ((k = sp_opts_choice(&sp_spec_stacks, c, optarg)) < 0)
				return usage(stderr, 2);
			mask = masks[k];
			kind = kinds[k];
			break;
		case 'o':
			outpath = optarg;
			break;
		case 'N': /* open no file that the trace names */
			sp_sym_no_files();
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			return usage(stderr, 2);
		}
	}
	if (sp_cli_operands("stacks", argc, argv, 1, 1))
		return usage(stderr, 2);
	trace = argv[optind];
	if (by_bytes < 0)
		by_bytes = mask == SP_FOLD_ALLOC;
	if (by_bytes && mask == SP_FOLD_LAUNCH) {
		fprintf(stderr, "stepprof stacks: launches have no bytes; use --weight calls\n");
		return usage(stderr, 2);
	}

	struct sp_trace_reader *r = sp_trace_open(trace, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "stepprof stacks: %s\n", err);
		return 1;
	}
	struct sp_sym *sym = sp_sym_open();
	sp_sym_use_trace(sym, r); /* Python frames */
	struct sp_stackagg agg = { 0 };
	struct sp_event ev;
	int rc, ret = 0;
	while ((rc = sp_trace_next(r, &ev)) == 1) {
		sp_cli_progress(r);
		if (ev.kind == SP_EV_MODULE)
			sp_sym_add_module(sym, sp_trace_string(r, ev.name), ev.u.module.start, ev.u.module.end,
					  ev.u.module.offset);
		else
			sp_stackagg_add(&agg, r, &ev, mask);
	}
	if (rc < 0) {
		fprintf(stderr, "stepprof stacks: %s: %s\n", trace, sp_trace_error(r));
		ret = 1;
	}
	char *tmp = NULL;
	FILE *out = outpath ? sp_outfile_fopen(outpath, &tmp, err, sizeof(err)) : stdout;
	if (!out) {
		fprintf(stderr, "stepprof stacks: %s\n", err);
		ret = 1;
	} else {
		size_t n = sp_stackagg_folded(&agg, mask, by_bytes, r, sym, out);
		int bad = fflush(out) || ferror(out);
		int nostacks = !n && !(sp_trace_header(r)->meta.features & SP_FEAT_STACKS);
		bad |= outpath && fclose(out);
		if (sp_outfile_commit(tmp, outpath, !bad) < 0 || bad) {
			fprintf(stderr, "stepprof stacks: writing %s failed\n", outpath ? outpath : "the output");
			ret = 1;
		} else if (nostacks) { /* an empty result would look like "no such calls" */
			fprintf(stderr,
				"stepprof stacks: %s holds no call stacks: it was recorded without "
				"[activities] stacks = native, python or both\n",
				trace);
			if (outpath)
				unlink(outpath);
			ret = 1;
		} else if (!n) {
			fprintf(stderr, "stepprof stacks: %s: no %s event with a call stack\n", trace, kind);
		} else if (outpath) {
			fprintf(stderr, "wrote %s: %zu line%s\n", outpath, n, n == 1 ? "" : "s");
		}
	}
	sp_stackagg_free(&agg);
	sp_sym_close(sym);
	sp_trace_close_reader(r);
	return ret;
}
