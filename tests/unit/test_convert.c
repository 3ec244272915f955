/* SPDX-License-Identifier: MIT */
/* test_convert.c - window grouping (events before BEGIN, GPU work after END joined by
 * correlation id, late records, a file cut short), JSON string escaping, and `stepprof convert`
 * output: one file per window, --merge, --window, gzip readable by python's gzip+json; the
 * exporter's extra spans (sp_export_span), with lanes for spans that overlap.
 * With SP_WRITE_SAMPLE=PATH set it only writes the sample trace there (for the e2e script). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/export.h"
#include "cli/steps.h"
#include "cli/windows.h"
#include "trace_fixture.h"
#include "window_fixture.h"

static char dir[] = "/tmp/sp_test_convert.XXXXXX";

/* dir/leaf in one of 8 rotating buffers: copy it if it must outlive 7 more calls. */
static char *path_of(const char *leaf)
{
	static char buf[8][256];
	static int i;
	char *p = buf[i++ % 8];
	snprintf(p, 256, "%s/%s", dir, leaf);
	return p;
}

static int has_kernel(const struct fx_events *v, uint32_t corr)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->ev[i].kind == SP_EV_KERNEL && v->ev[i].corr == corr)
			return 1;
	return 0;
}

static int run_convert(int argc, const char **argv)
{
	return sp_cmd_convert(argc, (char **)argv);
}

/* 0 if python3 parses path as JSON (gunzipped first for .gz) with the object-form keys. */
static int python_loads(const char *path)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import gzip,json,sys; p=sys.argv[1]; f=gzip.open(p) if p.endswith(\".gz\") else "
		 "open(p,\"rb\");"
		 " d=json.load(f); assert isinstance(d[\"traceEvents\"], list) and d[\"displayTimeUnit\"]==\"ns\"' "
		 "'%s'",
		 path);
	return system(cmd);
}

static void test_group_sample(void **state)
{
	char err[256];
	const struct sp_window *w;
	struct sp_trace_reader *r;
	struct sp_windows *g;
	struct fx_events ev = { 0 };

	fx_write_sample(path_of("g.sptrace"));
	r = sp_trace_open(path_of("g.sptrace"), err, sizeof(err));
	assert_non_null(r);
	g = sp_windows_open(r);

	assert_int_equal(sp_windows_next(g, &w), 1);
	fx_collect(g, &ev);
	assert_int_equal(w->id, 0);
	assert_true(w->complete);
	assert_int_equal(w->first_step, 5);
	assert_int_equal(w->last_step, 7);
	assert_int_equal(w->t0, FX_T);
	assert_int_equal(w->t1, FX_T + 30 * MS);
	assert_int_equal(fx_count_kind(&ev, SP_EV_STEP), 3);
	assert_int_equal(fx_count_kind(&ev, SP_EV_KERNEL), 8);
	assert_int_equal(ev.n, w->events);
	assert_true(has_kernel(&ev, 60));  /* ran after END, joined by its launch */
	assert_false(has_kernel(&ev, 999)); /* after END, no launch in the window */
	int pre = 0;
	for (size_t i = 0; i < ev.n; i++)
		pre += ev.ev[i].kind == SP_EV_API && ev.ev[i].corr == 11;
	assert_int_equal(pre, 1); /* written before BEGIN */
	assert_int_equal(w->dropped[SP_DROP_RING], 3);
	assert_int_equal(w->dropped[SP_DROP_LATE], 0);
	assert_int_equal(w->dropped_total, 3);
	assert_string_equal(sp_windows_thread_name(g, 100), "python main");
	assert_null(sp_windows_thread_name(g, 101));
	assert_non_null(sp_windows_device(g, 0));
	assert_null(sp_windows_device(g, 1));

	assert_int_equal(sp_windows_next(g, &w), 1);
	fx_collect(g, &ev);
	assert_int_equal(w->id, 1);
	assert_true(w->complete);
	assert_int_equal(fx_count_kind(&ev, SP_EV_KERNEL), 2);
	assert_false(has_kernel(&ev, 61)); /* late: counted, not kept */
	assert_int_equal(w->dropped[SP_DROP_LATE], 1);
	assert_int_equal(w->dropped[SP_DROP_CUPTI], 2);
	assert_int_equal(w->dropped[SP_DROP_RING], 0);

	assert_int_equal(sp_windows_next(g, &w), 0);
	assert_int_equal(sp_windows_next(g, &w), 0);
	assert_int_equal(sp_windows_outside(g), 1);
	sp_windows_close(g);
	sp_trace_close_reader(r);
	free(ev.ev);
}

