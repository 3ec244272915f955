/* SPDX-License-Identifier: MIT */
/* report.h - the text report of `stepprof report`: a key_averages-style table of GPU kernels,
 * the dropped-record line, one summary line per window, the per-step table (steps.h), the
 * memcpy/memset table and the NCCL table (commstats.h), with the peers' traces its waiting for
 * them (ranks.h). Reads the trace through windows.h, a window's events in two passes; memory is
 * a row per kernel name, per step and per NCCL (op, ranks, size), never a window's events. */
#ifndef SP_REPORT_H
#define SP_REPORT_H

#include <stdio.h>

enum { SP_REPORT_BY_OP = 1, SP_REPORT_BY_MODULE = 2 };

enum sp_report_sort { SP_SORT_TOTAL, SP_SORT_AVG, SP_SORT_CALLS, SP_SORT_MAX, SP_SORT_MIN, SP_SORT_NAME };

#define SP_REPORT_NAME_WIDTH 50  /* kernel name column, unless wide */
#define SP_REPORT_TOP 30         /* rows shown by default */

struct sp_report_opts {
	int sort;               /* enum sp_report_sort; names ascending, the others descending */
	int top;                /* kernel rows shown, 0 = all */
	long long window;       /* only this window id, -1 = all windows aggregated */
	int wide;               /* full kernel names instead of truncating to SP_REPORT_NAME_WIDTH */
	int json;               /* one JSON object instead of the tables (docs/OUTPUTS.md) */
	char **peers;           /* other ranks' traces of the run (--peers): NCCL waiting vs transfer */
	int npeers;
	int by_line;            /* kernel time by source line or frame (SP_BYLINES_*, bylines.h), 0 by kernel name */
	int by_ops; /* SP_REPORT_BY_OP: GPU time by torch operator, SP_REPORT_BY_MODULE: by module (report_ops.h) */
	int shapes; /* --by op: a row per input shapes */
	int op_sort; /* --by op: SP_OPSORT_* (report_ops.h) */
	void (*note)(const char *text); /* told of a peer left out ("peer PATH: why"); NULL: not told */
	const char *phase;      /* only the windows of this phase ([phase.NAME]), NULL = every window */
};

/* How sp_report ended; the command turns it into its message and exit status. */
enum sp_report_status {
	SP_REPORT_OK = 0,
	SP_REPORT_UNREADABLE,   /* the trace could not be opened: why holds the reader's message */
	SP_REPORT_CORRUPT,      /* a corrupt chunk: why holds sp_trace_error's message */
	SP_REPORT_NO_WINDOW,    /* no (such) window: seen says how many the trace holds */
};
struct sp_report_result {
	char why[256];          /* UNREADABLE, CORRUPT: the reason, without any command prefix */
	int seen;               /* windows the trace holds (all of them, whatever o->window says) */
	char ids[96];           /* their ids (sp_cli_ids_add) */
	int truncated;          /* the file was cut short */
	unsigned long long other_phase; /* NO_WINDOW with o->phase: windows of other phases */
	unsigned long long outside;     /* records outside every window (skipped) */
};

/* The sort key called s ("total", "avg", "calls", "max", "min", "name"), or -1. */
int sp_report_sort_parse(const char *s);
/* Reads the trace at path and writes the report to out. Returns SP_REPORT_OK, or the reason it
 * failed with the details in *res (res may be NULL); after a corrupt chunk, what was read may be
 * printed already. Prints nothing to stderr: the command says what failed. Exits the CLI if
 * memory runs out. */
enum sp_report_status sp_report(const char *path, const struct sp_report_opts *o, FILE *out,
				struct sp_report_result *res);

#endif
