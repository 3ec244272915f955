/* SPDX-License-Identifier: MIT */
/* test_pystack.c - the merge of Python frames into native stacks (exact groups, unknown entry
 * flags, native stacks cut short or without eval frames, the output bound), the Python frame
 * table, and a process without CPython (this test binary): no Python frames, native stacks as
 * before. The walker itself runs against real interpreters in tests/e2e/pystack.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include "collector/stacks/pystack.h"
#include "collector/stacks/stacks.h"
#include "config/config.h"
#include "trace/trace.h"

#define T(id) (SP_PYFRAME_TAG | (id))
#define EV 0xe0 /* an address standing for a _PyEval_EvalFrameDefault frame */

static uint32_t merge(const uint64_t *native, uint32_t nn, const uint32_t *py, const uint8_t *entry, uint32_t np,
		      uint64_t *out, uint32_t max)
{
	uint8_t is_eval[64];
	for (uint32_t i = 0; i < nn; i++)
		is_eval[i] = native[i] == EV;
	return sp_pystack_merge(native, is_eval, nn, py, entry, np, out, max);
}

/* 3.11+: eval calls run groups of frames up to an entry frame; each group replaces its eval. */
static void test_merge_groups(void **state)
{
	const uint64_t native[] = { 0x10, 0x11, EV, 0x12, EV, 0x13 };
	const uint32_t py[] = { 1, 2, 3, 4 };
	const uint8_t entry[] = { 0, 1, 0, 1 };
	uint64_t out[16];
	const uint64_t want[] = { 0x10, 0x11, T(1), T(2), 0x12, T(3), T(4), 0x13 };
	assert_int_equal(merge(native, 6, py, entry, 4, out, 16), 8);
	assert_memory_equal(out, want, sizeof(want));
}

/* 3.10: one frame per eval call. */
static void test_merge_one_each(void **state)
{
	const uint64_t native[] = { 0x10, EV, 0x12, EV };
	const uint32_t py[] = { 7, 8 };
	const uint8_t entry[] = { 1, 1 };
	uint64_t out[16];
	const uint64_t want[] = { 0x10, T(7), 0x12, T(8) };
	assert_int_equal(merge(native, 4, py, entry, 2, out, 16), 4);
	assert_memory_equal(out, want, sizeof(want));
}

/* Entry flags unknown: one frame per eval call, the rest at the outermost; every frame kept. */
static void test_merge_unknown(void **state)
{
	const uint64_t native[] = { EV, 0x12, EV, 0x13 };
	const uint32_t py[] = { 1, 2, 3, 4 };
	const uint8_t entry[] = { 2, 2, 2, 2 };
	uint64_t out[16];
	const uint64_t want[] = { T(1), 0x12, T(2), T(3), T(4), 0x13 };
	assert_int_equal(merge(native, 4, py, entry, 4, out, 16), 6);
	assert_memory_equal(out, want, sizeof(want));
}

/* Native stack cut before the outer eval calls (depth), or none at all (stacks = python): the
 * Python frames left go at the outer end; more eval frames than groups keep the native frame. */
static void test_merge_leftovers(void **state)
{
	const uint64_t native[] = { 0x10, EV, 0x11 };
	const uint32_t py[] = { 1, 2, 3 };
	const uint8_t entry[] = { 1, 0, 1 };
	uint64_t out[16];
	const uint64_t want[] = { 0x10, T(1), 0x11, T(2), T(3) };
	assert_int_equal(merge(native, 3, py, entry, 3, out, 16), 5);
	assert_memory_equal(out, want, sizeof(want));
	const uint64_t want_py[] = { T(1), T(2), T(3) };
	assert_int_equal(merge(NULL, 0, py, entry, 3, out, 16), 3);
	assert_memory_equal(out, want_py, sizeof(want_py));
	const uint64_t native2[] = { EV, EV, EV };
	const uint64_t want2[] = { T(1), T(2), T(3), EV };
	assert_int_equal(merge(native2, 3, py, entry, 3, out, 16), 4);
	assert_memory_equal(out, want2, sizeof(want2));
	assert_int_equal(merge(native, 3, py, entry, 3, out, 2), 2); /* bounded */
	assert_memory_equal(out, want, 2 * sizeof(*out));
}

static void test_frame_table(void **state)
{
	uint32_t a = sp_pyframe_intern(5, 6, 42), b = sp_pyframe_intern(5, 6, 43), file, func, line;
	assert_true(a && b && a != b);
	assert_int_equal(sp_pyframe_intern(5, 6, 42), a);
	assert_int_equal(sp_pyframe_lookup(NULL, b, &file, &func, &line), 0);
	assert_true(file == 5 && func == 6 && line == 43);
	assert_int_equal(sp_pyframe_lookup(NULL, 0, &file, &func, &line), -1);
	assert_int_equal(sp_pyframe_lookup(NULL, b + 1000, &file, &func, &line), -1);
}

/* This binary has no CPython: nothing to walk, and "both" captures the native stack alone. */
static void __attribute__((noinline)) capture_both(uint32_t *native, uint32_t *both, uint32_t *python,
						   uint32_t *fallback)
{
	*native = sp_stack_capture(16, SP_STACKS_NATIVE);
	*both = sp_stack_capture(16, SP_STACKS_BOTH);
	*python = sp_stack_capture(16, SP_STACKS_PYTHON);
	*fallback = sp_stack_capture(16, SP_STACKS_PYTHON | SP_STACK_NATIVE_FALLBACK);
}

static void test_no_python(void **state)
{
	uint32_t ids[8], native, both, python, fallback, n1, n2, n3;
	uint8_t entry[8];
	assert_int_equal(sp_pystack_walk(ids, entry, 8), 0);
	assert_null(sp_pystack_version());
	capture_both(&native, &both, &python, &fallback);
	const uint64_t *a = sp_stack_lookup(NULL, native, &n1), *b = sp_stack_lookup(NULL, both, &n2);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(n1, n2);
	for (uint32_t i = 2; i < n1; i++) /* inner frames differ: the two call sites in capture_both */
		assert_true(a[i] == b[i] && !SP_IS_PYFRAME(b[i]));
	assert_int_equal(python, 0);
	const uint64_t *c = sp_stack_lookup(NULL, fallback, &n3); /* python, no Python frame: native */
	assert_non_null(c);
	assert_int_equal(n3, n1);
	assert_true(c[n3 - 1] == a[n1 - 1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_groups),  cmocka_unit_test(test_merge_one_each),
		cmocka_unit_test(test_merge_unknown), cmocka_unit_test(test_merge_leftovers),
		cmocka_unit_test(test_frame_table),   cmocka_unit_test(test_no_python),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
