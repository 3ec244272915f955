/* SPDX-License-Identifier: MIT */
/* pystack.h - the calling thread's Python frames, read in-process from CPython 3.10-3.13 (found
 * with dlsym, never linked): (file, function, line) triples interned as small Python frame ids,
 * and their merge into a native stack where _PyEval_EvalFrameDefault stands (py-spy --native).
 * It never calls into the interpreter in a way that can run Python code, raise, allocate or touch
 * a reference count: PyTorch releases the GIL before it launches a kernel or allocates, so the
 * frames are read without it, from the thread's own frame chain (see pystack.c). */
#ifndef SP_PYSTACK_H
#define SP_PYSTACK_H

#include <stdint.h>

#define SP_PY_MAX 128 /* Python frames read per stack */

/* Reads the calling thread's Python frames, innermost first: ids[i] is an interned frame id and
 * entry[i] is 1 if frame i is the first one its _PyEval_EvalFrameDefault call ran (so the next
 * frame belongs to the next eval call outwards), 0 if not, 2 if unknown. Returns the count (at
 * most max), or 0: no CPython in the process, a version or build it does not know, no Python
 * frame on this thread, or the walk was turned off after a failed layout check (warned once).
 * Safe on any thread, with or without the GIL; never allocates with malloc. */
int sp_pystack_walk(uint32_t *ids, uint8_t *entry, int max);
/* For a thread with no Python frame (PyTorch's autograd threads, which launch the backward
 * kernels): the frames of another thread that is blocked in autograd's backward() (its innermost
 * frame torch/autograd/graph.py _engine_run_backward, or torch/autograd/__init__.py backward or
 * grad), innermost first, as interned ids. Every read of that thread's memory is guarded (it may
 * wake and change its frames at any time) and a walk counts only if the frames it read are still
 * in place after it; one is reused while they stay in place. Returns the count (at most max), or 0:
 * no such thread, no CPython or the walker off, or the frames changed while read. Never warns,
 * never turns the walker off; keeps errno. Safe on any thread; never allocates with malloc. */
int sp_pystack_borrow(uint32_t *ids, int max);
/* 1 if pc (a return address) lies in CPython's _PyEval_EvalFrameDefault, else 0. Lock-free;
 * can't fail (0 before the first walk resolved the interpreter). */
int sp_pystack_is_eval(uint64_t pc);
/* Merges Python frames into a native stack (both innermost first): each native frame in
 * _PyEval_EvalFrameDefault (is_eval[i] set) is replaced by the Python frames its call ran (one
 * group up to an entry frame; with entry unknown, one frame each and the rest at the outermost
 * eval frame), tagged SP_PYFRAME_TAG | id; Python frames left over when the native frames run
 * out go at the outer end. Writes at most max frames to out and returns the count. Pure; can't
 * fail. */
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
