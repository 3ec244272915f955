/* SPDX-License-Identifier: MIT */
/* pybridge.h - the Python bridge: in a CPython 3.10-3.13 process, a helper thread that takes the
 * GIL the way C extensions do and installs what the configuration asks in the program's own
 * Python: torch's global optimizer post hook, a wrapper on GradScaler.update, and the python
 * markers' functions (sys.monitoring's PY_START on 3.12+, a wrapper on 3.10/3.11). It never
 * imports a module (only sys.modules entries whose import has finished), leaves no name in the
 * program's namespaces (but the wrappers, which replace the attributes they wrap), does
 * nothing while the interpreter finalises or in a forked child, and on any Python exception says
 * one `stepprof:` line and turns itself off. A front end: its events go to the collector
 * (collector.h, sp_collector_py_*), on the program's thread with the GIL held. Calls CPython,
 * never CUPTI. docs/STEPS.md, "PyTorch optimizer steps" and "Python markers". */
#ifndef SP_PYBRIDGE_H
#define SP_PYBRIDGE_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include "config/phase.h"

/* What to install. */
struct sp_pybridge_ask {
	int optimizer;                   /* the optimizer post hook and the GradScaler.update watch */
	int ncalls; /* python markers' functions */
	const char *calls[SP_MAX_PHASES]; /* their module:qualname (outlive the bridge); index = event index */
	int torch_memory;         /* torch's allocator history and snapshot per window (pymem.c) */
	int torch_memory_entries; /* the history's bound */
};

/* Starts the bridge in this process if CPython is there (Py_IsInitialized resolves), with the
 * calling thread's view of the configuration: a helper thread (signals blocked) polls about
 * every 100 ms, from when the interpreter is initialised (a program that embeds CPython may
 * initialise it after CUDA) until everything asked is installed or has failed. Returns 1 if
 * started, 0 if the process has no CPython (or one the bridge does not know: said once if asked
 * explicitly, `loud`), -1 if the thread could not start (warned). Call once, at CUDA's
 * initialisation. */
int sp_pybridge_start(const struct sp_pybridge_ask *ask, int loud);
/* The process exits: the helper thread polls no more (it is not waited for). Can't fail. */
void sp_pybridge_stop(void);
/* What became of the watches, for the collector's exit messages: 0 waiting (never found), 1
 * installed, 2 failed, -1 the interpreter was never seen initialised; what: 0 the optimizer hook,
 * 1 the scaler watch, 2 + i python marker i. This function can't fail. */
int sp_pybridge_state(int what);

#endif
