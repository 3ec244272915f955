/* SPDX-License-Identifier: MIT */
/* trace_read.c - reads the trace file (docs/FORMAT.md) for the CLI: checks the header, loads one
 * chunk at a time, decodes records with columns.c and keeps the string, stack and Python frame
 * tables. Treats the file as hostile: every id, count and size is checked against the limits of
 * layout.h before it sizes anything; failures become a message (sp_trace_error), never a crash. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include "bytes.h"
#include "fileio.h"
#include "layout.h"
#include "trace.h"

/* Open addressing from the ids a file uses (any value below the id limit) to dense indexes
 * 1, 2, ... in order of first appearance: tables by index stay as small as the number of
 * distinct ids the file holds, whatever values it names. */
struct idmap {
	uint32_t *key, *val;    /* key 0: empty slot */
	uint32_t cap, used;     /* slots (power of two), filled */
};

struct sp_trace_reader {
	int fd;
	struct sp_trace_header hdr;
	uint64_t off;           /* file offset of the next chunk */
	uint64_t chunk_off;     /* file offset of the chunk loaded now */
	uint32_t count;         /* its records */
	struct sp_trace_pos hw; /* the furthest position read: tables hold what lies before it */
	int replay;             /* reading before hw again (sp_trace_seek): table records are skipped */
	uint64_t loaded_hw;     /* end offset of the furthest chunk loaded (decode budget, progress) */
	uint8_t *raw, *comp;    /* current chunk, decompressed; compressed scratch */
	size_t raw_cap, comp_cap;
	size_t len;             /* size of raw */
	uint32_t left;          /* records not yet decoded in this chunk */
	struct sp_chunk_cur cur; /* where decoding stands in raw (layout.h) */
	struct idmap strmap;    /* string id -> its index in str */
	struct {
		uint32_t id;
		char *s;
	} *str; /* strings by index (s NULL: named, not defined) */
	uint32_t nstr, strcap;  /* indexes used (0 reserved), allocated */
	uint64_t str_bytes;     /* bytes held in str */
	struct idmap stkmap;    /* stack id -> its index in stk */
	struct {
		uint32_t id, n;
		uint64_t *pcs;
	} *stk; /* stacks by index */
	uint32_t nstk, stkcap;
	uint64_t stk_frames;    /* frames held in stk */
	uint64_t decoded;       /* raw bytes of the chunks loaded since open or rewind */
	struct idmap pymap;     /* Python frame id -> its index in py */
	struct {
		uint32_t id, file, func, line;
	} *py; /* Python frames by index */
	uint32_t npy, pycap;    /* indexes used (0 reserved), allocated */
	uint32_t pymax;         /* highest id defined + 1 */
	int truncated, failed;
	ZSTD_DCtx *dctx;
	char err[256];
};

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
	int again = r->off < r->loaded_hw; /* loaded before: counted once against the budget */
	if (!again && r->decoded + rsize > budget)
		return reader_fail(r,
				   "chunk at offset %llu: the file decodes to more than %llu bytes (%llu MiB + %ux "
				   "its size): refused as a decompression bomb",
				   (unsigned long long)r->off, (unsigned long long)budget, DECODE_FLOOR >> 20,
				   DECODE_RATIO);
	if (sp_buf_grow(&r->comp, &r->comp_cap, csize) < 0 || sp_buf_grow(&r->raw, &r->raw_cap, rsize ? rsize : 1) < 0)
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
	int rc = sp_chunk_begin(&r->cur, r->raw, rsize, r->hdr.version);
	if (rc < 0)
		return reader_fail(r,
				   rc == -2 ? "out of memory for a chunk at offset %llu"
					    : "corrupt chunk at offset %llu: its columns do not add up",
				   (unsigned long long)r->off);
	r->chunk_off = r->off;
	r->count = count;
	r->off += CHUNK_HEADER_SIZE + csize;
	r->decoded += again ? 0 : rsize;
	if (r->off > r->loaded_hw)
		r->loaded_hw = r->off;
	r->len = rsize;
	r->left = count;
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
	uint32_t stack = sp_ev_stack(ev);
	if (ev->name && !string_id(r, ev->name))
		return -1;
	if (ev->kind == SP_EV_MARKER && ev->u.marker.domain && !string_id(r, ev->u.marker.domain))
		return -1;
	if (ev->kind == SP_EV_MARKER && ev->u.marker.shapes && !string_id(r, ev->u.marker.shapes))
		return -1;
	return stack && !stack_id(r, stack) ? -1 : 0;
}

