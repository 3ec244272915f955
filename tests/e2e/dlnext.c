/* SPDX-License-Identifier: MIT */
/* dlnext.c - for tests/e2e/dlsym_next.sh: linked with libdlnext_a then libdlnext_b (both define
 * dlnext_who); prints what dlsym finds from each caller. Under any preload that does not define
 * dlnext_who the answers are: main next=a, a next=b, b next=none, default=a, handle b=b, and no
 * cuGetProcAddress (no driver loaded). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

const char *dlnext_after_a(void);
const char *dlnext_after_b(void);

int main(void)
{
	const char *(*next)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "dlnext_who");
	const char *(*dflt)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "dlnext_who");
	void *hb = dlopen("libdlnext_b.so", RTLD_NOW | RTLD_NOLOAD);
	const char *(*inb)(void) = hb ? (const char *(*)(void))dlsym(hb, "dlnext_who") : NULL;
	printf("main next=%s\n", next ? next() : "none");
	printf("a next=%s\n", dlnext_after_a());
	printf("b next=%s\n", dlnext_after_b());
	printf("default=%s\n", dflt ? dflt() : "none");
	printf("handle b=%s\n", inb ? inb() : "none");
	printf("cuGetProcAddress_v2=%s\n", dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2") ? "found" : "none");
	printf("missing=%s\n", dlsym(RTLD_DEFAULT, "dlnext_no_such_symbol") ? "found" : "none");
	return 0;
}
