/* SPDX-License-Identifier: MIT */
/* test_report.c - `stepprof report` on the sample trace of trace_fixture.h: the numbers worked
 * out by hand there (totals, averages, % of GPU time, drops, GPU busy, memcpy table), every sort
 * key, --top, --window, name truncation and --wide, and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/report.h"
#include "text_assert.h"
#include "trace_fixture.h"

static char dir[] = "/tmp/sp_test_report.XXXXXX";
static char trace[300];

#define GEMM "ampere_sgemm_128x64_nn"
#define NCCL "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
#define ELEM "void at::native::vectorized_elementwise_kernel"
#define WEIRD "name with"

/* The report of the sample with these options, as one string (caller frees); *rc gets the result. */
static char *report(int sort, int top, long long window, int wide, int *rc)
{
	struct sp_report_opts o = { .sort = sort, .top = top, .window = window, .wide = wide };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	*rc = sp_report(trace, &o, f, NULL);
	fclose(f);
	return buf;
}

/* The line of s that starts with prefix (copied into buf), or fails. */
static const char *line(const char *s, const char *prefix, char *buf, size_t n)
{
	const char *p = s;
	while ((p = strstr(p, prefix)) && p != s && p[-1] != '\n')
		p++;
	if (!p)
		fail_msg("no line starting '%s' in:\n%s", prefix, s);
	size_t len = strcspn(p, "\n");
	snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), p);
	return buf;
}

/* Asserts that the row of s starting with name holds these cells (spaces squeezed), and that it
 * is as wide as the header line of its table (starting with header): the columns line up. */
static void assert_table_cells(const char *s, const char *header, const char *name, const char *cells)
{
	char l[512], h[512], got[512];
	size_t n = 0;
	int space = 0;

	line(s, name, l, sizeof(l));
	for (const char *p = l + strlen(name); *p; p++) {
		if (*p == ' ') {
			space = n > 0;
			continue;
		}
		if (space)
			got[n++] = ' ';
		space = 0;
		got[n++] = *p;
	}
	got[n] = 0;
	assert_string_equal(got, cells);
	assert_int_equal(strlen(l), strlen(line(s, header, h, sizeof(h))));
}

#define assert_cells(s, name, cells) assert_table_cells(s, "Name ", name, cells)

static void test_totals(void **state)
{
	char l[512];
	int rc;
	char *s = report(SP_SORT_TOTAL, 0, -1, 0, &rc);

	assert_int_equal(rc, 0);
	assert_non_null(strstr(s, "Trace "));
	assert_non_null(strstr(s, "host node1, rank 1 of 2, pid 4242"));
	assert_non_null(strstr(s, "All 2 windows aggregated"));
	/* header columns in order */
	line(s, "Name ", l, sizeof(l));
	assert_true(strstr(l, "Calls") < strstr(l, "Total") && strstr(l, "Total") < strstr(l, "Avg") &&
		    strstr(l, "Avg") < strstr(l, "Min") && strstr(l, "Min") < strstr(l, "Max") &&
		    strstr(l, "Max") < strstr(l, "% GPU"));
	assert_cells(s, GEMM, "5 10.000ms 2.000ms 2.000ms 2.000ms 50.0%");
	assert_cells(s, NCCL, "1 8.000ms 8.000ms 8.000ms 8.000ms 40.0%");
	assert_cells(s, ELEM, "<... 3 1.500ms 500.000us 500.000us 500.000us 7.5%");
	assert_cells(s, "Total ", "10 20.000ms 100.0%");
	assert_string_equal(line(s, "4 kernel names", l, sizeof(l)),
			    "4 kernel names, 10 kernels, 20.000ms of kernel time");
	assert_string_equal(line(s, "Dropped records:", l, sizeof(l)),
			    "Dropped records: 6 (cupti: 2, ring_full: 3, window_cap: 0, late: 1)");
	assert_string_equal(line(s, "Window 0:", l, sizeof(l)),
			    "Window 0: steps 5-7 (3 steps), 30.000ms, 8 kernels, GPU busy 44.0%, 3 dropped");
	assert_string_equal(line(s, "Window 1:", l, sizeof(l)),
			    "Window 1: steps 15-16 (2 steps), 20.000ms, 2 kernels, GPU busy 20.0%, 2 dropped");
	assert_string_equal(line(s, "Records outside", l, sizeof(l)), "Records outside any window (skipped): 1");
	assert_table_cells(s, "Memory op ", "Memcpy HtoD", "3 3.00MiB 300.000us 10.486");
	assert_table_cells(s, "Memory op ", "Memset", "1 4.00KiB 100.000us 0.041");
	assert_null(strstr(s, "cut short"));
	/* control characters of a name must not break the table */
	assert_cells(s, "name with?newline?tab?ctl",
		     ", bad utf8 \xff"
		     "end, \xc2\xb5s 1 500.000us 500.000us 500.000us 500.000us 2.5%");
	free(s);
}

