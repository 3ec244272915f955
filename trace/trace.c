/* SPDX-License-Identifier: MIT */
/* trace.c - the trace file format, both directions: header, chunks (one zstd frame each) and
 * the varint record encoding; docs/FORMAT.md describes the bytes. The writer side runs on the
 * writer thread only and never prints; the reader side is for the CLI and keeps one chunk plus
 * the string and stack tables in memory. A record's layout is the field tables below: change them only
 * together with SP_TRACE_VERSION and docs/FORMAT.md. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include "bytes.h"
#include "trace.h"

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

/* How a field is stored: plain varint, zigzag varint, device ordinal plus one (mod 2^16) so
 * SP_NO_DEVICE costs one byte, or correlation id: 0 for none, else 1 + zigzag(corr - the previous
 * nonzero corr of the chunk) - neighbouring records have neighbouring ids, so this is one
 * repetitive byte where the plain id was three unpredictable ones. */
enum { FL_U = 0, FL_S = 1, FL_DEV = 2, FL_CORR = 3 };

struct field {
	uint8_t off;            /* byte offset in struct sp_event */
	uint8_t size;           /* 1, 2, 4 or 8 */
	uint8_t how;            /* FL_* */
};

#define F(member, how) { offsetof(struct sp_event, member), sizeof(((struct sp_event *)0)->member), how }

/* After the kind byte, start (zigzag delta) and end - start (zigzag): these, for every kind. */
static const struct field common_fields[] = {
	F(corr, FL_CORR), F(name, FL_U), F(sub, FL_U), F(device, FL_DEV), F(tid, FL_U), F(stream, FL_U),
	F(context, FL_U),
};
/* Then the union fields of the kind, in this order. */
static const struct field kernel_fields[] = {
	F(u.kernel.grid[0], FL_U), F(u.kernel.grid[1], FL_U), F(u.kernel.grid[2], FL_U),
	F(u.kernel.block[0], FL_U), F(u.kernel.block[1], FL_U), F(u.kernel.block[2], FL_U),
	F(u.kernel.static_smem, FL_U), F(u.kernel.dynamic_smem, FL_U), F(u.kernel.regs, FL_U),
	F(u.kernel.launch, FL_U), F(u.kernel.graph_id, FL_U), F(u.kernel.graph_node, FL_U),
};
static const struct field copy_fields[] = {
	F(u.copy.bytes, FL_U), F(u.copy.value, FL_U), F(u.copy.src_kind, FL_U), F(u.copy.dst_kind, FL_U),
	F(u.copy.async, FL_U), F(u.copy.graph_id, FL_U), F(u.copy.graph_node, FL_U),
};
static const struct field sync_fields[] = { F(u.sync.event, FL_U) };
static const struct field api_fields[] = { F(u.api.cbid, FL_U), F(u.api.status, FL_S), F(u.api.stack, FL_U) };
static const struct field nccl_fields[] = {
	F(u.nccl.count, FL_U), F(u.nccl.bytes, FL_U), F(u.nccl.comm, FL_U), F(u.nccl.seq, FL_U),
	F(u.nccl.peer, FL_S), F(u.nccl.comm_rank, FL_S), F(u.nccl.comm_size, FL_S), F(u.nccl.dtype, FL_U),
	F(u.nccl.redop, FL_U), F(u.nccl.group_depth, FL_U), F(u.nccl.stack, FL_U),
};
static const struct field mem_fields[] = {
	F(u.mem.addr, FL_U), F(u.mem.size, FL_U), F(u.mem.live, FL_U), F(u.mem.stack, FL_U), F(u.mem.flags, FL_U),
};
static const struct field marker_fields[] = { F(u.marker.domain, FL_U), F(u.marker.depth, FL_S) };
static const struct field step_fields[] = {
	F(u.step.number, FL_S), F(u.step.how, FL_U), F(u.step.flags, FL_U), F(u.step.regime, FL_U),
	F(u.step.period, FL_U), F(u.step.launches, FL_U), F(u.step.every, FL_U), F(u.step.confidence, FL_U),
	F(u.step.relocks, FL_U),
};
/* a version-1 file's step record: the number only */
static const struct field step_fields_v1[] = { F(u.step.number, FL_S) };
static const struct field window_fields[] = {
	F(u.window.id, FL_U), F(u.window.capped, FL_U), F(u.window.first_step, FL_S),
	F(u.window.last_step, FL_S), F(u.window.bytes, FL_U), F(u.window.dropped, FL_U),
};
static const struct field dropped_fields[] = { F(u.dropped.count, FL_U) };
static const struct field device_fields[] = {
	F(u.dev.sm_count, FL_U), F(u.dev.cc_major, FL_U), F(u.dev.cc_minor, FL_U), F(u.dev.memory, FL_U),
};
static const struct field clock_fields[] = { F(u.clock.realtime_ns, FL_U) };
static const struct field module_fields[] = {
	F(u.module.start, FL_U), F(u.module.end, FL_U), F(u.module.offset, FL_U),
};

#define KIND(k, t) [k] = { t, sizeof(t) / sizeof(t[0]) }
static const struct {
	const struct field *f;
	uint8_t n;
} kind_fields[SP_EV__COUNT] = {
	KIND(SP_EV_KERNEL, kernel_fields), KIND(SP_EV_MEMCPY, copy_fields), KIND(SP_EV_MEMSET, copy_fields),
	KIND(SP_EV_SYNC, sync_fields), KIND(SP_EV_API, api_fields), KIND(SP_EV_NCCL, nccl_fields),
	KIND(SP_EV_ALLOC, mem_fields), KIND(SP_EV_FREE, mem_fields), KIND(SP_EV_MARKER, marker_fields),
	KIND(SP_EV_STEP, step_fields), KIND(SP_EV_WINDOW_BEGIN, window_fields),
	KIND(SP_EV_WINDOW_END, window_fields), KIND(SP_EV_DROPPED, dropped_fields),
	[SP_EV_THREAD] = { NULL, 0 }, KIND(SP_EV_DEVICE, device_fields), KIND(SP_EV_CLOCK, clock_fields),
	KIND(SP_EV_COMM, nccl_fields), KIND(SP_EV_MODULE, module_fields),
};

