/* SPDX-License-Identifier: MIT */
/* export.h - the exporter interface of `stepprof convert`: each output format is a table of
 * callbacks in its own file (cli/export_<format>.c), driven window by window from the
 * streaming grouper (windows.h). Also the buffered output stream they write to (plain or gzip,
 * chosen by the ".gz" suffix, written beside the target and renamed into place at close). */
#ifndef SP_EXPORT_H
#define SP_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "windows.h"

struct sp_out;
struct sp_nccl_match;
struct sp_xrank;

/* A slice that is not a record of the trace, shown on a rank's timeline by the exporter (e.g.
 * the cross-rank analysis's "waiting for the last rank" before a collective): on track `track`
 * (a name; one track per name and rank, beside the rank's CPU threads), from start to end
 * (wall-clock ns, CLOCK_REALTIME, as sp_window_wall gives). Spans of one track that partly
 * overlap go to extra lanes ("track (2)", ...), never cut. */
struct sp_export_span {
	int64_t key;            /* the rank (or the pid of a trace without rank) it belongs to */
	const char *track;      /* track name, e.g. "NCCL waiting" */
	const char *name;       /* the slice's name */
	uint64_t start, end;    /* wall-clock ns */
	const char *cat;        /* category, NULL for "stepprof" */
	const char *args_json;  /* NULL, or the members of its args object, e.g. "\"waited for\":3" */
};

/* What an exporter works with; one per output file. When several ranks' traces go into one file
 * (convert --merge-ranks), r, hdr, g and source change between window calls and stay valid until
 * end returns. */
struct sp_export {
	const struct sp_export_ops *ops;
	struct sp_out *out;             /* the file being written */
	struct sp_trace_reader *r;      /* strings of the trace */
	const struct sp_trace_header *hdr;
	struct sp_windows *g;           /* the windows' passes, thread names, devices */
	const char *source;             /* path of the trace, for the output's metadata */
	int wall;         /* times on the wall clock (several windows or ranks line up) */
	const struct sp_nccl_match *match; /* --merge-ranks: the NCCL calls of every rank's window of this
	                                      round, paired by (comm, seq); NULL otherwise */
	const struct sp_xrank *arrivals; /* --merge-ranks: the cross-rank analysis (crossrank.h): NCCL kernels
	                                    get "wait for peers" and "transfer" slices; NULL otherwise */
	int merged;       /* several ranks' traces in this one file (--merge-ranks) */
	const char *dest;               /* the output path ("-" for stdout), for the output's metadata */
	const struct sp_export_span *spans; /* extra slices to draw (see sp_export_span), the caller's:
	                                       each window call writes those of its rank, so set them
	                                       per round of windows (--merge-ranks: after
	                                       sp_nccl_match_build); read only by window calls */
	size_t nspans;
	void (*progress)(struct sp_export *x); /* called about every 64Ki events written, or NULL */
	void *progress_ctx;             /* the caller's, for progress */
	uint64_t events;                /* events written so far (exporters count) */
	void *priv;       /* the exporter's state, from begin to end */
};

struct sp_export_ops {
	const char *name;               /* format name (--format) */
	const char *suffix;             /* file suffix, e.g. ".json" */
	/* Starts a file. Returns 0 or -1 (message on stderr). */
	int (*begin)(struct sp_export *x);
	/* Writes one window, the one x->g handed out last (w: it, or a part of it, the passes
	 * restricted to that part: sp_windows_restrict), reading its events through the passes of
	 * windows.h. Returns 0 or -1 (message on stderr). */
	int (*window)(struct sp_export *x, const struct sp_window *w);
	/* Finishes the file and frees priv; called once after a successful begin, even after an
	 * error. Returns 0 or -1. */
	int (*end)(struct sp_export *x);
};

extern const struct sp_export_ops sp_export_chrome;

/* The exporter called name, or NULL. */
const struct sp_export_ops *sp_export_find(const char *name);

/* Opens path for writing (gzip if it ends in ".gz"; "-" is stdout, plain). Data goes to
 * a new mkstemp file beside path (outfile.h) until sp_out_close renames it over path. Returns NULL
 * with a message in err on failure. */
