/* SPDX-License-Identifier: MIT */
/* gen_cut.c - writes the traces a cut run leaves, as the collector's writer orders them, for
 * tests/e2e/cli_cut.sh: each step launches two kernels (cudaLaunchKernel + kernel), STEP records
 * carry the schedule's action (RECORD, RECORD_AND_SAVE on a window's last step).
 *   held:    window 0 whole (steps 0-2); window 1 (steps 3-5) without its WINDOW_END: a full disk
 *            cut the file while the writer held window 2's BEGIN back (it waits for window 1's
 *            END), so window 2's steps 6-8 and window 3's step 9 are in the file without a BEGIN.
 *   crash:   window 0's BEGIN and steps 0-1, then nothing (the process died in step 2).
 *   nobegin: steps 4-5 of a recorded window whose BEGIN is not in the file.
 *   quiet:   a window's records but no STEP and no BEGIN (records outside every window).
 * Usage: gen_cut MODE OUT.sptrace (exits 1 on a write failure, 2 on bad arguments) */
#include <stdio.h>
#include <string.h>
#include "trace/trace.h"
#include "config/schedule.h"

#define T0 5000000000000ull
#define STEP_NS 1000000ull

static const char *const names[] = { NULL, "cudaLaunchKernel", "gemm_kernel", "pt_main_thread" };

static const char *lookup(void *ctx, uint32_t id)
{
	(void)ctx;
	return id && id < sizeof names / sizeof names[0] ? names[id] : NULL;
}

struct gen {
	struct sp_trace_writer *w;
	int bad;
	uint32_t corr;
};

static void put(struct gen *g, struct sp_event e)
{
	g->bad |= sp_trace_write(g->w, &e) < 0;
}

static struct sp_event ev(int kind, uint64_t start, uint64_t end)
{
	return (struct sp_event){ .kind = (uint8_t)kind, .device = SP_NO_DEVICE, .start = start, .end = end };
}

/* Step n (its records, then its STEP record with action act); with steps = 0 only the launches. */
static void step(struct gen *g, int64_t n, int act, int steps)
{
	uint64_t t = T0 + (uint64_t)n * STEP_NS;
	for (int k = 0; k < 2; k++) {
		struct sp_event a = ev(SP_EV_API, t + 100000 + 300000 * (uint64_t)k, t + 110000 + 300000 * (uint64_t)k);
		a.sub = 1, a.tid = 7, a.corr = ++g->corr, a.name = 1, a.device = 0;
		put(g, a);
		struct sp_event e = ev(SP_EV_KERNEL, a.start + 20000, a.start + 220000);
		e.corr = a.corr, e.name = 2, e.stream = 7, e.device = 0, e.context = 1;
		put(g, e);
	}
	if (!steps)
		return;
	struct sp_event s = ev(SP_EV_STEP, t, t + STEP_NS);
	s.sub = (uint8_t)act, s.tid = 7, s.u.step.number = n;
	put(g, s);
}

static void window(struct gen *g, int kind, uint32_t id, int64_t step_no)
{
	struct sp_event w = ev(kind, T0 + (uint64_t)step_no * STEP_NS, T0 + (uint64_t)step_no * STEP_NS);
	w.u.window.id = id;
	if (kind == SP_EV_WINDOW_BEGIN)
		w.u.window.first_step = step_no;
	else
		w.u.window.last_step = step_no - 1, w.start = w.end = w.start - 1;
	put(g, w);
}

int main(int argc, char **argv)
{
	struct sp_trace_meta m = { .pid = 4242, .rank = -1, .world_size = -1, .local_rank = -1,
				   .anchor_mono_ns = T0 - STEP_NS, .anchor_real_ns = 1700000000000000000ull };
	struct gen g = { 0 };
	const char *mode = argc == 3 ? argv[1] : "";

	if (strcmp(mode, "held") && strcmp(mode, "crash") && strcmp(mode, "nobegin") && strcmp(mode, "quiet")) {
		fprintf(stderr, "usage: gen_cut held|crash|nobegin|quiet OUT.sptrace\n");
		return 2;
	}
	snprintf(m.host, sizeof m.host, "cut-host");
	snprintf(m.command, sizeof m.command, "train.py");
	g.w = sp_trace_create(argv[2], &m, lookup, NULL, 0);
	if (!g.w) {
		perror(argv[2]);
		return 1;
	}
	struct sp_event th = ev(SP_EV_THREAD, T0 - STEP_NS, T0 - STEP_NS);
	th.tid = 7, th.name = 3;
	put(&g, th);
	if (!strcmp(mode, "held")) {
		window(&g, SP_EV_WINDOW_BEGIN, 0, 0);
		for (int64_t n = 0; n < 3; n++)
			step(&g, n, n == 2 ? SP_ACT_RECORD_AND_SAVE : SP_ACT_RECORD, 1);
		window(&g, SP_EV_WINDOW_END, 0, 3);
		window(&g, SP_EV_WINDOW_BEGIN, 1, 3);
		for (int64_t n = 3; n < 10; n++) /* windows of steps 3-5, 6-8 and 9-11 back to back */
			step(&g, n, n % 3 == 2 ? SP_ACT_RECORD_AND_SAVE : SP_ACT_RECORD, 1);
	} else if (!strcmp(mode, "crash")) {
		window(&g, SP_EV_WINDOW_BEGIN, 0, 0);
		for (int64_t n = 0; n < 2; n++)
			step(&g, n, SP_ACT_RECORD, 1);
		step(&g, 2, SP_ACT_RECORD_AND_SAVE, 0); /* step 2's launches; it never ended */
	} else if (!strcmp(mode, "nobegin")) {
		step(&g, 4, SP_ACT_RECORD, 1);
		step(&g, 5, SP_ACT_RECORD_AND_SAVE, 1);
	} else {
		step(&g, 4, SP_ACT_RECORD, 0);
	}
	g.bad |= sp_trace_close(g.w) < 0;
	return g.bad;
}
