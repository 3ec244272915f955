/* SPDX-License-Identifier: MIT */
/* test_nccl.c - NCCL on the CLI side with two synthetic ranks: kernel-name parsing and the
 * nccl-tests bus-bandwidth rules, the report's NCCL table (values worked out by hand below:
 * direct and API-found kernel links, a group sharing its kernel by bytes, a CPU-timed call, an
 * orphan kernel), the nearest clock anchor, and `convert --merge-ranks` (ranks sorted, calls of one
 * collective paired with flows and their arrival skew). With SP_WRITE_NCCL_SAMPLE=DIR set it only
 * writes DIR/rank0.sptrace and DIR/rank1.sptrace (for tests/e2e/cli_nccl.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/commstats.h"
#include "cli/report.h"
#include "cli/windows.h"
#include "trace/trace.h"
#include "config/schedule.h"
#include "text_assert.h"

#define US 1000ull
#define MS 1000000ull
#define WALL 1700000000123000000ull /* wall clock of rank 0's window 0 start */
#define C1 0x1111222233334444ull     /* communicators: both of size 2 */
#define C2 0x5555666677778888ull
#define F32 7    /* ncclFloat32 */
#define U8 1     /* ncclUint8 */

enum { /* string ids */
       N_AR = 1,
       N_AG,
       N_SEND,
       N_RECV,
       N_GS,
       N_GE,
       N_BC,
       N_RS,
       K_AR_LL,
       K_AR_LL128,
       K_AG,
       K_SR,
       K_BC,
       K_ORPHAN,
       K_GEMM,
       N_LAUNCH,
       N_MAIN,
       N_GPU,
};

static const char *const strings[] = {
	[N_AR] = "ncclAllReduce",
	[N_AG] = "ncclAllGather",
	[N_SEND] = "ncclSend",
	[N_RECV] = "ncclRecv",
	[N_GS] = "ncclGroupStart",
	[N_GE] = "ncclGroupEnd",
	[N_BC] = "ncclBroadcast",
	[N_RS] = "ncclReduceScatter",
	[K_AR_LL] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
	[K_AR_LL128] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL128",
	[K_AG] = "ncclDevKernel_AllGather_RING_SIMPLE",
	[K_SR] = "ncclDevKernel_SendRecv",
	[K_BC] = "ncclDevKernel_Broadcast_RING_LL128",
	[K_ORPHAN] = "ncclDevKernel_AllReduce_Sum_f32_TREE_LL",
	[K_GEMM] = "ampere_sgemm_128x64_nn",
	[N_LAUNCH] = "cudaLaunchKernel",
	[N_MAIN] = "main",
	[N_GPU] = "NVIDIA H100 80GB HBM3",
};

static char dir[] = "/tmp/sp_test_nccl.XXXXXX";
static char rank_path[2][300];

struct rankw {    /* a rank's trace being written */
	struct sp_trace_writer *w;
	uint64_t t0;            /* trace clock of window 0's start */
	int rank;
};

static const char *lookup(void *ctx, uint32_t id)
{
	return id < sizeof(strings) / sizeof(strings[0]) ? strings[id] : NULL;
}

static void put(struct rankw *r, struct sp_event e)
{
	if (sp_trace_write(r->w, &e) <= 0) {
		fprintf(stderr, "test_nccl: sp_trace_write failed\n");
		exit(1);
	}
}

static struct sp_event ev(struct rankw *r, int kind, uint64_t rel_us, uint64_t dur_us)
{
	return (struct sp_event){ .kind = (uint8_t)kind,
				  .start = r->t0 + rel_us * US,
				  .end = r->t0 + (rel_us + dur_us) * US,
				  .device = 0,
				  .tid = 100 };
}

