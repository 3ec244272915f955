/* SPDX-License-Identifier: MIT */
/* test_columns.c - the version-5 (and 6) chunk content (trace/columns.c, docs/FORMAT.md "Chunk content,
 * version 5"): every field of a periodic stream round-trips through templates and predictions
 * whatever the values (times that wrap around 2^64 or run backwards, GPU times off their 32 ns
 * grid by exactly half a tick, correlation ids that wrap, ids at their limits), with any chunk
 * size, across explicit flushes, past the lane and template limits of a chunk; a repeated record
 * costs a few bytes; hand-made chunks that break the layout are refused as corrupt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "scratch.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>
#include "trace/trace.h"

#define HDR 472

static const char *lookup(void *ctx, uint32_t id)
{
	static char s[32];
	snprintf(s, sizeof(s), "name-%u", id);
	return s;
}

static void path_of(char *buf, size_t len, const char *leaf)
{
	snprintf(buf, len, "%s/%s", dir, leaf);
}

static struct sp_trace_writer *create(const char *path, size_t chunk)
{
	struct sp_trace_meta m = { .pid = 7, .rank = -1, .world_size = -1, .local_rank = -1 };
	unlink(path);
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, chunk);
	assert_non_null(w);
	return w;
}

/* Reads path and compares it with the n events of want. */
static void expect_file(const char *path, const struct sp_event *want, int n)
{
	char err[256];
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	struct sp_event got;
	if (!r)
		fail_msg("%s", err);
	assert_int_equal(sp_trace_header(r)->version, SP_TRACE_VERSION);
	for (int i = 0; i < n; i++) {
		if (sp_trace_next(r, &got) != 1)
			fail_msg("record %d: %s", i, sp_trace_error(r));
		if (memcmp(&got, &want[i], sizeof(got)))
			fail_msg("record %d (%s, start %llu) differs after the round trip", i,
				 sp_ev_kind_name(want[i].kind), (unsigned long long)want[i].start);
	}
	assert_int_equal(sp_trace_next(r, &got), 0);
	assert_int_equal(sp_trace_truncated(r), 0);
	sp_trace_close_reader(r);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A training-like stream over 3 threads and 3 GPU streams, STEPS steps of the same records with
 * jittered times, then the adversarial ones. Returns the count. */
enum { STEPS = 40, PER_STEP = 9 };
static int stream(struct sp_event *ev, uint64_t t0)
{
	int n = 0;
	uint64_t t = t0, g = t0 + 5000;
	uint32_t corr = UINT32_MAX - 200; /* wraps to 0 and past it in the middle */
	for (int s = 0; s < STEPS; s++) {
		for (int k = 0; k < 3; k++) {
			t += 3000 + rnd() % 700;
			corr += 1 + (uint32_t)(k == 2);
			if (!corr) /* 0 means none: the collector never uses it */
				corr = 1;
			struct sp_event a = { .kind = SP_EV_API,
					      .sub = SP_API_RUNTIME,
					      .device = SP_NO_DEVICE,
					      .tid = 100 + (uint32_t)k % 2,
					      .start = t,
					      .end = t + 2000 + rnd() % 900,
					      .corr = corr,
					      .name = 3 };
			a.u.api.cbid = 211;
			a.u.api.stack = (uint32_t)k;
			ev[n++] = a;
			g = (g > t + 4000 ? g : t + 4000) + 1000 + rnd() % 64 * 32; /* on the 32 ns grid */
			uint64_t d = (uint64_t)(k + 1) * 10000 + rnd() % 40 * 32 + rnd() % 2;
			struct sp_event kr = { .kind = SP_EV_KERNEL,
					       .device = 1,
					       .start = g,
					       .end = g + d,
					       .corr = corr,
					       .name = 10 + (uint32_t)k,
					       .stream = 7 + (uint32_t)k % 2,
					       .context = 1 };
			kr.u.kernel.grid[0] = 1u << (k * 10);
			kr.u.kernel.block[0] = 256;
			kr.u.kernel.regs = 32;
			kr.u.kernel.graph_node = k == 1 ? UINT64_MAX : 0;
			ev[n++] = kr;
			g += d;
		}
		struct sp_event m = { .kind = SP_EV_MARKER,
				      .device = SP_NO_DEVICE,
				      .tid = 100,
				      .start = t - 9000,
				      .end = t + 100,
				      .name = 20 };
		m.u.marker.depth = INT32_MIN;
		m.u.marker.flags = s % 2 ? SP_MARKF_OP | SP_MARKF_SEQ : SP_MARKF_MODULE; /* version 6's fields */
		m.u.marker.shapes = 21 + (uint32_t)s % 3;
		m.u.marker.seq = s % 2 ? INT64_MIN + s : INT64_MAX - s;
		ev[n++] = m;
		struct sp_event al = { .kind = SP_EV_ALLOC,
				       .sub = SP_MEM_DEVICE,
				       .device = 1,
				       .tid = 101,
				       .start = t + 50,
				       .end = t + 50 };
		al.u.mem = (struct sp_ev_mem){ .addr = rnd(), .size = rnd() >> 20, .live = rnd(), .stack = 9 };
		ev[n++] = al;
		struct sp_event nc = { .kind = SP_EV_NCCL,
				       .sub = SP_NCCL_ALLREDUCE,
				       .device = SP_NO_DEVICE,
				       .tid = 102,
				       .start = t + 60,
				       .end = t + 90,
				       .corr = 0,
				       .name = 4 };
		nc.u.nccl = (struct sp_ev_nccl){ .count = 1,
						 .bytes = 4,
						 .comm = 77,
						 .seq = (uint64_t)s,
						 .peer = -1,
						 .comm_rank = 0,
						 .comm_size = 2 };
		ev[n++] = nc;
	}
	/* adversarial: ids at their limits; GPU records half a tick off the grid either way */
	struct sp_event k = ev[1];
	k.start = g + 16, k.end = g + 16 + 10000 - 16;
	ev[n++] = k;
	k.start += 10000 - 17, k.end = k.start + 10000 + 15;
	ev[n++] = k;
	k.tid = UINT32_MAX, k.stream = UINT32_MAX, k.context = UINT32_MAX, k.device = 0xfffe, k.name = (1u << 24) - 1;
	k.corr = UINT32_MAX;
	ev[n++] = k;
	/* times back to 0, up to the top, wrapping, and running backwards */
	struct sp_event a = ev[0];
	uint64_t edge[][2] = { { 0, 0 },
			       { UINT64_MAX, 5 },
			       { UINT64_MAX - 3, 2 },
			       { 1ull << 63, (1ull << 63) - 1 },
			       { 42, UINT64_MAX } };
	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
		a.start = k.start = edge[i][0];
		a.end = k.end = edge[i][1];
		a.corr = k.corr = (uint32_t)(i * 0x7fffffffu + 1);
		ev[n++] = a;
		ev[n++] = k;
	}
	return n;
}

