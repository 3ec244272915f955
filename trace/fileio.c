/* SPDX-License-Identifier: MIT */
/* fileio.c - see fileio.h. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "fileio.h"

int sp_write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int sp_buf_grow(uint8_t **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	uint8_t *b = realloc(*buf, need);
	if (!b)
		return -1;
	*buf = b;
	*cap = need;
	return 0;
}
