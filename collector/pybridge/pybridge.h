/* SPDX-License-Identifier: MIT */
/* pybridge.h - the Python bridge: a helper thread installs what the configuration asks in the
 * program's CPython (optimizer hook, GradScaler wrapper, python markers) without importing; its
 * events go to the collector on the program's thread. Rules and limits: docs/STEPS.md. */
#ifndef SP_PYBRIDGE_H
#define SP_PYBRIDGE_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include "config/phase.h"

/* What to install. */
struct sp_pybridge_ask {
	int optimizer;                   /* the optimizer post hook and the GradScaler.update watch */
	int made;                        /* the Optimizer.__init__ watch (kind = auto: an optimizer made) */
	int ncalls; /* python markers' functions */
	const char *calls[SP_MAX_PHASES]; /* their module:qualname (outlive the bridge); index = event index */
	int torch_memory;         /* torch's allocator history and snapshot per window (pymem.c) */
	int torch_memory_entries; /* the history's bound */
};

/* Starts the bridge's polling thread if this process has a CPython the bridge knows. Returns 1
 * started, 0 no CPython (said if `loud`), -1 the thread could not start (warned). Call once, at
 * CUDA's initialisation. */
int sp_pybridge_start(const struct sp_pybridge_ask *ask, int loud);
/* The process exits: the helper thread polls no more (it is not waited for). Can't fail. */
void sp_pybridge_stop(void);
/* What became of the watches, for the collector's exit messages: 0 waiting (never found), 1
 * installed, 2 failed, -1 the interpreter was never seen initialised; what: 0 the optimizer hook,
 * 1 the scaler watch, 2 + i python marker i. This function can't fail. */
int sp_pybridge_state(int what);

#endif
