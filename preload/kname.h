/* SPDX-License-Identifier: MIT */
/* kname.h - the name of the kernel a launch hook sees (preload/procaddr.c), as CUPTI's symbolName
 * gives it (the mangled name), interned by the collector. */
#ifndef SP_KNAME_H
#define SP_KNAME_H

#include <cuda.h>
#include <stdint.h>

/* The interned id of f's name, 0 if the driver cannot name it (before CUDA 12.3) or f is NULL.
 * The driver is asked at every call (one call, by the getter that named f before: cuFuncGetName
 * for a CUfunction, cuKernelGetName for the CUkernel cudart 12+ passes as one): a module unloaded
 * and another loaded may put another kernel at a CUfunction's address (XLA autotunes that way).
 * A lock-free table per CUfunction keeps the interned id, reused while its name is the driver's
 * answer, so only the interning is saved; a racing thread names it again. Can't fail. */
uint32_t sp_kname(CUfunction f);

#endif
