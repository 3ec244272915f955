/* SPDX-License-Identifier: MIT */
/* trace_fixture.h - synthetic traces for the CLI tests (test_convert, test_report and, through
 * `test_convert` with SP_WRITE_SAMPLE set, tests/e2e/cli_convert_report.sh). The sample's
 * numbers are chosen so the expected report can be worked out by hand: see fx_write_sample. */
#ifndef SP_TRACE_FIXTURE_H
#define SP_TRACE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "trace/trace.h"
#include "config/schedule.h"

#define US 1000ull
#define MS 1000000ull
#define FX_T 1000000000000ull /* trace time of window 0's start: 1000 s on CLOCK_MONOTONIC */

enum {  /* string ids of the sample */
	S_LAUNCH = 1, S_ELEMWISE, S_GEMM, S_NCCL_KERNEL, S_MAIN_THREAD, S_GPU, S_FORWARD, S_ALLREDUCE,
	S_MEMCPY_API, S_WEIRD, S_SYNC_API, S_LAUNCH_EX, S_MEMSET_API,
};

static const char *const fx_strings[] = {
	[S_LAUNCH] = "cudaLaunchKernel",
	[S_ELEMWISE] = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
		       "std::array<char*, 3> >(int, \"q\"\\path & <x>)",
	[S_GEMM] = "ampere_sgemm_128x64_nn",
	[S_NCCL_KERNEL] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
	[S_MAIN_THREAD] = "python main",
	[S_GPU] = "NVIDIA H100 80GB HBM3",
	[S_FORWARD] = "forward",
	[S_ALLREDUCE] = "ncclAllReduce",
	[S_MEMCPY_API] = "cudaMemcpyAsync",
	[S_WEIRD] = "name with\nnewline\ttab\x01" "ctl, bad utf8 \xff" "end, \xc2\xb5s",
	[S_SYNC_API] = "cudaStreamSynchronize",
	[S_LAUNCH_EX] = "cuLaunchKernelEx",
	[S_MEMSET_API] = "cudaMemsetAsync",
};

static const char *fx_lookup(void *ctx, uint32_t id)
{
	return id < sizeof(fx_strings) / sizeof(fx_strings[0]) ? fx_strings[id] : NULL;
}

static struct sp_trace_writer *fx_create(const char *path)
{
	struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_MEMCPY | SP_FEAT_RUNTIME_API,
				   .pid = 4242, .rank = 1, .world_size = 2, .local_rank = 1,
				   .anchor_mono_ns = FX_T - 5000 * MS, .anchor_real_ns = 1700000000000000000ull };
	strcpy(m.host, "node1");
	strcpy(m.command, "python train.py --lr \"0.1\"");
	unlink(path); /* sp_trace_create makes new files only: a fixture rewrites its file */
	struct sp_trace_writer *w = sp_trace_create(path, &m, fx_lookup, NULL, 0);
	if (!w) {
		perror(path);
		exit(1);
	}
	return w;
}

static void fx_put(struct sp_trace_writer *w, struct sp_event e)
{
	if (sp_trace_write(w, &e) <= 0) {
		fprintf(stderr, "fixture: sp_trace_write failed\n");
		exit(1);
	}
}

static struct sp_event fx_ev(int kind, uint64_t start, uint64_t end)
{
	struct sp_event e = { .kind = (uint8_t)kind, .start = start, .end = end, .device = SP_NO_DEVICE };
	return e;
}

static struct sp_event fx_api(uint64_t start, uint32_t corr, uint32_t name, uint32_t tid)
{
	struct sp_event e = fx_ev(SP_EV_API, start, start + 10 * US);
	e.sub = name == S_LAUNCH_EX ? SP_API_DRIVER : SP_API_RUNTIME;
	e.corr = corr;
	e.name = name;
	e.tid = tid;
	e.device = 0;
	e.u.api.cbid = name == S_LAUNCH ? 211 : 13;
	return e;
}

static struct sp_event fx_gpu(int kind, uint64_t start, uint64_t end, uint32_t corr, uint32_t name, uint32_t stream)
{
	struct sp_event e = fx_ev(kind, start, end);
	e.corr = corr;
	e.name = name;
	e.stream = stream;
	e.device = 0;
	e.context = 1;
	if (kind == SP_EV_KERNEL) {
		e.u.kernel.grid[0] = 128, e.u.kernel.grid[1] = e.u.kernel.grid[2] = 1;
		e.u.kernel.block[0] = 256, e.u.kernel.block[1] = e.u.kernel.block[2] = 1;
		e.u.kernel.regs = 32;
		e.u.kernel.static_smem = 1024;
		e.u.kernel.dynamic_smem = 2048;
	}
	return e;
}

