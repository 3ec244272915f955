/* SPDX-License-Identifier: MIT */
/* test_steps.c - the per-step statistics of steps.h, `stepprof steps` and `stepprof diff` on two
 * synthetic ranks
 * whose numbers are worked out by hand: rank 0 computes 2 ms and spends 3 ms in an NCCL kernel per
 * step, rank 1 computes 4 ms and spends 1 ms in NCCL (no NCCL call records: nothing to pair);
 * every step lasts 10 ms, except rank 1's step 2 (11 ms). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "cli/cli.h"
#include "cli/steps.h"
#include "collector/base/clock.h"
#include "scratch.h"
#include "text_assert.h"
#include "trace_fixture.h"

static char path[2][512];

#define GEMM_NAME "ampere_sgemm_128x64_nn"
#define NCCL_NAME "ncclDevKernel_AllReduce_Sum_f32_RING_LL"

/* Writes rank r's trace: one window, steps 1..3; each step launches a compute kernel (gemm) at
 * +0.1 ms that runs from +1 ms and an NCCL kernel after it, and ends after `len` ms. */
static void write_rank(int r)
{
	struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_RUNTIME_API,
				   .pid = 100 + r,
				   .rank = r,
				   .world_size = 2,
				   .local_rank = r,
				   .anchor_mono_ns = FX_T,
				   .anchor_real_ns = 1700000000000000000ull };
	strcpy(m.host, "node1");
	struct sp_trace_writer *w = sp_trace_create(path[r], &m, fx_lookup, NULL, 0);
	uint64_t t = FX_T, compute = r ? 4 * MS : 2 * MS, nccl = r ? 1 * MS : 3 * MS;
	uint32_t c = 1;

	assert_non_null(w);
	fx_put(w, fx_window(SP_EV_WINDOW_BEGIN, 0, 1, t, 0));
	for (int n = 1; n <= 3; n++) {
		uint64_t len = r == 1 && n == 2 ? 11 * MS : 10 * MS;
		fx_put(w, fx_api(t + 100 * US, c, S_LAUNCH, 100));
		fx_put(w, fx_gpu(SP_EV_KERNEL, t + 1 * MS, t + 1 * MS + compute, c, S_GEMM, 7));
		fx_put(w, fx_api(t + 200 * US, c + 1, S_LAUNCH_EX, 101));
		fx_put(w, fx_gpu(SP_EV_KERNEL, t + 1 * MS + compute, t + 1 * MS + compute + nccl, c + 1, S_NCCL_KERNEL,
				 13));
		struct sp_event e = fx_step(n, t, n == 3);
		e.end = t + len;
		fx_put(w, e);
		t += len;
		c += 2;
	}
	fx_put(w, fx_window(SP_EV_WINDOW_END, 0, 3, t, 0));
	assert_int_equal(sp_trace_close(w), 0);
}

static int setup(void **state)
{
	(void)state;
	if (make_scratch("steps"))
		return -1;
	for (int r = 0; r < 2; r++) {
		snprintf(path[r], sizeof(path[r]), "%s/rank%d.sptrace", dir, r);
		write_rank(r);
	}
	return 0;
}

/* The stdout of cmd(argc, argv), as one string (caller frees); *rc gets its status. */
static char *capture(int (*cmd)(int, char **), int argc, char **argv, int *rc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len), *saved = stdout;

	assert_non_null(f);
	fflush(stdout);
	stdout = f;
	*rc = cmd(argc, argv);
	stdout = saved;
	fclose(f);
	return buf;
}

/* The output of `stepprof steps` with the first n traces. */
static char *run_steps(int n, int *rc)
{
	char *argv[] = { "steps", path[0], path[1] };
	return capture(sp_cmd_steps, n + 1, argv, rc);
}

static void one_rank(void **state)
{
	char l[256];
	int rc;
	char *s = run_steps(1, &rc);

	assert_int_equal(rc, 0);
	/* step 2 of rank 0: 10 ms, compute 2 ms + NCCL 3 ms at 1-6 ms: busy 50%, idle 6-10 ms */
	assert_string_equal(squeezed(s, "2 ", l, sizeof(l)), "2 0 10.000ms 2 5.000ms 3.000ms 0ns 50.0% 4.000ms");
	free(s);
}

