/* SPDX-License-Identifier: MIT */
/* bytes.h - the byte encodings the file formats of trace/ share (trace_write.c, trace_read.c,
 * record.c, tokens.c): little-endian integers, LEB128 varints, zigzag. Header-only; no I/O, no allocation. */
#ifndef SP_TRACE_BYTES_H
#define SP_TRACE_BYTES_H

#include <stdint.h>

static inline void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)v | 0x80;
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Reads one varint from *p (not past end). Returns 0, or -1 if it runs past end or 10 bytes. */
static inline int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 70 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

#endif
