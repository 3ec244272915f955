/* SPDX-License-Identifier: MIT */
/* layout.h - inside trace/ only: the byte layout that the trace writer (trace_write.c) and reader
 * (trace_read.c) share: header and chunk sizes, record kinds beyond the events, the reader's
 * limits, the fields of one event record (record.c) and the columns of a chunk (columns.c).
 * docs/FORMAT.md describes the bytes; change them only together with SP_TRACE_VERSION. Never
 * include it outside trace/. */
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

/* What a version 1-4 record is decoded against: the previous record of the same chunk (both 0 at
 * a chunk's start). */
struct sp_rec_prev {
	uint64_t start;         /* start of the previous record */
	uint64_t corr;          /* last nonzero correlation id */
};

/* Decodes the event record of kind (its kind byte already read) from *p..end, as a file of
 * format version 1-4 writes it, into ev, and advances *p and *prev. Returns 0, or -1 for a record
 * cut short or a value that does not fit its field (ev and *prev then hold a part). */
int sp_rec_decode(const uint8_t **p, const uint8_t *end, uint8_t kind, unsigned version, struct sp_rec_prev *prev,
		  struct sp_event *ev);

/* Version 5 (columns.c): the fields of a record that its template holds, and those stored with
 * every record (values). The template key of ev: its kind and template fields, every other byte 0.
 * This function can't fail. */
void sp_rec_key(struct sp_event *key, const struct sp_event *ev);
/* Encodes ev's template fields (values 0) or value fields (values 1) as varints at p, which has
 * room for MAX_EVENT_BYTES. Returns the end. This function can't fail. */
uint8_t *sp_rec_put(uint8_t *p, const struct sp_event *ev, int values);
/* Decodes them, as a file of version (5 or later) stores them, from *p..end into ev (whose kind
 * is set) and advances *p. Returns 0, or -1 for bytes cut short or a value that does not fit its
 * field. */
int sp_rec_get(const uint8_t **p, const uint8_t *end, unsigned version, struct sp_event *ev, int values);

/* ---- version 5: a chunk's content is columns (columns.c, docs/FORMAT.md) ---- */
#define MAX_TEMPLATES 16384u         /* templates of one chunk: the reader refuses more as corrupt */
#define MAX_LANES 256u               /* lanes of one chunk (threads, GPU streams); more share lane 0 */
#define MAX_QUANTUM_LOG 16           /* a time quantum is 1 << 0..16 ns */
#define GPU_QUANTUM_LOG 5            /* the writer's GPU quantum: GPU timers tick every 32 ns */

/* The writer's side: the columns of the chunk being built, its templates and predictions. */
struct sp_enc;

/* Returns a new encoder, or NULL (errno ENOMEM). */
struct sp_enc *sp_enc_new(void);
void sp_enc_free(struct sp_enc *e);
/* Bytes of the chunk's content so far. This function can't fail. */
size_t sp_enc_bytes(const struct sp_enc *e);
/* 1 if the chunk holds MAX_TEMPLATES templates: it must be written before the next event. */
int sp_enc_full(const struct sp_enc *e);
/* Appends an event record. Returns the bytes it added, or -1 with errno ENOMEM (nothing
 * changed). The kind must be an event kind and the chunk not full. */
int sp_enc_event(struct sp_enc *e, const struct sp_event *ev);
/* Room for a string, stack or Python frame record of kind with at most need bytes after its kind
 * byte: returns where to write them, or NULL with errno ENOMEM (nothing changed). The record is
 * appended by sp_enc_table_end with its end. */
uint8_t *sp_enc_table(struct sp_enc *e, uint8_t kind, size_t need);
void sp_enc_table_end(struct sp_enc *e, const uint8_t *end);
/* The chunk's content (directory and columns) in *raw (valid until the next call on e), *len
 * bytes; e is then empty for the next chunk. Returns 0, or -1 with errno ENOMEM (e unchanged). */
int sp_enc_finish(struct sp_enc *e, const uint8_t **raw, size_t *len);

/* The reader's side: where it stands in a loaded chunk. For versions 1-4, kind bytes and fields
 * are one stream (body); for version 5, kinds and the bytes of string, stack and Python frame
 * records (body) are two of the chunk's columns, and dec holds the rest. */
struct sp_chunk_cur {
	unsigned version;
	const uint8_t *kind, *kind_end; /* version 5: the kind column */
	const uint8_t *body, *body_end; /* table records are read from here */
	struct sp_rec_prev prev;        /* versions 1-4 */
	struct sp_dec *dec;             /* version 5: columns, templates, predictions (owned) */
};

/* Starts reading the chunk content raw (len bytes) of a file of version. Returns 0, -1 if its
 * column directory is corrupt, -2 out of memory. */
int sp_chunk_begin(struct sp_chunk_cur *c, const uint8_t *raw, size_t len, unsigned version);
/* The next record's kind byte. Returns 0, or -1 if none is left. */
int sp_chunk_kind(struct sp_chunk_cur *c, uint8_t *kind);
/* Decodes the event record of kind (its kind byte read) into ev. Returns 0, -1 if corrupt (cut
 * short, a value that does not fit, an unknown template), -2 out of memory. */
int sp_chunk_event(struct sp_chunk_cur *c, uint8_t kind, struct sp_event *ev);
/* 1 if every byte of the chunk has been read, else 0. This function can't fail. */
int sp_chunk_done(const struct sp_chunk_cur *c);
/* Frees what c holds; c may be zeroed or used. This function can't fail. */
void sp_chunk_free(struct sp_chunk_cur *c);

#endif
