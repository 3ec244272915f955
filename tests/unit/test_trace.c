/* SPDX-License-Identifier: MIT */
/* test_trace.c - the trace file format: every kind round-trips, strings and call stacks
 * precede their use across chunks, cut files read their whole chunks, corrupt chunks and new versions are
 * refused, and a realistic kernel stream stays compact (bytes per kernel printed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "scratch.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "trace/trace.h"
#include "config/schedule.h"

#define HDR 472 /* the version-2 header */

static const char *names[] = { NULL,
			       "vec_add",
			       "void gemm<float, 128>(float const*, float*, int)",
			       "cudaLaunchKernel",
			       "ncclAllReduce",
			       "step",
			       "nvtx-domain",
			       "worker-0",
			       "NVIDIA H100 80GB HBM3",
			       "/usr/lib/libcuda.so.1" };

static const char *lookup(void *ctx, uint32_t id)
{
	return id < sizeof(names) / sizeof(names[0]) ? names[id] : NULL;
}

static void path_of(char *buf, size_t len, const char *leaf)
{
	snprintf(buf, len, "%s/%s", dir, leaf);
}

static struct sp_trace_meta meta(void)
{
	struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_NCCL,
				   .pid = 4242,
				   .rank = 3,
				   .world_size = 8,
				   .local_rank = 1,
				   .anchor_mono_ns = 1000000000ull,
				   .anchor_real_ns = 1700000000123456789ull };
	strcpy(m.host, "node-17");
	strcpy(m.command, "python train.py --epochs 3");
	strcpy(m.run_id, "20261126-103000-4242");
	strcpy(m.producer, "stepprof test");
	return m;
}

