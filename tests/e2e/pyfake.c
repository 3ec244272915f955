/* SPDX-License-Identifier: MIT */
/* pyfake.c - a process that looks like CPython 3.13 to stepprof's Python bridge without being one,
 * for tests/e2e/pybridge.sh: it exports Py_GetVersion (a version string of a GIL build),
 * Py_IsInitialized and _Py_DecRefShared (which only a free-threading build defines), initialises
 * "CUDA" (InitializeInjection) and exits 0. The bridge must refuse it as a free-threading build
 * and call nothing else. Linked with -rdynamic (its symbols are found with dlsym). */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdio.h>

const char *Py_GetVersion(void)
{
	return "3.13.0 (main, Oct  1 2024, 00:00:00) [GCC 12.2.0]";
}

int Py_IsInitialized(void)
{
	return 1;
}

void _Py_DecRefShared(void *o)
{
	(void)o;
	fprintf(stderr, "pyfake: _Py_DecRefShared called\n");
}

int main(void)
{
	void (*inject)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
	if (!inject) {
		fprintf(stderr, "pyfake: no InitializeInjection (stepprof not preloaded)\n");
		return 2;
	}
	inject();
	fprintf(stderr, "pyfake: exiting 0\n");
	return 0;
}
