/* SPDX-License-Identifier: MIT */
/* tokens.c - the token stream file format, both directions (see tokens.h, docs/FORMAT.md).
 * Header: fixed little-endian fields. Chunk: u32 raw size, u32 compressed size, one zstd frame.
 * Record: one byte (kind | flags); kind 0 defines a name (varint id, varint length, bytes);
 * a token has varint name id, zigzag varint time delta (from the chunk's previous token; the
 * first token of a chunk holds its absolute time) and varint thread id. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>
#include "bytes.h"
#include "fileio.h"
#include "tokens.h"

#define HEADER_SIZE 808u          /* bytes of the version-1 header */
#define CHUNK_RAW (256u << 10)    /* raw bytes per chunk (a chunk is written when this fills) */
#define CHUNK_MAX_RAW (64u << 20) /* the reader refuses larger chunks (hostile sizes) */
#define RECORD_MAX (16 + 4096)    /* largest record: a name definition of a 4 KiB string */
#define MAX_NAME_ID (1u << 22)    /* name ids the reader accepts (a hostile id costs at most 32 MiB) */
#define ZLEVEL 3    /* fast: the producer compresses on an application thread */

/* header field offsets */
enum {
	H_MAGIC = 0,
	H_VERSION = 8,
	H_MINVER = 10,
	H_SIZE = 12,
	H_PID = 16,
	H_MONO = 24,
	H_REAL = 32,
	H_STEPPROF = 40,
	H_HOST = 72,
	H_TRUTH = 136,
	H_COMMAND = 264,
	H_END = 776
};

const char *sp_tok_kind_name(int kind)
{
	static const char *const names[] = { "?",        "kernel", "api",    "graph", "nccl",   "nvtx_push",
					     "nvtx_pop", "truth",  "pyhook", "optim", "scaler", "pycall" };
	return kind > 0 && kind <= SP_TOK_KIND_MAX ? names[kind] : "?";
}

/* ---- writing ---- */

struct sp_tok_writer {
	int fd;
	int dead;               /* a write failed: drop everything */
	uint8_t *raw;           /* the chunk being built */
	size_t len;
	uint8_t *out;           /* compressed chunk */
	size_t out_cap;
	uint64_t prev_ts;       /* time of the chunk's previous token */
	int chunk_has_token;
	uint8_t *defined;       /* defined[id] = 1 once the name is in the file */
	uint32_t defined_cap;
	ZSTD_CCtx *cctx;
};

struct sp_tok_writer *sp_tok_create(const char *path, const struct sp_tok_header *h, char *err, size_t errlen)
{
	uint8_t hdr[HEADER_SIZE] = { 0 };
	struct sp_tok_writer *w = calloc(1, sizeof *w);
	if (!w || !(w->raw = malloc(CHUNK_RAW + RECORD_MAX)) || !(w->cctx = ZSTD_createCCtx())) {
		snprintf(err, errlen, "no memory");
		goto fail;
	}
	w->out_cap = ZSTD_compressBound(CHUNK_RAW + RECORD_MAX) + 8;
	if (!(w->out = malloc(w->out_cap))) {
		snprintf(err, errlen, "no memory");
		goto fail;
	}
	ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, ZLEVEL);
	ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
	/* never another process's file: O_EXCL (the caller picks another name on EEXIST) */
	w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(e));
		errno = e;
		goto fail;
	}
	memcpy(hdr + H_MAGIC, SP_TOK_MAGIC, 8);
	put_le(hdr + H_VERSION, SP_TOK_VERSION, 2);
	put_le(hdr + H_MINVER, SP_TOK_WRITE_MIN, 2);
	put_le(hdr + H_SIZE, HEADER_SIZE, 4);
	put_le(hdr + H_PID, (uint32_t)h->pid, 4);
	put_le(hdr + H_MONO, h->anchor_mono_ns, 8);
	put_le(hdr + H_REAL, h->anchor_real_ns, 8);
	memcpy(hdr + H_STEPPROF, h->stepprof, strnlen(h->stepprof, 31));
	memcpy(hdr + H_HOST, h->host, strnlen(h->host, 63));
	memcpy(hdr + H_TRUTH, h->truth, strnlen(h->truth, 127));
	memcpy(hdr + H_COMMAND, h->command, strnlen(h->command, 511));
	if (sp_write_all(w->fd, hdr, sizeof hdr) < 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		close(w->fd);
		goto fail;
	}
	return w;
fail:
	if (w) {
		ZSTD_freeCCtx(w->cctx);
		free(w->raw);
		free(w->out);
		free(w);
	}
	return NULL;
}

int sp_tok_flush(struct sp_tok_writer *w)
{
	if (w->dead)
		return -1;
	if (!w->len)
		return 0;
	size_t c = ZSTD_compress2(w->cctx, w->out + 8, w->out_cap - 8, w->raw, w->len);
	if (ZSTD_isError(c)) {
		w->dead = 1;
		return -1;
	}
	put_le(w->out, w->len, 4);
	put_le(w->out + 4, c, 4);
	w->len = 0;
	w->chunk_has_token = 0;
	if (sp_write_all(w->fd, w->out, c + 8) < 0) {
		w->dead = 1;
		return -1;
	}
	return 0;
}