/* A file cut inside its last chunk: window 0 whole, window 1 partial (incomplete, t1 at its last
 * event), window 2's records lost with the torn chunk. */
static void test_group_truncated(void **state)
{
	char path[256];
	snprintf(path, sizeof(path), "%s", path_of("cut.sptrace"));
	struct sp_trace_writer *w = fx_create(path);
	const struct sp_window *win;
	struct sp_trace_reader *r;
	struct sp_windows *g;
	struct stat st;
	char err[256];
	uint64_t T = FX_T;
	struct fx_events ev = { 0 };

	fx_put(w, fx_window(SP_EV_WINDOW_BEGIN, 0, 0, T, 0));
	fx_put(w, fx_api(T + MS, 1, S_LAUNCH, 100));
	fx_put(w, fx_gpu(SP_EV_KERNEL, T + 2 * MS, T + 3 * MS, 1, S_GEMM, 7));
	fx_put(w, fx_step(0, T, 1));
	fx_put(w, fx_window(SP_EV_WINDOW_END, 0, 0, T + 10 * MS, 0));
	fx_put(w, fx_window(SP_EV_WINDOW_BEGIN, 1, 3, T + 100 * MS, 0));
	fx_put(w, fx_step(3, T + 100 * MS, 0));
	fx_put(w, fx_api(T + 101 * MS, 2, S_LAUNCH, 100));
	fx_put(w, fx_gpu(SP_EV_KERNEL, T + 102 * MS, T + 104 * MS, 2, S_GEMM, 7));
	assert_int_equal(sp_trace_flush(w), 0);
	for (int i = 0; i < 2000; i++) /* a chunk that will be torn */
		fx_put(w, fx_gpu(SP_EV_KERNEL, T + 200 * MS + (uint64_t)i, T + 201 * MS, 3, S_GEMM, 7));
	assert_int_equal(sp_trace_close(w), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size - 20), 0);

	r = sp_trace_open(path, err, sizeof(err));
	assert_non_null(r);
	g = sp_windows_open(r);
	assert_int_equal(sp_windows_next(g, &win), 1);
	fx_collect(g, &ev);
	assert_int_equal(win->id, 0);
	assert_true(win->complete);
	assert_int_equal(fx_count_kind(&ev, SP_EV_KERNEL), 1);
	assert_int_equal(sp_windows_next(g, &win), 1);
	fx_collect(g, &ev);
	assert_int_equal(win->id, 1);
	assert_false(win->complete);
	assert_int_equal(win->first_step, 3);
	assert_int_equal(win->last_step, 3);
	assert_int_equal(win->t1, T + 110 * MS); /* the step's end */
	assert_int_equal(fx_count_kind(&ev, SP_EV_KERNEL), 1);
	assert_int_equal(sp_windows_next(g, &win), 0);
	assert_true(sp_trace_truncated(r));
	sp_windows_close(g);
	sp_trace_close_reader(r);
	free(ev.ev);

	/* convert still writes both, the second marked incomplete */
	const char *argv[] = { "convert", path, "-o", path_of("cut.json") };
	assert_int_equal(run_convert(4, argv), 0);
	char *s = fx_slurp(path_of("cut.1.pt.trace.json"));
	assert_non_null(s);
	assert_non_null(strstr(s, "window 1 (incomplete)"));
	assert_non_null(strstr(s, "\"complete\":false"));
	free(s);
	assert_int_equal(python_loads(path_of("cut.0.pt.trace.json")), 0);
	assert_int_equal(python_loads(path_of("cut.1.pt.trace.json")), 0);
}

