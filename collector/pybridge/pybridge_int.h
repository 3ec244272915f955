/* SPDX-License-Identifier: MIT */
/* pybridge_int.h - state the bridge's two files share (pybridge.c: the thread and its guards;
 * pywatch.c: what a poll installs and the callables Python calls). Only they include it. */
#ifndef SP_PYBRIDGE_INT_H
#define SP_PYBRIDGE_INT_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <stdatomic.h>
#include <stdint.h>
#include "pyapi.h"
#include "pybridge.h"

/* The watches, by index in sp_pyb.state: the optimizer hook, the scaler watch, python marker i at
 * SP_PYW_CALL + i, the watch on Optimizer.__init__ (an optimizer made) last. */
enum { SP_PYW_OPTIM = 0, SP_PYW_SCALER = 1, SP_PYW_CALL = 2, SP_PYW_MADE = 2 + SP_MAX_PHASES, SP_PYW_N };
/* A watch's state. */
enum { SP_PYW_WAITING = 0, SP_PYW_INSTALLED, SP_PYW_FAILED };

extern struct sp_pyb {
	struct sp_pybridge_ask ask; /* what to install (set before the thread starts) */
	_Atomic int off;            /* a failure (said), a fork child: the callables return at once */
	_Atomic int stopping;       /* the interpreter finalises (atexit, Py_AtExit) or the process
				     * exits: no poll from now on, for good */
	uint64_t delay_us;          /* STEPPROF_TEST_PYBRIDGE_DELAY_US (tests only) */
	unsigned polls;             /* polls so far (helper thread) */
	_Atomic unsigned gil_polls; /* ... that took the GIL, and how long they held it in all (ns): */
	_Atomic uint64_t gil_ns;    /* what a poll costs the program's threads (STEPPROF_VERBOSE) */
	void *ts;                   /* the helper thread's own PyThreadState, kept between polls (its
				     * GIL let go with PyEval_SaveThread), NULL before the first poll */
	int gil;                    /* the PyGILState_Ensure that made it (released when polling ends) */
	int running;                /* the interpreter was seen initialised (a later "not" is its end) */
	int exit_guard;             /* Py_AtExit took the C exit guard (or cannot) */
	int state[SP_PYW_N];        /* SP_PYW_* of each watch (written by the helper thread) */
	/* what a poll keeps (helper thread or the GIL holder; never freed: the process keeps them) */
	PyObj *helpers;             /* the private globals of the helper functions (pywatch.c) */
	PyObj *hook_handle;         /* the optimizer hook's RemovableHandle */
	PyObj *code[SP_PYW_N];      /* 3.12+: the code object each watch's PY_START is on, or NULL */
	int tool; /* sys.monitoring tool id, -1 none (wrappers), -2 not tried yet */
	int exit_hooked;            /* the atexit callback is registered (or cannot be) */
} sp_pyb;

/* pybridge.c */
void sp_pyb_off(const char *what, const char *why);
/* 1 while the callables may act: on, in the process that started it, the interpreter not finalising. */
int sp_pyb_live(void);

/* pyops.c: turns torch's operator emission and the module hooks on or off as the collector wants
 * (sp_collector_ops_want), after each of the bridge's events, on the program's thread with the
 * GIL held. Can't fail (a Python exception turns operators off, said once). */
void sp_pyops_tick(void);

/* pymem.c: turns torch's allocator history on at a window's first step and, at its end, writes
 * its snapshot beside the trace and turns it off ([activities] torch_memory), after each of the
 * bridge's events, on the program's thread with the GIL held. Can't fail (a Python exception
 * turns it off for good, said once). */
void sp_pymem_tick(void);

/* pywatch.c: installs what is due, with the GIL held (helper thread). Can't fail (a Python
 * exception turns the bridge off, said once). */
void sp_pyw_poll(void);

#endif
