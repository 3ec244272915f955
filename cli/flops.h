/* SPDX-License-Identifier: MIT */
/* flops.h - floating-point operations of a torch operator from its recorded input sizes, as
 * torch.profiler's with_flops counts them (torch/csrc/profiler/util.cpp computeFlops: aten::mm,
 * addmm, bmm, baddbmm, conv2d), and attention as torch.utils.flop_counter counts it (the
 * _scaled_dot_product_{flash,efficient,cudnn}_attention ops and their backward); the peak dense
 * bf16 tensor throughput of known GPUs by name. Pure: no trace, no output. */
#ifndef SP_FLOPS_H
#define SP_FLOPS_H

#include <stdint.h>

#define SP_SHAPES_MAX 16 /* tensors of an op's sizes read (the FLOP formulas need 4 at most) */
#define SP_DIMS_MAX 8    /* dimensions of a tensor read */

/* An op's input sizes, "[[8, 64], [], [64, 32]]" taken apart: n tensors (a non-tensor argument is
 * a tensor of 0 dimensions), each ndim[i] sizes. */
struct sp_shapes {
	int n;
	int ndim[SP_SHAPES_MAX];
	int64_t dim[SP_SHAPES_MAX][SP_DIMS_MAX];
};

/* Parses s into *sh. Returns 0, or -1 if s is not such a list (cut, or a tensor of more than
 * SP_DIMS_MAX dimensions); tensors past SP_SHAPES_MAX are left out. This function can't fail. */
int sp_shapes_parse(const char *s, struct sp_shapes *sh);
/* The FLOPs of one call of op (its name, "aten::mm") with input sizes shapes (NULL: none) and,
 * for aten::conv2d, the convolution module's parameters conv ("stride=1,1 padding=1,1
 * dilation=1,1 groups=1", or padding=same/valid; NULL if unknown). Returns 1 with *flops, 0 if
 * op has no formula, -1 if it has one but the sizes (or conv's parameters) do not fit it. */
int sp_flops(const char *op, const char *shapes, const char *conv, double *flops);
/* 1 if op has a FLOP formula (sp_flops may count it). Can't fail. */
int sp_flops_counted(const char *op);
/* The dense bf16 tensor-core peak of the GPU called name, in TFLOP/s (vendors' datasheets), or 0
 * if the table does not know it. Can't fail. */
double sp_flops_peak(const char *name);

#endif
