/* SPDX-License-Identifier: MIT */
/* fileio.h - the two file chores that the formats of trace/ (trace_write.c, trace_read.c,
 * tokens.c) share: writing a whole buffer through short writes and EINTR, and growing a byte
 * buffer. Never prints; safe on the collector's writer thread. */
#ifndef SP_TRACE_FILEIO_H
#define SP_TRACE_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* Writes all n bytes of buf to fd. Returns 0, or -1 with errno (part may have been written). */
int sp_write_all(int fd, const void *buf, size_t n);
/* Makes *buf (of *cap bytes) hold at least need bytes. Returns 0, or -1 (no memory; *buf and *cap
 * unchanged). */
int sp_buf_grow(uint8_t **buf, size_t *cap, size_t need);

#endif
