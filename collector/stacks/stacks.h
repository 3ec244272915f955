/* SPDX-License-Identifier: MIT */
/* stacks.h - call stacks captured with libunwind (native) and/or read from CPython (pystack.h)
 * and interned as small ids that events carry (u.mem.stack, u.api.stack, u.nccl.stack); the
 * writer writes each stack once, before its first use. Frames inside stepprof, libcupti and
 * libcuda are dropped, so a stack starts at the program's call. Python frames are stored as
 * SP_PYFRAME_TAG | frame id (trace.h) where _PyEval_EvalFrameDefault stood; a thread with no Python
 * frame that runs while another is blocked in autograd's backward() gets that thread's Python frames
 * after SP_FRAME_BACKWARD (trace.h), outer to its own native frames. Symbolisation happens
 * offline (cli/symbols.c) from the trace's module map and Python frame records. */
#ifndef SP_STACKS_H
#define SP_STACKS_H

#include <stdint.h>

#define SP_STACK_MAX 128                  /* native frames, and Python frames, per stack */
#define SP_STACK_MERGED (2 * SP_STACK_MAX) /* frames of a stack with both */

/* For allocation sites, with SP_STACKS_PYTHON alone: the native stack when the thread has no Python
 * frame (of its own or borrowed), and otherwise its innermost SP_STACK_SITE_FRAMES native frames
 * inner to the Python frames, so that the library that allocated (PyTorch's caching allocator,
 * NCCL, cuBLAS) is known. */
#define SP_STACK_NATIVE_FALLBACK 0x100u
#define SP_STACK_SITE_FRAMES 12

/* Captures the calling thread's stack (what: the SP_STACKS_* mask of config.h, optionally with
 * SP_STACK_NATIVE_FALLBACK; at most depth native and depth
 * Python frames, 1..128) and returns its id, or 0 if it could not (nothing to capture, no
 * memory, re-entered). Safe on any thread; may be called inside malloc hooks (the stack arena is
 * mmap'ed; a Python frame seen for the first time interns its strings, and a malloc that this
 * re-enters gets no stack). A process without CPython gets native stacks only. */
uint32_t sp_stack_capture(int depth, unsigned what);
/* The frames of stack id (innermost first) and their count, or NULL if unknown. Lock-free.
 * Signature fits sp_stack_lookup_fn of trace.h. */
const uint64_t *sp_stack_lookup(void *ctx, uint32_t id, uint32_t *n);

#endif