/* A corrupt chunk in the middle: the windows before it come out (the one it cuts marked
 * incomplete), then the error; convert keeps what it wrote and fails. */
static void test_group_corrupt(void **state)
{
	char path[256];
	snprintf(path, sizeof(path), "%s", path_of("bad.sptrace"));
	struct sp_trace_writer *w = fx_create(path);
	const struct sp_window *win;
	struct sp_trace_reader *r;
	struct sp_windows *g;
	char err[256];
	uint64_t T = FX_T, off;
	FILE *f;

	fx_put(w, fx_window(SP_EV_WINDOW_BEGIN, 0, 0, T, 0));
	fx_put(w, fx_step(0, T, 1));
	fx_put(w, fx_window(SP_EV_WINDOW_END, 0, 0, T + 10 * MS, 0));
	fx_put(w, fx_window(SP_EV_WINDOW_BEGIN, 1, 1, T + 20 * MS, 0));
	fx_put(w, fx_step(1, T + 20 * MS, 1));
	assert_int_equal(sp_trace_flush(w), 0);
	off = sp_trace_file_bytes(w);
	fx_put(w, fx_gpu(SP_EV_KERNEL, T + 21 * MS, T + 22 * MS, 0, S_GEMM, 7));
	assert_int_equal(sp_trace_flush(w), 0);
	fx_put(w, fx_window(SP_EV_WINDOW_END, 1, 1, T + 30 * MS, 0));
	assert_int_equal(sp_trace_close(w), 0);
	f = fopen(path, "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, (long)off + 16, SEEK_SET), 0); /* the zstd frame of the 2nd chunk */
	assert_int_equal(fwrite("XXXXXXXX", 1, 8, f), 8);
	fclose(f);

	r = sp_trace_open(path, err, sizeof(err));
	assert_non_null(r);
	g = sp_windows_open(r);
	assert_int_equal(sp_windows_next(g, &win), 1);
	assert_int_equal(win->id, 0);
	assert_true(win->complete);
	assert_int_equal(sp_windows_next(g, &win), 1);
	struct fx_events ev = { 0 };
	fx_collect(g, &ev);
	assert_int_equal(win->id, 1);
	assert_false(win->complete);
	assert_int_equal(fx_count_kind(&ev, SP_EV_STEP), 1);
	free(ev.ev);
	assert_int_equal(sp_windows_next(g, &win), -1);
	assert_int_equal(sp_windows_next(g, &win), -1);
	sp_windows_close(g);
	sp_trace_close_reader(r);

	const char *argv[] = { "convert", path, "-o", path_of("bad.json") };
	assert_int_equal(run_convert(4, argv), 1);
	assert_int_equal(python_loads(path_of("bad.0.pt.trace.json")), 0);
	assert_int_equal(python_loads(path_of("bad.1.pt.trace.json")), 0);
}

static void test_json_escape(void **state)
{
	char err[256];
	struct sp_out *o = sp_out_open(path_of("esc.txt"), err, sizeof(err));

	assert_non_null(o);
	sp_out_json_str(o, fx_strings[S_ELEMWISE]);
	sp_out_puts(o, "\n");
	sp_out_json_str(o, fx_strings[S_WEIRD]);
	sp_out_puts(o, "\n");
	sp_out_json_str(o, "\xe2\x82"); /* a cut 3-byte sequence */
	sp_out_puts(o, "\n");
	sp_out_json_str(o, NULL);
	sp_out_puts(o, "\n");
	sp_out_us(o, 1234567);
	sp_out_puts(o, " ");
	sp_out_us(o, -1500);
	sp_out_puts(o, " ");
	sp_out_us(o, 7);
	assert_int_equal(sp_out_close(o, 1), 0);
	assert_int_equal(access(path_of("esc.txt.tmp"), F_OK), -1);

	char *s = fx_slurp(path_of("esc.txt"));
	assert_string_equal(s, "\"void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
			       "std::array<char*, 3> >(int, \\\"q\\\"\\\\path & <x>)\"\n"
			       "\"name with\\nnewline\\ttab\\u0001ctl, bad utf8 \\ufffdend, \xc2\xb5s\"\n"
			       "\"\\ufffd\\ufffd\"\n"
			       "\"\"\n"
			       "1234.567 -1.500 0.007");
	free(s);
}

/* The number formatting of the hot paths (sp_put_* behind sp_out_u64/i64/fixed/us) against
 * printf's, at every digit count and the extremes; and a gzip stream of many buffers (the gzip
 * thread takes them in turn) that decompresses to the same bytes as the plain one. */
static void test_numbers_and_gzip(void **state)
{
	static const uint64_t u[] = { 0,
				      1,
				      9,
				      10,
				      11,
				      99,
				      100,
				      101,
				      999,
				      1000,
				      65535,
				      4294967295ull,
				      999999999999999999ull,
				      1000000000000000000ull,
				      9999999999999999999ull,
				      10000000000000000000ull,
				      UINT64_MAX };
	/* no halfway cases: sp_out_fixed rounds them away from zero, printf to even */
	static const double fx[] = {
		0, 0.4, 1.26, 4.740741, 123456.7891234, 999999999999.9, -2.6, 1e12, 9007199254.7409, -1e300, 1e308
	};
	char err[256], want[65536], *s;
	size_t n = 0;
	struct sp_out *o = sp_out_open(path_of("num.txt"), err, sizeof(err));

	assert_non_null(o);
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		sp_out_u64(o, u[i]);
		sp_out_puts(o, " ");
		n += (size_t)snprintf(want + n, sizeof(want) - n, "%llu ", (unsigned long long)u[i]);
	}
	for (uint64_t v = 1; v < 10000000000000000000ull; v *= 10) { /* each digit count: v - 1, v */
		sp_out_u64(o, v - 1);
		sp_out_i64(o, -(int64_t)v);
		n += (size_t)snprintf(want + n, sizeof(want) - n, "%llu-%llu", (unsigned long long)(v - 1),
				      (unsigned long long)v);
	}
	sp_out_i64(o, INT64_MIN);
	n += (size_t)snprintf(want + n, sizeof(want) - n, "%lld", (long long)INT64_MIN);
	for (size_t i = 0; i < sizeof(fx) / sizeof(fx[0]); i++)
		for (int d = 0; d <= 9; d += 3) {
			sp_out_puts(o, " ");
			sp_out_fixed(o, fx[i], d);
			n += (size_t)snprintf(want + n, sizeof(want) - n, " %.*f", d, fx[i]);
		}
	sp_out_puts(o, " ");
	sp_out_fixed(o, 0.0 / 0.0, 3);
	n += (size_t)snprintf(want + n, sizeof(want) - n, " 0.000");
	sp_out_us(o, INT64_MIN);
	n += (size_t)snprintf(want + n, sizeof(want) - n, "-%llu.%03llu", (unsigned long long)((1ull << 63) / 1000),
			      (unsigned long long)((1ull << 63) % 1000));
	assert_int_equal(sp_out_close(o, 1), 0);
	s = fx_slurp(path_of("num.txt"));
	assert_string_equal(s, want);
	free(s);

	/* 12 MiB through gzip and plain (room-based writes and plain writes mixed) */
	for (int gz = 0; gz < 2; gz++) {
		o = sp_out_open(path_of(gz ? "big.txt.gz" : "big.txt"), err, sizeof(err));
		assert_non_null(o);
		for (uint64_t i = 0; i < 1000000; i++) {
			char *p = sp_out_room(o, 2 * SP_PUT_NUM_MAX + 8);
			p = SP_PUT_LIT(p, "{\"i\":");
			p = sp_put_u64(p, i * 2654435761u % 1000003);
			sp_out_done(o, p);
			sp_out_puts(o, "}\n");
		}
		assert_int_equal(sp_out_close(o, 1), 0);
	}
	char cmd[600];
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import gzip,sys; a=gzip.open(sys.argv[1]).read(); b=open(sys.argv[2],\"rb\").read();"
		 " assert a==b and len(a)>12000000, (len(a), len(b))' '%s' '%s'",
		 path_of("big.txt.gz"), path_of("big.txt"));
	assert_int_equal(system(cmd), 0);
}

