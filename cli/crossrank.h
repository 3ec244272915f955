/* SPDX-License-Identifier: MIT */
/* crossrank.h - the cross-rank diagnosis behind `stepprof steps` with several traces: every rank's
 * collectives paired by (communicator, sequence number), the ranks put on one clock (wall-clock
 * anchors, refined by the collectives' common end), each collective's arrivals, waits and
 * transfers, a per-rank-and-step breakdown (compute, exposed communication, wait for peers, host
 * stall, copies) and the straggler with its cause. Reads each trace once; keeps per rank its steps,
 * its collectives and its compute intervals, never a whole trace. Never exits except on out of
 * memory; prints only in sp_xrank_print / sp_xrank_json. */
#ifndef SP_CROSSRANK_H
#define SP_CROSSRANK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "steps.h"

#define SP_XRANK_SCHEMA 1 /* "schema_version" of sp_xrank_json's output */

struct sp_xrank;

/* A new, empty analysis. Exits the CLI if memory runs out. */
struct sp_xrank *sp_xrank_new(void);
/* Loads only the windows of phase from then on (NULL: every window). Can't fail. */
void sp_xrank_set_phase(struct sp_xrank *a, const char *phase);
/* 1 if the windows loaded belong to two or more phases (or some to none). Can't fail. */
int sp_xrank_phases_mixed(const struct sp_xrank *a);
/* Reads the trace at path into a: its steps, NCCL collectives and compute intervals. Returns 1
 * loaded, 0 if the trace holds no recorded step (left out, nothing kept), -1 if it is unreadable
 * or corrupt (message in err). Exits the CLI if memory runs out. */
int sp_xrank_load(struct sp_xrank *a, const char *path, char *err, size_t errlen);
/* Aligns the clocks, pairs the collectives, and computes waits, breakdowns and the verdict. Call
 * once, after the last load. Exits the CLI if memory runs out; otherwise can't fail. */
void sp_xrank_analyse(struct sp_xrank *a);
/* The traces loaded, in load order: their steps and header ranks (-1 unknown). */
size_t sp_xrank_count(const struct sp_xrank *a);
const struct sp_steps *sp_xrank_steps(const struct sp_xrank *a, size_t i);
int sp_xrank_rank(const struct sp_xrank *a, size_t i);
const char *sp_xrank_path(const struct sp_xrank *a, size_t i);
/* Whether trace i was cut short: 0 no; 1 the file ends inside a chunk; 2 a window lacks its
 * WINDOW_END (the last such window's id and the last step it holds in *window, *step). */
int sp_xrank_cut(const struct sp_xrank *a, size_t i, uint32_t *window, int64_t *step);
/* The per-rank table, the clock alignment and the verdict in plain words. Can't fail. */
void sp_xrank_print(const struct sp_xrank *a, FILE *out);
/* Everything as one JSON object (schema SP_XRANK_SCHEMA, docs/OUTPUTS.md); with arrivals, also
 * every collective's calls (arrivals, waits, transfers). Can't fail. */
void sp_xrank_json(const struct sp_xrank *a, FILE *out, int arrivals);
/* For an NCCL kernel of the trace of rank key (its pid without a rank) starting at ks (trace clock)
 * that began a collective paired with other ranks: its wait for the last arrival in *wait (ns,
 * from ks) and returns 1; 0 if the analysis has no such kernel. Can't fail. */
int sp_xrank_kernel_wait(const struct sp_xrank *a, int64_t key, uint64_t ks, uint64_t *wait);
struct sp_out;
/* For the merged Perfetto view (convert --merge-ranks): if kernel e of the trace of key (at ts on
 * the output's axis, on track pid/e->stream) is an NCCL kernel the analysis paired, writes two
 * slices nested in it to o, each preceded by ",\n": "wait for peers" (cat nccl_wait, from its start
 * until the last rank arrived) and "transfer" (cat nccl_transfer, the rest). Returns the number of
 * events written (0 or 2). Can't fail (write errors are the stream's, see export.h). */
int sp_xrank_wait_slices(const struct sp_xrank *a, struct sp_out *o, int64_t key, const struct sp_event *e, int64_t pid,
			 uint64_t tid, int64_t ts);
/* The verdict's straggler: its rank (or -1 for none), cause name in *cause (NULL for none). */
int sp_xrank_straggler(const struct sp_xrank *a, const char **cause);
/* Trace i's NCCL kernels split at each collective's last arrival (those paired with another
 * trace; unpaired kernels count as transfer): totals and medians per step. Can't fail. */
struct sp_xrank_wait {
	uint64_t wait_ns, transfer_ns;          /* all its steps */
	uint64_t wait_step_ns, transfer_step_ns; /* medians per step */
	size_t steps;
};
void sp_xrank_waits(const struct sp_xrank *a, size_t i, struct sp_xrank_wait *w);
/* The verdict in plain words (after sp_xrank_analyse). Can't fail. */
const char *sp_xrank_verdict(const struct sp_xrank *a);
/* Frees a (NULL is fine). Can't fail. */
void sp_xrank_free(struct sp_xrank *a);

#endif