/* One event of every kind, every field that matters for the kind set to a distinctive value. */
static int all_kinds(struct sp_event *ev)
{
	int n = 0;
	uint64_t t = 5000000000ull;
	struct sp_event k = {
		.kind = SP_EV_KERNEL,
		.device = 1,
		.start = t,
		.end = t + 2500,
		.corr = 77,
		.name = 2,
		.stream = 7,
		.context = 3,
		.u.kernel = { { 64, 2, 1 }, { 256, 1, 1 }, 1024, 4096, 40, SP_LAUNCH_COOPERATIVE, 0, 9, 0xfeedbeefcafe }
	};
	ev[n++] = k;
	ev[n++] = (struct sp_event){ .kind = SP_EV_MEMCPY,
				     .sub = 1,
				     .device = 0,
				     .start = t - 100,
				     .end = t + 900,
				     .corr = 78,
				     .stream = 7,
				     .context = 3,
				     .u.copy = { .bytes = 1ull << 33,
						 .src_kind = 2,
						 .dst_kind = 3,
						 .async = 1,
						 .graph_id = 4,
						 .graph_node = 5 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_MEMSET,
				     .device = 0,
				     .start = t,
				     .end = t + 10,
				     .corr = 79,
				     .stream = 13,
				     .context = 3,
				     .u.copy = { .bytes = 4096, .value = 0xdeadbeef, .dst_kind = 3 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_SYNC,
				     .sub = 3,
				     .device = 0,
				     .tid = 1234,
				     .start = t,
				     .end = t + 77777,
				     .corr = 80,
				     .stream = 7,
				     .context = 3,
				     .u.sync.event = 12 };
	ev[n++] = (struct sp_event){ .kind = SP_EV_API,
				     .sub = SP_API_RUNTIME,
				     .device = SP_NO_DEVICE,
				     .tid = 1234,
				     .start = t,
				     .end = t + 3000,
				     .corr = 77,
				     .name = 3,
				     .u.api = { .cbid = 211, .status = -2, .stack = 6 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_NCCL,
				     .sub = SP_NCCL_ALLREDUCE,
				     .device = 2,
				     .tid = 99,
				     .start = t,
				     .end = t + 50000,
				     .corr = 81,
				     .name = 4,
				     .stream = 21,
				     .u.nccl = { .count = 1u << 20,
						 .bytes = 4u << 20,
						 .comm = 0x8877665544332211ull,
						 .seq = 17,
						 .peer = -1,
						 .comm_rank = 3,
						 .comm_size = 8,
						 .dtype = 7,
						 .redop = 0xff,
						 .group_depth = 2,
						 .stack = 7 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_ALLOC,
				     .sub = SP_MEM_DEVICE,
				     .device = 0,
				     .tid = 99,
				     .start = t,
				     .end = t + 40,
				     .corr = 82,
				     .name = 3,
				     .stream = 1,
				     .u.mem = { .addr = 0x7f0000001000ull,
						.size = 1 << 20,
						.live = 3 << 20,
						.stack = 5,
						.flags = SP_MEMF_SNAPSHOT | SP_MEMF_PEAK } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_FREE,
				     .sub = SP_MEM_HOST,
				     .device = SP_NO_DEVICE,
				     .tid = 99,
				     .start = t + 1,
				     .end = t + 1,
				     .u.mem = { .addr = 0x55550000ull, .size = 64, .live = 0, .stack = 0 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_MARKER,
				     .device = SP_NO_DEVICE,
				     .tid = 5,
				     .start = t,
				     .end = t + 9,
				     .name = 5,
				     .u.marker = { .domain = 6,
						   .depth = -1,
						   .flags = SP_MARKF_OP | SP_MARKF_SEQ,
						   .shapes = 2,
						   .seq = 1234567 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_STEP,
				     .sub = SP_ACT_RECORD,
				     .device = SP_NO_DEVICE,
				     .tid = 5,
				     .start = t,
				     .end = t + 1000000,
				     .name = 5,
				     .u.step = { .number = -7,
						 .how = 1,
						 .flags = SP_STEP_AFTER | SP_STEP_REFUTED,
						 .regime = 3,
						 .period = 498,
						 .launches = 497,
						 .every = 2,
						 .confidence = 5,
						 .relocks = 1 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_WINDOW_BEGIN,
				     .device = SP_NO_DEVICE,
				     .start = t,
				     .end = t,
				     .u.window = { .id = 2, .first_step = 10, .last_step = 12 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_WINDOW_END,
				     .device = SP_NO_DEVICE,
				     .start = t + 5,
				     .end = t + 5,
				     .u.window = { .id = 2,
						   .capped = 1,
						   .first_step = 10,
						   .last_step = 12,
						   .bytes = 123456789,
						   .dropped = 42 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_DROPPED,
				     .sub = SP_DROP_CUPTI,
				     .device = 1,
				     .start = t,
				     .end = t,
				     .u.dropped.count = 1ull << 40 };
	ev[n++] = (struct sp_event){ .kind = SP_EV_THREAD,
				     .device = SP_NO_DEVICE,
				     .tid = 4321,
				     .start = t,
				     .end = t,
				     .name = 7 };
	ev[n++] =
		(struct sp_event){ .kind = SP_EV_DEVICE,
				   .device = 3,
				   .start = t,
				   .end = t,
				   .name = 8,
				   .u.dev = { .sm_count = 132, .cc_major = 9, .cc_minor = 0, .memory = 85ull << 30 } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_CLOCK,
				     .device = SP_NO_DEVICE,
				     .start = t,
				     .end = t,
				     .u.clock.realtime_ns = 1700000000987654321ull };
	ev[n++] = (struct sp_event){ .kind = SP_EV_COMM,
				     .sub = SP_COMM_SPLIT,
				     .device = 2,
				     .tid = 99,
				     .start = t,
				     .end = t,
				     .name = 4,
				     .u.nccl = { .comm = 0x1122334455667788ull, .comm_rank = 5, .comm_size = 16 } };
	ev[n++] = (struct sp_event){
		.kind = SP_EV_MODULE,
		.device = SP_NO_DEVICE,
		.start = 0,
		.end = 0,
		.name = 9,
		.u.module = { .start = 0x7f1234560000ull, .end = 0x7f1234990000ull, .offset = 0x1000 }
	};
	/* extremes: start 0 after a big one, end < start, maximal values */
	ev[n++] = (struct sp_event){ .kind = SP_EV_KERNEL,
				     .device = 0xfffe,
				     .tid = UINT32_MAX,
				     .start = UINT64_MAX,
				     .end = 3,
				     .corr = UINT32_MAX,
				     .stream = UINT32_MAX,
				     .context = UINT32_MAX,
				     .u.kernel = { .grid = { UINT32_MAX, 1, 1 },
						   .block = { 1024, 1, 1 },
						   .regs = UINT16_MAX,
						   .launch = 255,
						   .graph_id = UINT32_MAX,
						   .graph_node = UINT64_MAX } };
	ev[n++] = (struct sp_event){ .kind = SP_EV_STEP,
				     .device = SP_NO_DEVICE,
				     .start = 0,
				     .end = UINT64_MAX,
				     .u.step.number = INT64_MIN };
	return n;
}

/* Writes n events with the given chunk size. */
static void write_file(const char *path, const struct sp_event *ev, int n, size_t chunk)
{
	struct sp_trace_meta m = meta();
	unlink(path); /* sp_trace_create makes new files only */
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, chunk);
	assert_non_null(w);
	for (int i = 0; i < n; i++)
		assert_true(sp_trace_write(w, &ev[i]) > 0);
	assert_int_equal(sp_trace_close(w), 0);
}

static void test_roundtrip_every_kind(void **state)
{
	struct sp_event ev[64], got;
	int n = all_kinds(ev);
	char path[256], err[256];
	path_of(path, sizeof(path), "kinds.sptrace");
	for (size_t chunk = 1; chunk <= 1u << 20; chunk <<= 10) { /* one chunk per record, then one chunk */
		write_file(path, ev, n, chunk);
		struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
		assert_non_null(r);
		const struct sp_trace_header *h = sp_trace_header(r);
		struct sp_trace_meta m = meta();
		assert_int_equal(h->version, SP_TRACE_VERSION);
		assert_int_equal(h->min_version, SP_TRACE_WRITE_MIN_VERSION);
		assert_int_equal(h->header_size, HDR);
		assert_memory_equal(&h->meta, &m, sizeof(m));
		int seen = 0;
		for (int i = 0; i < n; i++) {
			assert_int_equal(sp_trace_next(r, &got), 1);
			if (memcmp(&got, &ev[i], sizeof(got)))
				fail_msg("record %d (%s) differs after the round trip", i, sp_ev_kind_name(ev[i].kind));
			seen |= 1 << got.kind;
		}
		assert_int_equal(sp_trace_next(r, &got), 0);
		assert_int_equal(sp_trace_truncated(r), 0);
		assert_int_equal(seen, ((1 << SP_EV__COUNT) - 1) & ~1);
		assert_string_equal(sp_trace_string(r, 8), names[8]);
		sp_trace_close_reader(r);
	}
}

/* sp_trace_tell / sp_trace_seek inside chunks: a version-5 chunk's records are coded against
 * templates and predictions of the records before, so a place inside it reads the same records
 * again whatever was read last (forward and back in the loaded chunk, across chunks). */
static void test_seek_inside_chunks(void **state)
{
	enum { ROUNDS = 40 };
	static struct sp_event ev[64 * ROUNDS], got[64 * ROUNDS];
	static struct sp_trace_pos at[64 * ROUNDS];
	struct sp_event one[64], e;
	int k = all_kinds(one), n = 0;
	char path[256], err[256];
	path_of(path, sizeof(path), "seek.sptrace");
	for (int round = 0; round < ROUNDS; round++)
		for (int i = 0; i < k; i++, n++) {
			ev[n] = one[i];
			if (ev[n].start < ev[n].end && ev[n].end < (1ull << 60)) /* times and ids move on */
				ev[n].start += 1000u * round, ev[n].end += 1000u * round + (uint64_t)(i % 3);
			if (ev[n].corr)
				ev[n].corr += 3u * round;
		}
	for (size_t chunk = 4096; chunk <= 1u << 20; chunk <<= 8) { /* several chunks, then one */
		write_file(path, ev, n, chunk);
		struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
		assert_non_null(r);
		for (int i = 0; i < n; i++) {
			sp_trace_tell(r, &at[i]);
			assert_int_equal(sp_trace_next(r, &got[i]), 1);
			assert_memory_equal(&got[i], &ev[i], sizeof(e));
		}
		srand(7);
		for (int j = 0; j < 400; j++) {
			int i = j % 2 ? rand() % n : n - 1 - j / 2; /* at random, and walking back */
			assert_int_equal(sp_trace_seek(r, &at[i]), 0);
			for (int m = i; m < n && m < i + 3; m++) {
				assert_int_equal(sp_trace_next(r, &e), 1);
				if (memcmp(&e, &got[m], sizeof(e)))
					fail_msg("record %d after a seek to %d differs (chunk size %zu)", m, i, chunk);
			}
		}
		assert_string_equal(sp_trace_string(r, 8), names[8]);
		sp_trace_close_reader(r);
	}
}

static void test_bad_kind_refused(void **state)
{
	char path[256];
	path_of(path, sizeof(path), "badkind.sptrace");
	struct sp_trace_meta m = meta();
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, 0);
	struct sp_event ev = { .kind = SP_EV__COUNT };
	assert_int_equal(sp_trace_write(w, &ev), -1);
	ev.kind = SP_EV_NONE;
	assert_int_equal(sp_trace_write(w, &ev), -1);
	assert_int_equal(sp_trace_write_string(w, 0, "x"), -1);
	assert_int_equal(sp_trace_close(w), 0);
}

static void test_strings_precede_use_across_chunks(void **state)
{
	char path[256], err[256];
	path_of(path, sizeof(path), "strings.sptrace");
	struct sp_trace_meta m = meta();
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, 64);
	struct sp_event ev = { .kind = SP_EV_MARKER, .device = SP_NO_DEVICE, .start = 1, .end = 2 };
	uint32_t ids[] = { 2, 5, 2, 2, 9, 5, 42, 0, 2, 9 };
	int first_long = 0, later_long = 0;
	for (int i = 0; i < 10; i++) {
		ev.name = ids[i];
		ev.u.marker.domain = i == 3 ? 6 : 0;
		int n = sp_trace_write(w, &ev);
		assert_true(n > 0);
		if (i == 0)
			first_long = n;
		if (i == 8)
			later_long = n;
		assert_int_equal(sp_trace_flush(w), 0); /* every record in its own chunk */
	}
	assert_int_equal(sp_trace_write_string(w, 11, "late"), 5 + 2);
	assert_int_equal(sp_trace_close(w), 0);
	/* the long name costs its bytes once, not again in a later chunk */
	assert_true(first_long > (int)strlen(names[2]));
	assert_true(later_long < 32);

	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	assert_non_null(r);
	struct sp_event got;
	for (int i = 0; i < 10; i++) {
		assert_int_equal(sp_trace_next(r, &got), 1);
		assert_int_equal(got.name, ids[i]);
		/* resolvable when the record is returned: the string came first */
		const char *want = ids[i] == 42 ? "?" : ids[i] ? names[ids[i]] : "?";
		assert_string_equal(sp_trace_string(r, got.name), want);
		if (i == 3)
			assert_string_equal(sp_trace_string(r, got.u.marker.domain), "nvtx-domain");
	}
	assert_string_equal(sp_trace_string(r, 11), "?");
	assert_int_equal(sp_trace_next(r, &got), 0);
	assert_string_equal(sp_trace_string(r, 11), "late");
	assert_string_equal(sp_trace_string(r, 1000), "?");
	/* the table survives a rewind and the second pass returns the same records */
	assert_int_equal(sp_trace_rewind(r), 0);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(sp_trace_next(r, &got), 1);
		assert_int_equal(got.name, ids[i]);
	}
	assert_int_equal(sp_trace_next(r, &got), 0);
	sp_trace_close_reader(r);
}

/* Stacks of test_stacks_precede_use: 1 jumps up and down (negative deltas, extremes), 2 is 128
 * deep, 3 is unknown to the producer, 4 is deeper than a reader takes (written cut to its 1024
 * innermost frames). ctx counts the calls. */
static const uint64_t stack_one[] = { 0x7f0000001234ull, 0x55550000abcdull, UINT64_MAX, 0, 0x7f0000001234ull };
static uint64_t deep[2000];
static const uint64_t *stack_lookup(void *ctx, uint32_t id, uint32_t *n)
{
	++*(int *)ctx;
	*n = id == 1 ? 5 : id == 2 ? 128 : 2000;
	return id == 1 ? stack_one : id == 2 || id == 4 ? deep : NULL;
}

static void test_stacks_precede_use(void **state)
{
	char path[256], err[256];
	int lookups = 0;
	path_of(path, sizeof(path), "stacks.sptrace");
	for (int i = 0; i < 2000; i++)
		deep[i] = 0x7f1000000000ull + (uint64_t)(i * 7919 % 2000) * 16;
	struct sp_trace_meta m = meta();
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, 64);
	sp_trace_set_stack_lookup(w, stack_lookup, &lookups);
	struct sp_event ev[] = {
		{ .kind = SP_EV_ALLOC,
		  .device = 0,
		  .start = 10,
		  .end = 10,
		  .u.mem = { .addr = 1, .size = 8, .stack = 1 } },
		{ .kind = SP_EV_API, .device = 0, .start = 11, .end = 12, .name = 3, .u.api.stack = 2 },
		{ .kind = SP_EV_NCCL, .device = 0, .start = 13, .end = 14, .name = 4, .u.nccl.stack = 3 },
		{ .kind = SP_EV_COMM, .device = 0, .start = 15, .end = 15, .name = 4, .u.nccl.stack = 4 },
		{ .kind = SP_EV_FREE,
		  .device = 0,
		  .start = 16,
		  .end = 16,
		  .u.mem = { .addr = 1, .size = 8, .stack = 1 } },
		{ .kind = SP_EV_API, .device = 0, .start = 17, .end = 18, .name = 3, .u.api.stack = 9 },
		{ .kind = SP_EV_KERNEL, .device = 0, .start = 19, .end = 20, .name = 1 }, /* no stack field */
	};
	int bytes[7];
	const uint64_t nine[] = { 0x400000, 0x3fffff };
	assert_int_equal(sp_trace_write_stack(w, 0, nine, 2), -1);
	assert_int_equal(sp_trace_write_stack(w, 9, deep, 1025), -1);
	assert_true(sp_trace_write_stack(w, 9, nine, 2) > 0);
	for (int i = 0; i < 7; i++) {
		bytes[i] = sp_trace_write(w, &ev[i]);
		assert_true(bytes[i] > 0);
		assert_int_equal(sp_trace_flush(w), 0); /* every record in its own chunk */
	}
	assert_int_equal(sp_trace_close(w), 0);
	assert_int_equal(lookups, 4); /* once per id; never for 9, written explicitly */
	assert_true(bytes[0] > 5 * 2 + 10);
	/* stack 1 (five frames, 30 bytes and more) is not written again in a later chunk */
	assert_true(bytes[4] + 30 <= bytes[0]);

	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	struct sp_event got;
	uint32_t n = 99;
	assert_non_null(r);
	assert_null(sp_trace_stack(r, 1, &n));
	assert_int_equal(n, 0);
	for (int pass = 0; pass < 2; pass++) { /* the table survives a rewind */
		for (int i = 0; i < 7; i++) {
			assert_int_equal(sp_trace_next(r, &got), 1);
			assert_memory_equal(&got, &ev[i], sizeof(got));
		}
		assert_int_equal(sp_trace_next(r, &got), 0);
		const uint64_t *p = sp_trace_stack(r, 1, &n);
		assert_int_equal(n, 5);
		assert_memory_equal(p, stack_one, sizeof(stack_one));
		p = sp_trace_stack(r, 2, &n);
		assert_int_equal(n, 128);
		assert_memory_equal(p, deep, 128 * sizeof(*p));
		assert_null(sp_trace_stack(r, 3, &n)); /* written empty */
		assert_int_equal(n, 0);
		p = sp_trace_stack(r, 4, &n);
		assert_int_equal(n, 1024);
		assert_memory_equal(p, deep, 1024 * sizeof(*p));
		p = sp_trace_stack(r, 9, &n);
		assert_int_equal(n, 2);
		assert_memory_equal(p, nine, sizeof(nine));
		assert_null(sp_trace_stack(r, 77, &n));
		assert_int_equal(sp_trace_rewind(r), 0);
	}
	sp_trace_close_reader(r);
}

/* Python frames of test_pyframes: ids 1 and 2 known (their strings from names[]), 3 unknown. */
static const uint64_t pystack[] = { 0x7f0000001234ull, SP_PYFRAME_TAG | 2, SP_PYFRAME_TAG | 1, 0x55550000abcdull,
				    SP_PYFRAME_TAG | 3 };
static const uint64_t *py_stack_lookup(void *ctx, uint32_t id, uint32_t *n)
{
	*n = 5;
	return id == 1 ? pystack : NULL;
}

static int py_lookup(void *ctx, uint32_t id, uint32_t *file, uint32_t *func, uint32_t *line)
{
	++*(int *)ctx;
	if (id > 2)
		return -1;
	*file = id == 1 ? 5 : 6;
	*func = id == 1 ? 7 : 8;
	*line = id * 100;
	return 0;
}

/* A stack with Python frames: the file is version 3, each frame record (and its strings) precedes
 * the stack that names it and is written once; an unknown one reads as "?" at line 0; version 2
 * files keep tagged values as plain numbers and a reader refuses a Python frame record in them. */
static void test_pyframes(void **state)
{
	char path[256], err[256];
	int calls = 0;
	path_of(path, sizeof(path), "py.sptrace");
	struct sp_trace_meta m = meta();
	m.features |= SP_FEAT_PYSTACKS;
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, 0);
	sp_trace_set_stack_lookup(w, py_stack_lookup, NULL);
	sp_trace_set_pyframe_lookup(w, py_lookup, &calls);
	struct sp_event ev = { .kind = SP_EV_API, .start = 1, .end = 2, .name = 3, .u.api.stack = 1 };
	assert_true(sp_trace_write(w, &ev) > 0);
	ev.start = 3;
	assert_true(sp_trace_write(w, &ev) > 0);
	assert_int_equal(sp_trace_close(w), 0);
	assert_int_equal(calls, 3);

	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	struct sp_event got;
	const char *file, *func;
	uint32_t line, n;
	assert_non_null(r);
	assert_int_equal(sp_trace_header(r)->version, SP_TRACE_VERSION);
	assert_int_equal(sp_trace_header(r)->min_version, SP_TRACE_WRITE_MIN_VERSION);
	assert_int_equal(sp_trace_next(r, &got), 1);
	assert_memory_equal(sp_trace_stack(r, 1, &n), pystack, sizeof(pystack));
	assert_int_equal(sp_trace_pyframe(r, 1, &file, &func, &line), 0);
	assert_string_equal(file, names[5]);
	assert_string_equal(func, names[7]);
	assert_int_equal(line, 100);
	assert_int_equal(sp_trace_pyframe(r, 2, &file, &func, &line), 0);
	assert_string_equal(func, names[8]);
	assert_int_equal(line, 200);
	assert_int_equal(sp_trace_pyframe(r, 3, &file, &func, &line), 0);
	assert_string_equal(file, "?");
	assert_int_equal(line, 0);
	assert_int_equal(sp_trace_pyframe(r, 4, &file, &func, &line), -1);
	assert_int_equal(sp_trace_pyframe_ids(r), 4);
	assert_int_equal(sp_trace_next(r, &got), 1);
	assert_int_equal(sp_trace_next(r, &got), 0);
	sp_trace_close_reader(r);

	/* without pystacks: the same stack is written as plain values, no Python frame record */
	m.features &= ~SP_FEAT_PYSTACKS;
	calls = 0;
	unlink(path); /* sp_trace_create never replaces a file */
	w = sp_trace_create(path, &m, lookup, NULL, 0);
	assert_non_null(w);
	sp_trace_set_stack_lookup(w, py_stack_lookup, NULL);
	sp_trace_set_pyframe_lookup(w, py_lookup, &calls);
	assert_true(sp_trace_write(w, &ev) > 0);
	assert_int_equal(sp_trace_close(w), 0);
	assert_int_equal(calls, 0);
	r = sp_trace_open(path, err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(sp_trace_header(r)->version, SP_TRACE_VERSION);
	assert_int_equal(sp_trace_next(r, &got), 1);
	assert_memory_equal(sp_trace_stack(r, 1, &n), pystack, sizeof(pystack));
	assert_int_equal(sp_trace_pyframe_ids(r), 0);
	sp_trace_close_reader(r);
}

/* Reads path to the end. Returns the count of events; *trunc and *rc from the reader. */
static int read_all(const char *path, int *trunc, int *rc)
{
	char err[256];
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	if (!r)
		return -1;
	struct sp_event ev;
	int n = 0;
	while ((*rc = sp_trace_next(r, &ev)) == 1) {
		assert_int_equal(ev.corr, n); /* the records come in order, none skipped */
		n++;
	}
	*trunc = sp_trace_truncated(r);
	sp_trace_close_reader(r);
	return n;
}

static void copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), a)) > 0)
		fwrite(buf, 1, n, b);
	fclose(a);
	fclose(b);
}