static void test_convert_per_window(void **state)
{
	char trace[256];
	snprintf(trace, sizeof(trace), "%s", path_of("run.sptrace"));
	fx_write_sample(trace);

	const char *argv[] = { "convert", trace };
	assert_int_equal(run_convert(2, argv), 0);
	assert_int_equal(access(path_of("run.0.pt.trace.json.gz"), F_OK), 0); /* the default: gzip */
	assert_int_equal(access(path_of("run.1.pt.trace.json.gz"), F_OK), 0);
	assert_int_equal(access(path_of("run.2.pt.trace.json.gz"), F_OK), -1);
	const char *argv_plain[] = { "convert", trace, "-o", path_of("run.json") };
	assert_int_equal(run_convert(4, argv_plain), 0);
	assert_int_equal(python_loads(path_of("run.0.pt.trace.json")), 0);
	assert_int_equal(python_loads(path_of("run.1.pt.trace.json")), 0);

	char *s = fx_slurp(path_of("run.0.pt.trace.json"));
	assert_non_null(s);
	assert_int_equal(fx_count(s, "\"name\":\"ProfilerStep#"), 3);
	assert_non_null(strstr(s, "\"name\":\"ProfilerStep#5\""));
	assert_int_equal(fx_count(s, "\"ph\":\"s\""), 12);
	assert_int_equal(fx_count(s, "\"ph\":\"f\""), 12);
	assert_int_equal(fx_count(s, "\"cat\":\"kernel\""), 8);
	assert_int_equal(fx_count(s, "\"cat\":\"gpu_memcpy\""), 3);
	assert_int_equal(fx_count(s, "\"cat\":\"gpu_memset\""), 1);
	assert_int_equal(fx_count(s, "\"cat\":\"nccl\""), 1);
	assert_int_equal(fx_count(s, "\"cat\":\"cuda_sync\""), 1);
	assert_int_equal(fx_count(s, "\"cat\":\"cuda_driver\""), 1);
	assert_int_equal(fx_count(s, "\"ph\":\"C\""), 2);
	assert_non_null(strstr(s, "\"name\":\"node1 rank 1\""));
	assert_non_null(strstr(s, "\"name\":\"node1 rank 1 GPU 0\""));
	assert_non_null(strstr(s, "\"name\":\"python main\""));
	assert_non_null(strstr(s, "\"name\":\"thread 101\""));
	assert_non_null(strstr(s, "\"name\":\"stream 7\""));
	assert_non_null(strstr(s, "\"name\":\"memory GPU 0\""));
	assert_non_null(strstr(s, "\"name\":\"dropped records (ring_full)\""));
	assert_non_null(strstr(s, "\"name\":\"Memcpy HtoD (Pinned -> Device)\""));
	/* times relative to the window start: the first launch at 100 us; flow ids are correlation ids */
	assert_non_null(strstr(s, "\"tid\":100,\"ts\":100.000,\"dur\":10.000"));
	assert_non_null(strstr(s, "{\"ph\":\"s\",\"id\":11,"));
	assert_non_null(strstr(s, "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 1, \"world_size\": 2}"));
	assert_null(strstr(s, "\"correlation\":999"));
	free(s);
}