static void two_ranks(void **state)
{
	char l[256];
	int rc;
	char *s = run_steps(2, &rc);

	assert_int_equal(rc, 0);
	assert_string_equal(squeezed(s, "1 ", l, sizeof(l)), "1 2 10.000ms 10.000ms 10.000ms - 0.0%");
	assert_string_equal(squeezed(s, "2 ", l, sizeof(l)), "2 2 10.000ms 10.500ms 11.000ms 1 10.0%");
	const char *ranks = strstr(s, "\nRank ");
	assert_non_null(ranks);
	ranks++; /* the per-rank table: its rows start with the rank, as step rows do with the step */
	assert_string_equal(squeezed(ranks, "Rank ", l, sizeof(l)), "Rank Steps Median step Compute Exposed comm Wait "
								    "for peers CPU on peers Host stall Copies Last GPU "
								    "Last CPU");
	/* rank 0: GPU work 1-6 ms of each 10 ms step: idle 1 ms before the first step's work, then
	 * 5 ms (6-10 and 0-1) before each later one's; rank 1: the same, 6 ms before step 3's */
	assert_string_equal(squeezed(ranks, "0 ", l, sizeof(l)), "0 3 10.000ms 2.000ms 0ns 0ns 0ns 5.000ms 0ns 0% 0%");
	assert_string_equal(squeezed(ranks, "1 ", l, sizeof(l)), "1 3 10.000ms 4.000ms 0ns 0ns 0ns 5.000ms 0ns 0% 0%");
	/* no NCCL call records: nothing to pair, so no straggler, and it says why */
	assert_non_null(strstr(s, "No straggler can be named: no collective"));
	free(s);
}