/* An NCCL call at rel_us (CPU time dur_us) carrying corr. */
static void call(struct rankw *r, int op, uint32_t name, uint64_t rel_us, uint64_t dur_us, uint32_t corr, uint64_t comm,
		 uint64_t seq, uint64_t count, int dtype, int depth, int peer)
{
	static const int size[] = { [U8] = 1, [F32] = 4 };
	struct sp_event e = ev(r, SP_EV_NCCL, rel_us, dur_us);

	e.sub = (uint8_t)op, e.name = name, e.corr = corr, e.stream = 13;
	e.u.nccl = (struct sp_ev_nccl){ .count = count,
					.bytes = count * (uint64_t)(comm ? size[dtype] : 0),
					.comm = comm,
					.seq = seq,
					.peer = peer,
					.comm_rank = comm ? r->rank : -1,
					.comm_size = comm ? 2 : -1,
					.dtype = (uint8_t)dtype,
					.redop = op == SP_NCCL_ALLREDUCE ? 0 : 0xff,
					.group_depth = (uint8_t)depth };
	put(r, e);
}

/* A cudaLaunchKernel at rel_us and its kernel name at k_us for k_dur_us. */
static void launch(struct rankw *r, uint64_t rel_us, uint32_t corr, uint32_t kernel, uint64_t k_us, uint64_t k_dur_us)
{
	struct sp_event e = ev(r, SP_EV_API, rel_us, 10);

	e.sub = SP_API_RUNTIME, e.name = N_LAUNCH, e.corr = corr, e.u.api.cbid = 211;
	put(r, e);
	e = ev(r, SP_EV_KERNEL, k_us, k_dur_us);
	e.tid = 0, e.name = kernel, e.corr = corr, e.stream = kernel == K_GEMM ? 7 : 13, e.context = 1;
	e.u.kernel.grid[0] = e.u.kernel.block[0] = 1;
	put(r, e);
}

/* Window id from rel_us to rel_us + 20 ms (one step, number id) and, at its end, the clock anchor
 * real_ns. The caller writes its events between begin and end. */
static void window_begin(struct rankw *r, uint32_t id, uint64_t rel_us)
{
	struct sp_event e = ev(r, SP_EV_WINDOW_BEGIN, rel_us, 0);
	e.tid = 0, e.u.window.id = id, e.u.window.first_step = id, e.u.window.last_step = id;
	put(r, e);
	e = ev(r, SP_EV_STEP, rel_us, 20000);
	e.sub = SP_ACT_RECORD_AND_SAVE, e.u.step.number = id;
	put(r, e);
}

static void window_end(struct rankw *r, uint32_t id, uint64_t rel_us, uint64_t real_ns)
{
	struct sp_event e = ev(r, SP_EV_CLOCK, rel_us + 20000, 0);
	e.tid = 0, e.u.clock.realtime_ns = real_ns;
	put(r, e);
	e.kind = SP_EV_WINDOW_END, e.u.window = (struct sp_ev_window){ .id = id, .first_step = 0, .last_step = id };
	put(r, e);
}

/* Rank rank's trace. Rank 1's clock is 0.5 ms behind rank 0's on the wall clock; its header anchor
 * is 7 ms off (the clock was stepped later), the anchors written at its windows' ends are right.
 * Wall times (ms from WALL) of the calls on rank 0 / rank 1:
 *   C1 seq 10 AllReduce 4 MiB    1.0 / 3.0  (skew 2 ms)  kernel 4 ms / 2 ms (rank 1: found by its launch)
 *   C1 seq 11 AllGather 1 MiB    6.0 / 6.3              kernel 1 ms
 *   group: C1 seq 12 Send, 13 Recv (rank 0 sends 0.5 MiB, receives 1.5 MiB; rank 1 the reverse),
 *          one SendRecv kernel of 2 ms launched by GroupEnd: shared 0.5 / 1.5 ms by bytes
 *   C2 seq 0 Broadcast 8 MiB    11.0 / 11.1             kernel 4 ms
 *   C1 seq 14 ReduceScatter 4 KiB 16.0 / 16.0           no kernel: 50 us of CPU time
 *   rank 0 only: an NCCL kernel of 0.5 ms with no launch in the window; a gemm kernel
 *   window 1: C1 seq 20 AllReduce 4 MiB at 1001.0 / 1001.1, kernel RING_LL128 2 ms */