static void test_convert_merge_gzip(void **state)
{
	char trace[256];
	snprintf(trace, sizeof(trace), "%s", path_of("m.sptrace"));
	fx_write_sample(trace);

	const char *argv[] = { "convert", trace, "--merge", "-o", path_of("all.json.gz") };
	assert_int_equal(run_convert(5, argv), 0);
	assert_int_equal(access(path_of("all.0.pt.trace.json.gz"), F_OK), -1);
	char *s = fx_slurp(path_of("all.json.gz"));
	assert_non_null(s);
	assert_int_equal((unsigned char)s[0], 0x1f); /* gzip magic */
	assert_int_equal((unsigned char)s[1], 0x8b);
	free(s);
	assert_int_equal(python_loads(path_of("all.json.gz")), 0);

	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import gzip,json,sys; d=json.load(gzip.open(sys.argv[1]));"
		 " s=sorted(e[\"name\"] for e in d[\"traceEvents\"] if e[\"name\"].startswith(\"ProfilerStep#\"));"
		 " assert s==[\"ProfilerStep#%%d\" %% n for n in (15,16,5,6,7)], s;"
		 " assert [w[\"id\"] for w in d[\"otherData\"][\"windows\"]]==[0,1];"
		 " assert d[\"baseTimeNanoseconds\"] %% 86400000000000 == 0' '%s'",
		 path_of("all.json.gz"));
	assert_int_equal(system(cmd), 0);

	/* --window picks one */
	const char *argv2[] = { "convert", trace, "--window", "1", "-o", path_of("one.json") };
	assert_int_equal(run_convert(6, argv2), 0);
	assert_int_equal(access(path_of("one.0.pt.trace.json"), F_OK), -1);
	assert_int_equal(access(path_of("one.1.pt.trace.json"), F_OK), -1);
	s = fx_slurp(path_of("one.json")); /* -o FILE with one window: exactly FILE */
	assert_non_null(s);
	assert_int_equal(fx_count(s, "\"name\":\"ProfilerStep#"), 2);
	free(s);

	const char *argv3[] = { "convert", trace, "--window", "7" };
	assert_int_equal(run_convert(4, argv3), 1);
	const char *argv4[] = { "convert", path_of("missing.sptrace") };
	assert_int_equal(run_convert(2, argv4), 1);
	const char *argv5[] = { "convert", trace, "--bogus" };
	assert_int_equal(run_convert(3, argv5), 2);
}

