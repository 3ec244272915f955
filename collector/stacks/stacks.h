/* SPDX-License-Identifier: MIT */
/* stacks.h - call stacks captured with libunwind and/or read from CPython (pystack.h), interned as small ids
 * events carry; frames of stepprof, libcupti and libcuda dropped; Python frames as SP_PYFRAME_TAG | id
 * (borrowed ones after SP_FRAME_BACKWARD). Symbolised offline (cli/symbols.c). */
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

/* Captures the calling thread's stack (what: SP_STACKS_* mask; at most depth native and Python frames,
 * 1..128). Returns its id, or 0 (nothing, no memory, re-entered). Any thread, malloc hooks included. */
uint32_t sp_stack_capture(int depth, unsigned what);
/* The frames of stack id (innermost first) and their count, or NULL if unknown. Lock-free.
 * Signature fits sp_stack_lookup_fn of trace.h. */
const uint64_t *sp_stack_lookup(void *ctx, uint32_t id, uint32_t *n);

#endif