static struct sp_event fx_window(int kind, uint32_t id, int64_t step, uint64_t t, uint64_t dropped)
{
	struct sp_event e = fx_ev(kind, t, t);
	e.u.window.id = id;
	e.u.window.first_step = kind == SP_EV_WINDOW_BEGIN ? step : 0;
	e.u.window.last_step = step;
	e.u.window.dropped = dropped;
	return e;
}

static struct sp_event fx_step(int64_t n, uint64_t start, int last)
{
	struct sp_event e = fx_ev(SP_EV_STEP, start, start + 10 * MS);
	e.sub = last ? SP_ACT_RECORD_AND_SAVE : SP_ACT_RECORD;
	e.tid = 100;
	e.u.step.number = n;
	return e;
}

static struct sp_event fx_dropped(int source, uint64_t count, uint64_t t)
{
	struct sp_event e = fx_ev(SP_EV_DROPPED, t, t);
	e.sub = (uint8_t)source;
	e.u.dropped.count = count;
	return e;
}

/* One step of window 0 starting at s, step number n: launches of gemm (2 ms) and elementwise
 * (0.5 ms) and a 1 MiB HtoD copy (0.1 ms), under a "forward" marker. Correlation ids c+1..c+3.
 * skip_first_api leaves out the first launch (the caller wrote it before the BEGIN record). */
static void fx_step0(struct sp_trace_writer *w, uint64_t s, int64_t n, uint32_t c, int skip_first_api, int last)
{
	struct sp_event e;

	e = fx_ev(SP_EV_MARKER, s + 50 * US, s + 5 * MS);
	e.tid = 100, e.name = S_FORWARD;
	fx_put(w, e);
	if (!skip_first_api)
		fx_put(w, fx_api(s + 100 * US, c + 1, S_LAUNCH, 100));
	fx_put(w, fx_api(s + 200 * US, c + 2, S_LAUNCH, 100));
	fx_put(w, fx_api(s + 300 * US, c + 3, S_MEMCPY_API, 100));
	fx_put(w, fx_gpu(SP_EV_KERNEL, s + 1 * MS, s + 3 * MS, c + 1, S_GEMM, 7));
	fx_put(w, fx_gpu(SP_EV_KERNEL, s + 3 * MS, s + 3500 * US, c + 2, S_ELEMWISE, 7));
	e = fx_gpu(SP_EV_MEMCPY, s + 4 * MS, s + 4100 * US, c + 3, 0, 7);
	e.sub = 1; /* HtoD */
	e.u.copy.bytes = 1 << 20, e.u.copy.src_kind = 2, e.u.copy.dst_kind = 3, e.u.copy.async = 1;
	fx_put(w, e);
	fx_put(w, fx_step(n, s, last));
}

/* The sample: rank 1 of 2, host node1, two windows.
 * Window 0: steps 5-7 at FX_T + 0/10/20 ms, ends at FX_T + 30 ms. Kernels: gemm 3 x 2 ms,
 *   elementwise 3 x 0.5 ms, the NCCL kernel 1 x 8 ms (21-29 ms, launched from thread 101, which
 *   has no name record), the weird-named kernel 1 x 0.5 ms running after the END (30.5-31 ms,
 *   written after END, joined by correlation). 3 HtoD copies of 1 MiB (0.1 ms), 1 memset of
 *   4 KiB (0.1 ms). The first launch is written before BEGIN. 3 ring_full drops.
 *   GPU busy: 2.6 + 2.6 + 8 = 13.2 ms of 30 ms = 44.0%.
 * Outside: a kernel at 40 ms with an unknown correlation id (written after END).
 * Window 1: steps 15-16 at FX_T + 1000/1010 ms, ends at +1020 ms: gemm 2 x 2 ms, 2 cupti drops,
 *   and one late record (a kernel of window 0's launch 61, read after window 1 began).
 *   GPU busy 4 of 20 ms = 20.0%.
 * Totals: gemm 5 calls 10 ms, nccl 8 ms, elementwise 1.5 ms, weird 0.5 ms = 20 ms.
 * Dropped: 6 (cupti 2, ring_full 3, window_cap 0, late 1). Flows: 12 in window 0, 2 in 1. */