/* Extra spans given to the exporter (issue 13's "waiting" slices): each on its named track of its
 * rank's CPU process, a partly overlapping one on a second lane, spans of other ranks left out. */
static void test_extra_spans(void **state)
{
	char trace[256], err[256];
	snprintf(trace, sizeof(trace), "%s", path_of("spans.sptrace"));
	fx_write_sample(trace); /* rank 1 */

	struct sp_trace_reader *r = sp_trace_open(trace, err, sizeof(err));
	assert_non_null(r);
	struct sp_windows *g = sp_windows_open(r);
	const struct sp_window *w;
	assert_int_equal(sp_windows_next(g, &w), 1);
	uint64_t t0 = sp_window_wall(w, w->t0);
	const struct sp_export_span spans[] = {
		{ 1, "NCCL waiting", "wait for rank 0", t0 + 1000, t0 + 5000, NULL, "\"waited for\":0" },
		{ 1, "NCCL waiting", "wait again", t0 + 4000, t0 + 9000, "nccl_wait", NULL }, /* overlaps: lane 2 */
		{ 0, "NCCL waiting", "rank 0's", t0, t0 + 10, NULL, NULL },                    /* no rank 0 here */
	};
	struct sp_export x = { .ops = &sp_export_chrome,
			       .r = r,
			       .hdr = sp_trace_header(r),
			       .g = g,
			       .source = trace,
			       .wall = 1,
			       .merged = 1,
			       .spans = spans,
			       .nspans = 3 };
	x.out = sp_out_open(path_of("spans.json"), err, sizeof(err));
	assert_non_null(x.out);
	assert_int_equal(x.ops->begin(&x), 0);
	assert_int_equal(x.ops->window(&x, w), 0);
	assert_int_equal(x.ops->end(&x), 0);
	assert_int_equal(sp_out_close(x.out, 1), 0);
	sp_windows_close(g);
	sp_trace_close_reader(r);

	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); ev=d[\"traceEvents\"];"
		 " names={(e[\"pid\"],e[\"tid\"]):e[\"args\"][\"name\"] for e in ev if "
		 "e.get(\"name\")==\"thread_name\"};"
		 " sl={e[\"name\"]:e for e in ev if e.get(\"ph\")==\"X\" and \"wait\" in e[\"name\"] or "
		 "e.get(\"name\")==\"rank 0s\"};"
		 " a,b=sl[\"wait for rank 0\"],sl[\"wait again\"];"
		 " assert set(sl)=={\"wait for rank 0\",\"wait again\"}, sl;"
		 " assert names[(a[\"pid\"],a[\"tid\"])]==\"NCCL waiting\" and names[(b[\"pid\"],b[\"tid\"])]==\"NCCL "
		 "waiting (2)\";"
		 " assert a[\"pid\"]==b[\"pid\"]==1 and a[\"dur\"]==4.0 and a[\"args\"]=={\"waited for\":0} and "
		 "b[\"cat\"]==\"nccl_wait\"'"
		 " '%s'",
		 path_of("spans.json"));
	assert_int_equal(system(cmd), 0);
}