struct sp_out *sp_out_open(const char *path, char *err, size_t errlen);
/* A stream over the caller's f (written through, flushed by sp_out_close, never closed). Exits
 * the CLI if memory runs out. */
struct sp_out *sp_out_stream(FILE *f);
/* Buffered writes. Errors are remembered and reported by sp_out_close. Can't fail otherwise. */
void sp_out_write(struct sp_out *o, const void *p, size_t n);
void sp_out_puts(struct sp_out *o, const char *s);
void sp_out_printf(struct sp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string (quotes included): escapes '"', '\\' and control characters, and writes
 * bytes that are not valid UTF-8 as U+FFFD so the output always parses. NULL writes "". */
void sp_out_json_str(struct sp_out *o, const char *s);
/* v in decimal. These functions can't fail (errors are remembered like sp_out_write's). */
void sp_out_u64(struct sp_out *o, uint64_t v);
void sp_out_i64(struct sp_out *o, int64_t v);
/* v with that many decimals (0..9), rounded: "4.740741" (halfway cases away from zero; printf's
 * digits where v scaled is past 2^53; NaN as 0). This function can't fail. */
void sp_out_fixed(struct sp_out *o, double v, int decimals);
/* ns as microseconds with 3 decimals (e.g. -1.500, 12.034). */
void sp_out_us(struct sp_out *o, int64_t ns);

/* Formatting straight into the stream's buffer, for the exporters' hot paths (one bounds check
 * per event part instead of one call per token): sp_out_room gives room for n bytes (n <=
 * SP_OUT_ROOM_MAX), the caller writes at most n there with the sp_put_* functions (each returns
 * the new end) and hands the end back with sp_out_done. These functions can't fail. */
#define SP_OUT_ROOM_MAX 65536
#define SP_PUT_NUM_MAX 24       /* the most bytes sp_put_u64, sp_put_i64 and sp_put_us write */
#define SP_PUT_FIXED_MAX 330    /* the most bytes sp_put_fixed writes (%.9f of DBL_MAX) */
char *sp_out_room(struct sp_out *o, size_t n);
void sp_out_done(struct sp_out *o, char *end);
static inline char *sp_put(char *p, const void *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}
/* a string literal: its length is known when compiled */
#define SP_PUT_LIT(p, lit) sp_put((p), "" lit, sizeof(lit) - 1)
/* v in decimal at p (inline: it writes most of what the exporters write) */
static inline char *sp_put_u64(char *p, uint64_t v)
{
	static const uint64_t pow10[20] = { 1,    1e1,  1e2,  1e3,  1e4,
					    1e5,  1e6,  1e7,  1e8,  1e9,
					    1e10, 1e11, 1e12, 1e13, 1e14,
					    1e15, 1e16, 1e17, 1e18, 10000000000000000000ull };
	static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
				    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
				    "8081828384858687888990919293949596979899";
	int t = (64 - __builtin_clzll(v | 1)) * 1233 >> 12; /* about log10(v): bits * log10(2) */
	int n = t + (v >= pow10[t]) + (t == 0 && v == 0);  /* digits; "0" has one */
	char *q = p + n;

	while (v >= 100) { /* written in place, last digits first */
		unsigned d = (unsigned)(v % 100);
		v /= 100;
		q -= 2;
		q[0] = pairs[2 * d];
		q[1] = pairs[2 * d + 1];
	}
	if (v >= 10) {
		q[-2] = pairs[2 * v];
		q[-1] = pairs[2 * v + 1];
	} else {
		q[-1] = (char)('0' + v);
	}
	return p + n;
}
char *sp_put_i64(char *p, int64_t v);
char *sp_put_us(char *p, int64_t ns);
char *sp_put_fixed(char *p, double v, int decimals);
/* Flushes, closes and renames into place (or removes the temporary file if anything failed or
 * keep is 0). Returns 0, or -1 with a message on stderr. Frees o in every case. */
int sp_out_close(struct sp_out *o, int keep);

#endif
