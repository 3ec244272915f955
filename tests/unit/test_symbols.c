/* SPDX-License-Identifier: MIT */
/* test_symbols.c - offline symbolisation of this binary's own functions, of a C library and of a
 * C++ library (demangled), with the fallbacks for unknown modules and addresses; the same from a
 * trace's MODULE records; folded stacks (`stepprof stacks`) and the report's allocation sites
 * table on a trace whose stacks are made of this binary's functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "scratch.h"
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/stackagg.h"
#include "cli/report.h"
#include "cli/symbols.h"
#include "stack_fixture.h"
#include "trace_fixture.h"

static char trace[300];

/* Adds this process's executable mappings to s, as the collector would record them. */
static void add_own_modules(struct sp_sym *s)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4352], path[4096], perm[8];
	unsigned long long lo, hi, off;
	assert_non_null(f);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &lo, &hi, perm, &off, path) == 5 &&
		    perm[2] == 'x' && path[0] == '/')
			sp_sym_add_module(s, path, lo, hi, off);
	fclose(f);
}

static void assert_prefix(const char *s, const char *prefix)
{
	if (strncmp(s, prefix, strlen(prefix)))
		fail_msg("'%s' does not start with '%s'", s, prefix);
}

static void test_own_and_library_functions(void **state)
{
	struct sp_sym *s = sp_sym_open();
	add_own_modules(s);
	sp_sym_add_module(s, "/nonexistent/libfake.so", 0x10000000, 0x10010000, 0x2000);
	add_own_modules(s); /* repeats (one set per window) change nothing */

	assert_string_equal(sp_sym_frame(s, SX_PC(sx_alloc_weights)), "sx_alloc_weights+0x4 (test_symbols)");
	assert_string_equal(sp_sym_function(s, SX_PC(sx_alloc_weights)), "sx_alloc_weights");
	assert_string_equal(sp_sym_frame(s, SX_PC(sx_train_loop)), "sx_train_loop+0x4 (test_symbols)");
	const char *first = sp_sym_frame(s, SX_PC(sx_model_forward));
	assert_string_equal(first, "sx_model_forward+0x4 (test_symbols)");
	assert_ptr_equal(sp_sym_frame(s, SX_PC(sx_model_forward)), first); /* cached */

	/* a shared library at its load bias */
	void *zv = dlsym(RTLD_DEFAULT, "ZSTD_versionNumber");
	assert_non_null(zv);
	assert_prefix(sp_sym_frame(s, (uint64_t)(uintptr_t)zv + 4), "ZSTD_versionNumber+0x4 (libzstd.so");
	assert_string_equal(sp_sym_function(s, (uint64_t)(uintptr_t)zv + 4), "ZSTD_versionNumber");
	/* a C++ name, demangled */
	void *what = dlsym(RTLD_DEFAULT, "_ZNKSt9exception4whatEv");
	assert_non_null(what);
	assert_prefix(sp_sym_frame(s, (uint64_t)(uintptr_t)what + 1), "std::exception::what() const+0x1 (libstdc++.so");

	/* a module whose file is not here, and an address in no module */
	assert_string_equal(sp_sym_frame(s, 0x10000010), "0x10000010 (libfake.so+0x2010)");
	assert_string_equal(sp_sym_function(s, 0x10000010), "libfake.so+0x2010");
	assert_string_equal(sp_sym_frame(s, 0x20), "0x20");
	assert_string_equal(sp_sym_function(s, 0), "0x0");
	sp_sym_close(s);

	/* without any module: nothing is named */
	char hex[32];
	snprintf(hex, sizeof(hex), "0x%" PRIx64, SX_PC(sx_alloc_weights));
	s = sp_sym_open();
	assert_string_equal(sp_sym_frame(s, SX_PC(sx_alloc_weights)), hex);
	sp_sym_close(s);
}

/* Stacks of the sample: A alloc_weights <- model_forward <- train_loop; B launch_gemm <-
 * train_loop; C model_forward <- train_loop; D the same frames as A under another id. */
static const uint64_t *lookup_stack(void *ctx, uint32_t id, uint32_t *n)
{
	static uint64_t st[5][3];
	st[1][0] = st[4][0] = SX_PC(sx_alloc_weights);
	st[1][1] = st[4][1] = st[3][0] = SX_PC(sx_model_forward);
	st[1][2] = st[4][2] = st[2][1] = st[3][1] = SX_PC(sx_train_loop);
	st[2][0] = SX_PC(sx_launch_gemm);
	*n = id == 1 || id == 4 ? 3 : 2;
	return id >= 1 && id <= 4 ? st[id] : NULL;
}

static struct sp_event mem(int kind, uint64_t t, uint64_t size, uint32_t stack, uint32_t flags)
{
	struct sp_event e = fx_ev(kind, t, t);
	e.sub = SP_MEM_DEVICE, e.device = 0, e.tid = 100;
	e.u.mem.addr = t, e.u.mem.size = size, e.u.mem.stack = stack;
	e.u.mem.flags = flags;
	return e;
}

