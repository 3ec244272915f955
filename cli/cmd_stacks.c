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

/* What the command line asks for. */
struct stacks_opts {
	const char *trace, *outpath; /* the trace; the output file (NULL: stdout) */
	const char *kind;            /* the --kind name, for messages */
	unsigned mask;               /* SP_FOLD_* of --kind */
	int by_bytes;                /* weight stacks by bytes, else by calls */
};

/* Writes agg's folded stacks to o->outpath (atomically) or stdout, and says on stderr when there
 * is nothing to write and why. Returns 0, or 1 after a message (write error; a trace without
 * stacks, then o->outpath is removed). */
static int write_folded(const struct stacks_opts *o, struct sp_stackagg *agg, struct sp_trace_reader *r,
			struct sp_sym *sym)
{
	char err[512], *tmp = NULL;
	FILE *out = o->outpath ? sp_outfile_fopen(o->outpath, &tmp, err, sizeof(err)) : stdout;
	if (!out) {
		fprintf(stderr, "stepprof stacks: %s\n", err);
		return 1;
	}
	size_t n = sp_stackagg_folded(agg, o->mask, o->by_bytes, r, sym, out);
	int bad = fflush(out) || ferror(out);
	int nostacks = !n && !(sp_trace_header(r)->meta.features & SP_FEAT_STACKS);
	bad |= o->outpath && fclose(out);
	if (sp_outfile_commit(tmp, o->outpath, !bad) < 0 || bad) {
		fprintf(stderr, "stepprof stacks: writing %s failed\n", o->outpath ? o->outpath : "the output");
		return 1;
	}
	if (nostacks) { /* an empty result would look like "no such calls" */
		fprintf(stderr,
			"stepprof stacks: %s holds no call stacks: it was recorded without "
			"[activities] stacks = native, python or both\n",
			o->trace);
		if (o->outpath)
			unlink(o->outpath);
		return 1;
	}
	if (!n)
		fprintf(stderr, "stepprof stacks: %s: no %s event with a call stack\n", o->trace, o->kind);
	else if (o->outpath)
		fprintf(stderr, "wrote %s: %zu line%s\n", o->outpath, n, n == 1 ? "" : "s");
	return 0;
}

/* Exit status: 0 written (also when nothing matched: then no line); 1 unreadable or corrupt
 * trace, or write error; 2 usage. */
int sp_cmd_stacks(int argc, char **argv)
{
	static const unsigned masks[] = { SP_FOLD_ALLOC, SP_FOLD_LAUNCH, SP_FOLD_NCCL, SP_FOLD_ALL };
	static const char *const kinds[] = { "alloc", "launch", "nccl", "all" };
	struct stacks_opts o = { .kind = "alloc", .mask = SP_FOLD_ALLOC, .by_bytes = -1 };
	int c, k;
	char err[512];

	optind = 0;
	while ((c = sp_opts_next(&sp_spec_stacks, argc, argv)) != -1) {
		switch (c) {
		case 'b':
			if ((k = sp_opts_choice(&sp_spec_stacks, c, optarg)) < 0)
				return usage(stderr, 2);
			o.by_bytes = k == 0;
			break;
		case 'k':
			if ((k = sp_opts_choice(&sp_spec_stacks, c, optarg)) < 0)
				return usage(stderr, 2);
			o.mask = masks[k];
			o.kind = kinds[k];
			break;
		case 'o':
			o.outpath = optarg;
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
	o.trace = argv[optind];
	if (o.by_bytes < 0)
		o.by_bytes = o.mask == SP_FOLD_ALLOC;
	if (o.by_bytes && o.mask == SP_FOLD_LAUNCH) {
		fprintf(stderr, "stepprof stacks: launches have no bytes; use --weight calls\n");
		return usage(stderr, 2);
	}

	struct sp_trace_reader *r = sp_trace_open(o.trace, err, sizeof(err));
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
			sp_stackagg_add(&agg, r, &ev, o.mask);
	}
	if (rc < 0) {
		fprintf(stderr, "stepprof stacks: %s: %s\n", o.trace, sp_trace_error(r));
		ret = 1;
	}
	if (write_folded(&o, &agg, r, sym))
		ret = 1;
	sp_stackagg_free(&agg);
	sp_sym_close(sym);
	sp_trace_close_reader(r);
	return ret;
}
