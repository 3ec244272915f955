/* SPDX-License-Identifier: MIT */
/* report.h - the text report of `stepprof report`: a key_averages-style table of GPU kernels,
 * the dropped-record line, one summary line per window, the per-step table (steps.h), the
 * memcpy/memset table and the NCCL table (nccl.h), with the peers' traces its waiting for them (ranks.h). Reads the trace once through windows.h; memory is one window plus one row per kernel
 * name and per NCCL (op, ranks, size). */
#ifndef SP_REPORT_H
#define SP_REPORT_H

#include <stdio.h>

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
	int by_line;            /* kernel time by source line (bylines.h) instead of by kernel name */
	const char *phase;      /* only the windows of this phase ([phase.NAME]), NULL = every window */
};

/* The sort key called s ("total", "avg", "calls", "max", "min", "name"), or -1. */
int sp_report_sort_parse(const char *s);
/* Reads the trace at path and writes the report to out. Returns 0; 1 if the file is unreadable,
 * corrupt, or has no (such) window (message on stderr; what was read may be printed already). */
int sp_report(const char *path, const struct sp_report_opts *o, FILE *out);

#endif
