/* SPDX-License-Identifier: MIT */
/* report_ops.h - `stepprof report --by op` and `--by module`: GPU time by torch operator, as
 * torch.profiler's key_averages tables it (calls, self CUDA time: the kernels an op launched
 * itself, CUDA total: with the ops it called; with --shapes one row per input shapes), FLOPs
 * and achieved TFLOP/s beside the card's peak (flops.h); and by nn.Module, a tree of the
 * modules' paths (forward kernels, and the backward kernels autograd ran for them). Kernels are
 * charged as opattr.h says. Streaming: a window at a time; memory is one row per op name (and
 * shapes) and per module path. */
#ifndef SP_REPORT_OPS_H
#define SP_REPORT_OPS_H

#include <stdio.h>
#include "export.h"
#include "trace/trace.h"
#include "windows.h"

struct sp_opstats;

/* What the op table is sorted by (descending, the name ascending). */
enum { SP_OPSORT_SELF = 0, SP_OPSORT_TOTAL, SP_OPSORT_CALLS, SP_OPSORT_AVG, SP_OPSORT_NAME, SP_OPSORT_FLOPS };

/* A new accumulator; shapes: one row per (op, input shapes). Exits the CLI if memory runs out. */
struct sp_opstats *sp_opstats_new(int shapes);
/* Adds window w, the one g last handed out, of the trace r: two passes in file order (the ops,
 * modules and launching calls; then the GPU records charged by correlation id). Exits the CLI if
 * memory runs out; otherwise can't fail. */
void sp_opstats_add_window(struct sp_opstats *s, const struct sp_trace_reader *r, struct sp_windows *g,
			   const struct sp_window *w);
/* The op table (sort: SP_OPSORT_*; top rows, 0 all; wide: no cut in the name and shapes columns;
 * device: the GPU's name for its peak, NULL unknown). Can't fail (exits if memory runs out). */
void sp_opstats_print_ops(const struct sp_opstats *s, int sort, int top, int wide, const char *device, FILE *out);
/* The module tree (top: rows, 0 all). Can't fail (exits if memory runs out). */
void sp_opstats_print_modules(const struct sp_opstats *s, int top, int wide, FILE *out);
/* "ops":{...},"modules":{...} members (docs/OUTPUTS.md), every row. Can't fail. */
void sp_opstats_json(const struct sp_opstats *s, const char *device, struct sp_out *x);
/* Frees s (NULL is fine). Can't fail. */
void sp_opstats_free(struct sp_opstats *s);

#endif