/* A growable bitmap of ids already written (strings, stacks). */
struct idbits {
	uint8_t *bits;
	uint32_t n;             /* bits allocated */
};

/* Open addressing from the ids a file uses (any value below the id limit) to dense indexes
 * 1, 2, ... in order of first appearance: tables by index stay as small as the number of
 * distinct ids the file holds, whatever values it names. */
struct idmap {
	uint32_t *key, *val;    /* key 0: empty slot */
	uint32_t cap, used;     /* slots (power of two), filled */
};

struct sp_trace_writer {
	int fd;
	ZSTD_CCtx *cctx;
	uint8_t *raw;           /* records of the chunk being built */
	size_t raw_len, raw_cap;
	size_t chunk_bytes;     /* raw size that triggers a flush */
	uint32_t nrec;          /* records in raw, strings included */
	uint64_t prev_start;    /* start of the previous record in this chunk (0 at chunk start) */
	uint64_t prev_corr;     /* last nonzero correlation id in this chunk (0 at chunk start) */
	uint8_t *out;           /* chunk header + compressed frame */
	size_t out_cap;
	uint64_t file_bytes;
	int broken;             /* errno of a failed chunk write: nothing more is written */
	sp_string_lookup_fn lookup;
	void *lookup_ctx;
	sp_stack_lookup_fn stack_lookup;
	void *stack_ctx;
	sp_pyframe_lookup_fn py_lookup;
	void *py_ctx;
	int python;            /* SP_FEAT_PYSTACKS: stacks may hold Python frames, written as frame records */
	struct idbits strings;  /* string ids already in the file */
	struct idbits stacks;   /* stack ids already in the file */
	struct idbits pyframes; /* Python frame ids already in the file */
};

struct sp_trace_reader {
	int fd;
	struct sp_trace_header hdr;
	uint64_t off;           /* file offset of the next chunk */
	uint8_t *raw, *comp;    /* current chunk, decompressed; compressed scratch */
	size_t raw_cap, comp_cap;
	size_t pos, len;        /* read position and size of raw */
	uint32_t left;          /* records not yet decoded in this chunk */
	uint64_t prev_start;
	uint64_t prev_corr;
	struct idmap strmap;    /* string id -> its index in str */
	struct { uint32_t id; char *s; } *str; /* strings by index (s NULL: named, not defined) */
	uint32_t nstr, strcap;  /* indexes used (0 reserved), allocated */
	uint64_t str_bytes;     /* bytes held in str */
	struct idmap stkmap;    /* stack id -> its index in stk */
	struct { uint32_t id, n; uint64_t *pcs; } *stk; /* stacks by index */
	uint32_t nstk, stkcap;
	uint64_t stk_frames;    /* frames held in stk */
	uint64_t decoded;       /* raw bytes of the chunks loaded since open or rewind */
	struct idmap pymap;     /* Python frame id -> its index in py */
	struct { uint32_t id, file, func, line; } *py; /* Python frames by index */
	uint32_t npy, pycap;    /* indexes used (0 reserved), allocated */
	uint32_t pymax;         /* highest id defined + 1 */
	int truncated, failed;
	ZSTD_DCtx *dctx;
	char err[256];
};

/* The stored form of one field of ev. This function can't fail. */
static uint64_t field_get(const struct sp_event *ev, const struct field *f)
{
	uint64_t v = get_le((const uint8_t *)ev + f->off, f->size);
	if (f->how == FL_S) {
		int shift = 64 - 8 * f->size;
		return zigzag((int64_t)(v << shift) >> shift);
	}
	return f->how == FL_DEV ? (v + 1) & 0xffff : v;
}

/* Stores the decoded form of one field into ev. Returns 0, or -1 if v does not fit the field. */
static int field_set(struct sp_event *ev, const struct field *f, uint64_t v)
{
	int bits = 8 * f->size;
	if (f->how == FL_S) {
		int64_t s = unzigzag(v);
		if (bits < 64 && (s < -((int64_t)1 << (bits - 1)) || s >= ((int64_t)1 << (bits - 1))))
			return -1;
		v = (uint64_t)s;
	} else if (bits < 64 && v >> bits) {
		return -1;
	} else if (f->how == FL_DEV) {
		v = (v - 1) & 0xffff;
	}
	put_le((uint8_t *)ev + f->off, v, f->size);
	return 0;
}

/* ---- writing ---- */

/* Makes room for need more raw bytes. Returns 0, or -1 with errno ENOMEM (nothing changed). */
static int raw_reserve(struct sp_trace_writer *w, size_t need)
{
	if (w->raw_len + need <= w->raw_cap)
		return 0;
	size_t cap = w->raw_cap ? w->raw_cap : 4096;
	while (cap < w->raw_len + need)
		cap *= 2;
	uint8_t *p = realloc(w->raw, cap);
	if (!p)
		return -1;
	w->raw = p;
	w->raw_cap = cap;
	return 0;
}

/* Writes all of buf. Returns 0, or -1 with errno (part may have been written). */
static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* This function can't fail. */
static bool bits_has(const struct idbits *b, uint32_t id)
{
	return id < b->n && (b->bits[id / 8] >> (id % 8) & 1);
}

/* Marks id as written. Returns 0, or -1 with errno ENOMEM (the record is then simply written
 * again on its next use). */
static int bits_set(struct idbits *b, uint32_t id)
{
	if (id >= b->n) {
		uint32_t n = b->n ? b->n : 1024;
		while (n <= id && n < (1u << 31))
			n *= 2;
		if (n <= id)
			return -1;
		uint8_t *p = realloc(b->bits, n / 8);
		if (!p)
			return -1;
		memset(p + b->n / 8, 0, (n - b->n) / 8);
		b->bits = p;
		b->n = n;
	}
	b->bits[id / 8] |= (uint8_t)(1u << (id % 8));
	return 0;
}