/* The test switch of collector/base/clock.c: STEPPROF_TEST_CLOCK_OFFSET_NS shifts the wall-clock anchors. */
static void clock_offset(void **state)
{
	struct timespec ts;
	setenv("STEPPROF_TEST_CLOCK_OFFSET_NS", "-50000000", 1);
	uint64_t got = sp_realtime_ns();
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t d = (int64_t)((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - got);
	assert_true(d >= 50000000 && d < 60000000);
	unsetenv("STEPPROF_TEST_CLOCK_OFFSET_NS");
}

/* rank 0 as base, rank 1 as new: gemm 2 -> 4 ms per step, NCCL 3 -> 1 ms; equal |delta|, so by
 * name; the same kernel time per step and median step. */
static void diff(void **state)
{
	char l[256], *argv[] = { "diff", path[0], path[1] };
	int rc;
	char *s = capture(sp_cmd_diff, 3, argv, &rc);

	assert_int_equal(rc, 0);
	assert_non_null(strstr(s, "steps, median step 10.000ms (+0.0%), kernel time 5.000ms per step (+0.0%)"));
	assert_rows(s, (const char *const[]){ "Kernel (per step)", GEMM_NAME, NCCL_NAME }, 3);
	assert_string_equal(squeezed(s, GEMM_NAME, l, sizeof(l)),
			    GEMM_NAME " 1.0 1.0 2.000ms 4.000ms +2.000ms +100.0%");
	assert_string_equal(squeezed(s, NCCL_NAME, l, sizeof(l)), NCCL_NAME " 1.0 1.0 3.000ms 1.000ms -2.000ms -66.7%");
	free(s);
	char *top[] = { "diff", path[0], path[1], "--top", "1" };
	s = capture(sp_cmd_diff, 5, top, &rc);
	assert_non_null(strstr(s, "... 1 more kernel names"));
	free(s);
	char *bad[] = { "diff", path[0] };
	FILE *saved = stderr;
	stderr = fopen("/dev/null", "w");
	free(capture(sp_cmd_diff, 2, bad, &rc));
	fclose(stderr);
	stderr = saved;
	assert_int_equal(rc, 2);
}

/* Where GPU work belongs: at its launching call's start; at its own start without an id, or when
 * the call's record is not in the window (lost to a full ring). Steps 1-3 at +0, +250 us, +600 us. */
static void anchor_rule(void **state)
{
	char p[600], err[256];
	uint64_t T = FX_T;
	const struct sp_window *w;

	snprintf(p, sizeof(p), "%s/anchor.sptrace", dir);
	struct sp_trace_writer *tw = fx_create(p);
	struct sp_event ev[] = {
		fx_api(T + 300 * US, 7, S_LAUNCH, 100),
		fx_api(T + 100 * US, 5, S_LAUNCH, 100),
		fx_api(T + 50 * US, 0, S_LAUNCH, 100),                      /* no id */
		fx_gpu(SP_EV_KERNEL, T + 900 * US, T + 950 * US, 7, S_GEMM, 7),
		fx_gpu(SP_EV_KERNEL, T + 920 * US, T + 960 * US, 9, S_GEMM, 7), /* its call was lost */
		fx_gpu(SP_EV_MEMCPY, T + 940 * US, T + 990 * US, 0, S_GEMM, 7),
		fx_gpu(SP_EV_KERNEL, T + 980 * US, T + 999 * US, 5, S_GEMM, 7),
	};
	fx_put(tw, fx_window(SP_EV_WINDOW_BEGIN, 0, 1, T, 0));
	for (int n = 1; n <= 3; n++) {
		struct sp_event st = fx_step(n, T + (n == 1 ? 0 : n == 2 ? 250 : 600) * US, n == 3);
		st.end = T + (n == 1 ? 250 : n == 2 ? 600 : 1000) * US;
		fx_put(tw, st);
	}
	for (size_t i = 0; i < sizeof ev / sizeof *ev; i++)
		fx_put(tw, ev[i]);
	fx_put(tw, fx_window(SP_EV_WINDOW_END, 0, 3, T + 1000 * US, 0));
	assert_int_equal(sp_trace_close(tw), 0);

	struct sp_trace_reader *r = sp_trace_open(p, err, sizeof(err));
	assert_non_null(r);
	struct sp_windows *g = sp_windows_open(r);
	assert_int_equal(sp_windows_next(g, &w), 1);
	const int64_t want[] = { 2, 3, 3, 1 }; /* the step of ev[3..6] */
	for (int i = 0; i < 4; i++) {
		uint64_t t = sp_windows_anchor(g, &ev[3 + i]);
		int64_t in = 0;
		for (size_t k = 0; k < w->nsteps; k++)
			if (t >= w->steps[k].start && t < w->steps[k].end)
				in = w->steps[k].u.step.number;
		assert_int_equal(in, want[i]);
	}
	struct sp_steps s = { 0 };
	assert_int_equal(sp_steps_add_window(&s, r, g, w), 99 * US); /* busy: 900..999 us */
	assert_int_equal(s.n, 3);
	assert_int_equal(s.st[0].kernels, 1); /* corr 5 */
	assert_int_equal(s.st[1].kernels, 1); /* corr 7 */
	assert_int_equal(s.st[2].kernels, 1); /* corr 9, and the copy */
	assert_int_equal(s.st[2].copy_ns, 50 * US);
	assert_int_equal(s.st[2].busy, 99 * US);
	assert_int_equal(s.st[2].idle, 300 * US);
	sp_steps_free(&s);
	sp_windows_close(g);
	sp_trace_close_reader(r);
}

static void errors(void **state)
{
	char *none[] = { "steps" }, *opt[] = { "steps", "--bogus" }, *missing[] = { "steps", "/nonexistent/x.sptrace" };
	FILE *saved = stderr;

	stderr = fopen("/dev/null", "w");
	assert_int_equal(sp_cmd_steps(1, none), 2);
	assert_int_equal(sp_cmd_steps(2, opt), 2);
	assert_int_equal(sp_cmd_steps(2, missing), 1);
	fclose(stderr);
	stderr = saved;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_rank), cmocka_unit_test(two_ranks),   cmocka_unit_test(clock_offset),
		cmocka_unit_test(diff),     cmocka_unit_test(anchor_rule), cmocka_unit_test(errors),
	};
	return cmocka_run_group_tests(tests, setup, remove_scratch);
}