/* The per-step table, worked out by hand from trace_fixture.h: steps 5 and 6 launch gemm (2 ms)
 * and elementwise (0.5 ms) and copy 0.1 ms, GPU work 1-3.5 and 4-4.1 ms into the 10 ms step (the
 * longest idle stretch 4.1-10 ms); step 7 adds the NCCL kernel (8 ms at 21-29 ms, launched from
 * another thread inside the step), the memset and the weird kernel (launched at 29.8 ms, run
 * after the window's end: counted in its step, outside its span); steps 15 and 16 one gemm each. */
static void test_steps(void **state)
{
	int rc;
	char *s = report(SP_SORT_TOTAL, 0, -1, 0, &rc);

	assert_int_equal(rc, 0);
	assert_rows(s, (const char *const[]){ "Step ", "5 ", "6 ", "7 ", "15 ", "16 " }, 6);
	assert_table_cells(s, "Step ", "5 ", "0 10.000ms 2 2.500ms 0ns 100.000us 26.0% 5.900ms");
	assert_table_cells(s, "Step ", "6 ", "0 10.000ms 2 2.500ms 0ns 100.000us 26.0% 5.900ms");
	assert_table_cells(s, "Step ", "7 ", "0 10.000ms 4 11.000ms 8.000ms 200.000us 80.0% 1.000ms");
	assert_table_cells(s, "Step ", "15 ", "1 10.000ms 1 2.000ms 0ns 0ns 20.0% 7.000ms");
	assert_table_cells(s, "Step ", "16 ", "1 10.000ms 1 2.000ms 0ns 0ns 20.0% 7.000ms");
	free(s);
	s = report(SP_SORT_TOTAL, 0, 1, 0, &rc); /* one window: its steps only */
	assert_int_equal(rc, 0);
	assert_null(strstr(s, "\n5 "));
	assert_table_cells(s, "Step ", "15 ", "1 10.000ms 1 2.000ms 0ns 0ns 20.0% 7.000ms");
	free(s);
}

/* The findings of the sample: steps idle for a median 74% (26, 26, 80, 20, 20% busy), NCCL
 * 8 of 20 ms of kernel time, gemm 10 of 20 ms, 6 drops by source; all steps equally long. */
static void test_findings(void **state)
{
	int rc;
	char *s = report(SP_SORT_TOTAL, 0, -1, 0, &rc);

	assert_int_equal(rc, 0);
	assert_rows(s,
		    (const char *const[]){
			    "Findings", "- The GPU is idle for a median 74.0% of each step",
			    "- NCCL kernels take 40.0% of GPU kernel time",
			    "- One kernel takes 50.0% of GPU kernel time: " GEMM ".",
			    "- 6 records were lost: 3 to full per-thread rings (raise [limits] ring_events); "
			    "2 by CUPTI (raise [limits] cupti_buffer_bytes); 1 GPU record came after" },
		    5);
	assert_null(strstr(s, "the median step"));
	free(s);
	s = report(SP_SORT_TOTAL, 0, 1, 0, &rc); /* window 1: one gemm per step, 2 CUPTI drops and the late one */
	assert_non_null(strstr(s, "- The GPU is idle for a median 80.0% of each step"));
	assert_null(strstr(s, "NCCL kernels take"));
	assert_non_null(strstr(s, "- One kernel takes 100.0% of GPU kernel time"));
	assert_non_null(
		strstr(s, "- 3 records were lost: 2 by CUPTI (raise [limits] cupti_buffer_bytes); 1 GPU record came"));
	free(s);
}