/* Appends a string record to the chunk. Returns its encoded size, or -1 with errno ENOMEM. */
static int append_string(struct sp_trace_writer *w, uint32_t id, const char *s)
{
	size_t len = strnlen(s, MAX_STRING_BYTES); /* longer: its first MAX_STRING_BYTES bytes */
	if (raw_reserve(w, len + 21) < 0)
		return -1;
	uint8_t *start = w->raw + w->raw_len, *p = start;
	*p++ = KIND_STRING;
	p = put_varint(p, id);
	p = put_varint(p, len);
	memcpy(p, s, len);
	p += len;
	w->raw_len += (size_t)(p - start);
	w->nrec++;
	bits_set(&w->strings, id);
	return (int)(p - start);
}

/* Writes the string of id if the file lacks it. Returns bytes added (0 if none) or -1. */
static int ensure_string(struct sp_trace_writer *w, uint32_t id)
{
	if (!id || bits_has(&w->strings, id))
		return 0;
	const char *s = w->lookup ? w->lookup(w->lookup_ctx, id) : NULL;
	return append_string(w, id, s ? s : "?");
}

/* Appends a stack record: each address as the zigzag of its difference to the previous one of
 * the stack (0 before the first). Returns its encoded size, or -1 with errno ENOMEM. */
static int append_stack(struct sp_trace_writer *w, uint32_t id, const uint64_t *pcs, uint32_t n)
{
	if (raw_reserve(w, 21 + (size_t)n * 10) < 0)
		return -1;
	uint8_t *start = w->raw + w->raw_len, *p = start;
	uint64_t prev = 0;
	*p++ = KIND_STACK;
	p = put_varint(p, id);
	p = put_varint(p, n);
	for (uint32_t i = 0; i < n; i++) {
		p = put_varint(p, zigzag((int64_t)(pcs[i] - prev)));
		prev = pcs[i];
	}
	w->raw_len += (size_t)(p - start);
	w->nrec++;
	bits_set(&w->stacks, id);
	return (int)(p - start);
}

/* The call-stack id that ev names (launch, NCCL call or allocation site), 0 if none. */
static uint32_t event_stack(const struct sp_event *ev)
{
	switch (ev->kind) {
	case SP_EV_API: return ev->u.api.stack;
	case SP_EV_NCCL:
	case SP_EV_COMM: return ev->u.nccl.stack;
	case SP_EV_ALLOC:
	case SP_EV_FREE: return ev->u.mem.stack;
	default: return 0;
	}
}

/* Writes the Python frame record of id (and its strings) if the file lacks it. Returns bytes
 * added (0 if none) or -1 with errno ENOMEM. */
static int ensure_pyframe(struct sp_trace_writer *w, uint32_t id)
{
	uint32_t file = 0, func = 0, line = 0;
	if (!id || id >= MAX_PYFRAME_ID || bits_has(&w->pyframes, id))
		return 0;
	if (w->py_lookup(w->py_ctx, id, &file, &func, &line) < 0)
		file = func = line = 0;
	int a = ensure_string(w, file), b = a < 0 ? -1 : ensure_string(w, func);
	if (a < 0 || b < 0 || raw_reserve(w, 41) < 0)
		return -1;
	uint8_t *start = w->raw + w->raw_len, *p = start;
	*p++ = KIND_PYFRAME;
	p = put_varint(p, id);
	p = put_varint(p, file);
	p = put_varint(p, func);
	p = put_varint(p, line);
	w->raw_len += (size_t)(p - start);
	w->nrec++;
	bits_set(&w->pyframes, id);
	return a + b + (int)(p - start);
}

/* Writes the stack of id if the file lacks it (after the Python frame records it names, in a
 * version 3 file). Returns bytes added (0 if none) or -1. */
static int ensure_stack(struct sp_trace_writer *w, uint32_t id)
{
	if (!id || bits_has(&w->stacks, id))
		return 0;
	uint32_t n = 0;
	int k = 0;
	const uint64_t *pcs = w->stack_lookup ? w->stack_lookup(w->stack_ctx, id, &n) : NULL;
	n = !pcs ? 0 : n > MAX_STACK_DEPTH ? MAX_STACK_DEPTH : n; /* keeps the innermost */
	for (uint32_t i = 0; i < n && w->python && w->py_lookup; i++) {
		int b = SP_IS_PYFRAME(pcs[i]) ? ensure_pyframe(w, SP_PYFRAME_ID(pcs[i])) : 0;
		if (b < 0)
			return -1;
		k += b;
	}
	int s = append_stack(w, id, pcs, n);
	return s < 0 ? -1 : k + s;
}

/* Flushes if the chunk has reached its size. Returns 0 or -1 with errno. */
static int maybe_flush(struct sp_trace_writer *w)
{
	return w->raw_len >= w->chunk_bytes ? sp_trace_flush(w) : 0;
}

/* ---- reading ---- */

static int reader_fail(struct sp_trace_reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	r->failed = 1;
	return -1;
}

/* Reads up to len bytes at off. Returns the count read (short only at end of file), or -1. */
static ssize_t read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Grows *buf to at least len bytes. Returns 0, or -1 (buffer unchanged). */
static int grow(uint8_t **buf, size_t *cap, size_t len)
{
	if (len <= *cap)
		return 0;
	uint8_t *p = realloc(*buf, len);
	if (!p)
		return -1;
	*buf = p;
	*cap = len;
	return 0;
}

/* Loads the next chunk. Returns 1 if loaded, 0 at the end of the file or a torn chunk (sets
 * truncated), -1 on a corrupt chunk or I/O error (message set). */
