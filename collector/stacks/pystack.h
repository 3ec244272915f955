/* SPDX-License-Identifier: MIT */
/* pystack.h - the calling thread's Python frames, read in-process from CPython 3.10-3.13 (found with
 * dlsym), interned as frame ids and merged into native stacks. Never runs Python code, allocates or
 * touches a reference count: frames are read without the GIL (see pystack.c). */
#ifndef SP_PYSTACK_H
#define SP_PYSTACK_H

#include <stdint.h>

#define SP_PY_MAX 128 /* Python frames read per stack */

/* Reads the calling thread's Python frames, innermost first: ids[i] an interned id, entry[i] 1 if the first
 * of its eval call, 0 if not, 2 unknown. Returns the count (<= max), or 0 (no CPython, unknown layout, no
 * frame, walker off). Any thread, GIL or not; never mallocs. */
int sp_pystack_walk(uint32_t *ids, uint8_t *entry, int max);
/* For a thread with no Python frame (autograd's): the frames of a thread blocked in backward(), read
 * with guarded reads and kept only if still in place after. Returns the count (<= max), or 0. Never warns
 * or turns the walker off; keeps errno. Any thread; never mallocs. */
int sp_pystack_borrow(uint32_t *ids, int max);
/* 1 if pc (a return address) lies in CPython's _PyEval_EvalFrameDefault, else 0. Lock-free;
 * can't fail (0 before the first walk resolved the interpreter). */
int sp_pystack_is_eval(uint64_t pc);
/* Merges Python frames into a native stack (both innermost first): each _PyEval_EvalFrameDefault frame
 * (is_eval[i]) becomes the Python frames it ran, tagged SP_PYFRAME_TAG | id. Returns the count (<= max). Pure. */
uint32_t sp_pystack_merge(const uint64_t *native, const uint8_t *is_eval, uint32_t nn, const uint32_t *py,
			  const uint8_t *entry, uint32_t np, uint64_t *out, uint32_t max);
/* Interns the frame (file, func: string ids; line) and returns its id, or 0 if the table is
 * full. Lock taken on a miss only. Used by the walker and by tests. */
uint32_t sp_pyframe_intern(uint32_t file, uint32_t func, uint32_t line);
/* The frame of id: string ids of its file and function, and its line. Returns 0, or -1 if id is
 * unknown. Lock-free. Signature fits sp_pyframe_lookup_fn of trace.h. */
int sp_pyframe_lookup(void *ctx, uint32_t id, uint32_t *file, uint32_t *func, uint32_t *line);
/* "3.12" etc. of the interpreter the walker uses, or NULL if none (not resolved yet, not CPython,
 * unsupported). For messages. */
const char *sp_pystack_version(void);

#endif