/* Defines name id in the file if it is not yet. Returns 0 or -1 (no memory). */
static int define_name(struct sp_tok_writer *w, uint32_t id, const char *name)
{
	if (!id)
		return 0;
	if (id >= w->defined_cap) {
		uint32_t cap = w->defined_cap ? w->defined_cap : 1024;
		while (cap <= id)
			cap *= 2;
		uint8_t *d = realloc(w->defined, cap);
		if (!d)
			return -1;
		memset(d + w->defined_cap, 0, cap - w->defined_cap);
		w->defined = d;
		w->defined_cap = cap;
	}
	if (w->defined[id])
		return 0;
	w->defined[id] = 1;
	size_t n = strnlen(name ? name : "?", 4096);
	uint8_t *p = w->raw + w->len;
	*p++ = 0;
	p = put_varint(p, id);
	p = put_varint(p, n);
	memcpy(p, name ? name : "?", n);
	w->len = (size_t)(p + n - w->raw);
	return 0;
}

int sp_tok_add(struct sp_tok_writer *w, const struct sp_token *t, const char *name)
{
	if (w->dead)
		return -1;
	if (define_name(w, t->name, name) < 0) {
		w->dead = 1;
		return -1;
	}
	uint8_t *p = w->raw + w->len;
	int64_t dt = w->chunk_has_token ? (int64_t)(t->ts - w->prev_ts) : (int64_t)t->ts;
	*p++ = (uint8_t)((t->kind & 0x0f) | (t->flags & 0xf0));
	p = put_varint(p, t->name);
	p = put_varint(p, zigzag(dt));
	p = put_varint(p, t->tid);
	w->len = (size_t)(p - w->raw);
	w->prev_ts = t->ts;
	w->chunk_has_token = 1;
	return w->len >= CHUNK_RAW ? sp_tok_flush(w) : 0;
}

int sp_tok_close(struct sp_tok_writer *w)
{
	if (!w)
		return 0;
	int r = sp_tok_flush(w);
	if (close(w->fd) < 0)
		r = -1;
	ZSTD_freeCCtx(w->cctx);
	free(w->raw);
	free(w->out);
	free(w->defined);
	free(w);
	return r;
}

/* ---- reading ---- */

struct sp_tok_reader {
	FILE *f;
	struct sp_tok_header h;
	uint8_t *raw, *comp;     /* the current chunk, decoded; its compressed bytes */
	size_t raw_cap, comp_cap;
	const uint8_t *p, *end;  /* unread part of the chunk */
	uint64_t prev_ts;
	int chunk_has_token;
	int truncated;
	char **names;            /* names[id], NULL if undefined */
	uint32_t names_cap;
	ZSTD_DCtx *dctx;
};

struct sp_tok_reader *sp_tok_open(const char *path, char *err, size_t errlen)
{
	uint8_t hdr[HEADER_SIZE];
	struct sp_tok_reader *r = calloc(1, sizeof *r);
	if (!r || !(r->dctx = ZSTD_createDCtx())) {
		snprintf(err, errlen, "no memory");
		free(r);
		return NULL;
	}
	if (!(r->f = fopen(path, "rbe"))) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (fread(hdr, 1, H_END, r->f) != H_END || memcmp(hdr, SP_TOK_MAGIC, 8)) {
		snprintf(err, errlen, "%s: not a stepprof token stream (STEPPROF_RECORD_TOKENS)", path);
		goto fail;
	}
	r->h.version = (uint16_t)get_le(hdr + H_VERSION, 2);
	r->h.min_version = (uint16_t)get_le(hdr + H_MINVER, 2);
	r->h.header_size = (uint32_t)get_le(hdr + H_SIZE, 4);
	if (r->h.min_version > SP_TOK_VERSION || r->h.version < SP_TOK_MIN_VERSION) {
		snprintf(err, errlen,
			 "%s: token stream version %u (needs a reader of version >= %u); this stepprof "
			 "reads versions %u..%u",
			 path, r->h.version, r->h.min_version, SP_TOK_MIN_VERSION, SP_TOK_VERSION);
		goto fail;
	}
	if (r->h.header_size < H_END || r->h.header_size > (1u << 20) || fseek(r->f, r->h.header_size, SEEK_SET)) {
		snprintf(err, errlen, "%s: bad header size %u", path, r->h.header_size);
		goto fail;
	}
	r->h.pid = (int32_t)get_le(hdr + H_PID, 4);
	r->h.anchor_mono_ns = get_le(hdr + H_MONO, 8);
	r->h.anchor_real_ns = get_le(hdr + H_REAL, 8);
	memcpy(r->h.stepprof, hdr + H_STEPPROF, 31);
	memcpy(r->h.host, hdr + H_HOST, 63);
	memcpy(r->h.truth, hdr + H_TRUTH, 127);
	memcpy(r->h.command, hdr + H_COMMAND, 511);
	return r;
fail:
	sp_tok_close_reader(r);
	return NULL;
}

