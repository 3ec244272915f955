/* SPDX-License-Identifier: MIT */
/* trace_write.c - writes the trace file (docs/FORMAT.md): the header, then chunks of records (one
 * zstd frame each), with every string, call stack and Python frame written once, before the
 * first record that names it. Runs on the collector's writer thread only and never prints;
 * records are encoded into the chunk's columns by columns.c. */
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
#include "fileio.h"
#include "layout.h"
#include "trace.h"

/* A growable bitmap of ids already written (strings, stacks). */
struct idbits {
	uint8_t *bits;
	uint32_t n;             /* bits allocated */
};

struct sp_trace_writer {
	int fd;
	ZSTD_CCtx *cctx;
	struct sp_enc *enc;     /* the chunk being built (columns.c) */
	size_t chunk_bytes;     /* raw size that triggers a flush */
	uint32_t nrec;          /* records in the chunk, strings included */
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

/* ---- writing ---- */

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
	uint8_t *start = sp_enc_table(w->enc, KIND_STRING, len + 20), *p = start;
	if (!p)
		return -1;
	p = put_varint(p, id);
	p = put_varint(p, len);
	memcpy(p, s, len);
	p += len;
	sp_enc_table_end(w->enc, p);
	w->nrec++;
	bits_set(&w->strings, id);
	return 1 + (int)(p - start);
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
	uint8_t *start = sp_enc_table(w->enc, KIND_STACK, 20 + (size_t)n * 10), *p = start;
	uint64_t prev = 0;
	if (!p)
		return -1;
	p = put_varint(p, id);
	p = put_varint(p, n);
	for (uint32_t i = 0; i < n; i++) {
		p = put_varint(p, zigzag((int64_t)(pcs[i] - prev)));
		prev = pcs[i];
	}
	sp_enc_table_end(w->enc, p);
	w->nrec++;
	bits_set(&w->stacks, id);
	return 1 + (int)(p - start);
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
	uint8_t *start = a < 0 || b < 0 ? NULL : sp_enc_table(w->enc, KIND_PYFRAME, 40), *p = start;
	if (!p)
		return -1;
	p = put_varint(p, id);
	p = put_varint(p, file);
	p = put_varint(p, func);
	p = put_varint(p, line);
	sp_enc_table_end(w->enc, p);
	w->nrec++;
	bits_set(&w->pyframes, id);
	return a + b + 1 + (int)(p - start);
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
	return sp_enc_bytes(w->enc) >= w->chunk_bytes ? sp_trace_flush(w) : 0;
}

/* ---- exported: writing ---- */

/* Returns NULL with errno set on failure (EEXIST if path exists); nothing is left open or
 * allocated. */
struct sp_trace_writer *sp_trace_create(const char *path, const struct sp_trace_meta *meta, sp_string_lookup_fn lookup,
					void *lookup_ctx, size_t chunk_bytes)
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
	w->chunk_bytes = !chunk_bytes                     ? DEFAULT_CHUNK_BYTES
			 : chunk_bytes > MAX_WRITER_CHUNK ? MAX_WRITER_CHUNK
							  : chunk_bytes;
	w->python = !!(meta->features & SP_FEAT_PYSTACKS);
	w->lookup = lookup;
	w->lookup_ctx = lookup_ctx;
	w->cctx = ZSTD_createCCtx();
	w->enc = sp_enc_new();
	if (!w->cctx || !w->enc || ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1))) {
		ZSTD_freeCCtx(w->cctx);
		sp_enc_free(w->enc);
		free(w);
		errno = ENOMEM;
		return NULL;
	}
	/* a new file only: never through a link someone planted, never over an earlier trace */
	w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (w->fd < 0 || sp_write_all(w->fd, h, sizeof(h)) < 0) {
		int e = errno;
		if (w->fd >= 0) {
			close(w->fd);
			unlink(path);
		}
		ZSTD_freeCCtx(w->cctx);
		sp_enc_free(w->enc);
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
	if (sp_enc_full(w->enc) && sp_trace_flush(w) < 0) /* the chunk's templates are all taken */
		return -1;
	int ns = ensure_string(w, ev->name), nd = 0, nh = 0, nk = 0, n = 0;
	if (ns >= 0 && ev->kind == SP_EV_MARKER)
		nd = ensure_string(w, ev->u.marker.domain);
	if (ns >= 0 && nd >= 0 && ev->kind == SP_EV_MARKER)
		nh = ensure_string(w, ev->u.marker.shapes);
	if (ns >= 0 && nd >= 0 && nh >= 0)
		nk = ensure_stack(w, sp_ev_stack(ev));
	if (ns < 0 || nd < 0 || nh < 0 || nk < 0 || (n = sp_enc_event(w->enc, ev)) < 0)
		return -1;
	w->nrec++;
	return maybe_flush(w) < 0 ? -1 : ns + nd + nh + nk + n;
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
	size_t bound = CHUNK_HEADER_SIZE + ZSTD_compressBound(sp_enc_bytes(w->enc) + 200);
	if (bound > w->out_cap) {
		uint8_t *p = realloc(w->out, bound);
		if (!p)
			return -1;
		w->out = p;
		w->out_cap = bound;
	}
	const uint8_t *raw;
	size_t len;
	if (sp_enc_finish(w->enc, &raw, &len) < 0)
		return -1;
	uint32_t nrec = w->nrec;
	w->nrec = 0;
	size_t c = ZSTD_compress2(w->cctx, w->out + CHUNK_HEADER_SIZE, bound - CHUNK_HEADER_SIZE, raw, len);
	if (ZSTD_isError(c) || c > UINT32_MAX || len > UINT32_MAX) { /* the chunk is lost */
		errno = EIO;
		return -1;
	}
	put_le(w->out, CHUNK_MAGIC, 4);
	put_le(w->out + 4, c, 4);
	put_le(w->out + 8, len, 4);
	put_le(w->out + 12, nrec, 4);
	if (sp_write_all(w->fd, w->out, CHUNK_HEADER_SIZE + c) < 0) {
		w->broken = errno ? errno : EIO;
		return -1;
	}
	w->file_bytes += CHUNK_HEADER_SIZE + c;
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
	sp_enc_free(w->enc);
	free(w->out);
	free(w->strings.bits);
	free(w->stacks.bits);
	free(w->pyframes.bits);
	free(w);
	errno = e;
	return rc;
}
