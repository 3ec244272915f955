/* SPDX-License-Identifier: MIT */
/* entry.c - how stepprof gets into a process. The constructor only points the CUDA driver's
 * injection hook (CUDA_INJECTION64_PATH) at this library: a process that never initialises
 * CUDA therefore gets no thread, no file and no CUPTI. cuInit then calls InitializeInjection,
 * which hands over to the collector. An injection library that was configured before us (nsys,
 * compute-sanitizer) is chained: it is initialised first, so it keeps CUPTI and stepprof warns.
 * The program's own CUPTI calls are hooked in preload/cupti.c.
 * May run before main(): no stdio, no allocation in the constructor. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "collector/collector.h"
#include "collector/base/log.h"
#include "entry.h"
#include "resolve.h"

#define SP_EXPORT __attribute__((visibility("default")))

static struct {
	char self[4096];         /* path of this library */
} E;

static int is_off(const char *v)
{
	return v && (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"));
}

int sp_preload_enabled(void)
{
	return !is_off(getenv("STEPPROF_PROFILE_ENABLED"));
}

__attribute__((constructor)) static void sp_entry_init(void)
{
	Dl_info info;
	const char *prev = getenv("CUDA_INJECTION64_PATH");
	if (!sp_preload_enabled())
		return;
	if (!dladdr((void *)sp_entry_init, &info) || !info.dli_fname)
		return;
	if (!realpath(info.dli_fname, E.self))
		return;
	if (prev && *prev && strcmp(prev, E.self) != 0 && !strstr(prev, "libstepprof"))
		setenv("STEPPROF_CHAINED_INJECTION", prev, 1);
	if (!prev || strcmp(prev, E.self) != 0)
		setenv("CUDA_INJECTION64_PATH", E.self, 1);
}

/* Called by the CUDA driver inside cuInit (once per process). Returns 1 (success) always: a
 * failure to profile must not fail CUDA. */
SP_EXPORT int InitializeInjection(void)
{
	const char *chained = getenv("STEPPROF_CHAINED_INJECTION");
	if (chained && *chained) {
		void *h = dlopen(chained, RTLD_NOW | RTLD_GLOBAL);
		int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
		if (init)
			init();
		else
			sp_warn("cannot chain the injection library %s: %s", chained,
				h ? "no InitializeInjection" : dlerror());
	}
	sp_collector_inject();
	return 1;
}