const struct sp_tok_header *sp_tok_get_header(const struct sp_tok_reader *r)
{
	return &r->h;
}

/* Reads and decodes the next chunk. Returns 1, 0 at the end of the file, -1 if damaged. */
static int next_chunk(struct sp_tok_reader *r, char *err, size_t errlen)
{
	uint8_t ch[8];
	size_t got = fread(ch, 1, 8, r->f);
	if (got == 0)
		return 0;
	uint32_t rsize = (uint32_t)get_le(ch, 4), csize = (uint32_t)get_le(ch + 4, 4);
	if (got < 8) {
		r->truncated = 1;
		return 0;
	}
	if (rsize > CHUNK_MAX_RAW || csize > ZSTD_compressBound(CHUNK_MAX_RAW)) {
		snprintf(err, errlen, "damaged chunk (sizes %u, %u)", rsize, csize);
		return -1;
	}
	if (sp_buf_grow(&r->comp, &r->comp_cap, csize) < 0 || sp_buf_grow(&r->raw, &r->raw_cap, rsize) < 0)
		return snprintf(err, errlen, "no memory"), -1;
	if (fread(r->comp, 1, csize, r->f) != csize) {
		r->truncated = 1;
		return 0;
	}
	size_t n = ZSTD_decompressDCtx(r->dctx, r->raw, rsize, r->comp, csize);
	if (ZSTD_isError(n) || n != rsize) {
		snprintf(err, errlen, "damaged chunk: %s", ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size mismatch");
		return -1;
	}
	r->p = r->raw;
	r->end = r->raw + n;
	r->chunk_has_token = 0;
	return 1;
}

/* Reads a name definition at r->p (after its kind byte). Returns 0 or -1 (damaged). */
static int read_name(struct sp_tok_reader *r)
{
	uint64_t id, len;
	if (get_varint(&r->p, r->end, &id) || get_varint(&r->p, r->end, &len) || !id || id >= MAX_NAME_ID ||
	    len > (uint64_t)(r->end - r->p))
		return -1;
	if (id >= r->names_cap) {
		uint32_t cap = r->names_cap ? r->names_cap : 1024;
		while (cap <= id)
			cap *= 2;
		char **n = realloc(r->names, cap * sizeof *n);
		if (!n)
			return -1;
		memset(n + r->names_cap, 0, (cap - r->names_cap) * sizeof *n);
		r->names = n;
		r->names_cap = cap;
	}
	char *s = malloc(len + 1);
	if (!s)
		return -1;
	memcpy(s, r->p, len);
	s[len] = 0;
	for (size_t i = 0; i < len; i++) /* hostile bytes stay printable */
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			s[i] = '?';
	free(r->names[id]);
	r->names[id] = s;
	r->p += len;
	return 0;
}

int sp_tok_next(struct sp_tok_reader *r, struct sp_token *t, char *err, size_t errlen)
{
	for (;;) {
		if (r->p >= r->end) {
			int c = next_chunk(r, err, errlen);
			if (c <= 0)
				return c;
			continue;
		}
		uint8_t b = *r->p++;
		uint64_t name, dt, tid;
		if ((b & 0x0f) == 0) {
			if (read_name(r) < 0)
				return snprintf(err, errlen, "damaged name record"), -1;
			continue;
		}
		if ((b & 0x0f) > SP_TOK_KIND_MAX || get_varint(&r->p, r->end, &name) ||
		    get_varint(&r->p, r->end, &dt) || get_varint(&r->p, r->end, &tid) || name >= MAX_NAME_ID)
			return snprintf(err, errlen, "damaged token record"), -1;
		int64_t d = unzigzag(dt);
		t->ts = r->chunk_has_token ? r->prev_ts + (uint64_t)d : (uint64_t)d;
		r->prev_ts = t->ts;
		r->chunk_has_token = 1;
		t->kind = b & 0x0f;
		t->flags = b & (SP_TOKF_SYNC | SP_TOKF_DRIVER | SP_TOKF_RANGE); /* never MATCHED */
		t->name = (uint32_t)name;
		t->tid = (uint32_t)tid;
		return 1;
	}
}

const char *sp_tok_name(const struct sp_tok_reader *r, uint32_t id)
{
	return id < r->names_cap ? r->names[id] : NULL;
}

int sp_tok_truncated(const struct sp_tok_reader *r)
{
	return r->truncated;
}

void sp_tok_close_reader(struct sp_tok_reader *r)
{
	if (!r)
		return;
	if (r->f)
		fclose(r->f);
	for (uint32_t i = 0; i < r->names_cap; i++)
		free(r->names[i]);
	free(r->names);
	free(r->raw);
	free(r->comp);
	ZSTD_freeDCtx(r->dctx);
	free(r);
}
