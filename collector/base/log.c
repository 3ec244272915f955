/* SPDX-License-Identifier: MIT */
/* log.c - see log.h. Formats into a stack buffer and writes it with one write(2), so lines from
 * several threads don't interleave and no stdio lock is taken inside the profiled program. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "log.h"

static void vlog(const char *fmt, va_list ap)
{
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "stepprof: ");
	int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
	n = (m < 0) ? n : (n + m > (int)sizeof buf - 2 ? (int)sizeof buf - 2 : n + m);
	buf[n++] = '\n';
	ssize_t w = write(2, buf, n);
	(void)w;
}

void sp_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

void sp_info(const char *fmt, ...)
{
	static int verbose = -1;
	if (verbose < 0) {
		const char *v = getenv("STEPPROF_VERBOSE");
		verbose = v && *v && strcmp(v, "0");
	}
	if (!verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}
