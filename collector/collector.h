/* SPDX-License-Identifier: MIT */
/* collector.h - the collector core's entry points. Front ends (preload/ hooks, the CUDA
 * injection entry) call these and nothing else; the core does not know who called. */
#ifndef SP_COLLECTOR_H
#define SP_COLLECTOR_H

#include <stdint.h>

/* Called once from the CUDA driver's injection entry (inside cuInit, before any kernel or graph
 * exists). Loads the configuration; if this process is selected, loads CUPTI, subscribes and
 * arms step detection. Any failure warns once and leaves the process unprofiled.
 * This function can't fail (it returns nothing). */
void sp_collector_inject(void);
/* A hooked library call that may be a marker (NCCL: fn = "ncclAllReduce"...). Cheap when the
 * marker is not of that kind. May run on any thread. */
void sp_collector_library_call(int kind, const char *fn);
/* Another tool tried to subscribe to CUPTI (torch.profiler, nsys): warn once, naming it.
 * Returns 1 if stepprof holds CUPTI in this process (the caller must fail the other subscribe). */
int sp_collector_owns_cupti(void);

#endif
