/* SPDX-License-Identifier: MIT */
/* opattr.h - which torch operator and which nn.Module each GPU record of a window belongs to.
 * The window's op and module ranges (marker records with SP_MARKF_OP / SP_MARKF_MODULE) are
 * nested per thread; a GPU record's launching call (the API record of its correlation id) falls
 * in the innermost op on its thread, as torch.profiler ties a kernel to the op that launched it.
 * Its module is the innermost module around that call, or, for a backward op (the autograd node
 * directly inside "autograd::engine::evaluate_function: ..."), the module of the forward op with
 * the node's sequence number. Used by `report --by op|module` and `convert` (cpu_op events). */
#ifndef SP_OPATTR_H
#define SP_OPATTR_H

#include <stddef.h>
#include <stdint.h>
#include "trace/trace.h"
#include "windows.h"

/* One op or module range. */
struct sp_orange {
	const struct sp_event *e; /* its copy in opev or modev */
	int32_t parent; /* the enclosing range of its kind on its thread (index), -1 none */
	int32_t module; /* ops: the innermost module around its start (index into mod), -1 none */
	int32_t node;   /* ops: the backward node it runs under (index into op, itself for a node), -1 */
};

struct sp_opattr {
	struct sp_orange *op, *mod; /* by (tid, start), the longer first at equal starts */
	size_t nop, nmod, op_cap, mod_cap;
	struct sp_event *opev, *modev; /* copies of the window's op and module records, file order */
	size_t opev_cap, modev_cap;
	struct call {
		uint32_t corr, tid;
		uint64_t t;
	} *calls; /* launching calls inside a range by corr (open addressing), the earliest of an id */
	size_t calls_cap, ncalls;
	struct seqmod {
		int64_t seq;
		uint32_t module;
		int32_t fwd;
		int used;
	} *seqs; /* forward ops' seq -> the
							  * module of the last, the first (index) */
	size_t seqs_cap;
};

/* Builds a's view of the window g last handed out (r: the trace's strings) in two passes in file
 * order (the second only if the window has an op or module range), reusing a's memory: copies of
 * its op and module records, then its launching calls (corr, thread, start) inside one of those
 * ranges; never its GPU records (string fields are ids: the reader keeps the strings).
 * Exits the CLI if memory runs out; otherwise can't fail. Zero-initialise a before the first call. */
void sp_opattr_build(struct sp_opattr *a, const struct sp_trace_reader *r, struct sp_windows *g);
/* The innermost op (index into a->op) on thread tid at time t, -1 none. Can't fail. */
int sp_opattr_op_at(const struct sp_opattr *a, uint32_t tid, uint64_t t);
/* The innermost op around the launching call of correlation id corr, -1 none (or no such call
 * in the window). Can't fail. */
int sp_opattr_op_of(const struct sp_opattr *a, uint32_t corr);
/* The module (its name's string id) whose forward, or whose backward through a sequence number
 * (*backward set to 1), the GPU work of correlation id corr belongs to; 0 none. Can't fail. */
uint32_t sp_opattr_module_of(const struct sp_opattr *a, uint32_t corr, int *backward);
/* The index of range e (an op marker of the window) in a->op, -1 if it is none. Can't fail. */
int sp_opattr_index(const struct sp_opattr *a, const struct sp_event *e);
/* The forward op (index) that op i, a backward node, was made for (the first forward op with its
 * sequence number), -1 none. Can't fail. */
int sp_opattr_fwd_of(const struct sp_opattr *a, int i);
/* Frees a's memory and zeroes it. Can't fail. */
void sp_opattr_free(struct sp_opattr *a);

#endif
