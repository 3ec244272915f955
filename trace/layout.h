/* SPDX-License-Identifier: MIT */
/* layout.h - inside trace/ only: the byte layout that the trace writer (trace_write.c) and reader
 * (trace_read.c) share: header and chunk sizes, record kinds beyond the events, the reader's
 * limits, and the encoding of one event record (record.c). docs/FORMAT.md describes the bytes;
 * change them only together with SP_TRACE_VERSION. Never include it outside trace/. */
#ifndef SP_TRACE_LAYOUT_H
#define SP_TRACE_LAYOUT_H

#include <stdint.h>
#include "event.h"

#define HEADER_V1_SIZE 376           /* bytes of the version-1 header */
#define HEADER_V2_SIZE 472           /* version 2 appends run_id[64] and producer[32] */
#define CHUNK_MAGIC 0x4b435053u      /* "SPCK" read as a little-endian u32 */
#define CHUNK_HEADER_SIZE 16
#define DEFAULT_CHUNK_BYTES (256u << 10)
/* Reader limits (docs/FORMAT.md, "Limits"): every id, count and size read from a file is checked
 * against one of these before it sizes anything. The writer stays well inside them. */
#define MAX_RAW_CHUNK (4u << 20)     /* reader refuses bigger chunks as corrupt */
#define MAX_WRITER_CHUNK (1u << 20)  /* largest chunk_bytes the writer accepts */
#define DECODE_FLOOR (16ull << 20)   /* a file decodes to at most DECODE_FLOOR + */
#define DECODE_RATIO 64u             /* DECODE_RATIO x its size raw bytes per pass */
#define MAX_STRING_ID (1u << 24)     /* reader refuses bigger string ids as corrupt */
#define MAX_STRING_BYTES (64u << 10) /* longest string record (the writer truncates to it) */
#define MAX_STRING_TOTAL (256u << 20)/* bytes of all strings held at once */
#define KIND_STRING 0xff
#define KIND_STACK 0xfe
#define KIND_PYFRAME 0xfd            /* from version 3 */
#define MAX_PYFRAME_ID (1u << 24)    /* reader refuses bigger Python frame ids as corrupt */
#define MAX_STACK_ID (1u << 24)      /* reader refuses bigger stack ids as corrupt */
#define MAX_STACK_DEPTH 1024         /* reader refuses deeper stacks as corrupt */
#define MAX_STACK_TOTAL (32u << 20)  /* frames of all stacks held at once */
#define MAX_EVENT_BYTES 256          /* bound on one encoded event (fields x 10-byte varints) */
#ifndef ZSTD_LEVEL
#define ZSTD_LEVEL 9
#endif

/* What a record is encoded against: the previous record of the same chunk (both 0 at a chunk's
 * start). */
struct sp_rec_prev {
	uint64_t start;         /* start of the previous record */
	uint64_t corr;          /* last nonzero correlation id */
};

/* Encodes ev (kind byte, start and duration, the common fields, then its kind's fields) at p,
 * which has room for MAX_EVENT_BYTES, and advances *prev. Returns the end of the record. The
 * kind must be an event kind (below SP_EV__COUNT). This function can't fail. */
uint8_t *sp_rec_encode(uint8_t *p, const struct sp_event *ev, struct sp_rec_prev *prev);
/* Decodes the event record of kind (its kind byte already read) from *p..end, as a file of
 * format version writes it, into ev, and advances *p and *prev. Returns 0, or -1 for a record
 * cut short or a value that does not fit its field (ev and *prev then hold a part). */
int sp_rec_decode(const uint8_t **p, const uint8_t *end, uint8_t kind, unsigned version, struct sp_rec_prev *prev,
		  struct sp_event *ev);

#endif