static void test_truncated_reads_whole_chunks(void **state)
{
	enum { N = 3000, MAXCH = 64 };
	char path[256], cut[256];
	path_of(path, sizeof(path), "whole.sptrace");
	path_of(cut, sizeof(cut), "cut.sptrace");
	struct sp_trace_meta m = meta();
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, 8192);
	uint64_t end_of[MAXCH];
	int events_by[MAXCH], nch = 0;
	for (int i = 0; i < N; i++) {
		struct sp_event ev = { .kind = SP_EV_KERNEL,
				       .start = 1000 + 5000ull * i,
				       .corr = (uint32_t)i,
				       .name = 1 + i % 2,
				       .stream = 7 };
		ev.end = ev.start + 2000 + (uint64_t)(i * 7919 % 1000);
		uint64_t before = sp_trace_file_bytes(w);
		assert_true(sp_trace_write(w, &ev) > 0);
		if (sp_trace_file_bytes(w) != before) {
			end_of[nch] = sp_trace_file_bytes(w);
			events_by[nch++] = i + 1;
		}
	}
	assert_int_equal(sp_trace_close(w), 0);
	struct stat st;
	stat(path, &st);
	if ((uint64_t)st.st_size != (nch ? end_of[nch - 1] : 0)) {
		end_of[nch] = (uint64_t)st.st_size;
		events_by[nch++] = N;
	}
	assert_true(nch >= 4);

	int trunc, rc;
	assert_int_equal(read_all(path, &trunc, &rc), N);
	assert_int_equal(trunc, 0);

	/* every offset from the start of the last chunk, and every 37th before it */
	copy_file(path, cut);
	int fd = open(cut, O_WRONLY);
	uint64_t last_start = end_of[nch - 2];
	for (uint64_t off = (uint64_t)st.st_size; off >= HDR; off--) {
		if (off < last_start && off % 37)
			continue;
		assert_int_equal(ftruncate(fd, (off_t)off), 0);
		int want = 0, boundary = off == HDR;
		for (int c = 0; c < nch; c++) {
			if (end_of[c] <= off)
				want = events_by[c];
			boundary |= end_of[c] == off;
		}
		int got = read_all(cut, &trunc, &rc);
		if (got != want || trunc != !boundary || rc != 0)
			fail_msg("cut at %llu: %d events (want %d), truncated %d, rc %d", (unsigned long long)off, got,
				 want, trunc, rc);
	}
	/* cut inside the header: refused with a message, never a crash */
	uint64_t offs[] = { 375, 100, 16, 15, 12, 8, 7, 1, 0 }; /* shrinking only */
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		char err[256] = "";
		assert_int_equal(ftruncate(fd, (off_t)offs[i]), 0);
		assert_null(sp_trace_open(cut, err, sizeof(err)));
		if (!strstr(err, offs[i] < 8 ? "not a stepprof trace" : "truncated header"))
			fail_msg("cut at %llu: %s", (unsigned long long)offs[i], err);
	}
	close(fd);
}