static int load_chunk(struct sp_trace_reader *r)
{
	uint8_t h[CHUNK_HEADER_SIZE];
	ssize_t n = read_at(r->fd, h, sizeof(h), r->off);
	if (n < 0)
		return reader_fail(r, "read error at offset %llu: %s", (unsigned long long)r->off, strerror(errno));
	if (n == 0)
		return 0;
	if (n < CHUNK_HEADER_SIZE) {
		r->truncated = 1;
		return 0;
	}
	uint32_t magic = (uint32_t)get_le(h, 4), csize = (uint32_t)get_le(h + 4, 4);
	uint32_t rsize = (uint32_t)get_le(h + 8, 4), count = (uint32_t)get_le(h + 12, 4);
	if (magic != CHUNK_MAGIC)
		return reader_fail(r, "bad chunk magic at offset %llu", (unsigned long long)r->off);
	if (rsize > MAX_RAW_CHUNK)
		return reader_fail(r, "chunk at offset %llu claims %u raw bytes (limit %u)", (unsigned long long)r->off,
				   rsize, MAX_RAW_CHUNK);
	if (count > rsize)
		return reader_fail(r, "chunk at offset %llu claims %u records in %u bytes", (unsigned long long)r->off,
				   count, rsize);
	struct stat st;
	if (fstat(r->fd, &st) < 0)
		return reader_fail(r, "fstat: %s", strerror(errno));
	if (r->off + CHUNK_HEADER_SIZE + csize > (uint64_t)st.st_size) {
		r->truncated = 1;
		return 0;
	}
	uint64_t budget = DECODE_FLOOR + DECODE_RATIO * (uint64_t)st.st_size;
	if (r->decoded + rsize > budget)
		return reader_fail(r, "chunk at offset %llu: the file decodes to more than %llu bytes (%llu MiB + %ux "
				   "its size): refused as a decompression bomb", (unsigned long long)r->off,
				   (unsigned long long)budget, DECODE_FLOOR >> 20, DECODE_RATIO);
	if (grow(&r->comp, &r->comp_cap, csize) < 0 || grow(&r->raw, &r->raw_cap, rsize ? rsize : 1) < 0)
		return reader_fail(r, "out of memory for a chunk of %u bytes", rsize);
	n = read_at(r->fd, r->comp, csize, r->off + CHUNK_HEADER_SIZE);
	if (n < 0)
		return reader_fail(r, "read error at offset %llu: %s", (unsigned long long)r->off, strerror(errno));
	if ((size_t)n < csize) {
		r->truncated = 1;
		return 0;
	}
	size_t got = ZSTD_decompressDCtx(r->dctx, r->raw, rsize, r->comp, csize);
	if (ZSTD_isError(got))
		return reader_fail(r, "corrupt chunk at offset %llu: %s", (unsigned long long)r->off,
				   ZSTD_getErrorName(got));
	if (got != rsize)
		return reader_fail(r, "corrupt chunk at offset %llu: %zu bytes instead of %u",
				   (unsigned long long)r->off, got, rsize);
	r->off += CHUNK_HEADER_SIZE + csize;
	r->decoded += rsize;
	r->pos = 0;
	r->len = rsize;
	r->left = count;
	r->prev_start = r->prev_corr = 0;
	return 1;
}

/* The slot of key in m (its key is key or 0). m->cap must be > 0. This function can't fail. */
static uint32_t idmap_slot(const struct idmap *m, uint32_t key)
{
	uint32_t h = (key * 2654435761u) & (m->cap - 1);
	while (m->key[h] && m->key[h] != key)
		h = (h + 1) & (m->cap - 1);
	return h;
}

/* The index of id key, 0 if not mapped. This function can't fail. */
static uint32_t idmap_get(const struct idmap *m, uint32_t key)
{
	if (!m->cap)
		return 0;
	uint32_t h = idmap_slot(m, key);
	return m->key[h] ? m->val[h] : 0;
}

/* Maps key (not mapped yet, nonzero) to val. Returns 0, or -1 out of memory (m unchanged). */
static int idmap_put(struct idmap *m, uint32_t key, uint32_t val)
{
	if ((m->used + 1) * 2 > m->cap) {
		struct idmap g = { .cap = m->cap ? m->cap * 2 : 256 };
		g.key = calloc(g.cap, sizeof(*g.key));
		g.val = malloc(g.cap * sizeof(*g.val));
		if (!g.key || !g.val) {
			free(g.key);
			free(g.val);
			return -1;
		}
		for (uint32_t i = 0; i < m->cap; i++)
			if (m->key[i]) {
				uint32_t h = idmap_slot(&g, m->key[i]);
				g.key[h] = m->key[i];
				g.val[h] = m->val[i];
			}
		g.used = m->used;
		free(m->key);
		free(m->val);
		*m = g;
	}
	uint32_t h = idmap_slot(m, key);
	m->key[h] = key;
	m->val[h] = val;
	m->used++;
	return 0;
}

/* The index of id fid (1 <= fid < limit) in a table of elsize-byte entries *tab (each starting
 * with its uint32_t id) with *n indexes used and *cap allocated, giving it the next index
 * (entry zeroed but for its id) on its first appearance.
 * Returns the index (>= 1), or 0 with a message set: fid out of range, or out of memory. */
static uint32_t dense_id(struct sp_trace_reader *r, const char *what, struct idmap *m, uint32_t fid, uint32_t limit,
			 void **tab, uint32_t *n, uint32_t *cap, size_t elsize)
{
	if (!fid || fid >= limit) {
		reader_fail(r, "%s id %u out of range (limit %u)", what, fid, limit);
		return 0;
	}
	uint32_t id = idmap_get(m, fid);
	if (id)
		return id;
	id = *n + 1;
	if (id >= *cap) {
		size_t c = *cap ? (size_t)*cap * 2 : 256;
		uint8_t *t = realloc(*tab, c * elsize);
		if (!t) {
			reader_fail(r, "out of memory for the %s table", what);
			return 0;
		}
		memset(t + (size_t)*cap * elsize, 0, (c - *cap) * elsize);
		*tab = t;
		*cap = (uint32_t)c;
	}
	if (idmap_put(m, fid, id) < 0) {
		reader_fail(r, "out of memory for the %s table", what);
		return 0;
	}
	memcpy((uint8_t *)*tab + (size_t)id * elsize, &fid, sizeof(fid));
	*n = id;
	return id;
}

static uint32_t string_id(struct sp_trace_reader *r, uint32_t fid)
{
	return dense_id(r, "string", &r->strmap, fid, MAX_STRING_ID, (void **)&r->str, &r->nstr, &r->strcap,
			sizeof(*r->str));
}

static uint32_t stack_id(struct sp_trace_reader *r, uint32_t fid)
{
	return dense_id(r, "stack", &r->stkmap, fid, MAX_STACK_ID, (void **)&r->stk, &r->nstk, &r->stkcap,
			sizeof(*r->stk));
}