/* One window: allocations of 100, 200 (A), 300 (D), 50 (no stack) bytes, a snapshot (A, 1000
 * bytes) and a peak record that are not allocations of the window; two launches from B (the
 * first with a nested driver launch without stack), one cudaMemcpyAsync with stack A (not a
 * launch), one NCCL call of 4096 bytes from C. */
static void write_trace(void)
{
	struct sp_trace_writer *w = fx_create(trace);
	struct sp_event e;
	sp_trace_set_stack_lookup(w, lookup_stack, NULL);
	assert_true(sx_write_modules(w, FX_T - MS, 1000) > 0);
	fx_put(w, mem(SP_EV_ALLOC, FX_T - 500 * MS, 1000, 1, SP_MEMF_SNAPSHOT));
	fx_put(w, fx_window(SP_EV_WINDOW_BEGIN, 0, 1, FX_T, 0));
	fx_put(w, mem(SP_EV_ALLOC, FX_T + 1 * MS, 100, 1, 0));
	fx_put(w, mem(SP_EV_ALLOC, FX_T + 2 * MS, 200, 1, 0));
	fx_put(w, mem(SP_EV_ALLOC, FX_T + 3 * MS, 300, 4, 0));
	fx_put(w, mem(SP_EV_ALLOC, FX_T + 4 * MS, 50, 0, 0));
	fx_put(w, mem(SP_EV_FREE, FX_T + 5 * MS, 100, 0, 0));
	for (int i = 0; i < 2; i++) {
		e = fx_api(FX_T + (6 + (uint64_t)i) * MS, 10 + (uint32_t)i, S_LAUNCH, 100);
		e.u.api.stack = 2;
		fx_put(w, e);
	}
	e = fx_api(FX_T + 6 * MS + 1000, 10, S_LAUNCH_EX, 100); /* nested in the first: no stack */
	fx_put(w, e);
	e = fx_api(FX_T + 8 * MS, 12, S_MEMCPY_API, 100);
	e.u.api.stack = 1;
	fx_put(w, e);
	e = fx_ev(SP_EV_NCCL, FX_T + 9 * MS, FX_T + 9 * MS + 10);
	e.sub = SP_NCCL_ALLREDUCE, e.name = S_ALLREDUCE, e.device = 0, e.u.nccl.bytes = 4096, e.u.nccl.stack = 3;
	fx_put(w, e);
	fx_put(w, mem(SP_EV_ALLOC, FX_T + 10 * MS, 0, 0, SP_MEMF_PEAK));
	fx_put(w, fx_step(1, FX_T, 1));
	fx_put(w, fx_window(SP_EV_WINDOW_END, 0, 1, FX_T + 10 * MS, 0));
	assert_int_equal(sp_trace_close(w), 0);
}

/* The folded output of `stepprof stacks TRACE ARGS... -o FILE` (ARGS NULL-terminated), or NULL
 * if the command failed. */
static char *stacks(const char *const *args)
{
	char out[320], *argv[16];
	int argc = 0;
	snprintf(out, sizeof(out), "%s/folded.txt", dir);
	argv[argc++] = "stacks";
	argv[argc++] = trace;
	while (*args)
		argv[argc++] = (char *)*args++;
	argv[argc++] = "-o";
	argv[argc++] = out;
	argv[argc] = NULL;
	unlink(out);
	return sp_cmd_stacks(argc, argv) ? NULL : fx_slurp(out);
}

static void test_folded_stacks(void **state)
{
	char *s;
	write_trace();

	s = stacks((const char *[]){ NULL }); /* default: allocations by bytes */
	assert_non_null(s);
	assert_string_equal(s, "[no stack] 50\n"
			       "sx_train_loop;sx_model_forward;sx_alloc_weights 600\n");
	free(s);
	s = stacks((const char *[]){ "--by", "calls", NULL });
	assert_string_equal(s, "[no stack] 1\nsx_train_loop;sx_model_forward;sx_alloc_weights 3\n");
	free(s);
	s = stacks((const char *[]){ "--kind", "launch", NULL });
	assert_string_equal(s, "sx_train_loop;sx_launch_gemm 2\n");
	free(s);
	s = stacks((const char *[]){ "--kind", "nccl", "--by", "bytes", NULL });
	assert_string_equal(s, "sx_train_loop;sx_model_forward 4096\n");
	free(s);
	s = stacks((const char *[]){ "--kind", "all", "--by", "calls", NULL });
	assert_string_equal(s, "[alloc];[no stack] 1\n"
			       "[alloc];sx_train_loop;sx_model_forward;sx_alloc_weights 3\n"
			       "[launch];sx_train_loop;sx_launch_gemm 2\n"
			       "[nccl];sx_train_loop;sx_model_forward 1\n");
	free(s);

	/* usage errors */
	char *bad1[] = { "stacks", trace, "--kind", "launch", "--by", "bytes", NULL };
	assert_int_equal(sp_cmd_stacks(6, bad1), 2);
	char *bad2[] = { "stacks", trace, "--kind", "kernels", NULL };
	assert_int_equal(sp_cmd_stacks(4, bad2), 2);
	char *bad3[] = { "stacks", "/nonexistent.sptrace", NULL };
	assert_int_equal(sp_cmd_stacks(2, bad3), 1);
}