/* Flips one byte at off of a copy of src and returns how reading it ends. */
static int read_corrupted(const char *src, const char *dst, uint64_t off, int *events, char *msg, size_t len)
{
	char err[256];
	copy_file(src, dst);
	int fd = open(dst, O_RDWR);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x5a;
	assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
	struct sp_trace_reader *r = sp_trace_open(dst, err, sizeof(err));
	assert_non_null(r);
	struct sp_event ev;
	int rc;
	*events = 0;
	while ((rc = sp_trace_next(r, &ev)) == 1)
		++*events;
	snprintf(msg, len, "%s", sp_trace_error(r));
	assert_int_equal(sp_trace_next(r, &ev), rc); /* sticky */
	sp_trace_close_reader(r);
	return rc;
}

static void test_corrupt_chunk_is_an_error(void **state)
{
	char path[256], bad[256], msg[256];
	path_of(path, sizeof(path), "good.sptrace");
	path_of(bad, sizeof(bad), "bad.sptrace");
	struct sp_trace_meta m = meta();
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, 0);
	struct sp_event ev = { .kind = SP_EV_KERNEL, .name = 2 };
	for (int i = 0; i < 100; i++) {
		ev.start = ev.end = 1000u * i;
		ev.corr = (uint32_t)i;
		sp_trace_write(w, &ev);
	}
	sp_trace_flush(w);
	uint64_t second = sp_trace_file_bytes(w);
	for (int i = 0; i < 100; i++)
		sp_trace_write(w, &ev);
	assert_int_equal(sp_trace_close(w), 0);
	struct stat st;
	stat(path, &st);
	int events;
	/* a byte in the second chunk's frame: first chunk read, then an error */
	for (uint64_t off = second + 16; off < (uint64_t)st.st_size; off += 7) {
		assert_int_equal(read_corrupted(path, bad, off, &events, msg, sizeof(msg)), -1);
		assert_int_equal(events, 100);
		assert_non_null(strstr(msg, "corrupt"));
	}
	/* the chunk magic, and a raw size that does not match the frame */
	assert_int_equal(read_corrupted(path, bad, second, &events, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "bad chunk magic"));
	assert_int_equal(read_corrupted(path, bad, second + 8, &events, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "corrupt chunk"));
	/* a torn-looking compressed size past the end of the file is a cut, not an error */
	assert_int_equal(read_corrupted(path, bad, second + 7, &events, msg, sizeof(msg)), 0);
	assert_int_equal(events, 100);
}

