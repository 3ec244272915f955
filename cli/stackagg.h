/* SPDX-License-Identifier: MIT */
/* stackagg.h - stack aggregation: call sites counted by stack id, for `stepprof stacks` (folded stacks: one
 * "root;...;leaf weight" line per distinct stack, as flamegraph.pl and speedscope read them) and
 * for the "Top allocation sites by bytes" table of `stepprof report`. Counts per stack id while
 * streaming; names frames (symbols.h) only when printing. */
#ifndef SP_STACKAGG_H
#define SP_STACKAGG_H

#include <stdint.h>
#include <stdio.h>
#include "trace/trace.h"
#include "symbols.h"
#include "windows.h"

/* What is counted (a mask of these) */
enum {
	SP_FOLD_ALLOC = 1,      /* allocations made in a window (not SNAPSHOT or PEAK records); bytes = size */
	SP_FOLD_LAUNCH = 2,     /* CUDA launch calls: API records with a stack whose name has "aunch"; no bytes */
	SP_FOLD_NCCL = 4,       /* NCCL calls; bytes = the call's bytes */
	SP_FOLD_ALL = 7,
};

#define SP_FOLD_CLASSES 3
#define SP_SITES_TOP 10 /* rows of the report's sites table */

/* Calls and bytes per stack id, per class. Zero-initialise; free with sp_stackagg_free. */
struct sp_stackagg {
	struct {
		uint64_t calls, bytes;
		uint64_t device;        /* alloc: of the calls, GPU allocations (their owner is told) */
	} *c[SP_FOLD_CLASSES]; /* indexed by sp_trace_stack_index (0: no stack) */
	uint32_t cap[SP_FOLD_CLASSES];
	uint64_t total[SP_FOLD_CLASSES]; /* records counted */
};

/* Counts ev if it is of a class in mask (r names its API call). Exits the CLI if memory runs out;
 * otherwise can't fail. */
void sp_stackagg_add(struct sp_stackagg *a, const struct sp_trace_reader *r, const struct sp_event *ev, unsigned mask);
/* Writes the folded stacks of the classes in mask: frames root first, named as sp_sym_function
 * names them (';' in a name becomes '_'), "[no stack]" for records without one, under a root
 * frame "[alloc]", "[launch]" or "[nccl]" when mask has several classes; weight = bytes (by_bytes)
 * or calls; lines sorted, equal stacks merged, weight-0 lines left out. Stack ids are read from
 * r. Returns the number of lines written. Exits if memory runs out. */
size_t sp_stackagg_folded(const struct sp_stackagg *a, unsigned mask, int by_bytes, const struct sp_trace_reader *r,
			  struct sp_sym *sym, FILE *out);
/* Prints "Top allocation sites by bytes": the top rows (by bytes, then name) of allocations
 * grouped by their innermost frame, as "function+0xoff (module)", with bytes, calls and, for GPU
 * allocations, their owner (memtl.h, sp_memtl_owner; sites of different owners are apart). Does
 * nothing if no allocation was counted. Modules are read from the trace at path; stack ids from r.
 * Exits if memory runs out; otherwise can't fail (a trace that can't be reread only leaves
 * addresses unnamed). */
void sp_stackagg_sites(const struct sp_stackagg *a, const char *path, const struct sp_trace_reader *r, int top,
		       FILE *out);
struct sp_out;
/* The same sites, all of them, as a JSON array of {"site","bytes","calls","owner"} (owner: the
 * key of sp_memtl_owner_key, null for host allocations) written to x ([] when
 * no allocation was counted). Exits if memory runs out; otherwise can't fail. */
void sp_stackagg_sites_json(const struct sp_stackagg *a, const char *path, const struct sp_trace_reader *r,
			    struct sp_out *x);
/* Frees a's memory and zeroes it. This function can't fail. */
void sp_stackagg_free(struct sp_stackagg *a);

#endif