/* The passes of a window read its stretch of the file again: sp_windows_sorted hands out the
 * events a pass in file order does, by start (longest first, then file order); sp_windows_anchor
 * places GPU work in the step holding the start of the CUDA call with its correlation id (the
 * earliest such call; the work's own start without one); sp_windows_restrict limits both passes. */
struct sorted_check {
	const struct sp_event *want; /* the window's events in the order expected */
	size_t n, got;
};

static int by_start(const void *pa, const void *pb)
{
	const struct sp_event *a = *(const struct sp_event *const *)pa, *b = *(const struct sp_event *const *)pb;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->end != b->end)
		return a->end > b->end ? -1 : 1;
	return a < b ? -1 : a > b;
}

static void sorted_seen(void *ctx, const struct sp_event *e)
{
	struct sorted_check *c = ctx;
	assert_true(c->got < c->n);
	assert_memory_equal(e, &c->want[c->got], sizeof(*e));
	c->got++;
}

/* The step of w holding t, or NULL. */
static const struct sp_event *step_at(const struct sp_window *w, uint64_t t)
{
	for (size_t k = 0; k < w->nsteps; k++)
		if (t >= w->steps[k].start && t < w->steps[k].end)
			return &w->steps[k];
	return NULL;
}

static int only_kernels(void *ctx, const struct sp_event *e)
{
	(void)ctx;
	return e->kind == SP_EV_KERNEL;
}

static void test_window_passes(void **state)
{
	const struct sp_window *w;
	char err[256];
	int windows = 0;
	struct fx_events ev = { 0 }, sub = { 0 };

	(void)state;
	fx_write_sample(path_of("p.sptrace"));
	struct sp_trace_reader *r = sp_trace_open(path_of("p.sptrace"), err, sizeof(err));
	assert_non_null(r);
	struct sp_windows *g = sp_windows_open(r);
	while (sp_windows_next(g, &w) == 1) {
		fx_collect(g, &ev);
		const struct sp_event **order = malloc((ev.n + 1) * sizeof(*order));
		struct sp_event *want = malloc((ev.n + 1) * sizeof(*want));
		size_t gpu = 0;
		for (size_t i = 0; i < ev.n; i++)
			order[i] = &ev.ev[i];
		qsort(order, ev.n, sizeof(*order), by_start);
		for (size_t i = 0; i < ev.n; i++)
			want[i] = *order[i];
		struct sorted_check c = { want, ev.n, 0 };
		sp_windows_sorted(g, NULL, sorted_seen, &c);
		assert_int_equal(c.got, ev.n);
		for (size_t i = 0; i < ev.n; i++) {
			const struct sp_event *e = &ev.ev[i];
			if (!sp_ev_is_gpu(e))
				continue;
			uint64_t call = 0; /* the earliest start of a call with its id */
			for (size_t k = 0; k < ev.n; k++)
				if (ev.ev[k].kind == SP_EV_API && e->corr && ev.ev[k].corr == e->corr &&
				    (!call || ev.ev[k].start < call))
					call = ev.ev[k].start;
			assert_ptr_equal(step_at(w, call ? call : e->start), step_at(w, sp_windows_anchor(g, e)));
			gpu++;
		}
		assert_true(gpu > 0);
		assert_true(w->nsteps > 0);
		sp_windows_restrict(g, only_kernels, NULL);
		fx_collect(g, &sub);
		assert_int_equal(sub.n, fx_count_kind(&ev, SP_EV_KERNEL));
		size_t nk = 0;
		for (size_t i = 0; i < ev.n; i++) /* the kernels, by start */
			if (want[i].kind == SP_EV_KERNEL)
				want[nk++] = want[i];
		c = (struct sorted_check){ want, nk, 0 };
		sp_windows_sorted(g, NULL, sorted_seen, &c);
		assert_int_equal(c.got, sub.n);
		free(order);
		free(want);
		windows++;
	}
	assert_int_equal(windows, 2);
	sp_windows_close(g);
	sp_trace_close_reader(r);
	free(ev.ev);
	free(sub.ev);
}

