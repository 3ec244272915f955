/* SPDX-License-Identifier: MIT */
/* kname.h - the name of the kernel a launch hook sees (preload/procaddr.c), as CUPTI's symbolName
 * gives it (the mangled name), interned by the collector. */
#ifndef SP_KNAME_H
#define SP_KNAME_H

#include <cuda.h>
#include <stdint.h>

/* The interned id of f's name, 0 if the driver cannot name it or f is NULL. The driver is asked every call
 * (a reloaded module may reuse an address: docs/ARCHITECTURE.md); a lock-free table only saves the
 * interning. Can't fail. */
uint32_t sp_kname(CUfunction f);

#endif
