/* SPDX-License-Identifier: MIT */
/* format.h - text formatting shared by the CLI's tables: times in human units and kernel names
 * in fixed-width columns. Never allocates. */
#ifndef SP_FORMAT_H
#define SP_FORMAT_H

#include <stdint.h>
#include <stdio.h>

/* ns in a human unit with 3 decimals: "850ns", "12.345us", "1.234ms", "2.500s" (into buf).
 * Returns buf. This function can't fail. */
const char *sp_fmt_ns(char *buf, size_t n, uint64_t ns);
/* A signed offset in the same units with its sign: "+12.000ms", "-5.000s", "+0ns" (into buf).
 * Returns buf. This function can't fail. */
const char *sp_fmt_sns(char *buf, size_t n, int64_t ns);
/* "" when count is 1, else "s": "1 step", "2 steps". This function can't fail. */
const char *sp_plural(uint64_t count);
/* Writes name in a column of width: control characters as '?', cut with "..." if longer.
 * This function can't fail. */
void sp_print_name(FILE *out, const char *name, int width);

#endif
