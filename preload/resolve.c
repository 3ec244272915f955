/* SPDX-License-Identifier: MIT */
/* resolve.c - see resolve.h. */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include "resolve.h"

struct search {
	const char *name;
	const void *self; /* this library's load address: its own definitions are skipped */
	void *found;
};

/* dl_iterate_phdr's callback: name's definition in one loaded object other than this library. */
static int in_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct search *s = data;
	(void)size;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0; /* the main program: its handle would search the global scope, this library first */
	void *h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return 0;
	void *f = dlsym(h, s->name);
	dlclose(h);
	Dl_info di;
	if (!f || !dladdr(f, &di) || di.dli_fbase == s->self)
		return 0;
	s->found = f;
	return 1;
}

void *sp_resolve(const char *name, const char *const *libs)
{
	sp_procaddr_raw(1); /* dlsym(libcuda, name) must not hand a hook back its own definition */
	void *f = dlsym(RTLD_NEXT, name);
	for (; !f && libs && *libs; libs++) {
		void *h = dlopen(*libs, RTLD_NOLOAD | RTLD_LAZY);
		if (h) {
			f = dlsym(h, name);
			dlclose(h);
		}
	}
	if (!f) { /* a library under another name (a wheel's libcudart-HASH.so.12), loaded RTLD_LOCAL */
		Dl_info me;
		struct search s = { name, dladdr((void *)sp_resolve, &me) ? me.dli_fbase : NULL, NULL };
		if (s.self)
			dl_iterate_phdr(in_object, &s);
		f = s.found;
	}
	sp_procaddr_raw(0);
	return f;
}