/* Decodes one event record (kind byte already read). Returns 0, or -1 on a bad record. */
static int read_event(struct sp_trace_reader *r, uint8_t kind, struct sp_event *ev)
{
	int rc = sp_chunk_event(&r->cur, kind, ev);
	if (rc < 0)
		return reader_fail(r, rc == -2 ? "out of memory decoding a %s record" : "corrupt %s record",
				   sp_ev_kind_name(kind));
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

/* 1 if the folder fd holds a *.sptrace entry (the first 4096 entries looked at). Closes fd. */
static int has_traces(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	int found = 0;
	if (d)
		rewinddir(d); /* a dup of a descriptor read before shares its offset */
	for (int i = 0; d && !found && i < 4096 && (e = readdir(d)); i++) {
		size_t n = strlen(e->d_name);
		found = n > 8 && !strcmp(e->d_name + n - 8, ".sptrace");
	}
	if (d)
		closedir(d);
	else
		close(fd);
	return found;
}

/* The message for a folder given as a trace: names its sub-folders that hold traces (a run with
 * phases writes OUTPUT/PHASE/ each: docs/OUTPUTS.md), or says to give the files. */
static void folder_message(int fd, const char *path, char *err, size_t errlen)
{
	DIR *d = fdopendir(dup(fd));
	struct dirent *e;
	int plen = (int)strlen(path), subs = 0;
	while (plen > 1 && path[plen - 1] == '/') /* DIR/ joins as DIR/NAME, not DIR//NAME */
		plen--;
	size_t len = (size_t)snprintf(err, errlen, "%s: a folder, not a trace file", path);
	for (int i = 0; d && i < 4096 && subs < 8 && (e = readdir(d)); i++) {
		if (e->d_name[0] == '.' || len >= errlen)
			continue;
		int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (sub >= 0 && has_traces(sub))
			len += (size_t)snprintf(err + len, errlen - len, "%s %.*s/%s/*.sptrace",
						subs++ ? "," : ": its phases' traces are", plen, path, e->d_name);
	}
	if (d)
		closedir(d);
	if (subs || len >= errlen)
		return;
	int again = dup(fd); /* has_traces closes what it is given */
	if (again >= 0 && has_traces(again))
		snprintf(err + len, errlen - len, " (give its .sptrace files: %.*s/*.sptrace)", plen, path);
	else
		snprintf(err + len, errlen - len, " (it holds no .sptrace file)");
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
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		folder_message(fd, path, err, errlen);
		goto fail;
	}
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
	*done = r->loaded_hw > r->off ? r->loaded_hw : r->off;
	*total = fstat(r->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* This function can't fail. */
const struct sp_trace_header *sp_trace_header(const struct sp_trace_reader *r)
{
	return &r->hdr;
}

/* Skips a string, stack or Python frame record (kind byte read) read before: the tables hold it
 * already, maybe redefined since. Returns 0, or -1 on a bad record. */
static int skip_table_record(struct sp_trace_reader *r, uint8_t kind, const uint8_t **p, const uint8_t *end)
{
	uint64_t a, n, v;
	if (get_varint(p, end, &a) < 0 || get_varint(p, end, &n) < 0)
		return reader_fail(r, "corrupt record");
	if (kind == KIND_STRING) {
		if (n > (uint64_t)(end - *p))
			return reader_fail(r, "corrupt string record");
		*p += n;
		return 0;
	}
	for (uint64_t i = 0; i < (kind == KIND_STACK ? n : 2); i++)
		if (get_varint(p, end, &v) < 0)
			return reader_fail(r, "corrupt record");
	return 0;
}

/* 1 if a is before b. */
static int pos_before(const struct sp_trace_pos *a, const struct sp_trace_pos *b)
{
	return a->off < b->off || (a->off == b->off && a->rec < b->rec);
}

/* Returns 1 with *ev filled, 0 at the end (or a torn last chunk), -1 on a corrupt chunk; after
 * -1 every call returns -1 until sp_trace_rewind or sp_trace_seek. */
int sp_trace_next(struct sp_trace_reader *r, struct sp_event *ev)
{
	if (r->failed)
		return -1;
	for (;;) {
		if (!r->left) {
			if (r->len && !sp_chunk_done(&r->cur))
				return reader_fail(r, "chunk before offset %llu has bytes after its last record",
						   (unsigned long long)r->off);
			int rc = load_chunk(r);
			if (rc <= 0)
				return rc;
			continue;
		}
		uint8_t kind;
		if (sp_chunk_kind(&r->cur, &kind) < 0)
			return reader_fail(r, "chunk before offset %llu ends before its last record",
					   (unsigned long long)r->off);
		const uint8_t *p = r->cur.body, *end = r->cur.body_end; /* table records */
		int rc;
		if (r->replay) {
			struct sp_trace_pos at = { .off = r->chunk_off, .rec = r->count - r->left };
			r->replay = pos_before(&at, &r->hw);
		}
		if (r->replay &&
		    (kind == KIND_STRING || kind == KIND_STACK || (kind == KIND_PYFRAME && r->hdr.version >= 3)))
			rc = skip_table_record(r, kind, &p, end);
		else if (kind == KIND_STRING)
			rc = read_string(r, &p, end);
		else if (kind == KIND_STACK)
			rc = read_stack(r, &p, end);
		else if (kind == KIND_PYFRAME && r->hdr.version >= 3)
			rc = read_pyframe(r, &p, end);
		else if (kind == SP_EV_NONE || kind >= SP_EV__COUNT)
			rc = reader_fail(r, "unknown record kind %u in chunk before offset %llu", kind,
					 (unsigned long long)r->off);
		else
			rc = read_event(r, kind, ev);
		if (rc < 0)
			return -1;
		if (kind == KIND_STRING || kind == KIND_STACK || kind == KIND_PYFRAME)
			r->cur.body = p;
		r->left--;
		struct sp_trace_pos now = { .off = r->chunk_off, .rec = r->count - r->left };
		if (!r->replay && pos_before(&r->hw, &now))
			r->hw = now;
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
int sp_trace_pyframe(const struct sp_trace_reader *r, uint32_t id, const char **file, const char **func, uint32_t *line)
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

/* This function can't fail. */
void sp_trace_tell(const struct sp_trace_reader *r, struct sp_trace_pos *p)
{
	if (!r->left)
		*p = (struct sp_trace_pos){ .off = r->off };
	else
		*p = (struct sp_trace_pos){ r->chunk_off, r->count - r->left, (uint32_t)(r->cur.body - r->raw),
					    r->cur.prev.start, r->cur.prev.corr };
}

/* Decodes the loaded version-5 chunk again from its start up to record rec (its templates and
 * predictions are built by the records before): from where reading stands if that is not past
 * rec. Returns 0, or -1 on a bad record. */
static int replay_to(struct sp_trace_reader *r, uint32_t rec)
{
	struct sp_event ev;
	uint8_t kind;
	int rc;

	if (r->count - r->left > rec) {
		if (sp_chunk_begin(&r->cur, r->raw, r->len, r->hdr.version) < 0)
			return reader_fail(r, "chunk at offset %llu no longer reads", (unsigned long long)r->chunk_off);
		r->left = r->count;
	}
	while (r->count - r->left < rec) {
		if (sp_chunk_kind(&r->cur, &kind) < 0)
			return reader_fail(r, "chunk at offset %llu ends before its last record",
					   (unsigned long long)r->chunk_off);
		if (kind == KIND_STRING || kind == KIND_STACK || kind == KIND_PYFRAME)
			rc = skip_table_record(r, kind, &r->cur.body, r->cur.body_end);
		else if (kind == SP_EV_NONE || kind >= SP_EV__COUNT || (rc = sp_chunk_event(&r->cur, kind, &ev)) < 0)
			rc = reader_fail(r, "corrupt record in chunk at offset %llu", (unsigned long long)r->chunk_off);
		if (rc < 0)
			return -1;
		r->left--;
	}
	return 0;
}

int sp_trace_seek(struct sp_trace_reader *r, const struct sp_trace_pos *p)
{
	int loaded = r->len && r->chunk_off == p->off && p->rec; /* the chunk in hand: no reading */
	r->failed = 0;
	r->replay = 1;
	if (!loaded) {
		r->off = p->off;
		r->len = 0;
		r->left = 0;
		if (!p->rec)
			return 0;
		if (load_chunk(r) <= 0)
			return -1;
	}
	if (p->rec > r->count || p->byte > r->len)
		return -1;
	if (r->hdr.version >= 5) /* a chunk's decoding state is only rebuilt by reading it */
		return replay_to(r, p->rec);
	r->cur.body = r->raw + p->byte;
	r->cur.prev = (struct sp_rec_prev){ p->prev_start, p->prev_corr };
	r->left = r->count - p->rec;
	return 0;
}

/* Returns 0. This function can't fail (the file is re-read lazily by sp_trace_next). */
int sp_trace_rewind(struct sp_trace_reader *r)
{
	r->off = r->hdr.header_size;
	r->len = 0;
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
	sp_chunk_free(&r->cur);
	ZSTD_freeDCtx(r->dctx);
	close(r->fd);
	free(r);
}
