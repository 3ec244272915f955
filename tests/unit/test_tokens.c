/* SPDX-License-Identifier: MIT */
/* test_tokens.c - the token stream format (trace/tokens.h) and its recorder (collector/out/tokrec.h):
 * round trip across chunks, a file cut mid-chunk, hostile bytes, and STEPPROF_RECORD_TOKENS /
 * STEPPROF_RECORD_TRUTH as the library reads them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "scratch.h"
#include "trace/tokens.h"
#include "collector/base/intern.h"
#include "collector/out/tokrec.h"

#define N_TOKENS 200000 /* several chunks */

static void name_of(uint32_t i, char *buf, size_t n)
{
	snprintf(buf, n, "kernel_%u<\"x\">", i % 300);
}

static void write_stream(const char *path)
{
	char err[256], nm[64];
	struct sp_tok_header h = { .pid = 42, .anchor_mono_ns = 5, .anchor_real_ns = 6 };
	snprintf(h.stepprof, sizeof h.stepprof, "test");
	snprintf(h.truth, sizeof h.truth, "nvtx:step");
	struct sp_tok_writer *w = sp_tok_create(path, &h, err, sizeof err);
	assert_non_null(w);
	for (uint32_t i = 0; i < N_TOKENS; i++) {
		/* times go backwards now and then, as tokens of two threads do */
		struct sp_token t = { .ts = 1000000 + (uint64_t)i * 700 - (i % 7 == 3 ? 900 : 0),
				      .name = 1 + i % 300,
				      .tid = 100 + i % 3,
				      .kind = (uint8_t)(1 + i % SP_TOK_KIND_MAX),
				      .flags = i % 5 ? 0 : SP_TOKF_SYNC };
		name_of(i, nm, sizeof nm);
		assert_int_equal(sp_tok_add(w, &t, nm), 0);
	}
	assert_int_equal(sp_tok_close(w), 0);
}

/* Reads path back; returns the number of tokens, checking each against what write_stream wrote. */
static size_t read_stream(const char *path, int *truncated)
{
	char err[256], nm[64];
	struct sp_token t;
	size_t n = 0;
	int rc;
	struct sp_tok_reader *r = sp_tok_open(path, err, sizeof err);
	assert_non_null(r);
	assert_int_equal(sp_tok_get_header(r)->pid, 42);
	assert_string_equal(sp_tok_get_header(r)->truth, "nvtx:step");
	/* version 2 (the Python bridge's kinds); a version-1 reader refuses it rather than call it damaged */
	assert_int_equal(sp_tok_get_header(r)->version, 2);
	assert_int_equal(sp_tok_get_header(r)->min_version, 2);
	while ((rc = sp_tok_next(r, &t, err, sizeof err)) == 1) {
		uint32_t i = (uint32_t)n++;
		assert_int_equal(t.ts, 1000000 + (uint64_t)i * 700 - (i % 7 == 3 ? 900 : 0));
		assert_int_equal(t.kind, 1 + i % SP_TOK_KIND_MAX);
		assert_int_equal(t.flags, i % 5 ? 0 : SP_TOKF_SYNC);
		assert_int_equal(t.tid, 100 + i % 3);
		name_of(i, nm, sizeof nm);
		assert_string_equal(sp_tok_name(r, t.name), nm);
	}
	assert_int_equal(rc, 0);
	*truncated = sp_tok_truncated(r);
	sp_tok_close_reader(r);
	return n;
}

static void round_trip(void **state)
{
	char path[160];
	int trunc;
	snprintf(path, sizeof path, "%s/a.sptokens", dir);
	write_stream(path);
	assert_int_equal(read_stream(path, &trunc), N_TOKENS);
	assert_false(trunc);
}

/* A file cut inside its last chunk reads up to the chunk before, and says it was cut. */
static void truncated_file(void **state)
{
	char path[160];
	int trunc;
	snprintf(path, sizeof path, "%s/b.sptokens", dir);
	write_stream(path);
	FILE *f = fopen(path, "rb");
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fclose(f);
	assert_int_equal(truncate(path, size - 100), 0);
	size_t n = read_stream(path, &trunc);
	assert_true(n > 0 && n < N_TOKENS);
	assert_true(trunc);
}

