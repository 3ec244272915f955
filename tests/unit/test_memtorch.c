/* SPDX-License-Identifier: MIT */
/* test_memtorch.c - `stepprof memory`'s reader of the collector's PyTorch allocator summary
 * (cli/memtorch.c): a version 2 file worked out by hand read in full (series, peak, lines at the
 * peak, cut) and shown as text, JSON and page data with its times put on the window's clock;
 * version 1 still read; hostile files: no header, negative, huge and junk-trailed numbers, lines
 * longer than the reader's buffer (their tail never read as a line), control bytes, points out of
 * order and a million of them (the series stays bounded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "scratch.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/export.h"
#include "cli/memtl.h"

#define MIB (1024ull * 1024)
#define H 1700000000000000ull /* the history's start, unix-epoch us */

static char path[200];

/* Writes text to the scratch file path (named for window id of trace "t.sptrace"). */
static void put(const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The text of one call of fn into buf. */
static char *capture(void (*fn)(const struct sp_memtl *, const struct sp_memtorch *, FILE *), const struct sp_memtl *w,
		     const struct sp_memtorch *t)
{
	static char buf[8192];
	FILE *f = fmemopen(buf, sizeof buf, "w");
	fn(w, t, f);
	fclose(f);
	return buf;
}

static const char v2[] = "stepprof-torch-memory 2\n"
			 "allocated 1005\nreserved 2097152\nsegments 1\nblocks 1\n"
			 "top 1005 train.py:42 forward\n"
			 "history_start_us 1700000000000000\nentries 13 2\ncut 1\n"
			 "series_start_us 1700000000001000\n"
			 "peak 1700000000004000 5247981\n"
			 "at_peak 3145728 1 model.py:7 big\n"
			 "at_peak 2097152 2 model.py:9 act\n"
			 "point 1700000000001000 4096 2097152\n"
			 "point 1700000000004000 5247981 10485760\n"
			 "point 1700000000009000 1005 2097152\n";

/* A window that opened 2 ms before the history, 20 ms long, its clock pair mono + 1000 s = real. */
static struct sp_memtl window(void)
{
	struct sp_memtl w = { .id = 3, .complete = 1 };
	w.anchor_mono = 5000000000ull;
	w.anchor_real = w.anchor_mono + (H * 1000 - 2000000ull - 7000000000ull); /* t0 below maps to H - 2 ms */
	w.t0 = 7000000000ull;
	w.t1 = w.t0 + 20000000ull;
	return w;
}

static void test_v2(void **state)
{
	(void)state;
	struct sp_memtorch t;
	struct sp_memtl w = window();
	char trace[220];
	snprintf(path, sizeof path, "%s/t.w3.memory_summary.txt", dir);
	snprintf(trace, sizeof trace, "%s/t.sptrace", dir);
	put(v2);
	assert_int_equal(sp_memtorch_read(&w, trace, &t), 0);
	assert_int_equal(t.version, 2);
	assert_true(t.history && t.cut && t.mapped);
	assert_int_equal(t.allocated, 1005);
	assert_int_equal(t.entries, 13);
	assert_int_equal(t.skipped, 2);
	assert_int_equal(t.peak, 5247981);
	assert_int_equal(t.npt, 3);
	assert_int_equal(t.nat, 2);
	assert_string_equal(t.at_peak[1].where, "model.py:9 act");
	assert_int_equal(t.at_peak[1].blocks, 2);
	char *text = capture(sp_memtorch_text, &w, &t);
	assert_non_null(
		strstr(text, "peak 5.00MiB allocated at +6.000 ms from the window's start; reserved 10.00MiB at most"));
	assert_non_null(strstr(text, "on from +2.000 ms, 13 events, malformed ones skipped"));
	assert_non_null(
		strstr(text,
		       "the allocator's history was cut: the series starts at +3.000 ms from the window's start"));
	assert_non_null(strstr(text, "   2.00MiB      2 blocks  model.py:9 act\n"));
	char js[8192];
	FILE *f = fmemopen(js, sizeof js, "w");
	struct sp_out *x = sp_out_stream(f);
	sp_memtorch_json(x, &w, &t);
	sp_out_close(x, 1);
	fclose(f);
	assert_non_null(strstr(js, "\"cut\":true,\"mapped\":true,\"series_start_us\":1700000000001000,\"series_start_"
				   "ns\":3000000"));
	assert_non_null(
		strstr(js, "\"peak\":{\"time_us\":1700000000004000,\"at_ns\":6000000,\"allocated_bytes\":5247981}"));
	assert_non_null(strstr(js, "\"allocated\":[4096,5247981,1005],\"reserved\":[2097152,10485760,2097152]"));
	assert_non_null(strstr(js, "\"driver_end_bytes\":null"));
	f = fmemopen(js, sizeof js, "w");
	x = sp_out_stream(f);
	sp_memtorch_html(x, &w, &t);
	sp_out_close(x, 1);
	fclose(f);
	assert_non_null(strstr(js, "\"t\":[3.000,6.000,11.000],\"a\":[4096,5247981,1005]"));
	sp_memtorch_free(&t);

	char v2b[sizeof v2];
	memcpy(v2b, v2, sizeof v2);
	memcpy(strstr(v2b, "cut 1"), "cut 2", 5); /* cut by the summary's bound, not the ring */
	put(v2b);
	assert_int_equal(sp_memtorch_read(&w, trace, &t), 0);
	text = capture(sp_memtorch_text, &w, &t);
	assert_non_null(
		strstr(text, "(the summary reads the latest 500000 events; the snapshot's pickle has them all)"));
	sp_memtorch_free(&t);
	memcpy(strstr(v2b, "cut 2"), "cut 3", 5); /* no such cut: not read */
	put(v2b);
	assert_int_equal(sp_memtorch_read(&w, trace, &t), 0);
	assert_int_equal(t.cut, 0);
	sp_memtorch_free(&t);
	put(v2);

	w.anchor_mono = w.anchor_real = 0; /* no clock pair: the history's own axis, said */
	assert_int_equal(sp_memtorch_read(&w, trace, &t), 0);
	assert_false(t.mapped);
	text = capture(sp_memtorch_text, &w, &t);
	assert_non_null(strstr(text, "at +4.000 ms from the history's start (the trace's clock records do not place it "
				     "in the window)"));
	sp_memtorch_free(&t);
	w = window();
	w.anchor_real += 3600ull * 1000000000ull; /* a pair an hour off: not believed */
	assert_int_equal(sp_memtorch_read(&w, trace, &t), 0);
	assert_false(t.mapped);
	sp_memtorch_free(&t);
}

static void test_v1(void **state)
{
	(void)state;
	struct sp_memtorch t;
	snprintf(path, sizeof path, "%s/v1.txt", dir);
	put("stepprof-torch-memory 1\nallocated 7\nreserved 9\nsegments 1\nblocks 1\ntop 7 a.py:1 f\n"
	    "peak 1 2\npoint 1 2 3\n");
	assert_int_equal(sp_memtorch_load(path, &t), 0);
	assert_int_equal(t.version, 1);
	assert_false(t.history);
	assert_int_equal(t.npt, 0); /* version 2 lines in a version 1 file are not read */
	assert_int_equal(t.ntop, 1);
	sp_memtorch_free(&t);
}

static void test_hostile(void **state)
{
	(void)state;
	struct sp_memtorch t;
	snprintf(path, sizeof path, "%s/bad.txt", dir);
	put("stepprof-torch-memory 3\nallocated 1\nreserved 1\n");
	assert_int_equal(sp_memtorch_load(path, &t), -1); /* unknown version */
	put("stepprof-torch-memory 2\nallocated -5\nreserved 1\n");
	assert_int_equal(sp_memtorch_load(path, &t), -1); /* a negative number is no number */
	put("stepprof-torch-memory 2\nallocated 99999999999999999999\nreserved 1\n");
	assert_int_equal(sp_memtorch_load(path, &t), -1);
	put("stepprof-torch-memory 2\nallocated 5 junk\nreserved 1\n");
	assert_int_equal(sp_memtorch_load(path, &t), -1);
	put("stepprof-torch-memory 2\nallocated 4611686018427387905\nreserved 1\n"); /* 2^62 + 1 */
	assert_int_equal(sp_memtorch_load(path, &t), -1);

	/* a long line whose tail looks like a point, control bytes, a truncated last line */
	FILE *f = fopen(path, "w");
	fprintf(f, "stepprof-torch-memory 2\nallocated 1\nreserved 2\nhistory_start_us 10\nseries_start_us 10\n"
		   "peak 20 5\nat_peak 5 1 ");
	for (int i = 0; i < 600; i++)
		fputc('x', f);
	fprintf(f, "point 1 1 1\nat_peak 4 1 a\tb\x01"
		   "c\npoint 30 1 1\npoint 25 1 1\npoint 40 2 2\npoint 50 3");
	fclose(f);
	assert_int_equal(sp_memtorch_load(path, &t), 0);
	assert_true(t.history);
	assert_int_equal(t.nat, 2);
	assert_true(strlen(t.at_peak[0].where) < 512 && !strchr(t.at_peak[0].where, 'p'));
	assert_string_equal(t.at_peak[1].where, "a?b?c");
	assert_int_equal(t.npt, 2); /* 30 and 40: 25 is out of order, "point 50 3" is cut short */
	assert_int_equal(t.pt[1].t_us, 40);
	assert_int_equal(t.dropped, 1);
	sp_memtorch_free(&t);

	f = fopen(path, "w"); /* a million points: the series keeps SP_MEMTORCH_MAX_POINTS */
	fprintf(f,
		"stepprof-torch-memory 2\nallocated 1\nreserved 2\nhistory_start_us 1\nseries_start_us 1\npeak 1 1\n");
	for (int i = 1; i <= 1000000; i++)
		fprintf(f, "point %d %d 7\n", i, i);
	fclose(f);
	assert_int_equal(sp_memtorch_load(path, &t), 0);
	assert_int_equal(t.npt, SP_MEMTORCH_MAX_POINTS);
	assert_int_equal(t.dropped, 1000000 - SP_MEMTORCH_MAX_POINTS);
	sp_memtorch_free(&t);

	put("stepprof-torch-memory 2\nallocated 1\nreserved 2\nhistory_start_us 50\nseries_start_us 10\npeak 60 1\n"
	    "point 60 1 1\n");
	assert_int_equal(sp_memtorch_load(path, &t), 0);
	assert_false(t.history); /* a series that starts before its history: not drawn */
	sp_memtorch_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v2),
		cmocka_unit_test(test_v1),
		cmocka_unit_test(test_hostile),
	};
	if (make_scratch("memtorch") < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, remove_scratch);
}
