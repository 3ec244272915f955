/* SPDX-License-Identifier: MIT */
/* trace.h - the per-rank trace file format: the only module that writes or reads it.
 * A file is a fixed header followed by chunks; each chunk is one zstd frame of encoded
 * records that decompresses on its own, so a file cut at any byte reads up to its last
 * whole chunk. Strings and call stacks are records too (id -> bytes, id -> return addresses)
 * and come before their first use.
 * docs/FORMAT.md is the byte-level description; keep the two in step. */
#ifndef SP_TRACE_H
#define SP_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include "event.h"

#define SP_TRACE_MAGIC "STEPPROF"
/* What the writer writes, and the newest this reader reads; 2: run id and producer in the header,
 * 3: Python frame records (0xFD) and tagged stack frames, 4: step records say how the step was
 * found, 5: a chunk's records are columns, coded against templates and predictions, 6: marker
 * records carry an op's or a module's flags, shapes and sequence number (docs/FORMAT.md) */
#define SP_TRACE_VERSION 6
#define SP_TRACE_MIN_VERSION 1    /* the oldest version this reader reads */
/* the oldest reader that can read what the writer writes (version 6 added fields to marker records) */
#define SP_TRACE_WRITE_MIN_VERSION 6

/* feature bits in the header: what the producer had switched on */
#define SP_FEAT_KERNELS (1ull << 0)
#define SP_FEAT_MEMCPY (1ull << 1)
#define SP_FEAT_MEMSET (1ull << 2)
#define SP_FEAT_SYNC (1ull << 3)
#define SP_FEAT_RUNTIME_API (1ull << 4)
#define SP_FEAT_DRIVER_API (1ull << 5)
#define SP_FEAT_NCCL (1ull << 6)
#define SP_FEAT_DEVICE_MEM (1ull << 7)
#define SP_FEAT_HOST_MALLOC (1ull << 8)
#define SP_FEAT_STACKS (1ull << 9)
#define SP_FEAT_SHAPES (1ull << 10)
#define SP_FEAT_NVTX (1ull << 11)
#define SP_FEAT_PYSTACKS (1ull << 12) /* stacks may hold Python frames (format version 3 and later) */
#define SP_FEAT_OPS (1ull << 13) /* torch operators' ranges in windows ([activities] ops, version 6) */
#define SP_FEAT_MODULES (1ull << 14) /* nn.Module ranges in windows ([activities] modules, version 6) */

/* A frame of a stack that is a Python frame, not a return address: the tag in the top 16 bits
 * (no canonical user-space address has them) and a Python frame id (sp_trace_pyframe) below. */
#define SP_PYFRAME_TAG 0xfffe000000000000ull
#define SP_IS_PYFRAME(pc) (((pc) >> 48) == 0xfffeu)
#define SP_PYFRAME_ID(pc) ((uint32_t)(pc))
/* A stack frame that is a mark, not an address (top 16 bits 0xfffd): SP_FRAME_BACKWARD stands
 * between the frames of a thread that ran no Python (PyTorch's autograd thread launching a backward
 * kernel), inner to it, and the Python frames borrowed from the thread blocked in backward(), outer
 * to it: the stack's work is autograd's backward pass of that Python line. Readers that predate it
 * show an unknown address. */
#define SP_FRAME_BACKWARD 0xfffd000000000001ull
#define SP_IS_MARK(pc) (((pc) >> 48) == 0xfffdu)

/* What the producer knows about itself; copied into the file header. */
struct sp_trace_meta {
	uint64_t features;      /* SP_FEAT_* */
	int32_t pid;
	int32_t rank;           /* -1 if the process has no rank */
	int32_t world_size;     /* -1 if unknown */
	int32_t local_rank;     /* -1 if unknown */
	uint64_t anchor_mono_ns;/* CLOCK_MONOTONIC and CLOCK_REALTIME read together at open */
	uint64_t anchor_real_ns;
	char host[64];          /* NUL-terminated host name */
	char command[256];      /* program command line, NUL-terminated, truncated */
	/* version 2 (empty when reading a version-1 file) */
	char run_id[64];        /* the run this process belongs to, shared by all its ranks */
	char producer[32];      /* the writer's version, e.g. "stepprof 0.2.0" */
};

