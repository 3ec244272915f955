/* SPDX-License-Identifier: MIT */
/* test_intern.c - string interning: ids from 1, equal strings equal ids, lookups stable across
 * table growth, and many threads interning overlapping sets agree on every id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "collector/base/intern.h"

static void test_basics(void **state)
{
	uint32_t before = sp_intern_count();
	assert_int_equal(sp_intern(NULL), 0);
	assert_null(sp_intern_lookup(0));
	uint32_t a = sp_intern("vec_add"), b = sp_intern("gemm"), e = sp_intern("");
	char copy[] = "vec_add";
	assert_int_equal(a, before + 1);
	assert_int_equal(b, before + 2);
	assert_int_equal(sp_intern(copy), a); /* by content, not by pointer */
	copy[0] = 'X';   /* the table holds its own copy */
	assert_string_equal(sp_intern_lookup(a), "vec_add");
	assert_string_equal(sp_intern_lookup(e), "");
	assert_int_equal(sp_intern_count(), before + 3);
	assert_null(sp_intern_lookup(before + 4));
}

static void test_growth_keeps_pointers(void **state)
{
	enum { N = 100000 };
	char buf[64];
	uint32_t first = sp_intern("growth-0");
	const char *p = sp_intern_lookup(first);
	for (int i = 1; i < N; i++) {
		snprintf(buf, sizeof(buf), "growth-%d", i);
		assert_int_equal(sp_intern(buf), first + (uint32_t)i);
	}
	assert_ptr_equal(sp_intern_lookup(first), p);
	for (int i = 0; i < N; i += 997) {
		snprintf(buf, sizeof(buf), "growth-%d", i);
		assert_int_equal(sp_intern(buf), first + (uint32_t)i);
		assert_string_equal(sp_intern_lookup(first + (uint32_t)i), buf);
	}
}

enum { THREADS = 8, WORDS = 20000 };
static uint32_t ids[THREADS][WORDS];

/* Each thread interns the same words in a different order and checks its own lookups. */
static void *intern_words(void *arg)
{
	int t = (int)(intptr_t)arg;
	char buf[64];
	for (int k = 0; k < WORDS; k++) {
		int i = (k * 7919 + t * 1237) % WORDS;
		snprintf(buf, sizeof(buf), "concurrent-%d", i);
		ids[t][i] = sp_intern(buf);
		const char *s = sp_intern_lookup(ids[t][i]);
		if (!s || strcmp(s, buf))
			return (void *)1;
	}
	return NULL;
}

static void test_threads_agree(void **state)
{
	uint32_t before = sp_intern_count();
	pthread_t th[THREADS];
	for (int t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, intern_words, (void *)(intptr_t)t);
	for (int t = 0; t < THREADS; t++) {
		void *bad;
		pthread_join(th[t], &bad);
		assert_null(bad);
	}
	for (int i = 0; i < WORDS; i++) {
		assert_true(ids[0][i] > before && ids[0][i] <= before + WORDS);
		for (int t = 1; t < THREADS; t++)
			assert_int_equal(ids[t][i], ids[0][i]);
	}
	assert_int_equal(sp_intern_count(), before + WORDS); /* no duplicates */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basics),
		cmocka_unit_test(test_growth_keeps_pointers),
		cmocka_unit_test(test_threads_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
