/* SPDX-License-Identifier: MIT */
/* tokrec.c - recording the detector's token stream (tokrec.h): appended under one lock, a chunk written when
 * full or a second old, so an abrupt end loses at most the last second; exit writes the rest. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "collector/base/clock.h"
#include "collector/base/intern.h"
#include "collector/base/log.h"
#include "collector/mem/memory.h"
#include "tokrec.h"
#include "trace/tokens.h"

#ifndef SP_GIT_VERSION
#define SP_GIT_VERSION "unknown"
#endif
#define FLUSH_EVERY_NS 1000000000ull /* at most this much is lost if exit handlers never run */

volatile int sp_tokrec_on;

static struct {
	pthread_mutex_t lock;
	struct sp_tok_writer *w;  /* NULL when not recording */
	int owner;                /* pid that opened it (a fork child never writes) */
	uint64_t last_flush;      /* time of the last chunk written */
	int truth_kind;           /* SP_TOK_KERNEL / SP_TOK_API / SP_TOK_NVTX_PUSH, 0 none */
	char truth_pat[128];
} tokfile = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void tokrec_exit(void)
{
	sp_tokrec_stop();
}

__attribute__((destructor)) static void tokrec_fini(void)
{
	sp_tokrec_stop();
}

/* Parses KIND:PATTERN into tokfile. Returns 0 or -1 (warned). */
static int parse_truth(const char *spec, char *err, size_t errlen)
{
	const char *c = strchr(spec, ':');
	if (!c || !c[1] || strlen(c + 1) >= sizeof tokfile.truth_pat)
		return snprintf(err, errlen, "expected KIND:PATTERN"), -1;
	size_t k = (size_t)(c - spec);
	if (k == 4 && !strncmp(spec, "nvtx", 4))
		tokfile.truth_kind = SP_TOK_NVTX_PUSH;
	else if (k == 3 && !strncmp(spec, "api", 3))
		tokfile.truth_kind = SP_TOK_API;
	else if (k == 6 && !strncmp(spec, "kernel", 6))
		tokfile.truth_kind = SP_TOK_KERNEL;
	else
		return snprintf(err, errlen, "KIND must be nvtx, api or kernel"), -1;
	snprintf(tokfile.truth_pat, sizeof tokfile.truth_pat, "%s", c + 1);
	return 0;
}

/* The file name with "%p" replaced by the pid. */
static void expand_path(const char *in, char *out, size_t n)
{
	size_t o = 0;
	for (const char *p = in; *p && o + 1 < n; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			o += (size_t)snprintf(out + o, n - o, "%d", (int)getpid());
			p++;
		} else {
			out[o++] = *p;
		}
		if (o >= n)
			o = n - 1;
	}
	out[o] = 0;
}

void sp_tokrec_cmdline(char *buf, size_t n)
{
	FILE *f = fopen("/proc/self/cmdline", "re");
	size_t got = 0;
	if (f) {
		got = fread(buf, 1, n - 1, f);
		for (size_t i = 0; i + 1 < got; i++)
			if (!buf[i])
				buf[i] = ' ';
		fclose(f);
	}
	buf[got] = 0;
}

int sp_tokrec_start(void)
{
	const char *path = getenv("STEPPROF_RECORD_TOKENS"), *truth = getenv("STEPPROF_RECORD_TRUTH");
	char err[256], file[4096];
	struct sp_tok_header h = { 0 };
	if (!path || !*path)
		return 0;
	if (truth && *truth && parse_truth(truth, err, sizeof err) < 0) {
		sp_warn("STEPPROF_RECORD_TRUTH='%s': %s; not recording tokens", truth, err);
		return -1;
	}
	expand_path(path, file, sizeof file);
	h.pid = getpid();
	h.anchor_mono_ns = sp_now_ns();
	h.anchor_real_ns = sp_realtime_ns();
	snprintf(h.stepprof, sizeof h.stepprof, "%s", SP_GIT_VERSION);
	snprintf(h.truth, sizeof h.truth, "%s", truth ? truth : "");
	gethostname(h.host, sizeof h.host - 1);
	sp_tokrec_cmdline(h.command, sizeof h.command);
	int self = sp_mem_self;
	sp_mem_self = 1; /* stepprof's buffers, not the program's host memory */
	tokfile.w = sp_tok_create(file, &h, err, sizeof err);
	if (!tokfile.w && errno == EEXIST) {
		/* another process of the run (a launcher, a compile worker) has the name: this one
		 * writes FILE.<pid> (and never touches the other's file) */
		size_t k = strlen(file);
		snprintf(file + k, sizeof file - k, ".%d", (int)getpid());
		tokfile.w = sp_tok_create(file, &h, err, sizeof err);
	}
	sp_mem_self = self;
	if (!tokfile.w) {
		sp_warn("STEPPROF_RECORD_TOKENS: %s; not recording tokens", err);
		return -1;
	}
	tokfile.owner = getpid();
	tokfile.last_flush = h.anchor_mono_ns;
	atexit(tokrec_exit);
	sp_tokrec_on = 1;
	sp_info("recording the detector's tokens to %s%s%s", file, tokfile.truth_kind ? ", truth " : "",
		tokfile.truth_kind ? truth : "");
	return 1;
}

int sp_tokrec_truth_kind(void)
{
	return tokfile.truth_kind;
}

const char *sp_tokrec_truth_pattern(void)
{
	return tokfile.truth_kind ? tokfile.truth_pat : NULL;
}

void sp_tokrec_add(uint8_t kind, uint8_t flags, uint32_t name, uint64_t ts, uint32_t tid)
{
	struct sp_token t = { .ts = ts, .name = name, .tid = tid, .kind = kind, .flags = flags };
	int self = sp_mem_self, bad = 0;
	sp_mem_self = 1;
	pthread_mutex_lock(&tokfile.lock);
	if (tokfile.w && tokfile.owner == getpid()) {
		bad = sp_tok_add(tokfile.w, &t, name ? sp_intern_lookup(name) : NULL) < 0;
		if (!bad && ts > tokfile.last_flush + FLUSH_EVERY_NS) {
			bad = sp_tok_flush(tokfile.w) < 0;
			tokfile.last_flush = ts;
		}
		if (bad) {
			sp_tok_close(tokfile.w);
			tokfile.w = NULL;
			sp_tokrec_on = 0;
		}
	}
	pthread_mutex_unlock(&tokfile.lock);
	sp_mem_self = self;
	if (bad)
		sp_warn("STEPPROF_RECORD_TOKENS: write failed; token recording stopped");
}

void sp_tokrec_stop(void)
{
	int self = sp_mem_self, bad = 0;
	sp_mem_self = 1;
	pthread_mutex_lock(&tokfile.lock);
	if (tokfile.w && tokfile.owner == getpid()) {
		sp_tokrec_on = 0;
		bad = sp_tok_close(tokfile.w) < 0;
		tokfile.w = NULL;
	}
	pthread_mutex_unlock(&tokfile.lock);
	sp_mem_self = self;
	if (bad)
		sp_warn("STEPPROF_RECORD_TOKENS: the last tokens could not be written");
}
