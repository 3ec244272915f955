/* SPDX-License-Identifier: MIT */
/* report_impl.h - inside `stepprof report` only (report.c aggregates and prints the tables,
 * report_findings.c words what stands out): the aggregated report and the few helpers both
 * halves use. Never include it elsewhere. */
#ifndef SP_REPORT_IMPL_H
#define SP_REPORT_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include "bylines.h"
#include "report_ops.h"
#include "commstats.h"
#include "crossrank.h"
#include "format.h"
#include "stackagg.h"
#include "steps.h"
#include "windows.h"

#define MEM_ROWS 12 /* CUPTI memcpy kinds 0..10, then memset */
#define MEMSET_ROW 11

struct kstat {
	uint64_t calls, total, min, max; /* ns */
};

struct mstat {
	uint64_t calls, bytes, total;
};

struct wsum {     /* one summary line */
	struct sp_window w;
	uint64_t steps, kernels, busy; /* busy: ns of [t0, t1] with GPU work running */
};

struct report {
	struct sp_trace_reader *r;
	struct kstat *k;        /* indexed by the name's index (sp_trace_string_index) */
	size_t kcap;
	struct mstat m[MEM_ROWS];
	uint64_t dropped[SP_DROP__COUNT];
	struct wsum *w;
	size_t nw;
	struct sp_steps steps;  /* the per-step table (steps.h) */
	struct sp_nccl_stats nccl; /* the NCCL table */
	struct sp_xrank *peers;  /* the trace and its peers' (--peers), analysed; NULL without peers */
	int self;                /* index of the trace among them, -1 if it holds no step */
	struct sp_stackagg sites;  /* allocation sites (stackagg.h) */
	struct sp_bylines lines;   /* kernel time by source line (--by line) */
	struct sp_opstats *ops;    /* GPU time by torch op and by module (--by op|module), NULL otherwise */
	const char *device;        /* the first GPU's name (its peak for TFLOP/s), NULL if none */
};

#define FINDINGS_MAX 8
#define FINDING_LEN 640

/* The kernel name of row i of rep->k. This function can't fail. */
static inline const char *kname(const struct report *rep, size_t i)
{
	return sp_trace_string(rep->r, sp_trace_string_id(rep->r, (uint32_t)i));
}

/* ---- report_findings.c ---- */
/* How the recorded steps were found (format version 2): one sentence into buf. Returns 0 if the
 * trace does not say (version 1). Can't fail. */
int sp_report_steps_found_by(const struct report *rep, char *buf, size_t len);
/* What stands out, in plain words, with where to look next: writes up to FINDINGS_MAX sentences
 * into f and returns how many. Exits if memory runs out. */
size_t sp_report_findings(const struct report *rep, char (*f)[FINDING_LEN]);

#endif