/* Every field of the stream round-trips, with a chunk per record, small chunks, the default, and
 * a flush every few records (windows); the first step's records define the templates, and every
 * later one costs few bytes. */
static void test_round_trip(void **state)
{
	static struct sp_event ev[STEPS * PER_STEP + 64];
	char path[256];
	path_of(path, sizeof(path), "rt.sptrace");
	int n = stream(ev, UINT64_MAX - 500000); /* the clock wraps inside the first steps */
	size_t chunks[] = { 1, 300, 4096, 0 };
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		for (int flush_every = 0; flush_every <= 7; flush_every += 7) {
			struct sp_trace_writer *w = create(path, chunks[c]);
			int big = 0;
			for (int i = 0; i < n; i++) {
				int b = sp_trace_write(w, &ev[i]);
				assert_true(b > 0);
				/* a repeated kernel or launch call: template index, corr and time residuals */
				if (!chunks[c] && !flush_every && i >= 2 * PER_STEP && i < STEPS * PER_STEP &&
				    (ev[i].kind == SP_EV_KERNEL || ev[i].kind == SP_EV_API) && b > 9)
					big++;
				if (flush_every && i % flush_every == flush_every - 1)
					assert_int_equal(sp_trace_flush(w), 0);
			}
			assert_int_equal(sp_trace_close(w), 0);
			assert_int_equal(big, 0);
			expect_file(path, ev, n);
		}
	}
}

/* More threads than a chunk has lanes, and more distinct records than it has templates: the
 * writer starts a new chunk, and everything reads back. */
