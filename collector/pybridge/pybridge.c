/* SPDX-License-Identifier: MIT */
/* pybridge.c - the bridge's life: the helper thread and its polls, the guards around the GIL
 * (interpreter end, fork, exit). No stepprof lock is held while Python runs. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "collector/base/clock.h"
#include "collector/base/log.h"
#include "collector/mem/memory.h"
#include "collector/out/writer.h"
#include "pybridge.h"
#include "pybridge_int.h"

#define POLL_NS 100000000ull   /* a poll every 100 ms ... */
#define SLOW_POLL_NS \
	1000000000ull /* ... and every second once the optimizer hook is in (the scaler
				    * watch may wait for a module the program never imports), or after
				    * SLOW_AFTER polls that found nothing (a program without torch) */
#define SLOW_AFTER 300

struct sp_pyb sp_pyb;

/* Turns the bridge off with one line naming what failed (why), or silently (why NULL). Its
 * callables return at once from now on; the helper thread stops at its next poll. Any thread.
 * This function can't fail. */
void sp_pyb_off(const char *what, const char *why)
{
	if (atomic_exchange(&sp_pyb.off, 1) || !why)
		return;
	sp_warn("Python bridge: %s failed (%s); it is off: %s", what, why,
		sp_pyb.ask.optimizer || sp_pyb.ask.ncalls ? "no more steps come from the program's Python" : "");
}

int sp_pyb_live(void)
{
	/* a fork child is off from its start (child_after_fork): no getpid, a system call, per event */
	return !atomic_load_explicit(&sp_pyb.off, memory_order_relaxed) && !sp_py.is_finalizing();
}

/* In a forked child: no helper thread, nothing installed counts (the callables see `off`). */
static void child_after_fork(void)
{
	atomic_store(&sp_pyb.off, 1);
	atomic_store(&sp_pyb.stopping, 1);
}

/* Py_AtExit's callback, at the end of every Py_FinalizeEx: that interpreter is gone, and with it
 * the helper's thread state and everything a poll kept; an embedding program that initialises
 * CPython again gets no poll (they would use the old interpreter's objects). Can't fail. */
static void interpreter_gone(void)
{
	atomic_store(&sp_pyb.stopping, 1);
}

/* 1 once every watch asked for is installed or failed. */
static int all_settled(void)
{
	for (int i = 0; i < 2 + sp_pyb.ask.ncalls; i++)
		if ((i < 2 ? sp_pyb.ask.optimizer : 1) && sp_pyb.state[i] == SP_PYW_WAITING)
			return 0;
	return !sp_pyb.ask.made || sp_pyb.state[SP_PYW_MADE] != SP_PYW_WAITING;
}

/* The test delay between a poll's check and its GIL (STEPPROF_TEST_PYBRIDGE_DELAY_US: opens the
 * window in which the interpreter may finalise, from the second poll on). */
