/* SPDX-License-Identifier: MIT */
/* opmsg.c - torch's NVTX message of an operator, taken apart (see opmsg.h). */
#include <stdlib.h>
#include <string.h>
#include "opmsg.h"

/* The end of the bracketed list that starts at p ('['), or NULL if it never closes. */
static const char *list_end(const char *p)
{
	int depth = 0;
	for (; *p; p++) {
		depth += *p == '[';
		if (*p == ']' && --depth == 0)
			return p + 1;
	}
	return NULL;
}

void sp_opmsg_parse(const char *msg, struct sp_opmsg *m)
{
	const char *op = strstr(msg, ", op_id = ");
	memset(m, 0, sizeof *m);
	m->name_len = strlen(msg);
	if (!op)
		return; /* not torch's: a range of the program */
	m->op = 1;
	m->name_len = (size_t)(op - msg);
	/* the name ends at the first of ", seq = " and ", op_id = " (a name holding ", seq = " is cut there) */
	const char *sq = strstr(msg, ", seq = ");
	if (sq && sq < op) {
		char *end;
		long long v = strtoll(sq + 8, &end, 10);
		m->name_len = (size_t)(sq - msg);
		if (end != sq + 8 && end == op) {
			m->has_seq = 1;
			m->seq = v;
		}
	}
	const char *sz = strstr(op, ", sizes = [");
	if (sz) {
		const char *b = sz + 10, *e = list_end(b);
		m->sizes = b;
		m->sizes_len = e ? (size_t)(e - b) : strlen(b);
	}
}
