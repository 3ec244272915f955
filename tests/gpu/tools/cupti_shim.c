/* SPDX-License-Identifier: MIT */
/* cupti_shim.c - cupti_probe.h's CUPTI states for a Python program (torch_graph_probe.py loads
 * this with ctypes after importing torch, so the libcupti it uses is the one torch loads):
 * shim_attach(spec) attaches as cupti_probe.h says, shim_window(on) opens and closes a window of
 * KM kinds, shim_fin_start/busy/join detach on a thread of their own. No CUDA calls.
 * Build: gcc -shared -fPIC -I$CUDA/include cupti_shim.c -o libcuptishim.so -L<CUPTI lib> -lcupti -lpthread */
#include "cupti_probe.h"

#define SHIM __attribute__((visibility("default")))

/* Returns 0, or the CUPTI error of the call that failed (named on stderr). */
SHIM int shim_attach(const char *spec)
{
	const char *what = "";
	CUptiResult r = probe_attach(spec, &what);
	if (r != CUPTI_SUCCESS) {
		const char *s = "";
		cuptiGetResultString(r, &s);
		fprintf(stderr, "cupti_shim: %s: CUPTI %d %s\n", what, (int)r, s);
	}
	return (int)r;
}

SHIM void shim_window(int on) { probe_window(on); }
SHIM int shim_fin_start(void) { return probe_fin_start(); }
SHIM int shim_fin_busy(void) { return probe_fin_busy(); }
SHIM int shim_fin_join(void) { return (int)probe_fin_join(); }
SHIM unsigned long long shim_records(void) { return probe.records; }
SHIM unsigned long long shim_callbacks(void) { return probe.callbacks; }
SHIM const char *shim_note(void) { return probe.note; }
