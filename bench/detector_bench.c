/* SPDX-License-Identifier: MIT */
/* detector_bench.c - what the step detector costs per token on the application thread, without a
 * GPU: the collector's detect() path (lock, token, sp_stepdet_feed, credit clock read, unlock)
 * driven by the launch-bound loop of docs/BENCHMARKS.md (2000 tiny `add` kernels and one
 * synchronisation per step), in the phases a run goes through:
 *   learning  - before the lock (the stream made aperiodic so that it never locks: the worst case,
 *               a detection attempt every 256 tokens over a full ring)
 *   counted   - locked, every launch counted (the first 64 steps of a regime, or a kernel anchor)
 *   recording - STEPPROF_RECORD_TOKENS: one sp_tok_add per token (zstd chunks included)
 *   learn loop- the launch-bound loop itself until it locks (about 5 steps): its learning phase
 *   loop only - the benchmark's own loop and clock read (the callback reads the clock anyway):
 *               subtract it from the others
 *   gcc -O2 -I. bench/detector_bench.c build/libspcore.a -lzstd -lpthread -o /tmp/db && /tmp/db
 * Prints ns per token for each (median of 5 runs). CUPTI's own callback cost comes on top (measured
 * on the GPU machine: docs/GPU-FACTS.md, "What CUPTI itself costs"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "collector/base/clock.h"
#include "collector/base/intern.h"
#include "decide/stepdet.h"
#include "config/config.h"
#include "trace/tokens.h"

#define STEP 2000      /* launches per step */
#define TOKENS 400000  /* tokens per run */
#define RUNS 5

static volatile uint64_t sink;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sp_stepdet det;
static uint64_t credit;

static uint64_t wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* windows.c's sp_win_detect() without CUPTI: returns the decisions' OR. */
static unsigned detect(uint8_t kind, uint8_t flags, uint32_t name, uint64_t t)
{
	struct sp_det_out o;
	pthread_mutex_lock(&lock);
	struct sp_token tk = { .ts = t - credit, .name = name, .tid = 1, .kind = kind, .flags = flags };
	int attempt = sp_stepdet_may_try(&det, &tk);
	uint64_t t0 = attempt ? sp_now_ns() : 0; /* (t may be made up: the lock-first loop's) */
	sp_stepdet_feed(&det, &tk, &o);
	if (attempt) { /* as windows.c: the attempt's time is credited and held to its share */
		uint64_t took = sp_now_ns() - t0;
		credit += took;
		sp_stepdet_attempt_took(&det, took);
	}
	pthread_mutex_unlock(&lock);
	return o.what;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* One run of `mode` (0 learning, 1 counted, 2 recording, 3 loop only, 4 learn loop): ns per token. */
static double run(int mode, uint32_t add, uint32_t sync, uint32_t *noise)
{
	uint64_t t = sp_now_ns(), rng = 7;
	struct sp_tok_writer *w = NULL;
	char err[128];
	if (mode == 2) {
		struct sp_tok_header h = { .pid = 1 };
		unlink("/tmp/detector_bench.sptokens"); /* the writer never replaces a file */
		w = sp_tok_create("/tmp/detector_bench.sptokens", &h, err, sizeof err);
		if (!w)
			return -1;
	}
	sp_stepdet_init(&det, SP_MARK_AUTO, "", 1, NULL);
	if (mode == 1) /* lock first on the plain loop (not timed) */
		for (int i = 0; det.learning && i < 40 * (STEP + 1); i++)
			detect(i % (STEP + 1) == STEP ? SP_TOK_API : SP_TOK_KERNEL,
			       i % (STEP + 1) == STEP ? SP_TOKF_SYNC : 0, i % (STEP + 1) == STEP ? sync : add,
			       t += 6000);
	uint64_t t0 = wall();
	for (int i = 0; i < TOKENS; i++) {
		int is_sync = i % (STEP + 1) == STEP;
		uint32_t name = is_sync ? sync : add;
		t = sp_now_ns();
		if (mode == 4 && !det.learning)
			break; /* the loop's learning phase ends with the lock */
		if (mode == 0) { /* aperiodic: now and then another kernel, so it never locks */
			rng = rng * 6364136223846793005ull + 1;
			if ((rng >> 60) == 0)
				name = noise[(rng >> 40) % 64];
		}
		if (mode == 3) {
			sink += t; /* the loop and the clock read alone */
		} else if (mode == 2) {
			struct sp_token tk = { .ts = t, .name = name, .tid = 1, .kind = SP_TOK_KERNEL };
			sp_tok_add(w, &tk, sp_intern_lookup(name));
		} else {
			detect(is_sync ? SP_TOK_API : SP_TOK_KERNEL, is_sync ? SP_TOKF_SYNC : 0, name, t);
		}
	}
	uint64_t fed = mode == 4 ? det.a.n : TOKENS; /* the learner's ring has seen every token */
	double ns = (double)(wall() - t0) / (fed ? fed : 1);
	if (mode == 1 && det.learning)
		fprintf(stderr, "detector_bench: the counted run lost its lock\n");
	sp_tok_close(w);
	sp_stepdet_free(&det);
	return ns;
}

int main(void)
{
	static const char *const names[] = { "learning", "counted", "recording", "loop only", "learn loop" };
	uint32_t add = sp_intern("void at::native::vectorized_elementwise_kernel<4, add>"), noise[64];
	uint32_t sync = sp_intern("cudaStreamSynchronize");
	char nm[32];
	for (int i = 0; i < 64; i++) {
		snprintf(nm, sizeof nm, "noise_%d", i);
		noise[i] = sp_intern(nm);
	}
	for (int m = 0; m < 5; m++) {
		double r[RUNS];
		for (int k = 0; k < RUNS; k++)
			r[k] = run(m, add, sync, noise);
		qsort(r, RUNS, sizeof *r, cmp);
		printf("%-10s %7.1f ns per token (median of %d runs of %d tokens; min %.1f, max %.1f)\n", names[m],
		       r[RUNS / 2], RUNS, TOKENS, r[0], r[RUNS - 1]);
	}
	return 0;
}
