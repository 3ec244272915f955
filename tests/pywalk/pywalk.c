/* SPDX-License-Identifier: MIT */
/* pywalk.c - a test library (not part of stepprof) that a real CPython loads with ctypes: it
 * captures the calling thread's stack through collector/stacks/stacks.c and collector/stacks/pystack.c, as
 * the preloaded library does at a launch, and returns it as text for tests/pywalk/check.py. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "collector/base/intern.h"
#include "collector/stacks/pystack.h"
#include "collector/stacks/stacks.h"
#include "trace/trace.h"

/* One line per frame, innermost first: "py FILE:FUNC:LINE" or "c SYMBOL" (dladdr; "?" when the
 * symbol is not exported). what: 1 native, 2 python, 3 both. Returns the frame count, or -1. */
__attribute__((visibility("default"))) int pywalk_capture(char *out, int cap, int what)
{
	uint32_t n = 0, id = sp_stack_capture(64, (unsigned)what);
	const uint64_t *pcs = id ? sp_stack_lookup(NULL, id, &n) : NULL;
	int len = 0;
	out[0] = 0;
	for (uint32_t i = 0; pcs && i < n && len < cap; i++) {
		uint32_t file, func, line;
		Dl_info info;
		if (SP_IS_PYFRAME(pcs[i]) && sp_pyframe_lookup(NULL, SP_PYFRAME_ID(pcs[i]), &file, &func, &line) == 0)
			len += snprintf(out + len, (size_t)(cap - len), "py %s:%s:%u\n", sp_intern_lookup(file),
					sp_intern_lookup(func), line);
		else
			len += snprintf(out + len, (size_t)(cap - len), "c %s\n",
					dladdr((void *)(uintptr_t)(pcs[i] - 1), &info) && info.dli_sname
						? info.dli_sname
						: "?");
	}
	return pcs ? (int)n : -1;
}

/* Captures n stacks (what as above) and returns the mean nanoseconds per capture: the cost of a
 * capture without ctypes around it. */
__attribute__((visibility("default"))) double pywalk_bench(int n, int what)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++)
		sp_stack_capture(64, (unsigned)what);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
}
