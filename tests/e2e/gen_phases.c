/* SPDX-License-Identifier: MIT */
/* gen_phases.c - writes a small trace with windows of two phases through the core writer, as the
 * collector writes them (docs/FORMAT.md, "Window records: the phase"): window 0 of phase fwd
 * (step 0), window 1 of phase fwd_bwd (step 7), window 2 of phase fwd (step 1); each with one
 * STEP record, one launch and its kernel. For tests that need such a trace without running the
 * collector (tests/e2e/readme_walk.sh walking RECIPES.md). Usage: gen_phases OUT.sptrace [RANK RUN_ID];
 * GEN_PHASES_ONLY=NAME writes only that phase's windows, as the collector writes OUTPUT/NAME/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/trace.h"

#define T0 1000000000ull

static const char *const strings[] = { NULL,          "fwd",       "fwd_bwd",
				       "generate*",   "train_mb*", "cudaLaunchKernel",
				       "gemm_kernel", "python",    "NVIDIA H100 80GB HBM3" };

static const char *lookup(void *ctx, uint32_t id)
{
	return id < sizeof(strings) / sizeof(strings[0]) ? strings[id] : NULL;
}

static int put(struct sp_trace_writer *w, struct sp_event ev)
{
	return sp_trace_write(w, &ev) < 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 4) {
		fprintf(stderr, "usage: gen_phases OUT.sptrace [RANK RUN_ID]\n");
		return 2;
	}
	struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_RUNTIME_API,
				   .pid = 4242,
				   .rank = 0,
				   .world_size = 1,
				   .anchor_mono_ns = T0,
				   .anchor_real_ns = 1764000000000000000ull };
	strcpy(m.host, "golden-host");
	strcpy(m.command, "python main_rl.py");
	strcpy(m.run_id, "20261126-110000-4242");
	strcpy(m.producer, "stepprof gen_phases");
	if (argc == 4) {
		m.rank = atoi(argv[2]);
		snprintf(m.run_id, sizeof(m.run_id), "%s", argv[3]);
	}
	struct sp_trace_writer *w = sp_trace_create(argv[1], &m, lookup, NULL, 0);
	if (!w) {
		perror(argv[1]);
		return 1;
	}
	const uint16_t none = SP_NO_DEVICE;
	int bad = 0;
	bad |= put(w, (struct sp_event){ .kind = SP_EV_THREAD,
					 .device = none,
					 .tid = 4242,
					 .start = T0,
					 .end = T0,
					 .name = 7 });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_DEVICE,
					 .device = 0,
					 .start = T0,
					 .end = T0,
					 .name = 8,
					 .u.dev = { .sm_count = 132, .cc_major = 9, .memory = 85899345920ull } });
	/* { phase, marker, step } of each window, back to back as phases take turns */
	static const struct {
		uint32_t phase, marker;
		int64_t step;
	} win[] = { { 1, 3, 0 }, { 2, 4, 7 }, { 1, 3, 1 } };
	const char *only = getenv("GEN_PHASES_ONLY");
	for (uint32_t i = 0; i < 3; i++) {
		if (only && strcmp(only, strings[win[i].phase]))
			continue;
		uint64_t t = T0 + 1000 + i * 100000, e = t + 100000;
		uint32_t corr = 10 + i;
		struct sp_ev_window wv = { .id = i, .first_step = win[i].step, .last_step = win[i].step };
		bad |= put(w, (struct sp_event){ .kind = SP_EV_WINDOW_BEGIN,
						 .device = none,
						 .start = t,
						 .end = t,
						 .name = win[i].phase,
						 .u.window = wv });
		bad |= put(w, (struct sp_event){ .kind = SP_EV_STEP,
						 .sub = 3,
						 .device = none,
						 .tid = 4242,
						 .start = t,
						 .end = e,
						 .name = win[i].marker,
						 .u.step = { .number = win[i].step, .how = 5, .every = 1 } });
		bad |= put(w, (struct sp_event){ .kind = SP_EV_API,
						 .sub = SP_API_RUNTIME,
						 .device = 0,
						 .tid = 4242,
						 .start = t + 100,
						 .end = t + 2000,
						 .corr = corr,
						 .name = 5,
						 .u.api = { .cbid = 211 } });
		bad |= put(w, (struct sp_event){ .kind = SP_EV_KERNEL,
						 .device = 0,
						 .start = t + 3000,
						 .end = t + 53000,
						 .corr = corr,
						 .name = 6,
						 .stream = 7,
						 .context = 1,
						 .u.kernel = { .grid = { 64, 1, 1 }, .block = { 256, 1, 1 } } });
		wv.bytes = 200;
		bad |= put(w, (struct sp_event){ .kind = SP_EV_WINDOW_END,
						 .device = none,
						 .start = e,
						 .end = e,
						 .name = win[i].phase,
						 .u.window = wv });
		bad |= sp_trace_flush(w) < 0;
	}
	bad |= sp_trace_close(w) < 0;
	if (bad) {
		fprintf(stderr, "gen_phases: writing %s failed\n", argv[1]);
		return 1;
	}
	return 0;
}
