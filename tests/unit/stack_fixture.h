/* SPDX-License-Identifier: MIT */
/* stack_fixture.h - call stacks made of the test binary's own functions and MODULE records of its
 * own executable mappings (read from /proc/self/maps as the collector reads them), so a trace a
 * test writes symbolises offline to known names for as long as the binary exists. */
#ifndef SP_STACK_FIXTURE_H
#define SP_STACK_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "trace/trace.h"

/* Distinct bodies, so no two are folded into one by the compiler. */
static volatile int sx_sink;
__attribute__((noinline, unused)) static void sx_alloc_weights(void) { sx_sink = 1; }
__attribute__((noinline, unused)) static void sx_model_forward(void) { sx_sink = 2; }
__attribute__((noinline, unused)) static void sx_train_loop(void) { sx_sink = 3; }
__attribute__((noinline, unused)) static void sx_launch_gemm(void) { sx_sink = 4; }

/* A return address 4 bytes into fn: symbolises as "fn+0x4". */
#define SX_PC(fn) ((uint64_t)(uintptr_t)&(fn) + 4)

/* Writes, for every executable mapping of a file, its path as string first_id + i and a MODULE
 * record at time t. Returns the number of modules written (-1 if the maps can't be read). */
__attribute__((unused)) static int sx_write_modules(struct sp_trace_writer *w, uint64_t t, uint32_t first_id)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4352], path[4096], perm[8];
	unsigned long long lo, hi, off;
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &lo, &hi, perm, &off, path) == 5 &&
		    perm[2] == 'x' && path[0] == '/') {
			struct sp_event ev = { .kind = SP_EV_MODULE, .device = SP_NO_DEVICE, .start = t, .end = t,
					       .name = first_id + (uint32_t)n };
			ev.u.module.start = lo;
			ev.u.module.end = hi;
			ev.u.module.offset = off;
			if (sp_trace_write_string(w, ev.name, path) < 0 || sp_trace_write(w, &ev) < 0)
				n = -1000;
			n++;
		}
	fclose(f);
	return n < 0 ? -1 : n;
}

#endif