static void test_sites_table(void **state)
{
	char err[256], *buf = NULL;
	size_t len = 0;
	struct sp_trace_reader *r;
	struct sp_stackagg a = { 0 };
	struct sp_event ev;
	FILE *f = open_memstream(&buf, &len);

	write_trace();
	r = sp_trace_open(trace, err, sizeof(err));
	assert_non_null(r);
	while (sp_trace_next(r, &ev) == 1)
		sp_stackagg_add(&a, r, &ev, SP_FOLD_ALLOC);
	assert_int_equal(a.total[0], 4); /* the snapshot and the peak record are not allocations */
	sp_stackagg_sites(&a, trace, r, SP_SITES_TOP, f);
	fclose(f);
	assert_non_null(strstr(buf, "\nTop allocation sites by bytes "));
	/* stacks 1 and 4 share their innermost frame: one row */
	const char *row = strstr(buf, "\nsx_alloc_weights+0x4 (test_symbols) ");
	assert_non_null(row);
	/* a GPU allocation's owner: the library of its innermost native frame (this test binary) */
	assert_non_null(strstr(row, " 600B        3  other library\n(no stack) "));
	assert_non_null(strstr(row, "\n(no stack)                                                            50B        1  "
				    "unknown\n"));
	assert_int_equal(fx_count(buf, "\n"), 4);
	free(buf);

	/* nothing counted: no table */
	buf = NULL;
	f = open_memstream(&buf, &len);
	sp_stackagg_free(&a);
	sp_stackagg_sites(&a, trace, r, SP_SITES_TOP, f);
	fclose(f);
	assert_int_equal(len, 0);
	free(buf);
	sp_trace_close_reader(r);
}

/* `stepprof report` on trace_fixture.h's sample: its one allocation (1 MiB, window 0, no stack)
 * gives the sites table; window 1 has none, so no table. */
static void test_report_has_sites(void **state)
{
	char path[320], *buf = NULL;
	size_t len = 0;
	struct sp_report_opts o = { .sort = SP_SORT_TOTAL, .top = SP_REPORT_TOP, .window = -1 };
	FILE *f = open_memstream(&buf, &len);

	snprintf(path, sizeof(path), "%s/sample.sptrace", dir);
	fx_write_sample(path);
	assert_int_equal(sp_report(path, &o, f, NULL), 0);
	fclose(f);
	const char *t = strstr(buf, "\nTop allocation sites by bytes ");
	assert_non_null(t);
	assert_non_null(strstr(t, "\n(no stack) "));
	assert_non_null(strstr(t, " 1.00MiB        1  unknown\n"));
	free(buf);

	buf = NULL;
	f = open_memstream(&buf, &len);
	o.window = 1;
	assert_int_equal(sp_report(path, &o, f, NULL), 0);
	fclose(f);
	assert_null(strstr(buf, "allocation sites"));
	free(buf);
}

static void test_display_names(void **state)
{
	static const char raw[] = "_ZN2at6native3fooIfEEvT_", plain[] = "step_marker", bad[] = "_Zgarbage";
	const char *shown = sp_display_name(raw);
	assert_string_equal(shown, "void at::native::foo<float>(float)");
	assert_ptr_equal(sp_display_name(raw), shown); /* cached */
	assert_ptr_equal(sp_display_name(plain), plain);
	assert_ptr_equal(sp_display_name(bad), bad);   /* not demangleable: as is */
}

static void test_modules_from_trace(void **state)
{
	char err[256];
	struct sp_sym *s = sp_sym_open();
	write_trace();
	assert_true(sp_sym_load_trace(s, trace, err, sizeof(err)) > 0);
	assert_string_equal(sp_sym_frame(s, SX_PC(sx_launch_gemm)), "sx_launch_gemm+0x4 (test_symbols)");
	assert_int_equal(sp_sym_load_trace(s, "/nonexistent.sptrace", err, sizeof(err)), -1);
	sp_sym_close(s);
}

int main(void)
{
	if (make_scratch("symbols") < 0)
		return 1;
	snprintf(trace, sizeof(trace), "%s/stacks.sptrace", dir);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_and_library_functions),
		cmocka_unit_test(test_modules_from_trace),
		cmocka_unit_test(test_display_names),
		cmocka_unit_test(test_folded_stacks),
		cmocka_unit_test(test_sites_table),
		cmocka_unit_test(test_report_has_sites),
	};
	return cmocka_run_group_tests(tests, NULL, remove_scratch);
}