/* Rewrites header bytes of a copy of path. */
static void patch(const char *src, const char *dst, int off, const void *bytes, int len)
{
	copy_file(src, dst);
	int fd = open(dst, O_RDWR);
	assert_int_equal(pwrite(fd, bytes, (size_t)len, off), len);
	close(fd);
}

static void test_versions(void **state)
{
	char path[256], bad[256], err[256];
	struct sp_event ev[64], got;
	int n = all_kinds(ev);
	path_of(path, sizeof(path), "ver.sptrace");
	path_of(bad, sizeof(bad), "ver2.sptrace");
	write_file(path, ev, n, 0);

	uint8_t v9[4] = { 9, 0, 9, 0 }; /* version 9, min_version 9 */
	patch(path, bad, 8, v9, 4);
	assert_null(sp_trace_open(bad, err, sizeof(err)));
	assert_non_null(strstr(err, "version 9 needs a newer stepprof"));

	uint8_t v0[4] = { 0, 0, 0, 0 };
	patch(path, bad, 8, v0, 4);
	assert_null(sp_trace_open(bad, err, sizeof(err)));
	assert_non_null(strstr(err, "too old"));

	patch(path, bad, 0, "STEPPROX", 8);
	assert_null(sp_trace_open(bad, err, sizeof(err)));
	assert_non_null(strstr(err, "not a stepprof trace"));

	uint8_t small[4] = { 100, 0, 0, 0 };
	patch(path, bad, 12, small, 4);
	assert_null(sp_trace_open(bad, err, sizeof(err)));
	assert_non_null(strstr(err, "header size"));

	assert_null(sp_trace_open("/nonexistent/x.sptrace", err, sizeof(err)));
	assert_non_null(strstr(err, "No such file"));

	/* a later version (readable by this one) with a longer header: the reader skips the rest */
	FILE *a = fopen(path, "rb"), *b = fopen(bad, "wb");
	uint8_t buf[1 << 16];
	size_t len = fread(buf, 1, sizeof(buf), a);
	uint8_t v3l[8] = { SP_TRACE_VERSION, 0, 1, 0, (HDR + 24) & 0xff, (HDR + 24) >> 8, 0, 0 };
	memcpy(buf + 8, v3l, 8);
	fwrite(buf, 1, HDR, b);
	memset(buf + len, 0xee, 24);
	fwrite(buf + len, 1, 24, b);
	fwrite(buf + HDR, 1, len - HDR, b);
	fclose(a);
	fclose(b);
	struct sp_trace_reader *r = sp_trace_open(bad, err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(sp_trace_header(r)->version, SP_TRACE_VERSION);
	assert_int_equal(sp_trace_header(r)->header_size, HDR + 24);
	for (int i = 0; i < n; i++) {
		assert_int_equal(sp_trace_next(r, &got), 1);
		assert_memory_equal(&got, &ev[i], sizeof(got));
	}
	assert_int_equal(sp_trace_next(r, &got), 0);
	sp_trace_close_reader(r);

	/* a header of version 1's 376 bytes (no run id): still read, run id and producer empty (the
	 * records stay this version's; a real version-1 file is tests/golden/small-v1.sptrace) */
	a = fopen(path, "rb");
	b = fopen(bad, "wb");
	len = fread(buf, 1, sizeof(buf), a);
	uint8_t v1[8] = { SP_TRACE_VERSION, 0, 1, 0, 376 & 0xff, 376 >> 8, 0, 0 };
	memcpy(buf + 8, v1, 8);
	fwrite(buf, 1, 376, b);
	fwrite(buf + HDR, 1, len - HDR, b);
	fclose(a);
	fclose(b);
	assert_non_null(r = sp_trace_open(bad, err, sizeof(err)));
	assert_string_equal(sp_trace_header(r)->meta.host, "node-17");
	assert_string_equal(sp_trace_header(r)->meta.run_id, "");
	assert_string_equal(sp_trace_header(r)->meta.producer, "");
	for (int i = 0; i < n; i++)
		assert_int_equal(sp_trace_next(r, &got), 1);
	assert_int_equal(sp_trace_next(r, &got), 0);
	sp_trace_close_reader(r);
	/* the file itself carries them */
	assert_non_null(r = sp_trace_open(path, err, sizeof(err)));
	assert_string_equal(sp_trace_header(r)->meta.run_id, "20261126-103000-4242");
	assert_string_equal(sp_trace_header(r)->meta.producer, "stepprof test");
	sp_trace_close_reader(r);
}

/* A chunk write that fails (file size limit) leaves at most a torn chunk: later writes and
 * flushes fail without writing, and the file reads as cut after its whole chunks. */
static void test_write_failure_stops_writing(void **state)
{
	char path[256];
	path_of(path, sizeof(path), "limited.sptrace");
	struct rlimit old, lim;
	getrlimit(RLIMIT_FSIZE, &old);
	lim = (struct rlimit){ 1024, old.rlim_max }; /* soft limit only: raising it back needs no privilege */
	signal(SIGXFSZ, SIG_IGN);
	struct sp_trace_meta m = meta();
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, 0);
	setrlimit(RLIMIT_FSIZE, &lim);
	struct sp_event ev = { .kind = SP_EV_ALLOC };
	uint64_t x = 1;
	for (int i = 0; i < 10; i++) { /* one small chunk fits */
		ev.u.mem.addr = x *= 6364136223846793005ull;
		assert_true(sp_trace_write(w, &ev) > 0);
	}
	assert_int_equal(sp_trace_flush(w), 0);
	for (int i = 0; i < 500; i++) { /* this one does not */
		ev.u.mem.addr = x *= 6364136223846793005ull;
		assert_true(sp_trace_write(w, &ev) > 0);
	}
	assert_int_equal(sp_trace_flush(w), -1);
	assert_int_equal(errno, EFBIG);
	setrlimit(RLIMIT_FSIZE, &old);
	assert_int_equal(sp_trace_write(w, &ev), -1); /* refused, even with room again */
	assert_int_equal(sp_trace_flush(w), -1);
	assert_int_equal(sp_trace_close(w), -1);
	struct stat st;
	stat(path, &st);
	assert_int_equal(st.st_size, 1024);
	int trunc, rc;
	char err[256];
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	int n = 0;
	while ((rc = sp_trace_next(r, &ev)) == 1)
		n++;
	assert_int_equal(rc, 0);
	assert_int_equal(n, 10);
	trunc = sp_trace_truncated(r);
	assert_int_equal(trunc, 1);
	sp_trace_close_reader(r);
}