__attribute__((unused)) static void fx_write_sample(const char *path)
{
	struct sp_trace_writer *w = fx_create(path);
	struct sp_event e;
	const uint64_t T = FX_T, T1 = FX_T + 1000 * MS;

	e = fx_ev(SP_EV_THREAD, T - MS, T - MS);
	e.tid = 100, e.name = S_MAIN_THREAD;
	fx_put(w, e);
	e = fx_ev(SP_EV_DEVICE, T - MS, T - MS);
	e.device = 0, e.name = S_GPU, e.u.dev.sm_count = 132, e.u.dev.cc_major = 9, e.u.dev.memory = 80ull << 30;
	fx_put(w, e);
	fx_put(w, fx_api(T + 100 * US, 11, S_LAUNCH, 100)); /* read before its window's BEGIN */
	fx_put(w, fx_window(SP_EV_WINDOW_BEGIN, 0, 5, T, 0));
	fx_step0(w, T, 5, 10, 1, 0);
	fx_step0(w, T + 10 * MS, 6, 20, 0, 0);
	fx_put(w, fx_dropped(SP_DROP_RING, 3, T + 15 * MS));
	fx_step0(w, T + 20 * MS, 7, 30, 0, 1);

	e = fx_ev(SP_EV_NCCL, T + 20500 * US, T + 20600 * US);
	e.sub = SP_NCCL_ALLREDUCE, e.name = S_ALLREDUCE, e.tid = 101, e.device = 0, e.stream = 13;
	e.u.nccl.count = 1 << 20, e.u.nccl.bytes = 4 << 20, e.u.nccl.comm = 0xabcdef0123456789ull;
	e.u.nccl.seq = 42, e.u.nccl.peer = -1, e.u.nccl.comm_rank = 1, e.u.nccl.comm_size = 2;
	e.u.nccl.dtype = 7, e.u.nccl.redop = 0;
	fx_put(w, e);
	fx_put(w, fx_api(T + 20550 * US, 50, S_LAUNCH_EX, 101));
	fx_put(w, fx_gpu(SP_EV_KERNEL, T + 21 * MS, T + 29 * MS, 50, S_NCCL_KERNEL, 13));
	fx_put(w, fx_api(T + 25 * MS, 51, S_MEMSET_API, 100));
	e = fx_gpu(SP_EV_MEMSET, T + 25100 * US, T + 25200 * US, 51, 0, 7);
	e.u.copy.bytes = 4096, e.u.copy.dst_kind = 3;
	fx_put(w, e);
	e = fx_ev(SP_EV_ALLOC, T + 1 * MS, T + 1 * MS);
	e.sub = SP_MEM_DEVICE, e.device = 0, e.tid = 100, e.u.mem.addr = 0x7f0000000000, e.u.mem.size = 1 << 20;
	e.u.mem.live = 1 << 20;
	fx_put(w, e);
	e.kind = SP_EV_FREE, e.start = e.end = T + 28 * MS, e.u.mem.live = 0;
	fx_put(w, e);
	fx_put(w, fx_api(T + 29 * MS, 0, S_SYNC_API, 100));
	e = fx_ev(SP_EV_SYNC, T + 29 * MS, T + 29500 * US);
	e.sub = 3, e.tid = 100, e.device = 0, e.stream = 7;
	fx_put(w, e);
	fx_put(w, fx_api(T + 29800 * US, 60, S_LAUNCH, 100));
	fx_put(w, fx_api(T + 29900 * US, 61, S_LAUNCH, 100));
	fx_put(w, fx_window(SP_EV_WINDOW_END, 0, 7, T + 30 * MS, 3));
	fx_put(w, fx_gpu(SP_EV_KERNEL, T + 30500 * US, T + 31 * MS, 60, S_WEIRD, 7));  /* after END, by corr */
	fx_put(w, fx_gpu(SP_EV_KERNEL, T + 40 * MS, T + 41 * MS, 999, S_GEMM, 7));    /* outside */

	fx_put(w, fx_window(SP_EV_WINDOW_BEGIN, 1, 15, T1, 0));
	fx_put(w, fx_gpu(SP_EV_KERNEL, T + 31 * MS, T + 32 * MS, 61, S_GEMM, 7)); /* late: window 0 is out */
	for (int i = 0; i < 2; i++) {
		uint64_t s = T1 + (uint64_t)i * 10 * MS;
		fx_put(w, fx_api(s + 100 * US, 100 + (uint32_t)i, S_LAUNCH, 100));
		fx_put(w, fx_gpu(SP_EV_KERNEL, s + 1 * MS, s + 3 * MS, 100 + (uint32_t)i, S_GEMM, 7));
		fx_put(w, fx_step(15 + i, s, i == 1));
	}
	fx_put(w, fx_dropped(SP_DROP_CUPTI, 2, T1 + 5 * MS));
	fx_put(w, fx_window(SP_EV_WINDOW_END, 1, 16, T1 + 20 * MS, 2));
	if (sp_trace_close(w)) {
		fprintf(stderr, "fixture: closing %s failed\n", path);
		exit(1);
	}
}

/* The whole of a file as a NUL-terminated string (NULL if unreadable). */
__attribute__((unused)) static char *fx_slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0, k;

	if (!f)
		return NULL;
	do {
		if (n + 4096 + 1 > cap) {
			cap = cap * 2 + 8192;
			buf = realloc(buf, cap);
		}
		k = fread(buf + n, 1, cap - n - 1, f);
		n += k;
	} while (k);
	fclose(f);
	buf[n] = 0;
	return buf;
}

/* Occurrences of needle in hay. */
__attribute__((unused)) static int fx_count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

#endif