/* Absorbs a string record (kind byte already read). Returns 0, or -1 on a bad record. */
static int read_string(struct sp_trace_reader *r, const uint8_t **p, const uint8_t *end)
{
	uint64_t fid, len;
	if (get_varint(p, end, &fid) < 0 || get_varint(p, end, &len) < 0 || len > (uint64_t)(end - *p))
		return reader_fail(r, "corrupt string record");
	if (len > MAX_STRING_BYTES)
		return reader_fail(r, "string of %llu bytes (limit %u)", (unsigned long long)len, MAX_STRING_BYTES);
	uint32_t i = string_id(r, fid > UINT32_MAX ? UINT32_MAX : (uint32_t)fid);
	if (!i)
		return -1;
	uint64_t old = r->str[i].s ? strlen(r->str[i].s) : 0;
	if (r->str_bytes - old + len > MAX_STRING_TOTAL)
		return reader_fail(r, "strings exceed %u bytes in all", MAX_STRING_TOTAL);
	char *s = malloc(len + 1);
	if (!s)
		return reader_fail(r, "out of memory for the string table");
	memcpy(s, *p, len);
	s[len] = 0;
	*p += len;
	free(r->str[i].s);
	r->str[i].s = s;
	r->str_bytes = r->str_bytes - old + len;
	return 0;
}

/* Absorbs a Python frame record (kind byte already read). Returns 0, or -1 on a bad record. */
static int read_pyframe(struct sp_trace_reader *r, const uint8_t **p, const uint8_t *end)
{
	uint64_t id, file, func, line;
	if (get_varint(p, end, &id) < 0 || get_varint(p, end, &file) < 0 || get_varint(p, end, &func) < 0 ||
	    get_varint(p, end, &line) < 0)
		return reader_fail(r, "corrupt python frame record");
	if (!id || id >= MAX_PYFRAME_ID || file >= MAX_STRING_ID || func >= MAX_STRING_ID || line > UINT32_MAX)
		return reader_fail(r, "python frame %llu out of range", (unsigned long long)id);
	uint32_t i = dense_id(r, "python frame", &r->pymap, (uint32_t)id, MAX_PYFRAME_ID, (void **)&r->py, &r->npy,
			      &r->pycap, sizeof(*r->py));
	if (!i)
		return -1;
	r->py[i].file = (uint32_t)file;
	r->py[i].func = (uint32_t)func;
	r->py[i].line = (uint32_t)line;
	if (id >= r->pymax)
		r->pymax = (uint32_t)id + 1;
	return 0;
}

/* Absorbs a stack record (kind byte already read). Returns 0, or -1 on a bad record. */
static int read_stack(struct sp_trace_reader *r, const uint8_t **p, const uint8_t *end)
{
	uint64_t fid, n, v, pc = 0;
	if (get_varint(p, end, &fid) < 0 || get_varint(p, end, &n) < 0)
		return reader_fail(r, "corrupt stack record");
	if (n > MAX_STACK_DEPTH || n > (uint64_t)(end - *p))
		return reader_fail(r, "stack %llu (%llu frames) out of range", (unsigned long long)fid,
				   (unsigned long long)n);
	uint32_t id = stack_id(r, fid > UINT32_MAX ? UINT32_MAX : (uint32_t)fid);
	if (!id)
		return -1;
	if (r->stk_frames - r->stk[id].n + n > MAX_STACK_TOTAL)
		return reader_fail(r, "stacks exceed %u frames in all", MAX_STACK_TOTAL);
	uint64_t *pcs = malloc((n ? n : 1) * sizeof(*pcs));
	if (!pcs)
		return reader_fail(r, "out of memory for the stack table");
	for (uint64_t i = 0; i < n; i++) {
		if (get_varint(p, end, &v) < 0) {
			free(pcs);
			return reader_fail(r, "corrupt stack record");
		}
		pcs[i] = pc += (uint64_t)unzigzag(v);
	}
	r->stk_frames = r->stk_frames - r->stk[id].n + n;
	free(r->stk[id].pcs);
	r->stk[id].pcs = pcs;
	r->stk[id].n = (uint32_t)n;
	return 0;
}

/* Gives the string and stack ids that ev names an index (sp_trace_string_index). Returns 0, or
 * -1 (message set) for an id out of range. */
static int index_event_ids(struct sp_trace_reader *r, const struct sp_event *ev)
{
	uint32_t stack = event_stack(ev);
	if (ev->name && !string_id(r, ev->name))
		return -1;
	if (ev->kind == SP_EV_MARKER && ev->u.marker.domain && !string_id(r, ev->u.marker.domain))
		return -1;
	return stack && !stack_id(r, stack) ? -1 : 0;
}

/* Decodes one event record (kind byte already read). Returns 0, or -1 on a bad record. */
static int read_event(struct sp_trace_reader *r, uint8_t kind, const uint8_t **p, const uint8_t *end,
		      struct sp_event *ev)
{
	uint64_t dstart, dur, v;
	memset(ev, 0, sizeof(*ev));
	ev->kind = kind;
	if (get_varint(p, end, &dstart) < 0 || get_varint(p, end, &dur) < 0)
		return reader_fail(r, "corrupt %s record", sp_ev_kind_name(kind));
	ev->start = r->prev_start + (uint64_t)unzigzag(dstart);
	ev->end = ev->start + (uint64_t)unzigzag(dur);
	r->prev_start = ev->start;
	for (size_t i = 0; i < sizeof(common_fields) / sizeof(common_fields[0]); i++) {
		if (get_varint(p, end, &v) < 0)
			return reader_fail(r, "corrupt %s record", sp_ev_kind_name(kind));
		if (common_fields[i].how == FL_CORR && v) /* modulo 2^64, as the writer's difference */
			r->prev_corr = v = r->prev_corr + (uint64_t)unzigzag(v - 1);
		if (field_set(ev, &common_fields[i], v) < 0)
			return reader_fail(r, "corrupt %s record", sp_ev_kind_name(kind));
	}
	const struct field *kf = kind_fields[kind].f;
	unsigned nk = kind_fields[kind].n;
	if (kind == SP_EV_STEP && r->hdr.version < 4) { /* step records before version 4: number only */
		kf = step_fields_v1;
		nk = 1;
	}
	for (unsigned i = 0; i < nk; i++)
		if (get_varint(p, end, &v) < 0 || field_set(ev, &kf[i], v) < 0)
			return reader_fail(r, "corrupt %s record", sp_ev_kind_name(kind));
	return index_event_ids(r, ev);
}

