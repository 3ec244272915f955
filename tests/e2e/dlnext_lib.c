/* SPDX-License-Identifier: MIT */
/* dlnext_lib.c - built twice (libdlnext_a.so, libdlnext_b.so; WHICH names it) for
 * tests/e2e/dlsym_next.sh: both define dlnext_who, and each asks dlsym(RTLD_NEXT) for the next
 * definition after itself, as interposing libraries do. */
#define _GNU_SOURCE
#include <dlfcn.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

__attribute__((visibility("default"))) const char *dlnext_who(void)
{
	return WHICH;
}

/* what the next definition of dlnext_who after this library returns; "none" if there is none */
__attribute__((visibility("default"))) const char *CAT(dlnext_after_, LIB)(void)
{
	const char *(*next)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "dlnext_who");
	return next ? next() : "none";
}