static void test_sort_keys(void **state)
{
	int rc;
	struct {
		int key;
		const char *order[4];
	} cases[] = {
		{ SP_SORT_TOTAL, { GEMM, NCCL, ELEM, WEIRD } },
		{ SP_SORT_CALLS, { GEMM, ELEM, WEIRD, NCCL } }, /* 1-call tie broken by name */
		{ SP_SORT_AVG, { NCCL, GEMM, WEIRD, ELEM } },
		{ SP_SORT_MAX, { NCCL, GEMM, WEIRD, ELEM } },
		{ SP_SORT_MIN, { NCCL, GEMM, WEIRD, ELEM } },
		{ SP_SORT_NAME, { GEMM, WEIRD, NCCL, ELEM } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *s = report(cases[i].key, 0, -1, 0, &rc);
		assert_int_equal(rc, 0);
		assert_rows(s, cases[i].order, 4);
		free(s);
	}
	assert_int_equal(sp_report_sort_parse("avg"), SP_SORT_AVG);
	assert_int_equal(sp_report_sort_parse("name"), SP_SORT_NAME);
	assert_int_equal(sp_report_sort_parse("bogus"), -1);
}

static void test_top_and_window(void **state)
{
	char l[512];
	int rc;
	char *s = report(SP_SORT_TOTAL, 2, -1, 0, &rc);

	assert_int_equal(rc, 0);
	assert_rows(s, (const char *[]){ GEMM, NCCL, "... 2 more kernel names: 2.000ms, 10.0% of GPU time" }, 3);
	assert_null(strstr(s, ELEM));
	assert_cells(s, "Total ", "10 20.000ms 100.0%");
	free(s);

	s = report(SP_SORT_TOTAL, 0, 1, 0, &rc);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(s, "Window 1 of 2 windows"));
	assert_cells(s, GEMM, "2 4.000ms 2.000ms 2.000ms 2.000ms 100.0%");
	assert_null(strstr(s, NCCL));
	assert_null(strstr(s, "Window 0:"));
	assert_string_equal(line(s, "Dropped records:", l, sizeof(l)),
			    "Dropped records: 3 (cupti: 2, ring_full: 0, window_cap: 0, late: 1)");
	assert_null(strstr(s, "Memcpy HtoD"));
	free(s);

	s = report(SP_SORT_TOTAL, 0, 5, 0, &rc);
	assert_int_equal(rc, SP_REPORT_NO_WINDOW); /* window 5 is not there */
	free(s);
}

static void test_names(void **state)
{
	char l[512];
	int rc;
	char *s = report(SP_SORT_TOTAL, 0, -1, 0, &rc);

	/* truncated to the column: 47 characters then "..." */
	line(s, ELEM, l, sizeof(l));
	assert_int_equal(strncmp(l, "void at::native::vectorized_elementwise_kernel<...", SP_REPORT_NAME_WIDTH), 0);
	free(s);

	s = report(SP_SORT_TOTAL, 0, -1, 1, &rc);
	line(s, ELEM, l, sizeof(l));
	assert_non_null(strstr(l, "std::array<char*, 3> >(int, \"q\"\\path & <x>)        3 "));
	line(s, "Name ", l, sizeof(l));
	assert_true(strlen(l) > 150); /* the column grew to the longest name */
	free(s);
}

static void test_errors(void **state)
{
	struct sp_report_opts o = { .window = -1 };
	char p[320];
	FILE *f;
	struct sp_report_result res;

	snprintf(p, sizeof(p), "%s/nothing.sptrace", dir);
	assert_int_equal(sp_report(p, &o, stdout, &res), SP_REPORT_UNREADABLE);
	assert_non_null(strstr(res.why, "nothing.sptrace"));
	assert_null(strstr(res.why, "stepprof report"));
	f = fopen(p, "w");
	fputs("not a trace, just text long enough to be a header ...", f);
	fclose(f);
	assert_int_equal(sp_report(p, &o, stdout, NULL), SP_REPORT_UNREADABLE);

	/* a valid trace with no window */
	snprintf(p, sizeof(p), "%s/empty.sptrace", dir);
	struct sp_trace_writer *w = fx_create(p);
	fx_put(w, fx_api(FX_T, 1, S_LAUNCH, 100));
	assert_int_equal(sp_trace_close(w), 0);
	assert_int_equal(sp_report(p, &o, stdout, &res), SP_REPORT_NO_WINDOW);
	assert_int_equal(res.seen, 0);
}

enum { STEP3_REFUTED, UNTRAINED, AT_EXIT };

