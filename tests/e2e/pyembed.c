/* SPDX-License-Identifier: MIT */
/* pyembed.c - a C program that embeds CPython, for tests/e2e/pybridge.sh: pyembed LIBPYTHON
 * SCRIPT loads that libpython into the global scope (as a program linked to it has it), runs the
 * script, finalises the interpreter, and lives on for LINGER_MS (1500) milliseconds before it
 * exits: 0 if the script ran to its end, 1 if it raised, 2 on a usage or load error. The time after
 * Py_FinalizeEx is when a thread that still touched the interpreter would crash the program.
 * PYEMBED_CUDA_FIRST=1: "CUDA" is initialised (InitializeInjection) before Py_InitializeEx, as a
 * host that starts Python late does; PYEMBED_TWICE=1: initialise, run, finalise twice (the script
 * sees its round in sys.argv[1]). */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: pyembed LIBPYTHON SCRIPT\n");
		return 2;
	}
	void *py = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	void (*init)(int) = py ? (void (*)(int))dlsym(py, "Py_InitializeEx") : NULL;
	int (*run)(const char *) = py ? (int (*)(const char *))dlsym(py, "PyRun_SimpleString") : NULL;
	int (*fini)(void) = py ? (int (*)(void))dlsym(py, "Py_FinalizeEx") : NULL;
	if (!init || !run || !fini) {
		fprintf(stderr, "pyembed: %s: %s\n", argv[1], dlerror());
		return 2;
	}
	/* sys.argv = [SCRIPT, ROUND], then the script run as a file would be (its __name__ is __main__) */
	char argv0[4200], code[] = "exec(compile(open(__import__('sys').argv[0]).read(), "
				   "__import__('sys').argv[0], 'exec'))";
	if (getenv("PYEMBED_CUDA_FIRST")) {
		void (*inject)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
		if (inject)
			inject();
	}
	int rc = 0, rounds = getenv("PYEMBED_TWICE") ? 2 : 1;
	for (int round = 1; round <= rounds && !rc; round++) {
		snprintf(argv0, sizeof argv0, "import sys; sys.argv = [r'''%s''', '%d']", argv[2], round);
		init(0);
		rc = run(argv0) == 0 && run(code) == 0 ? 0 : 1;
		fprintf(stderr, "pyembed: script %s; finalising\n", rc ? "raised" : "done");
		fflush(stderr);
		if (fini() < 0)
			fprintf(stderr, "pyembed: Py_FinalizeEx failed\n");
	}
	const char *ms = getenv("LINGER_MS");
	long linger = ms ? atol(ms) : 1500;
	struct timespec ts = { linger / 1000, (linger % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	fprintf(stderr, "pyembed: exiting %d\n", rc);
	return rc;
}
