/* SPDX-License-Identifier: MIT */
/* stacks.h - call stacks captured with libunwind and interned as small ids that events carry
 * (u.mem.stack, u.api.stack, u.nccl.stack); the writer writes each stack once, before its first
 * use. Frames inside stepprof, libcupti and libcuda are dropped, so a stack starts at the
 * program's call. Symbolisation happens offline (cli/symbols.c) from the trace's module map. */
#ifndef SP_STACKS_H
#define SP_STACKS_H

#include <stdint.h>

#define SP_STACK_MAX 128

/* Captures the calling thread's stack (at most depth frames, 1..128) and returns its id, or 0 if
 * it could not (no memory, re-entered). Safe on any thread; may be called inside malloc hooks
 * (it allocates only through its own arena, mmap'ed). */
uint32_t sp_stack_capture(int depth);
/* The frames of stack id (innermost first) and their count, or NULL if unknown. Lock-free.
 * Signature fits sp_stack_lookup_fn of trace.h. */
const uint64_t *sp_stack_lookup(void *ctx, uint32_t id, uint32_t *n);

#endif