/* Checks the first n bytes h of a file of fsize bytes. Returns 0, or -1 with a message in err. */
static int check_header(const uint8_t *h, ssize_t n, uint64_t fsize, const char *path, char *err, size_t errlen)
{
	if (n < 8 || memcmp(h, SP_TRACE_MAGIC, 8)) {
		snprintf(err, errlen, "%s: not a stepprof trace (bad magic)", path);
		return -1;
	}
	if (n < 16) {
		snprintf(err, errlen, "%s: truncated header (%zd bytes)", path, n);
		return -1;
	}
	unsigned version = (unsigned)get_le(h + 8, 2), min_version = (unsigned)get_le(h + 10, 2);
	uint32_t hsize = (uint32_t)get_le(h + 12, 4);
	if (min_version > SP_TRACE_VERSION)
		snprintf(err, errlen,
			 "%s: trace format version %u needs a newer stepprof (it needs a reader of version >= %u; "
			 "this one reads versions %u..%u)",
			 path, version, min_version, SP_TRACE_MIN_VERSION, SP_TRACE_VERSION);
	else if (version < SP_TRACE_MIN_VERSION)
		snprintf(err, errlen, "%s: trace format version %u is too old (this stepprof reads versions %u..%u)",
			 path, version, SP_TRACE_MIN_VERSION, SP_TRACE_VERSION);
	else if (hsize < HEADER_V1_SIZE)
		snprintf(err, errlen, "%s: corrupt header (header size %u < %u)", path, hsize, HEADER_V1_SIZE);
	else if (n < HEADER_V1_SIZE || fsize < hsize)
		snprintf(err, errlen, "%s: truncated header (%llu of %u bytes)", path, (unsigned long long)fsize,
			 hsize);
	else
		return 0;
	return -1;
}

/* ---- exported: writing ---- */

/* Returns NULL with errno set on failure (EEXIST if path exists); nothing is left open or
 * allocated. */
struct sp_trace_writer *sp_trace_create(const char *path, const struct sp_trace_meta *meta,
					sp_string_lookup_fn lookup, void *lookup_ctx, size_t chunk_bytes)
{
	uint8_t h[HEADER_V2_SIZE] = { 0 };
	memcpy(h, SP_TRACE_MAGIC, 8);
	put_le(h + 8, SP_TRACE_VERSION, 2);
	put_le(h + 10, SP_TRACE_WRITE_MIN_VERSION, 2);
	put_le(h + 12, HEADER_V2_SIZE, 4);
	put_le(h + 16, meta->features, 8);
	put_le(h + 24, (uint32_t)meta->pid, 4);
	put_le(h + 28, (uint32_t)meta->rank, 4);
	put_le(h + 32, (uint32_t)meta->world_size, 4);
	put_le(h + 36, (uint32_t)meta->local_rank, 4);
	put_le(h + 40, meta->anchor_mono_ns, 8);
	put_le(h + 48, meta->anchor_real_ns, 8);
	memcpy(h + 56, meta->host, strnlen(meta->host, 63));
	memcpy(h + 120, meta->command, strnlen(meta->command, 255));
	memcpy(h + 376, meta->run_id, strnlen(meta->run_id, 63));
	memcpy(h + 440, meta->producer, strnlen(meta->producer, 31));

	struct sp_trace_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->chunk_bytes = !chunk_bytes ? DEFAULT_CHUNK_BYTES : chunk_bytes > MAX_WRITER_CHUNK ? MAX_WRITER_CHUNK : chunk_bytes;
	w->python = !!(meta->features & SP_FEAT_PYSTACKS);
	w->lookup = lookup;
	w->lookup_ctx = lookup_ctx;
	w->cctx = ZSTD_createCCtx();
	if (!w->cctx || ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1))) {
		ZSTD_freeCCtx(w->cctx);
		free(w);
		errno = ENOMEM;
		return NULL;
	}
	/* a new file only: never through a link someone planted, never over an earlier trace */
	w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (w->fd < 0 || write_all(w->fd, h, sizeof(h)) < 0) {
		int e = errno;
		if (w->fd >= 0) {
			close(w->fd);
			unlink(path);
		}
		ZSTD_freeCCtx(w->cctx);
		free(w);
		errno = e;
		return NULL;
	}
	w->file_bytes = sizeof(h);
	return w;
}

/* Returns the encoded bytes added (strings included), or -1 with errno: EINVAL for a kind
 * that is not an event kind, ENOMEM, or the error of a chunk write, now or earlier (see
 * sp_trace_flush; the chunk's events are then lost). */
int sp_trace_write(struct sp_trace_writer *w, const struct sp_event *ev)
{
	if (ev->kind == SP_EV_NONE || ev->kind >= SP_EV__COUNT || w->broken) {
		errno = w->broken ? w->broken : EINVAL;
		return -1;
	}
	int ns = ensure_string(w, ev->name), nd = 0, nk = 0;
	if (ns >= 0 && ev->kind == SP_EV_MARKER)
		nd = ensure_string(w, ev->u.marker.domain);
	if (ns >= 0 && nd >= 0)
		nk = ensure_stack(w, event_stack(ev));
	if (ns < 0 || nd < 0 || nk < 0 || raw_reserve(w, MAX_EVENT_BYTES) < 0)
		return -1;
	uint8_t *start = w->raw + w->raw_len, *p = start;
	*p++ = ev->kind;
	p = put_varint(p, zigzag((int64_t)(ev->start - w->prev_start)));
	p = put_varint(p, zigzag((int64_t)(ev->end - ev->start)));
	w->prev_start = ev->start;
	for (size_t i = 0; i < sizeof(common_fields) / sizeof(common_fields[0]); i++) {
		uint64_t v = field_get(ev, &common_fields[i]);
		if (common_fields[i].how == FL_CORR && v) {
			v = 1 + zigzag((int64_t)v - (int64_t)w->prev_corr);
			w->prev_corr = ev->corr;
		}
		p = put_varint(p, v);
	}
	for (unsigned i = 0; i < kind_fields[ev->kind].n; i++)
		p = put_varint(p, field_get(ev, &kind_fields[ev->kind].f[i]));
	w->raw_len += (size_t)(p - start);
	w->nrec++;
	return maybe_flush(w) < 0 ? -1 : ns + nd + nk + (int)(p - start);
}

