/* SPDX-License-Identifier: MIT */
/* fakeinject.c - a stand-in for another CUDA injection library (nsys, compute-sanitizer) for
 * tests/e2e/crash.sh: its InitializeInjection says "fakeinject: initialised" on stderr, so a test
 * sees that stepprof still chains a library that is not itself. */
#include <unistd.h>

__attribute__((visibility("default"))) int InitializeInjection(void)
{
	static const char msg[] = "fakeinject: initialised\n";
	(void)!write(2, msg, sizeof msg - 1);
	return 1;
}