/* Garbage never crashes the reader: every byte flipped in turn after the header gives an error
 * or a clean end, never a crash (sanitizer builds check the memory side). */
static void hostile_bytes(void **state)
{
	char path[160], err[256];
	struct sp_tok_header h = { .pid = 1 };
	snprintf(path, sizeof path, "%s/c.sptokens", dir);
	struct sp_tok_writer *w = sp_tok_create(path, &h, err, sizeof err);
	for (uint32_t i = 0; i < 50; i++) {
		struct sp_token t = { .ts = i, .name = i % 4 + 1, .kind = SP_TOK_KERNEL };
		sp_tok_add(w, &t, "k");
	}
	sp_tok_close(w);
	FILE *f = fopen(path, "r+b");
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	for (long off = 808; off < size; off++) {
		unsigned char b;
		fseek(f, off, SEEK_SET);
		assert_int_equal(fread(&b, 1, 1, f), 1);
		unsigned char x = b ^ 0xa5;
		fseek(f, off, SEEK_SET);
		fwrite(&x, 1, 1, f);
		fflush(f);
		struct sp_tok_reader *r = sp_tok_open(path, err, sizeof err);
		struct sp_token t;
		assert_non_null(r);
		while (sp_tok_next(r, &t, err, sizeof err) == 1)
			;
		sp_tok_close_reader(r);
		fseek(f, off, SEEK_SET);
		fwrite(&b, 1, 1, f);
		fflush(f);
	}
	fclose(f);
	/* not a token stream at all */
	f = fopen(path, "wb");
	fputs("STEPPROF and more", f);
	fclose(f);
	assert_null(sp_tok_open(path, err, sizeof err));
	assert_non_null(strstr(err, "not a stepprof token stream"));
}

/* The recorder as the library drives it: environment in, file out, truth spec parsed. */
static void recorder(void **state)
{
	char path[160], spec[200], err[256];
	struct sp_token t;
	snprintf(path, sizeof path, "%s/rec.%%p.sptokens", dir);
	setenv("STEPPROF_RECORD_TOKENS", path, 1);
	setenv("STEPPROF_RECORD_TRUTH", "bogus:x", 1);
	assert_int_equal(sp_tokrec_start(), -1); /* bad kind: warns, records nothing */
	assert_false(sp_tokrec_on);
	setenv("STEPPROF_RECORD_TRUTH", "api:cuDriverGetVersion", 1);
	assert_int_equal(sp_tokrec_start(), 1);
	assert_int_equal(sp_tokrec_truth_kind(), SP_TOK_API);
	assert_string_equal(sp_tokrec_truth_pattern(), "cuDriverGetVersion");
	sp_tokrec_add(SP_TOK_KERNEL, 0, sp_intern("gemm"), 10, 7);
	sp_tokrec_add(SP_TOK_API, SP_TOKF_SYNC, sp_intern("cudaDeviceSynchronize"), 20, 7);
	sp_tokrec_stop();
	sp_tokrec_stop(); /* idempotent */
	sp_tokrec_add(SP_TOK_KERNEL, 0, sp_intern("late"), 30, 7); /* after the stop: dropped */
	snprintf(spec, sizeof spec, "%s/rec.%d.sptokens", dir, (int)getpid());
	struct sp_tok_reader *r = sp_tok_open(spec, err, sizeof err);
	assert_non_null(r);
	assert_string_equal(sp_tok_get_header(r)->truth, "api:cuDriverGetVersion");
	assert_int_equal(sp_tok_next(r, &t, err, sizeof err), 1);
	assert_string_equal(sp_tok_name(r, t.name), "gemm");
	assert_int_equal(sp_tok_next(r, &t, err, sizeof err), 1);
	assert_int_equal(t.flags, SP_TOKF_SYNC);
	assert_int_equal(t.ts, 20);
	assert_int_equal(sp_tok_next(r, &t, err, sizeof err), 0);
	sp_tok_close_reader(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(truncated_file),
		cmocka_unit_test(hostile_bytes),
		cmocka_unit_test(recorder),
	};
	if (make_scratch("tokens") < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, remove_scratch);
}
