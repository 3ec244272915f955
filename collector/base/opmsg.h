/* SPDX-License-Identifier: MIT */
/* opmsg.h - torch's NVTX message of an operator, taken apart: what torch's NVTX emission
 * (torch.autograd.profiler.emit_nvtx, torch/csrc/profiler/util.cpp getNvtxStr) pushes for each
 * op: "NAME[, seq = N], op_id = N[, sizes = [[...], ...]][, input_op_ids = [...]]". Pure: no
 * allocation, no interning; the parts point into the message. */
#ifndef SP_OPMSG_H
#define SP_OPMSG_H

#include <stddef.h>
#include <stdint.h>

struct sp_opmsg {
	int op;              /* 1: a torch op's message (it has "op_id = "), 0: any other range */
	size_t name_len;     /* the name is msg[0, name_len) */
	int has_seq;         /* "seq = N" was there */
	int64_t seq;
	const char *sizes;   /* the sizes list "[[...], ...]", NULL if none */
	size_t sizes_len;    /* up to its closing bracket (the rest of the message if it never closes) */
};

/* Takes msg apart into *m. This function can't fail. */
void sp_opmsg_parse(const char *msg, struct sp_opmsg *m);

#endif