/* The decoded header, as the reader returns it. */
struct sp_trace_header {
	uint16_t version;
	uint16_t min_version;
	uint32_t header_size;
	struct sp_trace_meta meta;
};

/* ---- writing ---- */
struct sp_trace_writer;

/* Called by the writer when an event names a string id it has not written yet; returns
 * the string (NUL-terminated) or NULL if unknown (the id is then written as "?"). */
typedef const char *(*sp_string_lookup_fn)(void *ctx, uint32_t id);
/* Called by the writer when an event names a call-stack id it has not written yet; returns the
 * stack's return addresses (innermost first) and their count in *n, or NULL if unknown (the id
 * is then written as an empty stack). */
typedef const uint64_t *(*sp_stack_lookup_fn)(void *ctx, uint32_t id, uint32_t *n);
/* Called by the writer when a stack names a Python frame id it has not written yet; fills the
 * string ids of the frame's file and function and its line, and returns 0, or -1 if unknown
 * (the frame is then written as file "?", function "?", line 0). */
typedef int (*sp_pyframe_lookup_fn)(void *ctx, uint32_t id, uint32_t *file, uint32_t *func, uint32_t *line);

/* Creates the file at path, which must not exist (O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode 0640
 * less the umask: never truncates an earlier trace, never follows a link), and writes the header.
 * chunk_bytes is the raw size at which a chunk is compressed and written (0 = default 256 KiB,
 * at most 1 MiB). Writes version SP_TRACE_VERSION (min_version SP_TRACE_WRITE_MIN_VERSION). Returns NULL with errno set on failure (EEXIST: path exists); nothing is left
 * open. */
struct sp_trace_writer *sp_trace_create(const char *path, const struct sp_trace_meta *meta, sp_string_lookup_fn lookup,
					void *lookup_ctx, size_t chunk_bytes);
/* Sets the lookup for call-stack ids (u.api.stack, u.nccl.stack, u.mem.stack); without one,
 * stacks that events name are written empty. This function can't fail. */
void sp_trace_set_stack_lookup(struct sp_trace_writer *w, sp_stack_lookup_fn fn, void *ctx);
/* Sets the lookup for Python frame ids that stacks name (version 2 files only; in a version 1
 * file, or without a lookup, such frames are written as plain values). This function can't fail. */
void sp_trace_set_pyframe_lookup(struct sp_trace_writer *w, sp_pyframe_lookup_fn fn, void *ctx);
/* Encodes one event into the current chunk (writing strings and stacks it names first). Returns
 * the number of encoded bytes added (> 0), or -1 with errno on a write failure of a full chunk. */
int sp_trace_write(struct sp_trace_writer *w, const struct sp_event *ev);
/* Writes one string record for id (used by lookup and by tests). Returns encoded bytes or -1. */
int sp_trace_write_string(struct sp_trace_writer *w, uint32_t id, const char *s);
/* Writes one stack record for id: n return addresses, innermost first (used by the stack lookup
 * path and by tests). Returns encoded bytes or -1 (errno EINVAL for id 0). */
int sp_trace_write_stack(struct sp_trace_writer *w, uint32_t id, const uint64_t *pcs, uint32_t n);
/* Compresses and writes the current chunk, if not empty. Returns 0 or -1 with errno. */
int sp_trace_flush(struct sp_trace_writer *w);
/* Bytes written to the file so far (header and whole chunks). This function can't fail. */
uint64_t sp_trace_file_bytes(const struct sp_trace_writer *w);
/* Flushes, closes and frees. Returns 0 or -1 if the last flush or close failed (freed anyway). */
int sp_trace_close(struct sp_trace_writer *w);

/* ---- reading (streaming: memory bounded by one chunk plus the string and stack tables, each a
 * small multiple of the decoded input; see docs/FORMAT.md, "Limits") ---- */
struct sp_trace_reader;

/* Opens and checks the header. Returns NULL and writes a message to err (errlen bytes) if the
 * file is unreadable, not a regular file (a FIFO is refused without blocking), not a stepprof
 * trace, or needs a newer reader (version < min_version). Every id, count and size read later is
 * checked against the limits of docs/FORMAT.md ("Limits") before it sizes anything. */