static void test_lane_and_template_limits(void **state)
{
	enum { N = 20000 };
	static struct sp_event ev[N];
	char path[256];
	path_of(path, sizeof(path), "limits.sptrace");
	uint64_t t = 1000;
	for (int i = 0; i < N; i++) {
		t += 100 + rnd() % 50;
		ev[i] = (struct sp_event){ .kind = i % 2 ? SP_EV_API : SP_EV_KERNEL,
					   .device = i % 2 ? SP_NO_DEVICE : 0,
					   .tid = i % 2 ? (uint32_t)i % 300 : 0,
					   .start = t,
					   .end = t + 90,
					   .corr = (uint32_t)i + 1,
					   .name = 5,
					   .stream = (uint32_t)(i % 2 ? 0 : i % 270) };
		ev[i].u.kernel.grid[0] = (uint32_t)i; /* a template per kernel */
	}
	struct sp_trace_writer *w = create(path, 1u << 20);
	for (int i = 0; i < N; i++)
		assert_true(sp_trace_write(w, &ev[i]) > 0);
	assert_int_equal(sp_trace_close(w), 0);
	expect_file(path, ev, N);
}

/* ---- hand-made chunks ---- */

/* The columns of a version-5 chunk, in their order (docs/FORMAT.md). */
enum {
	KIND,
	BODY,
	TMPL,
	CORR,
	CPU_S,
	CPU_S_HI,
	CPU_S_REM,
	CPU_D,
	CPU_D_HI,
	CPU_D_REM,
	GPU_S,
	GPU_S_HI,
	GPU_S_REM,
	GPU_D,
	GPU_D_HI,
	GPU_D_REM,
	NCOL
};

struct chunk {
	uint8_t col[NCOL][1 << 17];
	size_t len[NCOL];
	uint64_t qlog[2], ncols;
	uint32_t count;
};

static void put(struct chunk *c, int col, uint64_t v) /* a varint */
{
	while (v >= 0x80) {
		c->col[col][c->len[col]++] = (uint8_t)v | 0x80;
		v >>= 7;
	}
	c->col[col][c->len[col]++] = (uint8_t)v;
}

/* A kernel record of template index t (defined here when def), times as residuals. */
static void kernel(struct chunk *c, uint64_t t, int def, uint64_t corr_sym, uint64_t srem, uint64_t drem)
{
	c->col[KIND][c->len[KIND]++] = SP_EV_KERNEL;
	put(c, TMPL, t);
	if (def)
		for (int i = 0; i < 18; i++) /* name, sub, device + 1, tid, stream, context; grid... graph_node */
			put(c, BODY, i == 0 ? 1 : i == 2 ? 1 : 0);
	put(c, CORR, corr_sym);
	for (int i = 0; i < 2; i++) {
		c->col[GPU_S + 3 * i][c->len[GPU_S + 3 * i]++] = 0;
		put(c, GPU_S_HI + 3 * i, 0);
		put(c, GPU_S_REM + 3 * i, i ? drem : srem);
	}
	c->count++;
}

static void new_chunk(struct chunk *c)
{
	memset(c->len, 0, sizeof(c->len));
	c->qlog[0] = 0, c->qlog[1] = 5, c->ncols = NCOL, c->count = 0;
}

/* Writes a version-5 header and c as its one chunk (plus extra bytes in column extra_col). */
static void write_chunk(const char *path, const struct chunk *c)
{
	static uint8_t raw[NCOL * (1 << 17) + 256], comp[ZSTD_COMPRESSBOUND(sizeof(raw)) + 16];
	size_t n = 0;
	uint64_t head[3 + NCOL] = { c->qlog[0], c->qlog[1], c->ncols };
	for (int i = 0; i < NCOL; i++)
		head[3 + i] = c->len[i];
	for (int i = 0; i < 3 + NCOL; i++) {
		uint64_t v = head[i];
		for (; v >= 0x80; v >>= 7)
			raw[n++] = (uint8_t)v | 0x80;
		raw[n++] = (uint8_t)v;
	}
	for (int i = 0; i < NCOL; i++) {
		memcpy(raw + n, c->col[i], c->len[i]);
		n += c->len[i];
	}
	size_t z = ZSTD_compress(comp + 16, sizeof(comp) - 16, raw, n, 1);
	assert_false(ZSTD_isError(z));
	uint32_t h[4] = { 0x4b435053u, (uint32_t)z, (uint32_t)n, c->count };
	memcpy(comp, h, 16); /* the hosts these tests run on are little-endian */
	uint8_t hdr[HDR] = "STEPPROF";
	uint16_t v[2] = { 5, 5 };
	uint32_t hs = HDR;
	memcpy(hdr + 8, v, 4);
	memcpy(hdr + 12, &hs, 4);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(hdr, 1, HDR, f), HDR);
	assert_int_equal(fwrite(comp, 1, 16 + z, f), 16 + z);
	fclose(f);
}