/* A pass by start over a window whose file order is far from time order: a step written at its
 * end after 140 000 records of it, and 70 000 records written after 70 000 that start later (more
 * than the grouper holds aside before it deepens its heap). The pass still hands out every event
 * in order. */
static void test_window_passes_late(void **state)
{
	const char *path = path_of("late.sptrace");
	struct sp_trace_writer *tw = fx_create(path);
	const struct sp_window *w;
	char err[256];
	uint64_t T = FX_T;
	const int n = 70000;
	struct fx_events ev = { 0 };

	(void)state;
	fx_put(tw, fx_window(SP_EV_WINDOW_BEGIN, 0, 1, T, 0));
	for (int i = 0; i < n; i++) /* later, written first */
		fx_put(tw, fx_gpu(SP_EV_KERNEL, T + 1000 * MS + (uint64_t)i * US, T + 1000 * MS + (uint64_t)i * US + 500,
				  0, S_GEMM, 7));
	for (int i = 0; i < n; i++)
		fx_put(tw, fx_api(T + 1 * MS + (uint64_t)(n - i) * US, (uint32_t)i + 1, S_LAUNCH, 100));
	struct sp_event st = fx_step(1, T, 1);
	st.end = T + 2000 * MS;
	fx_put(tw, st);
	fx_put(tw, fx_window(SP_EV_WINDOW_END, 0, 1, T + 2000 * MS, 0));
	assert_int_equal(sp_trace_close(tw), 0);

	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	assert_non_null(r);
	struct sp_windows *g = sp_windows_open(r);
	assert_int_equal(sp_windows_next(g, &w), 1);
	fx_collect(g, &ev);
	assert_int_equal(ev.n, 2 * (size_t)n + 1);
	const struct sp_event **order = malloc(ev.n * sizeof(*order));
	struct sp_event *want = malloc(ev.n * sizeof(*want));
	for (size_t i = 0; i < ev.n; i++)
		order[i] = &ev.ev[i];
	qsort(order, ev.n, sizeof(*order), by_start);
	for (size_t i = 0; i < ev.n; i++)
		want[i] = *order[i];
	assert_int_equal(want[0].kind, SP_EV_STEP);
	struct sorted_check c = { want, ev.n, 0 };
	sp_windows_sorted(g, NULL, sorted_seen, &c);
	assert_int_equal(c.got, ev.n);
	free(order);
	free(want);
	free(ev.ev);
	sp_windows_close(g);
	sp_trace_close_reader(r);
}

int main(void)
{
	const char *sample = getenv("SP_WRITE_SAMPLE");
	if (sample) {
		fx_write_sample(sample);
		return 0;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_extra_spans),        cmocka_unit_test(test_group_sample),
		cmocka_unit_test(test_window_passes),      cmocka_unit_test(test_window_passes_late),
		cmocka_unit_test(test_group_truncated),    cmocka_unit_test(test_group_corrupt),
		cmocka_unit_test(test_json_escape),        cmocka_unit_test(test_numbers_and_gzip),
		cmocka_unit_test(test_convert_per_window), cmocka_unit_test(test_convert_merge_gzip),
	};
	if (!mkdtemp(dir) || chdir(dir)) { /* convert writes into the current directory by default */
		perror(dir);
		return 1;
	}
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	return rc;
}
