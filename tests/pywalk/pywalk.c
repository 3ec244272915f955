/* SPDX-License-Identifier: MIT */
/* pywalk.c - a test library (not part of stepprof) that a real CPython loads with ctypes: it
 * captures the calling thread's stack through collector/stacks/stacks.c and collector/stacks/pystack.c, as
 * the preloaded library does at a launch, and returns it as text for tests/pywalk/check.py. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "collector/base/intern.h"
#include "collector/stacks/pystack.h"
#include "collector/stacks/stacks.h"
#include "trace/trace.h"

/* Stack pcs (n frames) as text into out (cap bytes), one line per frame, innermost first:
 * "py FILE:FUNC:LINE", "mark backward" (SP_FRAME_BACKWARD) or "c SYMBOL" (dladdr; "?" when the
 * symbol is not exported). Returns the length written. */
static int format(const uint64_t *pcs, uint32_t n, char *out, int cap)
{
	int len = 0;
	out[0] = 0;
	for (uint32_t i = 0; pcs && i < n && len < cap; i++) {
		uint32_t file, func, line;
		Dl_info info;
		if (SP_IS_PYFRAME(pcs[i]) && sp_pyframe_lookup(NULL, SP_PYFRAME_ID(pcs[i]), &file, &func, &line) == 0)
			len += snprintf(out + len, (size_t)(cap - len), "py %s:%s:%u\n", sp_intern_lookup(file),
					sp_intern_lookup(func), line);
		else if (pcs[i] == SP_FRAME_BACKWARD)
			len += snprintf(out + len, (size_t)(cap - len), "mark backward\n");
		else
			len += snprintf(out + len, (size_t)(cap - len), "c %s\n",
					dladdr((void *)(uintptr_t)(pcs[i] - 1), &info) && info.dli_sname
						? info.dli_sname
						: "?");
	}
	return len;
}

/* The calling thread's stack as text (format). what: 1 native, 2 python, 3 both, with 0x100 the
 * allocation sites' native fallback. Returns the frame count, or -1 without a stack. */
__attribute__((visibility("default"))) int pywalk_capture(char *out, int cap, int what)
{
	uint32_t n = 0, id = sp_stack_capture(64, (unsigned)what);
	const uint64_t *pcs = id ? sp_stack_lookup(NULL, id, &n) : NULL;
	format(pcs, n, out, cap);
	return pcs ? (int)n : -1;
}

/* ---- a thread that runs no Python, as PyTorch's autograd threads (tests of borrowed frames) ---- */

struct worker {
	char *out;
	int cap, what, with_tstate, n;
};

/* The Python C API, found in the process (the interpreter that loaded this library). */
static void *py(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int gil = 0;
	void *ts = NULL;
	if (w->with_tstate) { /* a thread state without frames, the GIL released: torch's thread_init */
		gil = ((int (*)(void))py("PyGILState_Ensure"))();
		ts = ((void *(*)(void))py("PyEval_SaveThread"))();
	}
	w->n = pywalk_capture(w->out, w->cap, w->what);
	if (w->with_tstate) {
		((void (*)(void *))py("PyEval_RestoreThread"))(ts);
		((void (*)(int))py("PyGILState_Release"))(gil);
	}
	return NULL;
}

/* pywalk_capture on a new thread that runs no Python (with_tstate: it has a thread state, as
 * autograd's threads do), while the caller waits here (call it through ctypes.CDLL: the GIL is
 * released). Returns its frame count, or -1 without a stack (or if the thread did not start). */
__attribute__((visibility("default"))) int pywalk_capture_thread(char *out, int cap, int what, int with_tstate)
{
	struct worker w = { out, cap, what, with_tstate, -1 };
	pthread_t t;
	out[0] = 0;
	if (pthread_create(&t, NULL, worker_main, &w))
		return -1;
	pthread_join(t, NULL);
	return w.n;
}

double pywalk_bench(int n, int what);

struct bench {
	int n, what;
	double ns;
};

static void *bench_main(void *arg)
{
	struct bench *b = arg;
	b->ns = pywalk_bench(b->n, b->what);
	return NULL;
}

/* pywalk_bench on a new thread that runs no Python, while the caller waits (ctypes.CDLL): the cost
 * of a capture that borrows the caller's frames. Returns ns per capture, or -1. */
__attribute__((visibility("default"))) double pywalk_bench_thread(int n, int what)
{
	struct bench b = { n, what, -1 };
	pthread_t t;
	if (pthread_create(&t, NULL, bench_main, &b))
		return -1;
	pthread_join(t, NULL);
	return b.ns;
}

/* 1 if the Python frames pcs[0..n) are those of backward.py's hammer while in its C call:
 * _engine_run_backward, any number of deep, then hammer, main and <module> (cut anywhere after the
 * entry when the capture holds SP_PY_MAX frames). */
static int hammer_frames(const uint64_t *pcs, uint32_t n)
{
	static const char *const tail[] = { "hammer", "main", "<module>" };
	uint32_t i = 0, file, func, line;
	const char *name[SP_STACK_MERGED];
	if (n < 4 || n > SP_STACK_MERGED)
		return 0;
	for (uint32_t k = 0; k < n; k++) {
		if (!SP_IS_PYFRAME(pcs[k]) || sp_pyframe_lookup(NULL, SP_PYFRAME_ID(pcs[k]), &file, &func, &line))
			return 0;
		name[k] = sp_intern_lookup(func);
	}
	if (strcmp(name[i++], "_engine_run_backward"))
		return 0;
	while (i < n && strlen(name[i]) >= 4 && !strcmp(name[i] + strlen(name[i]) - 4, "deep"))
		i++;
	for (int k = 0; k < 3; k++, i++) {
		if (i == n && n == SP_PY_MAX)
			return 1; /* the capture's cut fell inside the tail */
		if (i >= n || strcmp(name[i], tail[k]))
			return 0;
	}
	return i == n;
}

/* A thread that captures stacks (Python frames only) over and over while the program runs,
 * counting those with borrowed frames and, among them, those that are not the hammer's frames in
 * its C call (a walk that read frames that were not in place). */
static struct {
	pthread_t t;
	atomic_int stop;
	long captures, borrowed, wrong;
} hammer;

static void *hammer_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&hammer.stop)) {
		uint32_t n = 0, id = sp_stack_capture(SP_STACK_MAX, 2);
		const uint64_t *pcs = id ? sp_stack_lookup(NULL, id, &n) : NULL;
		hammer.captures++;
		for (uint32_t i = 0; pcs && i + 1 < n; i++)
			if (pcs[i] == SP_FRAME_BACKWARD) {
				hammer.borrowed++;
				hammer.wrong += !hammer_frames(pcs + i + 1, n - i - 1);
				break;
			}
	}
	return NULL;
}

__attribute__((visibility("default"))) int pywalk_hammer_start(void)
{
	atomic_store(&hammer.stop, 0);
	hammer.captures = hammer.borrowed = hammer.wrong = 0;
	return pthread_create(&hammer.t, NULL, hammer_main, NULL) ? -1 : 0;
}

/* Stops the hammer; its counts in c[0..3): captures, with borrowed frames, wrong. */
__attribute__((visibility("default"))) void pywalk_hammer_stop(long *c)
{
	atomic_store(&hammer.stop, 1);
	pthread_join(hammer.t, NULL);
	c[0] = hammer.captures;
	c[1] = hammer.borrowed;
	c[2] = hammer.wrong;
}

/* Sleeps us microseconds (through ctypes.CDLL: the GIL released meanwhile). */
__attribute__((visibility("default"))) void pywalk_sleep_us(int us)
{
	usleep((useconds_t)us);
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
