/* SPDX-License-Identifier: MIT */
/* format.c - see format.h. */
#include <string.h>
#include "format.h"

const char *sp_fmt_ns(char *buf, size_t n, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, n, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, n, "%.3fus", ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, n, "%.3fms", ns / 1e6);
	else
		snprintf(buf, n, "%.3fs", ns / 1e9);
	return buf;
}

const char *sp_fmt_sns(char *buf, size_t n, int64_t ns)
{
	char abs[32];
	sp_fmt_ns(abs, sizeof(abs), ns < 0 ? -(uint64_t)ns : (uint64_t)ns);
	snprintf(buf, n, "%c%s", ns < 0 ? '-' : '+', abs);
	return buf;
}

const char *sp_plural(uint64_t count)
{
	return count == 1 ? "" : "s";
}

void sp_print_name(FILE *out, const char *name, int width)
{
	int len = (int)strlen(name), cut = len > width, keep = cut ? width - 3 : len;

	for (int i = 0; i < keep; i++)
		fputc((unsigned char)name[i] < 0x20 ? '?' : name[i], out);
	fprintf(out, "%s%*s", cut ? "..." : "", width - keep - (cut ? 3 : 0), "");
}