/* Writes a trace of automatic steps (format version 2) to dir/NAME: steps 0-5, each one gemm and
 * one elementwise kernel but step 3 (an evaluation pass: one gemm). UNTRAINED: steps 0-2 are
 * regime 1 without training evidence, 3-5 regime 2 with it; STEP3_REFUTED: step 3 is refuted;
 * AT_EXIT: step 5, not 3, is the short one, and the process exited in it. Returns the report's
 * text (free it). */
static char *auto_trace_report(const char *name, int mode)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	struct sp_trace_writer *w = fx_create(path);
	const uint64_t T = FX_T;
	uint32_t c = 1;
	fx_put(w, fx_window(SP_EV_WINDOW_BEGIN, 0, 0, T, 0));
	for (int n = 0; n < 6; n++) {
		uint64_t s = T + (uint64_t)n * 10 * MS;
		fx_put(w, fx_api(s + 100 * US, c, S_LAUNCH, 100));
		fx_put(w, fx_gpu(SP_EV_KERNEL, s + 1 * MS, s + 3 * MS, c++, S_GEMM, 7));
		if (n != (mode == AT_EXIT ? 5 : 3)) {
			fx_put(w, fx_api(s + 200 * US, c, S_LAUNCH, 100));
			fx_put(w, fx_gpu(SP_EV_KERNEL, s + 3 * MS, s + 4 * MS, c++, S_ELEMWISE, 7));
		}
		struct sp_event e = fx_step(n, s, n == 5);
		unsigned flags = mode == UNTRAINED ? (n >= 3 ? SP_STEP_TRAIN : 0)
				 : mode == AT_EXIT ? (n == 5 ? SP_STEP_AT_EXIT : 0)
						   : (n == 3 ? SP_STEP_REFUTED : 0);
		e.name = S_SYNC_API;
		e.u.step = (struct sp_ev_step){ .number = n,
						.how = 1,
						.flags = (uint8_t)(SP_STEP_AFTER | flags),
						.regime = mode == UNTRAINED && n >= 3 ? 2 : 1,
						.period = 3,
						.launches = 2,
						.every = 1,
						.confidence = 5 };
		fx_put(w, e);
	}
	fx_put(w, fx_window(SP_EV_WINDOW_END, 0, 5, T + 60 * MS, 0));
	assert_int_equal(sp_trace_close(w), 0);

	struct sp_report_opts o = { .sort = SP_SORT_TOTAL, .top = 0, .window = -1 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(sp_report(path, &o, f, NULL), 0);
	fclose(f);
	return buf;
}

/* The report says how the steps were found and names the step that differs. */
static void test_steps_found_by(void **state)
{
	char *buf = auto_trace_report("auto.sptrace", STEP3_REFUTED);
	assert_non_null(strstr(buf,
			       "Steps found automatically: boundary after 'cudaStreamSynchronize' (every 1), a period "
			       "of 3 calls with 2 launches, proven by 5 copies; regime 1; the detector refuted"));
	assert_non_null(strstr(buf,
			       "1 of 6 recorded steps differ from the others (median 2 kernels): step 3 (1 kernels, "
			       "refuted by the detector); automatic detection may have locked on another phase"));
	free(buf);
}

/* Steps of a regime without training evidence beside a training regime's: a finding names them. */
static void test_untrained_steps(void **state)
{
	char *buf = auto_trace_report("auto2.sptrace", UNTRAINED);
	assert_non_null(
		strstr(buf,
		       "3 recorded steps belong to a regime that launched no backward or optimizer kernel, "
		       "while regime 2 (training) did: steps 0-2 (regime 1); automatic detection took an evaluation"));
	free(buf);
}

/* The step the process exited in holds what came after the last iteration: the step table says
 * so, and it is no step that "differs from the others". */
static void test_step_at_exit(void **state)
{
	(void)state;
	char *buf = auto_trace_report("auto3.sptrace", AT_EXIT);
	assert_non_null(strstr(buf, "Step 5 ended when the process exited, not at a step boundary"));
	assert_null(strstr(buf, "differ from the others"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_totals),          cmocka_unit_test(test_steps),
		cmocka_unit_test(test_findings),        cmocka_unit_test(test_sort_keys),
		cmocka_unit_test(test_top_and_window),  cmocka_unit_test(test_names),
		cmocka_unit_test(test_errors),          cmocka_unit_test(test_steps_found_by),
		cmocka_unit_test(test_untrained_steps), cmocka_unit_test(test_step_at_exit),
	};
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(trace, sizeof(trace), "%s/sample.sptrace", dir);
	fx_write_sample(trace);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	return rc;
}
