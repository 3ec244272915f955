/* SPDX-License-Identifier: MIT */
/* cupti_api.c - finds and binds libcupti at run time (see cupti_api.h). Runs once, on the
 * thread that initialises CUDA, only in a selected process. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cupti_api.h"
#include "collector/base/log.h"

struct sp_cupti sp_cupti;

struct find_ctx {
	char cupti[1024];        /* a libcupti.so* already mapped */
	char cudart_dir[1024];   /* directory of a loaded libcudart (pip copies put libcupti beside it) */
};

static int scan_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_ctx *c = data;
	const char *p = info->dlpi_name, *base;
	if (!p || !*p)
		return 0;
	base = strrchr(p, '/');
	base = base ? base + 1 : p;
	if (!c->cupti[0] && !strncmp(base, "libcupti.so", 11))
		snprintf(c->cupti, sizeof c->cupti, "%s", p);
	if (!c->cudart_dir[0] && !strncmp(base, "libcudart.so", 12) && base > p)
		snprintf(c->cudart_dir, sizeof c->cudart_dir, "%.*s", (int)(base - p - 1), p);
	return 0;
}

static void *try_open(const char *path)
{
	return (path && *path && access(path, R_OK) == 0) ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
}

/* Returns 0 with every pointer bound, or -1 naming the first missing symbol in why. */
static int bind_all(void *h, char *why, size_t whylen)
{
#define SP_CUPTI_BIND(fn)                                                  \
	if (!(sp_cupti.fn = (__typeof__(fn) *)dlsym(h, #fn))) {            \
		snprintf(why, whylen, "%s has no %s", sp_cupti.path, #fn); \
		return -1;                                                 \
	}
	SP_CUPTI_FUNCS(SP_CUPTI_BIND)
#undef SP_CUPTI_BIND
	return 0;
}

int sp_cupti_load(const char *configured, char *why, size_t whylen)
{
	struct find_ctx c = { "", "" };
	char cand[8][1100];
	int n = 0;
	const char *cuda_home = getenv("CUDA_HOME");

	dl_iterate_phdr(scan_object, &c);
	if (configured && *configured)
		snprintf(cand[n++], sizeof cand[0], "%.1024s", configured);
	if (c.cupti[0])
		snprintf(cand[n++], sizeof cand[0], "%.1024s", c.cupti);
	if (c.cudart_dir[0])
		snprintf(cand[n++], sizeof cand[0], "%.1024s/libcupti.so.13", c.cudart_dir);
	if (cuda_home && *cuda_home) {
		snprintf(cand[n++], sizeof cand[0], "%.1024s/extras/CUPTI/lib64/libcupti.so.13", cuda_home);
		snprintf(cand[n++], sizeof cand[0], "%.1024s/lib64/libcupti.so.13", cuda_home);
	}
	snprintf(cand[n++], sizeof cand[0], "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
	snprintf(cand[n++], sizeof cand[0], "/usr/local/cuda/lib64/libcupti.so.13");
	snprintf(cand[n++], sizeof cand[0], "libcupti.so.13");

	for (int i = 0; i < n; i++) {
		void *h = strchr(cand[i], '/') ? try_open(cand[i]) : dlopen(cand[i], RTLD_NOW | RTLD_GLOBAL);
		if (!h)
			continue;
		memcpy(sp_cupti.path, cand[i], sizeof sp_cupti.path);
		if (bind_all(h, why, whylen) == 0) {
			sp_cupti.handle = h;
			return 0;
		}
		dlclose(h);
		if (configured && *configured && i == 0)
			return -1; /* the user named this one: say why it failed */
	}
	snprintf(why, whylen, "no usable libcupti.so.13 (set [cupti] library or CUDA_HOME)");
	return -1;
}

CUptiResult sp_cupti_check(CUptiResult r, const char *what, const char *file, int line)
{
	if (r != CUPTI_SUCCESS) {
		const char *msg = "?";
		if (sp_cupti.cuptiGetResultString)
			sp_cupti.cuptiGetResultString(r, &msg);
		sp_warn("%s:%d: %s failed: %s (%d)", file, line, what, msg, (int)r);
	}
	return r;
}