struct sp_trace_reader *sp_trace_open(const char *path, char *err, size_t errlen);
const struct sp_trace_header *sp_trace_header(const struct sp_trace_reader *r);
/* Next event in file order (string and stack records are absorbed into their tables, never
 * returned).
 * Returns 1 with *ev filled, 0 at the end of the readable data, -1 on a corrupt chunk (message
 * from sp_trace_error). A torn last chunk is the end, not an error: see sp_trace_truncated. */
int sp_trace_next(struct sp_trace_reader *r, struct sp_event *ev);
/* The string for id, or "?" if the file has not defined it. This function can't fail. */
const char *sp_trace_string(const struct sp_trace_reader *r, uint32_t id);
/* Dense indexes for ids, so that tables by id stay as small as the file: the index (1, 2, ... in
 * order of first appearance) of a string or stack id that the records read so far define or
 * name, 0 for id 0 or one not seen yet; and back from an index to its id (0 if out of range).
 * An index is at most the number of distinct ids read (docs/FORMAT.md, Limits), whatever their
 * values. These functions can't fail. */
uint32_t sp_trace_string_index(const struct sp_trace_reader *r, uint32_t id);
uint32_t sp_trace_string_id(const struct sp_trace_reader *r, uint32_t index);
uint32_t sp_trace_stack_index(const struct sp_trace_reader *r, uint32_t id);
uint32_t sp_trace_stack_id(const struct sp_trace_reader *r, uint32_t index);
/* The return addresses of stack id (innermost first) with their count in *n, or NULL (*n = 0)
 * if the file has not defined it so far or defined it empty. Valid until the reader is closed.
 * This function can't fail. */
const uint64_t *sp_trace_stack(const struct sp_trace_reader *r, uint32_t id, uint32_t *n);
/* The Python frame id (SP_PYFRAME_ID of a stack frame): its file and function (strings of the
 * file, "?" if undefined) and line. Returns 0, or -1 (outputs untouched) if the file has not
 * defined it so far. This function can't fail. */
int sp_trace_pyframe(const struct sp_trace_reader *r, uint32_t id, const char **file, const char **func,
		     uint32_t *line);
/* One more than the highest Python frame id defined so far (0 if none). This function can't fail. */
uint32_t sp_trace_pyframe_ids(const struct sp_trace_reader *r);
/* How far reading has got, for a progress line: *done = bytes up to the end of the current chunk,
 * *total = the file's size now. This function can't fail (*total = 0 if fstat fails). */
void sp_trace_progress(const struct sp_trace_reader *r, uint64_t *done, uint64_t *total);
/* 1 if the file ended inside a chunk (cut short), else 0. */
int sp_trace_truncated(const struct sp_trace_reader *r);
const char *sp_trace_error(const struct sp_trace_reader *r);
/* A place in the file between two records, for reading a stretch again (cli/windows.c). */
struct sp_trace_pos {
	uint64_t off;           /* file offset of the chunk */
	uint32_t rec;           /* records of it before the place */
	uint32_t byte;          /* versions 1-4: bytes of its content before the place */
	uint64_t prev_start, prev_corr; /* versions 1-4: the decoding state there (trace/layout.h);
	                                   version 5 decodes the chunk again up to rec */
};
/* The place of the next record. This function can't fail. */
void sp_trace_tell(const struct sp_trace_reader *r, struct sp_trace_pos *p);
/* Moves to p (from sp_trace_tell) to read on from there. Records read before are returned again;
 * string, stack and Python frame records read before are skipped: the tables keep the state of
 * the furthest place read (a string redefined later keeps its later text), and chunks read
 * again do not count against the decompression limit. Returns 0, or -1 if p's chunk no longer
 * reads (then sp_trace_next returns what it can). */
int sp_trace_seek(struct sp_trace_reader *r, const struct sp_trace_pos *p);
/* Moves back to the first event (string table kept). Returns 0 or -1. */
int sp_trace_rewind(struct sp_trace_reader *r);
void sp_trace_close_reader(struct sp_trace_reader *r);

#endif