static void write_rank(const char *path, int rank)
{
	struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_RUNTIME_API | SP_FEAT_NCCL,
				   .pid = 100 + rank,
				   .rank = rank,
				   .world_size = 2,
				   .local_rank = 0 };
	struct rankw r = { .t0 = rank ? 5000000 * MS : 1000000 * MS, .rank = rank };
	uint64_t wall0 = WALL + (uint64_t)rank * 500 * US; /* wall clock of this rank's t0 */
	int peer = !rank;
	struct sp_event e;

	m.anchor_mono_ns = r.t0 - 5000 * MS;
	m.anchor_real_ns = wall0 - 5000 * MS + (rank ? 7 * MS : 0);
	snprintf(m.host, sizeof(m.host), "%s", rank ? "nodeB" : "nodeA");
	snprintf(m.command, sizeof(m.command), "python train.py");
	r.w = sp_trace_create(path, &m, lookup, NULL, 0);
	if (!r.w) {
		perror(path);
		exit(1);
	}
	e = ev(&r, SP_EV_THREAD, 0, 0);
	e.name = N_MAIN;
	put(&r, e);
	e = ev(&r, SP_EV_DEVICE, 0, 0);
	e.tid = 0, e.name = N_GPU, e.u.dev.sm_count = 132, e.u.dev.cc_major = 9, e.u.dev.memory = 80ull << 30;
	put(&r, e);

	window_begin(&r, 0, 0);
	if (!rank) {
		call(&r, SP_NCCL_ALLREDUCE, N_AR, 1000, 200, 101, C1, 10, 1048576, F32, 0, -1);
		launch(&r, 1050, 101, K_AR_LL, 1100, 4000);
		call(&r, SP_NCCL_ALLGATHER, N_AG, 6000, 100, 102, C1, 11, 262144, F32, 0, -1);
		launch(&r, 6050, 102, K_AG, 6200, 1000);
	} else { /* the AllReduce call carries no corr: its kernel is found through the launch inside it */
		call(&r, SP_NCCL_ALLREDUCE, N_AR, 2500, 200, 0, C1, 10, 1048576, F32, 0, -1);
		launch(&r, 2550, 301, K_AR_LL, 2600, 2000);
		call(&r, SP_NCCL_ALLGATHER, N_AG, 5800, 100, 302, C1, 11, 262144, F32, 0, -1);
		launch(&r, 5850, 302, K_AG, 6000, 1000);
	}
	uint64_t g = rank ? 7600 : 8000;
	call(&r, SP_NCCL_GROUP_START, N_GS, g, 10, 0, 0, 0, 0, 0, 1, -1);
	call(&r, SP_NCCL_SEND, N_SEND, g + 20, 10, 0, C1, 12, rank ? 393216 : 131072, F32, 1, peer);
	call(&r, SP_NCCL_RECV, N_RECV, g + 40, 10, 0, C1, 13, rank ? 131072 : 393216, F32, 1, peer);
	call(&r, SP_NCCL_GROUP_END, N_GE, g + 60, 140, 103, 0, 0, 0, 0, 0, -1);
	launch(&r, g + 100, 103, K_SR, g + 300, 2000);
	uint64_t b = rank ? 10600 : 11000;
	call(&r, SP_NCCL_BROADCAST, N_BC, b, 100, 104, C2, 0, 8388608, U8, 0, 0);
	launch(&r, b + 50, 104, K_BC, b + 200, 4000);
	call(&r, SP_NCCL_REDUCESCATTER, N_RS, rank ? 15500 : 16000, 50, 0, C1, 14, 1024, F32, 0, -1);
	if (!rank) {
		e = ev(&r, SP_EV_KERNEL, 17000, 500);
		e.tid = 0, e.name = K_ORPHAN, e.corr = 999, e.stream = 13;
		put(&r, e);
		launch(&r, 17600, 105, K_GEMM, 17700, 1000);
	}
	window_end(&r, 0, 0, wall0 + 20 * MS);

	window_begin(&r, 1, 1000000);
	call(&r, SP_NCCL_ALLREDUCE, N_AR, rank ? 1000600 : 1001000, 100, 201, C1, 20, 1048576, F32, 0, -1);
	launch(&r, rank ? 1000650 : 1001050, 201, K_AR_LL128, rank ? 1000800 : 1001200, 2000);
	window_end(&r, 1, 1000000, wall0 + 1020 * MS);
	if (sp_trace_close(r.w)) {
		fprintf(stderr, "test_nccl: closing %s failed\n", path);
		exit(1);
	}
}

