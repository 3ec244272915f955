/* SPDX-License-Identifier: MIT */
/* entry.c - how stepprof gets into a process: the constructor only points CUDA_INJECTION64_PATH here, so a
 * process that never initialises CUDA gets nothing; cuInit's InitializeInjection hands over to the collector,
 * chaining an earlier injection library but never stepprof itself. May run before main(): no stdio. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "collector/collector.h"
#include "entry.h"
#include "resolve.h"

#define SP_EXPORT __attribute__((visibility("default")))
SP_EXPORT int InitializeInjection(void);
#define SP_MARK_MAX_FILE (512u << 20) /* a file larger than this is not searched for the mark */

/* Every build of the library holds these bytes: a file that holds them is stepprof. */
static const char sp_mark[] __attribute__((used)) = "stepprof-injection-library:5f1c9a2e";

static struct {
	char self[4096];          /* path of this library */
	struct stat self_st;      /* ... and its file (device, inode) */
	atomic_int injected;      /* InitializeInjection has run in this copy of the library */
} entry;

static int is_off(const char *v)
{
	return v && (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"));
}

int sp_preload_enabled(void)
{
	return !is_off(getenv("STEPPROF_PROFILE_ENABLED"));
}

/* 1 if the file at path is a stepprof library: this very file (through a link or under another
 * name), a file that holds the mark (a copy, another build), or one named libstepprof* (a build
 * older than the mark). 0 otherwise, and for a file that cannot be read. No allocation; can't fail. */
static int is_stepprof(const char *path)
{
	struct stat st;
	const char *base = path ? strrchr(path, '/') : NULL;
	if (path && strstr(base ? base + 1 : path, "libstepprof"))
		return 1;
	if (!path || !*path || stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	if (entry.self[0] && st.st_dev == entry.self_st.st_dev && st.st_ino == entry.self_st.st_ino)
		return 1;
	if (st.st_size < (off_t)sizeof sp_mark || (uint64_t)st.st_size > SP_MARK_MAX_FILE)
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *map = fd < 0 ? MAP_FAILED : mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (fd >= 0)
		close(fd);
	if (map == MAP_FAILED)
		return 0;
	int found = memmem(map, (size_t)st.st_size, sp_mark, sizeof sp_mark) != NULL;
	munmap(map, (size_t)st.st_size);
	return found;
}

static void sp_entry_init(void);

/* 1 if f lies in this copy of the library (the name InitializeInjection in it means the process's
 * first definition, not always its own). */
static int is_mine(void *f)
{
	Dl_info theirs, ours;
	return f && dladdr(f, &theirs) && dladdr((void *)sp_entry_init, &ours) && theirs.dli_fbase == ours.dli_fbase;
}

/* Another copy of stepprof that came first into the global scope (the preloaded one, when the
 * driver loads this copy through CUDA_INJECTION64_PATH): its InitializeInjection, or NULL. */
static int (*first_instance(void))(void)
{
	Dl_info info;
	void *f = dlsym(RTLD_DEFAULT, "InitializeInjection");
	if (!f || is_mine(f) || !dladdr(f, &info) || !info.dli_fname)
		return NULL;
	return is_stepprof(info.dli_fname) ? (int (*)(void))f : NULL;
}

__attribute__((constructor)) static void sp_entry_init(void)
{
	Dl_info info;
	const char *prev = getenv("CUDA_INJECTION64_PATH");
	if (!sp_preload_enabled())
		return;
	if (!dladdr((void *)sp_entry_init, &info) || !info.dli_fname)
		return;
	if (!realpath(info.dli_fname, entry.self) || stat(entry.self, &entry.self_st) < 0) {
		entry.self[0] = 0;
		return;
	}
	if (first_instance())
		return; /* a copy loaded after the first: that one points the driver at itself */
	if (prev && *prev && strcmp(prev, entry.self) != 0 && !is_stepprof(prev))
		setenv("STEPPROF_CHAINED_INJECTION", prev, 1);
	if (!prev || strcmp(prev, entry.self) != 0)
		setenv("CUDA_INJECTION64_PATH", entry.self, 1);
}

/* Called by the CUDA driver inside cuInit (once per process), or by another copy of stepprof that
 * the driver called. Returns 1 (success) always: a failure to profile must not fail CUDA. Runs
 * once per copy; a copy that is not the first hands over to the first (it holds the hooks). */
SP_EXPORT int InitializeInjection(void)
{
	if (atomic_exchange(&entry.injected, 1))
		return 1;
	int (*first)(void) = first_instance();
	if (first) {
		sp_info("InitializeInjection reached another copy of stepprof (%s): handed to the first one",
			entry.self);
		return first();
	}
	const char *chained = getenv("STEPPROF_CHAINED_INJECTION");
	if (chained && *chained && is_stepprof(chained)) {
		sp_info("STEPPROF_CHAINED_INJECTION=%s is stepprof itself: not chained", chained);
	} else if (chained && *chained) {
		void *h = dlopen(chained, RTLD_NOW | RTLD_GLOBAL);
		int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
		if (init && !is_mine((void *)init))
			init();
		else
			sp_warn("cannot chain the injection library %s: %s", chained,
				!h ? dlerror() : init ? "it is stepprof itself" : "no InitializeInjection");
	}
	sp_collector_inject();
	return 1;
}
