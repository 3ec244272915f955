/* SPDX-License-Identifier: MIT */
/* resolve.c - see resolve.h. */
#include <dlfcn.h>
#include <stddef.h>
#include "resolve.h"

void *sp_resolve(const char *name, const char *const *libs)
{
	void *f = dlsym(RTLD_NEXT, name);
	for (; !f && libs && *libs; libs++) {
		void *h = dlopen(*libs, RTLD_NOLOAD | RTLD_LAZY);
		if (h) {
			f = dlsym(h, name);
			dlclose(h);
		}
	}
	return f;
}
