/* SPDX-License-Identifier: MIT */
/* test_malloc.c - the malloc hooks (preload/malloc.c, included here: this binary's malloc family
 * is the hooks, forwarding to glibc as in a preloaded process; the collector's side is a stub
 * that records what it is told): which allocator's chunk sizes may be read (glibc's by what
 * the functions are and do; tcmalloc, which exports __libc_free at its own free, not), realloc
 * of a bootstrap pool block (copies what the block holds, not more), and a failed realloc (the
 * block stays recorded as live). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include "preload/malloc.c"

volatile size_t sp_host_min_bytes = SIZE_MAX;
static void *watch;             /* the block whose reports are counted */
static int allocs, frees;

void sp_collector_host_alloc(void *p, size_t size)
{
	allocs += p == watch;
}

void sp_collector_host_free(void *p)
{
	frees += p == watch;
}

void sp_collector_malloc_hooks(void)
{
	/* the hooks' announcement to the collector: nothing to record here */
}

static void glibc_is_recognised(void **state)
{
	free(malloc(1)); /* resolves the real functions */
	assert_true(sp_mem_glibc_object(real_alloc.malloc, real_alloc.free, malloc_usable_size));
	assert_true(sp_mem_glibc_behaviour(real_alloc.malloc, real_alloc.free, malloc_usable_size));
	assert_int_equal(real_alloc.glibc_sizes, 1);
}

static void tcmalloc_is_not_glibc(void **state)
{
	void *h = dlopen("libtcmalloc_minimal.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		print_message("libtcmalloc_minimal.so.4 not installed (Debian libtcmalloc-minimal4): skipped\n");
		skip();
	}
	void *(*tc_malloc)(size_t) = (void *(*)(size_t))dlsym(h, "malloc");
	void (*tc_free)(void *) = (void (*)(void *))dlsym(h, "free");
	size_t (*tc_usable)(void *) = (size_t (*)(void *))dlsym(h, "malloc_usable_size");
	assert_non_null(tc_malloc);
	/* what fooled the old test: its __libc_free is its free */
	assert_ptr_equal(dlsym(h, "__libc_free"), (void *)tc_free);
	assert_false(sp_mem_glibc_object(tc_malloc, tc_free, tc_usable));
	assert_false(sp_mem_glibc_behaviour(tc_malloc, tc_free, tc_usable));
}

static void pool_realloc_copies_the_block(void **state)
{
	free(malloc(1));
	/* as inside resolve()'s dlsym: calloc serves from the pool (volatile stores: the compiler
	 * takes calloc for a function that reads no program memory) */
	void *(*real_calloc)(size_t, size_t) = real_alloc.calloc;
	*(void *(*volatile *)(size_t, size_t)) & real_alloc.calloc = NULL;
	*(volatile int *)&real_alloc.resolving = 1;
	size_t left = sizeof pool - pool_used;
	char *volatile filler = left > 16 + 48 + 16 ? calloc(1, left - 16 - 48 - 16) : NULL;
	char *volatile launder = calloc(1, 40); /* the pool's last block */
	char *p = launder;
	*(volatile int *)&real_alloc.resolving = 0;
	*(void *(*volatile *)(size_t, size_t)) & real_alloc.calloc = real_calloc;
	(void)filler;
	assert_non_null(p);
	assert_true(in_pool(p));
	assert_int_equal(pool_size(p), 40);
	assert_true(p + 48 <= pool + sizeof pool);
	memset(p, 'x', 40);
	char *q = realloc(p, 8192); /* the old hook copied 4096 bytes: past the pool's end */
	assert_non_null(q);
	assert_false(in_pool(q));
	for (int i = 0; i < 40; i++)
		assert_int_equal(q[i], 'x');
	free(q);
	free(launder); /* ignored: a pool block */
}

static void failed_realloc_keeps_the_block(void **state)
{
	free(malloc(1));
	sp_host_min_bytes = 1000;
	char *p = malloc(4000);
	watch = p;
	allocs = frees = 0;
	char *q = realloc(p, SIZE_MAX / 2); /* fails: p is still allocated */
	assert_null(q);
	assert_int_equal(frees, 0);
	q = realloc(watch, 8000);
	assert_non_null(q);
	assert_int_equal(frees, 1); /* released as p, whatever address q has */
	watch = q;
	allocs = frees = 0;
	q = realloc(q, 0); /* glibc: releases q, returns NULL */
	assert_null(q);
	assert_int_equal(frees, 1);
	sp_host_min_bytes = SIZE_MAX;
	watch = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(glibc_is_recognised),
		cmocka_unit_test(tcmalloc_is_not_glibc),
		cmocka_unit_test(pool_realloc_copies_the_block),
		cmocka_unit_test(failed_realloc_keeps_the_block),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