/* The report of path as one string (caller frees). */
static char *report(const char *path, int top)
{
	struct sp_report_opts o = { .sort = SP_SORT_TOTAL, .top = top, .window = -1 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(sp_report(path, &o, f, NULL), 0);
	fclose(f);
	return buf;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_names_and_formulas(void **state)
{
	char b[32];

	assert_true(sp_nccl_is_kernel(strings[K_AR_LL]));
	assert_true(sp_nccl_is_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"));
	assert_false(sp_nccl_is_kernel(strings[K_GEMM]));
	/* as CUPTI reports NCCL 2.28's kernels: mangled */
	assert_true(sp_nccl_is_kernel("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LLPv"));
	assert_false(sp_nccl_is_kernel("_Z5ncclDv"));
	assert_string_equal(sp_nccl_algo_name(sp_nccl_algo("_Z39ncclDevKernel_AllReduce_Sum_f32_TREE_LLPv"), b,
					      sizeof(b)),
			    "TREE/LL");
	assert_string_equal(sp_nccl_algo_name(sp_nccl_algo(strings[K_AR_LL]), b, sizeof(b)), "RING/LL");
	assert_string_equal(sp_nccl_algo_name(sp_nccl_algo(strings[K_AR_LL128]), b, sizeof(b)), "RING/LL128");
	assert_string_equal(sp_nccl_algo_name(sp_nccl_algo("ncclDevKernel_AllReduce_Sum_bf16_NVLS_TREE_SIMPLE"), b,
					      sizeof(b)),
			    "NVLS_TREE/SIMPLE");
	assert_string_equal(sp_nccl_algo_name(sp_nccl_algo("ncclDevKernel_ReduceScatter_Sum_f16_COLLNET_DIRECT_LL"), b,
					      sizeof(b)),
			    "COLLNET_DIRECT/LL");
	assert_string_equal(sp_nccl_algo_name(sp_nccl_algo("ncclKernel_AllReduce_TREE_LL128_Sum_float"), b, sizeof(b)),
			    "TREE/LL128");
	assert_string_equal(sp_nccl_algo_name(sp_nccl_algo("ncclDevKernel_AllGather_PAT"), b, sizeof(b)), "PAT/-");
	assert_string_equal(sp_nccl_algo_name(sp_nccl_algo(strings[K_SR]), b, sizeof(b)), "-");
	assert_string_equal(sp_nccl_algo_name(SP_NCCL_ALGO_MIXED, b, sizeof(b)), "mixed");

	/* nccl-tests doc/PERFORMANCE.md, for 8 ranks */
	assert_true(sp_nccl_bus_factor(SP_NCCL_ALLREDUCE, 8) == 14.0 / 8);
	assert_true(sp_nccl_bus_factor(SP_NCCL_ALLGATHER, 8) == 7.0 / 8);
	assert_true(sp_nccl_bus_factor(SP_NCCL_REDUCESCATTER, 8) == 7.0 / 8);
	assert_true(sp_nccl_bus_factor(SP_NCCL_ALLTOALL, 8) == 7.0 / 8);
	assert_true(sp_nccl_bus_factor(SP_NCCL_BROADCAST, 8) == 1);
	assert_true(sp_nccl_bus_factor(SP_NCCL_REDUCE, 8) == 1);
	assert_true(sp_nccl_bus_factor(SP_NCCL_SEND, 8) == 1 && sp_nccl_bus_factor(SP_NCCL_RECV, 8) == 1);
	assert_true(sp_nccl_bus_factor(SP_NCCL_ALLREDUCE, -1) < 0);
	assert_true(sp_nccl_bus_factor(SP_NCCL_GROUP_END, 8) < 0);
	/* sizes: the whole array for the gathering/scattering ops, the buffer for the others */
	assert_int_equal(sp_nccl_size(SP_NCCL_ALLGATHER, 1000, 8), 8000);
	assert_int_equal(sp_nccl_size(SP_NCCL_REDUCESCATTER, 1000, 8), 8000);
	assert_int_equal(sp_nccl_size(SP_NCCL_ALLTOALL, 1000, 8), 8000);
	assert_int_equal(sp_nccl_size(SP_NCCL_ALLREDUCE, 1000, 8), 1000);
	assert_int_equal(sp_nccl_size(SP_NCCL_BROADCAST, 1000, 8), 1000);
	assert_int_equal(sp_nccl_size(SP_NCCL_ALLGATHER, 1000, -1), 0);
}

/* Rank 0, both windows. Rows by total time. algbw = size x calls / time (bytes/ns = GB/s):
 * AllReduce 2 x 4 MiB in 4 + 2 ms: 8388608 / 6e6 = 1.398, busbw x 2(2-1)/2 = 1.398, RING LL and LL128;
 * Broadcast 8 MiB in 4 ms: 2.097 (x 1); Recv 1.5 MiB in 1.5 ms (3/4 of the 2 ms group kernel): 1.049;
 * AllGather S = 2 x 1 MiB in 1 ms: 2.097, busbw x 1/2 = 1.049; Send 0.5 MiB in 0.5 ms: 1.049;
 * ReduceScatter S = 2 x 4 KiB in 50 us of CPU time: 0.164, busbw 0.082. */
static void test_report_rank0(void **state)
{
	char *s = report(rank_path[0], 0), l[256];
	const char *order[] = { "AllReduce ", "Broadcast ", "Recv ", "AllGather ", "Send ", "ReduceScatter " };
	const char *at = strstr(s, "\nNCCL op");

	assert_non_null(at);
	assert_string_equal(squeezed(s, "NCCL op", l, sizeof(l)),
			    "NCCL op Ranks Size Calls Total bytes Time Avg Algo/proto algbw GB/s busbw GB/s");
	for (int i = 0; i < 6; i++) { /* row order */
		const char *p = strstr(at, order[i]);
		assert_non_null(p);
		at = p;
	}
	assert_string_equal(squeezed(s, "AllReduce ", l, sizeof(l)),
			    "AllReduce 2 4.00MiB 2 8.00MiB 6.000ms 3.000ms mixed 1.398 1.398");
	assert_string_equal(squeezed(s, "Broadcast ", l, sizeof(l)),
			    "Broadcast 2 8.00MiB 1 8.00MiB 4.000ms 4.000ms RING/LL128 2.097 2.097");
	assert_string_equal(squeezed(s, "Recv ", l, sizeof(l)),
			    "Recv 2 1.50MiB 1 1.50MiB 1.500ms 1.500ms - 1.049 1.049");
	assert_string_equal(squeezed(s, "AllGather ", l, sizeof(l)),
			    "AllGather 2 2.00MiB 1 2.00MiB 1.000ms 1.000ms RING/SIMPLE 2.097 1.049");
	assert_string_equal(squeezed(s, "Send ", l, sizeof(l)),
			    "Send 2 512.00KiB 1 512.00KiB 500.000us 500.000us - 1.049 1.049");
	assert_string_equal(squeezed(s, "ReduceScatter ", l, sizeof(l)),
			    "ReduceScatter 2 8.00KiB 1 8.00KiB 50.000us* 50.000us - 0.164 0.082");
	assert_string_equal(squeezed(s, "* CPU time", l, sizeof(l)),
			    "* CPU time of the calls: no NCCL kernel was linked to them");
	assert_string_equal(squeezed(s, "NCCL kernels linked", l, sizeof(l)),
			    "NCCL kernels linked to no call: 1, 500.000us");
	/* the columns line up: every row as wide as the header (the '*' sits in its own column) */
	size_t w = strcspn(strstr(s, "NCCL op"), "\n");
	for (int i = 0; i < 6; i++) {
		const char *p = strstr(s, order[i]);
		while (p[-1] != '\n')
			p = strstr(p + 1, order[i]);
		assert_int_equal(strcspn(p, "\n"), w);
	}
	free(s);

	s = report(rank_path[0], 2);
	assert_string_equal(squeezed(s, "... 4 more NCCL", l, sizeof(l)),
			    "... 4 more NCCL rows: 3.050ms (--top 0 shows all)");
	assert_null(strstr(s, "\nRecv "));
	free(s);
}

/* Rank 1: its AllReduce kernels (2 + 2 ms) found by correlation id and through the launch inside
 * the call; it sends 1.5 MiB and receives 0.5 MiB of the shared 2 ms; no orphan. */
static void test_report_rank1(void **state)
{
	char *s = report(rank_path[1], 0), l[256];

	assert_string_equal(squeezed(s, "AllReduce ", l, sizeof(l)),
			    "AllReduce 2 4.00MiB 2 8.00MiB 4.000ms 2.000ms mixed 2.097 2.097");
	assert_string_equal(squeezed(s, "Send ", l, sizeof(l)),
			    "Send 2 1.50MiB 1 1.50MiB 1.500ms 1.500ms - 1.049 1.049");
	assert_string_equal(squeezed(s, "Recv ", l, sizeof(l)),
			    "Recv 2 512.00KiB 1 512.00KiB 500.000us 500.000us - 1.049 1.049");
	assert_null(strstr(s, "linked to no call"));
	free(s);
}

/* Windows take the anchor written at their end (rank 1's header anchor is 7 ms off). */
static void test_nearest_anchor(void **state)
{
	char err[256];
	struct sp_trace_reader *r = sp_trace_open(rank_path[1], err, sizeof(err));
	struct sp_windows *g;
	const struct sp_window *w;

	assert_non_null(r);
	g = sp_windows_open(r);
	assert_int_equal(sp_windows_next(g, &w), 1);
	assert_int_equal(sp_window_wall(w, w->t0), WALL + 500 * US);
	assert_int_equal(sp_windows_next(g, &w), 1);
	assert_int_equal(sp_window_wall(w, w->t0), WALL + 1000500 * US);
	sp_windows_close(g);
	sp_trace_close_reader(r);
}

/* The match of window 0 of both ranks, directly. */
static void test_match(void **state)
{
	struct sp_nccl_match *m = sp_nccl_match_new();
	struct sp_trace_reader *r[2];
	struct sp_windows *g[2];
	const struct sp_window *w[2];
	struct sp_nccl_peer p;
	char err[256];
	int seen = 0;

	for (int i = 0; i < 2; i++) {
		r[i] = sp_trace_open(rank_path[i], err, sizeof(err));
		assert_non_null(r[i]);
		g[i] = sp_windows_open(r[i]);
		assert_int_equal(sp_windows_next(g[i], &w[i]), 1);
	}
	sp_nccl_match_reset(m);
	sp_nccl_match_add(m, 1, w[1]);
	sp_nccl_match_add(m, 0, w[0]);
	sp_nccl_match_build(m);
	assert_int_equal(sp_nccl_match_paired(m), 6);
	for (size_t i = 0; i < w[1]->nnccl; i++) {
		const struct sp_event *e = &w[1]->nccl[i];
		if (!e->u.nccl.comm) { /* group calls are not matched */
			assert_int_equal(sp_nccl_match_find(m, 1, e, &p), 0);
			continue;
		}
		assert_int_equal(sp_nccl_match_find(m, 1, e, &p), 1);
		assert_int_equal(p.n, 2);
		assert_int_equal(p.pos, 1); /* rank 0's call comes first */
		assert_true(p.flow >= SP_NCCL_FLOW_BASE);
		if (e->u.nccl.seq == 10 && e->u.nccl.comm == C1) {
			assert_int_equal(p.first_wall, WALL + 1 * MS);
			assert_int_equal(p.last_wall, WALL + 3 * MS);
			assert_int_equal(p.wall, WALL + 3 * MS);
			assert_int_equal(p.last_key, 1);
			seen++;
		}
	}
	assert_int_equal(seen, 1);
	for (int i = 0; i < 2; i++) {
		sp_windows_close(g[i]);
		sp_trace_close_reader(r[i]);
	}
	sp_nccl_match_free(m);
}

/* convert --merge-ranks, ranks given in reverse: one file, rank 0 first, every matched call
 * tagged and linked (7 collectives: 6 in window 0, 1 in window 1), the 2 ms skew of seq 10. */
static void test_merge(void **state)
{
	char out[320];
	snprintf(out, sizeof(out), "%s/merged.json", dir);
	const char *argv[] = { "convert", "--merge-ranks", "-o", out, rank_path[1], rank_path[0] };
	char *s;

	assert_int_equal(sp_cmd_convert(6, (char **)argv), 0);
	FILE *f = fopen(out, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	s = calloc(1, (size_t)n + 1);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	assert_true(strstr(s, "\"name\":\"nodeA rank 0\"") < strstr(s, "\"name\":\"nodeB rank 1\""));
	assert_int_equal(count(s, "\"nccl_match\""), 14);
	assert_int_equal(count(s, "\"nccl_match\":\"0x1111222233334444:10\""), 2);
	assert_int_equal(count(s, "\"arrival skew (us)\":2000.000,"), 2);
	assert_int_equal(count(s, "\"ph\":\"s\",") - count(s, "\"cat\":\"ac2g\",\"name\":\"ac2g\"}"), 7);
	assert_int_equal(count(s, "\"cat\":\"nccl\",\"name\":\"nccl\""), 14); /* 7 starts, 7 ends */
	assert_non_null(strstr(s, "\"ranks\":["));
	free(s);

	/* usage: --merge-ranks needs -o; the same rank twice is refused */
	const char *no_out[] = { "convert", "--merge-ranks", rank_path[0], rank_path[1] };
	assert_int_equal(sp_cmd_convert(4, (char **)no_out), 2);
	const char *twice[] = { "convert", "--merge-ranks", "-o", out, rank_path[0], rank_path[0] };
	assert_int_equal(sp_cmd_convert(6, (char **)twice), 1);
	const char *two[] = { "convert", rank_path[0], rank_path[1] };
	assert_int_equal(sp_cmd_convert(3, (char **)two), 2);
}

int main(void)
{
	const char *sample = getenv("SP_WRITE_NCCL_SAMPLE");
	char path[300];
	int rc;

	if (sample) {
		for (int i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), "%s/rank%d.sptrace", sample, i);
			write_rank(path, i);
		}
		return 0;
	}
	if (!mkdtemp(dir)) {
		perror(dir);
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		snprintf(rank_path[i], sizeof(rank_path[i]), "%s/rank%d.sptrace", dir, i);
		write_rank(rank_path[i], i);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_and_formulas),
		cmocka_unit_test(test_report_rank0),
		cmocka_unit_test(test_report_rank1),
		cmocka_unit_test(test_nearest_anchor),
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_merge),
	};
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (!rc) {
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		rc = system(cmd) != 0;
	}
	return rc;
}