/* Kernel names like a real model's: mangled, long, ~50 of them. */
static char knames[51][160];

static const char *klookup(void *ctx, uint32_t id)
{
	return id >= 1 && id <= 50 ? knames[id] : NULL;
}

static void test_bytes_per_kernel(void **state)
{
	enum { N = 200000 };
	char path[256];
	path_of(path, sizeof(path), "kernels.sptrace");
	struct {
		uint32_t grid, block, regs, smem;
	} shape[51];
	srand(12345);
	for (int i = 1; i <= 50; i++) {
		snprintf(knames[i], sizeof(knames[i]),
			 "void at::native::elementwise_kernel<128, %d, at::native::gpu_kernel_impl_nocast<op%d>>(int, "
			 "T)",
			 i % 4, i);
		shape[i].grid = (uint32_t)(1 + rand() % 4096);
		shape[i].block = 64u << (rand() % 4);
		shape[i].regs = (uint32_t)(16 + rand() % 64);
		shape[i].smem = (uint32_t)(rand() % 3) * 1024;
	}
	struct sp_trace_meta m = meta();
	struct sp_trace_writer *w = sp_trace_create(path, &m, klookup, NULL, 0);
	uint64_t t = 1000000000000ull;
	uint32_t corr = 1000;
	for (int i = 0; i < N; i++) {
		int k = 1 + rand() % 50;
		t += 4500 + (uint64_t)(rand() % 1000);
		corr += 1 + (uint32_t)(rand() % 3);
		struct sp_event ev = { .kind = SP_EV_KERNEL,
				       .device = 0,
				       .start = t,
				       .end = t + 2000 + (uint64_t)(rand() % 1000),
				       .corr = corr,
				       .name = (uint32_t)k,
				       .stream = 7,
				       .context = 1 };
		ev.u.kernel.grid[0] = shape[k].grid;
		ev.u.kernel.grid[1] = ev.u.kernel.grid[2] = 1;
		ev.u.kernel.block[0] = shape[k].block;
		ev.u.kernel.block[1] = ev.u.kernel.block[2] = 1;
		ev.u.kernel.regs = (uint16_t)shape[k].regs;
		ev.u.kernel.dynamic_smem = shape[k].smem;
		assert_true(sp_trace_write(w, &ev) > 0);
	}
	assert_int_equal(sp_trace_close(w), 0);
	struct stat st;
	stat(path, &st);
	double per = (double)(st.st_size - HDR) / N;
	printf("bytes per kernel record (zstd, %d kernels, 50 names, random order): %.2f\n", N, per);
	assert_true(per < 5.0); /* version 4's rows: 7.0 */
}

