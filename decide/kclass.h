/* SPDX-License-Identifier: MIT */
/* kclass.h - what a kernel's name says about the work: a backward pass or an optimizer step
 * (training). Names as PyTorch, Inductor, cuDNN, cuBLAS and llm.c spell them; case-insensitive.
 * Pure. */
#ifndef SP_KCLASS_H
#define SP_KCLASS_H

/* 1 if the kernel name says backward pass or optimizer step ("backward", "bwd", "wgrad",
 * "dgrad", "adam", "sgd", "optimizer", "lamb", "adagrad", "rmsprop"), else 0 (NULL too). */
int sp_kernel_trains(const char *name);

#endif