/* Reads path: expects ok good records, then the end (msg NULL) or an error naming msg. */
static void expect_read(const char *path, int ok, const char *msg)
{
	char err[256];
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	struct sp_event ev;
	if (!r)
		fail_msg("%s", err);
	for (int i = 0; i < ok; i++)
		if (sp_trace_next(r, &ev) != 1)
			fail_msg("record %d: %s", i, sp_trace_error(r));
	int rc = sp_trace_next(r, &ev);
	if (!msg)
		assert_int_equal(rc, 0);
	else if (rc != -1 || !strstr(sp_trace_error(r), msg))
		fail_msg("expected an error with \"%s\", got %d: %s", msg, rc, sp_trace_error(r));
	sp_trace_close_reader(r);
}

static void test_corrupt_chunks(void **state)
{
	static struct chunk c;
	char path[256];
	path_of(path, sizeof(path), "hand.sptrace");

	new_chunk(&c); /* the hand encoder is right: two kernels of one template */
	kernel(&c, 0, 1, 5, 0, 0);
	kernel(&c, 0, 0, 1, 0, 0);
	write_chunk(path, &c);
	expect_read(path, 2, NULL);

	c.ncols = NCOL + 1;
	write_chunk(path, &c);
	expect_read(path, 0, "columns do not add up");
	c.ncols = NCOL;
	c.qlog[1] = 17;
	write_chunk(path, &c);
	expect_read(path, 0, "columns do not add up");
	c.qlog[1] = 5;

	c.len[CORR]++; /* a byte left over in a column */
	write_chunk(path, &c);
	expect_read(path, 2, "bytes after its last record");

	new_chunk(&c); /* a template index past the next free one */
	kernel(&c, 1, 1, 0, 0, 0);
	write_chunk(path, &c);
	expect_read(path, 0, "corrupt kernel record");

	new_chunk(&c); /* a kernel template named by an api record */
	kernel(&c, 0, 1, 0, 0, 0);
	kernel(&c, 0, 0, 0, 0, 0);
	c.col[KIND][1] = SP_EV_API;
	write_chunk(path, &c);
	expect_read(path, 1, "corrupt api record");

	new_chunk(&c); /* a remainder of a whole 32 ns tick */
	kernel(&c, 0, 1, 0, 0, 64);
	write_chunk(path, &c);
	expect_read(path, 0, "corrupt kernel record");

	new_chunk(&c); /* a correlation id past 32 bits, and one that comes out 0 */
	kernel(&c, 0, 1, 2 + (1ull << 32), 0, 0);
	write_chunk(path, &c);
	expect_read(path, 0, "corrupt kernel record");
	new_chunk(&c);
	kernel(&c, 0, 1, 1, 0, 0);
	write_chunk(path, &c);
	expect_read(path, 0, "corrupt kernel record");

	new_chunk(&c); /* one template more than a chunk may define */
	for (uint64_t i = 0; i <= 16384; i++) {
		c.col[KIND][c.len[KIND]++] = SP_EV_THREAD;
		put(&c, TMPL, i);
		for (int f = 0; f < 6; f++)
			put(&c, BODY, f == 3 ? i : 0);
		put(&c, CORR, 0);
		for (int k = 0; k < 2; k++) {
			c.col[CPU_S + 3 * k][c.len[CPU_S + 3 * k]++] = 0;
			put(&c, CPU_S_HI + 3 * k, 0);
		}
		c.count++;
	}
	write_chunk(path, &c);
	expect_read(path, 16384, "corrupt thread record");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_lane_and_template_limits),
		cmocka_unit_test(test_corrupt_chunks),
	};
	if (make_scratch("columns") < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, remove_scratch);
}