static void test_delay(void)
{
	if (sp_pyb.delay_us && sp_pyb.polls > 1) {
		struct timespec ts = { (time_t)(sp_pyb.delay_us / 1000000), (long)(sp_pyb.delay_us % 1000000) * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* Takes the GIL, as a Python thread does: PyGILState_Ensure the first time, then
 * PyEval_RestoreThread on the kept state (docs/STEPS.md: why finalisation is safe here). */
static void take_gil(void)
{
	if (!sp_pyb.ts)
		sp_pyb.gil = sp_py.gil_ensure();
	else
		sp_py.restore_thread(sp_pyb.ts);
	sp_pyb.ts = NULL;
}

/* One poll: takes the GIL once CPython is initialised and not finalising, installs what is due and
 * lets the GIL go. Returns 1 when polling is over. */
static int poll_once(void)
{
	sp_pyb.polls++;
	if (atomic_load(&sp_pyb.stopping) || atomic_load(&sp_pyb.off))
		return 1;
	if (!sp_py.is_initialized())
		return sp_pyb.running; /* not yet, or no more */
	if (sp_py.is_finalizing())
		return 1;
	sp_pyb.running = 1;
	test_delay();
	take_gil();
	uint64_t t0 = sp_now_ns();
	if (!sp_pyb.exit_guard) {
		sp_pyb.exit_guard = 1;
		if (sp_py.at_exit(interpreter_gone) < 0)
			sp_info("Python bridge: Py_AtExit is full; an embedding program that initialises CPython "
				"twice could see its second interpreter polled");
	}
	/* the atexit callback may have run while this thread waited for the GIL */
	if (!atomic_load(&sp_pyb.stopping))
		sp_pyw_poll();
	int over = atomic_load(&sp_pyb.off) || atomic_load(&sp_pyb.stopping) || all_settled();
	atomic_fetch_add_explicit(&sp_pyb.gil_ns, sp_now_ns() - t0, memory_order_relaxed);
	atomic_fetch_add_explicit(&sp_pyb.gil_polls, 1, memory_order_relaxed);
	if (over)
		sp_py.gil_release(sp_pyb.gil); /* the thread state goes with the GIL */
	else
		sp_pyb.ts = sp_py.save_thread();
	return over;
}

static void *bridge_main(void *arg)
{
	(void)arg;
	sp_mem_self = 1; /* its allocations are stepprof's */
	pthread_setname_np(pthread_self(), "stepprof-py");
	while (!atomic_load(&sp_pyb.stopping)) {
		int found = 0;
		for (int i = 0; i < SP_PYW_N; i++)
			found |= sp_pyb.state[i] != SP_PYW_WAITING;
		uint64_t ns = sp_pyb.state[SP_PYW_OPTIM] == SP_PYW_INSTALLED || (!found && sp_pyb.polls >= SLOW_AFTER)
				      ? SLOW_POLL_NS
				      : POLL_NS;
		struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
		nanosleep(&ts, NULL);
		if (atomic_load(&sp_pyb.stopping) || poll_once())
			break;
	}
	return NULL;
}

int sp_pybridge_start(const struct sp_pybridge_ask *ask, int loud)
{
	char why[160];
	int r = sp_pyapi_resolve(why, sizeof why);
	if (r <= 0) {
		if (r < 0 && loud)
			sp_warn("%s: no steps from the program's Python (the optimizer and python markers need it)",
				why);
		return 0;
	}
	sp_pyb.ask = *ask;
	sp_pyb.running = sp_py.is_initialized();
	const char *d = getenv("STEPPROF_TEST_PYBRIDGE_DELAY_US");
	sp_pyb.delay_us = d ? strtoull(d, NULL, 10) : 0;
	if (pthread_atfork(NULL, NULL, child_after_fork) != 0) {
		sp_warn("Python bridge: pthread_atfork failed; it is off");
		return -1;
	}
	pthread_t t;
	int err = sp_thread_start(&t, bridge_main, NULL);
	if (err) {
		sp_warn("Python bridge: cannot start its thread: %s; it is off", strerror(err));
		return -1;
	}
	pthread_detach(t);
	sp_info("Python bridge: CPython 3.%d; watching for %s%s%d python marker%s", sp_py.minor,
		ask->optimizer ? "torch's optimizer steps and GradScaler.update" : "", ask->optimizer ? ", " : "",
		ask->ncalls, ask->ncalls == 1 ? "" : "s");
	return 1;
}

void sp_pybridge_stop(void)
{
	atomic_store(&sp_pyb.stopping, 1);
	unsigned n = atomic_load_explicit(&sp_pyb.gil_polls, memory_order_relaxed);
	uint64_t ns = atomic_load_explicit(&sp_pyb.gil_ns, memory_order_relaxed);
	if (n)
		sp_info("Python bridge: %u polls held the GIL %.1f us each on average (%.3f ms in all)", n,
			(double)ns / n / 1000.0, (double)ns / 1e6);
}

int sp_pybridge_state(int what)
{
	if (!sp_pyb.running)
		return -1;
	return what >= 0 && what < 2 + SP_MAX_PHASES ? sp_pyb.state[what] : SP_PYW_WAITING;
}