/* Returns encoded bytes, or -1 with errno (EINVAL for id 0, ENOMEM, or the error of a chunk
 * write, as sp_trace_write). */
int sp_trace_write_string(struct sp_trace_writer *w, uint32_t id, const char *s)
{
	if (!id || w->broken) {
		errno = w->broken ? w->broken : EINVAL;
		return -1;
	}
	int n = append_string(w, id, s);
	return n < 0 || maybe_flush(w) < 0 ? -1 : n;
}

/* This function can't fail. */
void sp_trace_set_stack_lookup(struct sp_trace_writer *w, sp_stack_lookup_fn fn, void *ctx)
{
	w->stack_lookup = fn;
	w->stack_ctx = ctx;
}

/* This function can't fail. */
void sp_trace_set_pyframe_lookup(struct sp_trace_writer *w, sp_pyframe_lookup_fn fn, void *ctx)
{
	w->py_lookup = fn;
	w->py_ctx = ctx;
}

/* Returns encoded bytes, or -1 with errno (EINVAL for id 0 or more than the readable depth,
 * ENOMEM, or the error of a chunk write, as sp_trace_write). */
int sp_trace_write_stack(struct sp_trace_writer *w, uint32_t id, const uint64_t *pcs, uint32_t n)
{
	if (!id || n > MAX_STACK_DEPTH || w->broken) {
		errno = w->broken ? w->broken : EINVAL;
		return -1;
	}
	int k = append_stack(w, id, pcs, n);
	return k < 0 || maybe_flush(w) < 0 ? -1 : k;
}

/* Returns 0, or -1 with errno. After a failed write the file may end in a torn chunk (readers
 * stop there, as at a cut); every later flush then fails the same way without writing, so
 * nothing follows the torn bytes. */
int sp_trace_flush(struct sp_trace_writer *w)
{
	if (w->broken) {
		errno = w->broken;
		return -1;
	}
	if (!w->nrec)
		return 0;
	size_t bound = CHUNK_HEADER_SIZE + ZSTD_compressBound(w->raw_len);
	if (bound > w->out_cap) {
		uint8_t *p = realloc(w->out, bound);
		if (!p)
			return -1;
		w->out = p;
		w->out_cap = bound;
	}
	size_t c = ZSTD_compress2(w->cctx, w->out + CHUNK_HEADER_SIZE, bound - CHUNK_HEADER_SIZE, w->raw,
				  w->raw_len);
	if (ZSTD_isError(c) || c > UINT32_MAX || w->raw_len > UINT32_MAX) {
		errno = EIO;
		return -1;
	}
	put_le(w->out, CHUNK_MAGIC, 4);
	put_le(w->out + 4, c, 4);
	put_le(w->out + 8, w->raw_len, 4);
	put_le(w->out + 12, w->nrec, 4);
	if (write_all(w->fd, w->out, CHUNK_HEADER_SIZE + c) < 0) {
		w->broken = errno ? errno : EIO;
		return -1;
	}
	w->file_bytes += CHUNK_HEADER_SIZE + c;
	w->raw_len = 0;
	w->nrec = 0;
	w->prev_start = w->prev_corr = 0;
	return 0;
}

/* This function can't fail. */
uint64_t sp_trace_file_bytes(const struct sp_trace_writer *w)
{
	return w->file_bytes;
}

/* Returns 0, or -1 with errno if the last flush or close failed; w is freed either way. */
int sp_trace_close(struct sp_trace_writer *w)
{
	int rc = sp_trace_flush(w);
	int e = errno;
	if (close(w->fd) < 0 && rc == 0) {
		rc = -1;
		e = errno;
	}
	ZSTD_freeCCtx(w->cctx);
	free(w->raw);
	free(w->out);
	free(w->strings.bits);
	free(w->stacks.bits);
	free(w->pyframes.bits);
	free(w);
	errno = e;
	return rc;
}

/* ---- exported: reading ---- */

/* Returns NULL with a message in err when the file can't be opened, is not a trace, is cut
 * inside its header, or needs another reader version. */
