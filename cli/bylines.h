/* SPDX-License-Identifier: MIT */
/* bylines.h - GPU kernel time by source line, for `stepprof report --by line`: each kernel is
 * charged to the stack of the launch call with its correlation id, and the stack to its
 * innermost Python frame of the program's own code (symbols.h, sp_py_user_file: frames of the
 * standard library, installed packages and torch/ are skipped). Streaming: a window at a time;
 * memory is one row per launch stack, and the window's launch stacks by correlation id. */
#ifndef SP_BYLINES_H
#define SP_BYLINES_H

#include <stdint.h>
#include <stdio.h>
#include "export.h"
#include "trace/trace.h"
#include "windows.h"

/* Kernel time and count per launch stack id (0: the launch record has no stack), and of kernels
 * whose launch record is not in their window. Zero-initialise. */
struct sp_bylines {
	struct {
		uint64_t ns, kernels;
	} *s, orphan;
	size_t cap;
	struct {                /* the window being read: launch stack by correlation id */
		uint32_t lo;    /* dense: stack[id - lo], its bit in has set */
		uint64_t n;     /* ids covered; 0: sparse, key/val by open addressing (key 0 empty) */
		uint32_t *stack;
		uint64_t *has;
		uint32_t *key, *val;
		size_t cap, used;
	} launch;
};

/* Charges a window's kernels to their launch stacks, streaming: sp_bylines_begin (for the window g
 * handed out last), sp_bylines_call for each of its events (its launch calls), then
 * sp_bylines_kernel for each of its events (its kernels). Memory: a stack per correlation id of
 * the window (4 bytes an id while the ids are dense). Each exits the CLI if memory runs out;
 * otherwise they can't fail. */
void sp_bylines_begin(struct sp_bylines *b, const struct sp_windows *g);
void sp_bylines_call(struct sp_bylines *b, const struct sp_event *e);
void sp_bylines_kernel(struct sp_bylines *b, const struct sp_event *e);
/* Prints the table (top rows by time, 0 = all; wide: no cut in the line column), stack and
 * Python frame tables read from r. Can't fail (exits if memory runs out). */
void sp_bylines_print(const struct sp_bylines *b, const struct sp_trace_reader *r, int top, int wide, FILE *out);
/* Writes the rows as a JSON array (every row): {"file","line","function","user","total_ns",
 * "kernels"}, file/line/function null for kernels without a Python frame (then "what" says why:
 * "no Python frame", "no launch stack", "no launch record"). */
void sp_bylines_json(const struct sp_bylines *b, const struct sp_trace_reader *r, struct sp_out *x);
/* Frees b's memory and zeroes it. This function can't fail. */
void sp_bylines_free(struct sp_bylines *b);

#endif