/* Ids of any value get dense indexes in order of first appearance; an id past the limit, a long
 * string and an over-long chunk are refused (the writer truncates a long string). */
static void test_ids_by_index_and_limits(void **state)
{
	(void)state;
	char path[256], err[256];
	path_of(path, sizeof(path), "ids.sptrace");
	struct sp_trace_meta m = meta();
	struct sp_trace_writer *w = sp_trace_create(path, &m, NULL, NULL, 0);
	assert_non_null(w);
	static char big[100000];
	memset(big, 'x', sizeof(big) - 1);
	assert_true(sp_trace_write_string(w, 16000000, "far") > 0);
	assert_true(sp_trace_write_string(w, 7, big) > 0);
	uint64_t pcs[] = { 0x1000, 0x2000 };
	assert_true(sp_trace_write_stack(w, 9999999, pcs, 2) > 0);
	struct sp_event ev = { .kind = SP_EV_API,
			       .device = 0,
			       .tid = 1,
			       .start = 10,
			       .end = 20,
			       .name = 16000000,
			       .u.api.stack = 9999999 };
	assert_true(sp_trace_write(w, &ev) > 0);
	ev.name = 123456; /* named, never defined */
	assert_true(sp_trace_write(w, &ev) > 0);
	assert_int_equal(sp_trace_close(w), 0);

	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	struct sp_event got;
	assert_non_null(r);
	assert_int_equal(sp_trace_next(r, &got), 1);
	assert_int_equal(got.name, 16000000); /* events keep the file's ids */
	assert_int_equal(sp_trace_string_index(r, 16000000), 1);
	assert_int_equal(sp_trace_string_index(r, 7), 2);
	assert_int_equal(strlen(sp_trace_string(r, 7)), 65536); /* truncated by the writer */
	assert_int_equal(sp_trace_stack_index(r, 9999999), 1);
	assert_int_equal(sp_trace_stack_id(r, 1), 9999999);
	assert_int_equal(sp_trace_next(r, &got), 1);
	assert_int_equal(sp_trace_string_index(r, 123456), 3);
	assert_int_equal(sp_trace_string_id(r, 3), 123456);
	assert_string_equal(sp_trace_string(r, 123456), "?");
	assert_int_equal(sp_trace_string_index(r, 5), 0);
	assert_int_equal(sp_trace_string_id(r, 4), 0);
	assert_int_equal(sp_trace_next(r, &got), 0);
	sp_trace_close_reader(r);

	/* an event naming id 2^24 is corrupt */
	unlink(path);
	w = sp_trace_create(path, &m, NULL, NULL, 0);
	ev.name = 1u << 24;
	assert_true(sp_trace_write(w, &ev) > 0);
	assert_int_equal(sp_trace_close(w), 0);
	r = sp_trace_open(path, err, sizeof(err));
	assert_int_equal(sp_trace_next(r, &got), -1);
	assert_string_equal(sp_trace_error(r), "string id 16777216 out of range (limit 16777216)");
	sp_trace_close_reader(r);
	unlink(path);
}

int main(void)
{
	if (make_scratch("trace") < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_every_kind),
		cmocka_unit_test(test_seek_inside_chunks),
		cmocka_unit_test(test_bad_kind_refused),
		cmocka_unit_test(test_strings_precede_use_across_chunks),
		cmocka_unit_test(test_stacks_precede_use),
		cmocka_unit_test(test_pyframes),
		cmocka_unit_test(test_truncated_reads_whole_chunks),
		cmocka_unit_test(test_corrupt_chunk_is_an_error),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_ids_by_index_and_limits),
		cmocka_unit_test(test_write_failure_stops_writing),
		cmocka_unit_test(test_bytes_per_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, remove_scratch);
}