struct sp_trace_reader *sp_trace_open(const char *path, char *err, size_t errlen)
{
	uint8_t h[HEADER_V2_SIZE];
	struct stat st;
	struct sp_trace_reader *r = NULL;
	/* O_NONBLOCK: a FIFO given as the trace must not hang the open; only a regular file is read */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	ssize_t n = fd < 0 ? -1 : read_at(fd, h, sizeof(h), 0);
	if (n < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (check_header(h, n, (uint64_t)st.st_size, path, err, errlen) < 0)
		goto fail;
	if (!(r = calloc(1, sizeof(*r))) || !(r->dctx = ZSTD_createDCtx())) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	r->fd = fd;
	r->hdr.version = (uint16_t)get_le(h + 8, 2);
	r->hdr.min_version = (uint16_t)get_le(h + 10, 2);
	r->hdr.header_size = (uint32_t)get_le(h + 12, 4);
	struct sp_trace_meta *m = &r->hdr.meta;
	m->features = get_le(h + 16, 8);
	m->pid = (int32_t)get_le(h + 24, 4);
	m->rank = (int32_t)get_le(h + 28, 4);
	m->world_size = (int32_t)get_le(h + 32, 4);
	m->local_rank = (int32_t)get_le(h + 36, 4);
	m->anchor_mono_ns = get_le(h + 40, 8);
	m->anchor_real_ns = get_le(h + 48, 8);
	memcpy(m->host, h + 56, sizeof(m->host) - 1);
	memcpy(m->command, h + 120, sizeof(m->command) - 1);
	if (r->hdr.version >= 2 && r->hdr.header_size >= HEADER_V2_SIZE && n >= HEADER_V2_SIZE) {
		memcpy(m->run_id, h + 376, sizeof(m->run_id) - 1);
		memcpy(m->producer, h + 440, sizeof(m->producer) - 1);
		/* hostile input: these are printed and compared, keep them to printable bytes */
		for (char *p = m->run_id; *p; p++)
			*p = *p > ' ' && *p < 0x7f ? *p : '?';
		for (char *p = m->producer; *p; p++)
			*p = *p >= ' ' && *p < 0x7f ? *p : '?';
	}
	r->off = r->hdr.header_size;
	return r;
fail:
	free(r);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* This function can't fail. */
void sp_trace_progress(const struct sp_trace_reader *r, uint64_t *done, uint64_t *total)
{
	struct stat st;
	*done = r->off;
	*total = fstat(r->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* This function can't fail. */
const struct sp_trace_header *sp_trace_header(const struct sp_trace_reader *r)
{
	return &r->hdr;
}

/* Returns 1 with *ev filled, 0 at the end (or a torn last chunk), -1 on a corrupt chunk; after
 * -1 every call returns -1 until sp_trace_rewind. */
int sp_trace_next(struct sp_trace_reader *r, struct sp_event *ev)
{
	if (r->failed)
		return -1;
	for (;;) {
		if (!r->left) {
			if (r->pos != r->len)
				return reader_fail(r, "chunk before offset %llu has %zu bytes after its last record",
						   (unsigned long long)r->off, r->len - r->pos);
			int rc = load_chunk(r);
			if (rc <= 0)
				return rc;
			continue;
		}
		const uint8_t *p = r->raw + r->pos, *end = r->raw + r->len;
		if (p == end)
			return reader_fail(r, "chunk before offset %llu ends before its last record",
					   (unsigned long long)r->off);
		uint8_t kind = *p++;
		int rc;
		if (kind == KIND_STRING)
			rc = read_string(r, &p, end);
		else if (kind == KIND_STACK)
			rc = read_stack(r, &p, end);
		else if (kind == KIND_PYFRAME && r->hdr.version >= 3)
			rc = read_pyframe(r, &p, end);
		else if (kind == SP_EV_NONE || kind >= SP_EV__COUNT)
			rc = reader_fail(r, "unknown record kind %u in chunk before offset %llu", kind,
					 (unsigned long long)r->off);
		else
			rc = read_event(r, kind, &p, end, ev);
		if (rc < 0)
			return -1;
		r->pos = (size_t)(p - r->raw);
		r->left--;
		if (kind != KIND_STRING && kind != KIND_STACK && kind != KIND_PYFRAME)
			return 1;
	}
}

/* This function can't fail. */
const char *sp_trace_string(const struct sp_trace_reader *r, uint32_t id)
{
	uint32_t i = id ? idmap_get(&r->strmap, id) : 0;
	return i && r->str[i].s ? r->str[i].s : "?";
}

/* This function can't fail. */
uint32_t sp_trace_string_index(const struct sp_trace_reader *r, uint32_t id)
{
	return id ? idmap_get(&r->strmap, id) : 0;
}

/* This function can't fail. */
uint32_t sp_trace_string_id(const struct sp_trace_reader *r, uint32_t index)
{
	return index && index <= r->nstr ? r->str[index].id : 0;
}

/* This function can't fail. */
uint32_t sp_trace_stack_index(const struct sp_trace_reader *r, uint32_t id)
{
	return id ? idmap_get(&r->stkmap, id) : 0;
}

/* This function can't fail. */
uint32_t sp_trace_stack_id(const struct sp_trace_reader *r, uint32_t index)
{
	return index && index <= r->nstk ? r->stk[index].id : 0;
}

/* This function can't fail. */
const uint64_t *sp_trace_stack(const struct sp_trace_reader *r, uint32_t id, uint32_t *n)
{
	uint32_t i = id ? idmap_get(&r->stkmap, id) : 0;
	*n = i ? r->stk[i].n : 0;
	return *n ? r->stk[i].pcs : NULL;
}

/* Returns 0, or -1 if id is undefined. This function can't fail. */
int sp_trace_pyframe(const struct sp_trace_reader *r, uint32_t id, const char **file, const char **func,
		     uint32_t *line)
{
	uint32_t i = idmap_get(&r->pymap, id);
	if (!i)
		return -1;
	*file = sp_trace_string(r, r->py[i].file);
	*func = sp_trace_string(r, r->py[i].func);
	*line = r->py[i].line;
	return 0;
}

/* This function can't fail. */
uint32_t sp_trace_pyframe_ids(const struct sp_trace_reader *r)
{
	return r->pymax;
}

/* This function can't fail. */
int sp_trace_truncated(const struct sp_trace_reader *r)
{
	return r->truncated;
}

/* The message of the last -1 from sp_trace_next, or "no error". This function can't fail. */
const char *sp_trace_error(const struct sp_trace_reader *r)
{
	return r->err[0] ? r->err : "no error";
}

/* Returns 0. This function can't fail (the file is re-read lazily by sp_trace_next). */
int sp_trace_rewind(struct sp_trace_reader *r)
{
	r->off = r->hdr.header_size;
	r->pos = r->len = 0;
	r->left = 0;
	r->decoded = 0;
	r->truncated = r->failed = 0;
	r->err[0] = 0;
	return 0;
}

/* Frees everything; r may be NULL. This function can't fail. */
void sp_trace_close_reader(struct sp_trace_reader *r)
{
	if (!r)
		return;
	for (uint32_t i = 0; i < r->strcap; i++)
		free(r->str[i].s);
	free(r->str);
	for (uint32_t i = 0; i < r->stkcap; i++)
		free(r->stk[i].pcs);
	free(r->stk);
	free(r->py);
	free(r->pymap.key);
	free(r->pymap.val);
	free(r->strmap.key);
	free(r->strmap.val);
	free(r->stkmap.key);
	free(r->stkmap.val);
	free(r->raw);
	free(r->comp);
	ZSTD_freeDCtx(r->dctx);
	close(r->fd);
	free(r);
}
