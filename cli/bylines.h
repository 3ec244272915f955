/* SPDX-License-Identifier: MIT */
/* bylines.h - GPU kernel time by source line, for `stepprof report --by line|frame`: each kernel
 * is charged to the stack of the launch call with its correlation id, and the stack to one Python
 * frame: by line, the innermost frame of the program's own code (symbols.h, sp_py_user_file: frames
 * of the standard library, installed packages and torch/ are skipped); by frame, the innermost
 * frame outside torch and the standard library, installed packages included (sp_py_model_file). A
 * program whose own code reaches the GPU through one line only (HF Trainer's trainer.train()) is
 * shown by frame. Kernels that autograd's threads launched while the program waited in backward()
 * (stacks with SP_FRAME_BACKWARD) are marked [backward]. Streaming: a window at a time; memory is
 * one row per launch stack, and the window's launch stacks by correlation id. */
#ifndef SP_BYLINES_H
#define SP_BYLINES_H

#include <stdint.h>
#include <stdio.h>
#include "export.h"
#include "trace/trace.h"
#include "windows.h"

enum { SP_BYLINES_LINE = 1, SP_BYLINES_FRAME = 2 }; /* what a row is: --by line, --by frame */

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
/* Prints the table by mode (SP_BYLINES_*; line turns to frame for a program with a single entry
 * point, and says so) (top rows by time, 0 = all; wide: no cut in the line column), stack and
 * Python frame tables read from r. Can't fail (exits if memory runs out). */
void sp_bylines_print(const struct sp_bylines *b, const struct sp_trace_reader *r, int mode, int top, int wide,
		      FILE *out);
/* Writes the rows (mode as for sp_bylines_print) as a JSON array (every row): {"file","line",
 * "function","user","what","backward","by","auto","total_ns","kernels"}: file/line/function null
 * for kernels without a Python frame (then "what" says why: "no Python frame", "no launch stack",
 * "no launch record"); "user": the frame is the program's own code; "backward": launched for
 * autograd's backward pass; "by": "line" or "frame"; "auto": frame was chosen for line. */
void sp_bylines_json(const struct sp_bylines *b, const struct sp_trace_reader *r, int mode, struct sp_out *x);
/* Frees b's memory and zeroes it. This function can't fail. */
void sp_bylines_free(struct sp_bylines *b);

#endif
