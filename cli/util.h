/* SPDX-License-Identifier: MIT */
/* util.h - generic helpers of the offline CLI: allocation that exits the command when memory
 * runs out (never for the profiled process: the collector must not exit), qsort for arrays that
 * may be empty, and a set of 64-bit ids. Knows nothing of traces or commands. */
#ifndef SP_UTIL_H
#define SP_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* A set of ids (correlation ids, track keys), open addressing. */
struct sp_idset {
	uint64_t *slot;         /* 0 = empty; key 0 is kept in has_zero */
	size_t cap, n;
	int has_zero;
};
/* Adds key; exits the CLI if memory runs out. Returns 1 if it was new, 0 if already there. */
int sp_idset_add(struct sp_idset *s, uint64_t key);
/* 1 if key is in s. This function can't fail. */
int sp_idset_has(const struct sp_idset *s, uint64_t key);
/* Empties s (keeping its memory) / frees its memory. These functions can't fail. */
void sp_idset_clear(struct sp_idset *s);
void sp_idset_free(struct sp_idset *s);

/* For the offline CLI only: sp_oom prints "stepprof: out of memory" and exits 1; sp_xrealloc is
 * realloc that calls it on failure. */
void sp_oom(void) __attribute__((noreturn));
void *sp_xrealloc(void *p, size_t n);
/* strdup that exits the CLI if memory runs out. */
char *sp_xstrdup(const char *s);
/* Grows the zero-filled array p of *cap elements of elem bytes (doubling, from 256) until index i
 * fits; returns it and updates *cap. Exits the CLI if memory runs out. */
void *sp_xgrow(void *p, size_t *cap, size_t elem, size_t i);
/* qsort and qsort_r for arrays that may be empty and NULL (the C library's base must never be
 * NULL, even for no element). These functions can't fail. */
void sp_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
void sp_sort_r(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *), void *ctx);

/* -1, 0 or 1 as a is below, equal to or above b: the step of a comparator. Can't fail. */
static inline int sp_cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

#endif
