/* SPDX-License-Identifier: MIT */
/* gen_golden.c - writes tests/golden/small.sptrace: a small trace with every record kind over
 * three chunks, a name reused across chunks and a name that needs escaping, call stacks (one
 * shared by two records, one the producer does not know), a snapshot and a peak allocation. Everything is fixed
 * (no clock, pid or host is read), so two runs with one zstd version give identical bytes.
 * Usage: gen_golden OUT.sptrace [RANK RUN_ID [FIRST_STEP]] | gen_golden --zstd-version
 * (RANK, RUN_ID and FIRST_STEP replace the golden's rank 1, run id and step numbers 1-2: the
 * README walk's runs of two ranks) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include "trace/trace.h"
#include "config/schedule.h"

#define T0 1000000000000ull /* trace clock at the header anchor */

static const char *const strings[] = {
	NULL,
	"vec_add",
	"void gemm<float, 128>(float const*, float*, int)",
	"cudaLaunchKernel",
	"ncclAllReduce",
	"train_step",
	"my-domain",
	"data \"loader\"\tworker",
	"NVIDIA H100 80GB HBM3",
	"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
	"cudaMalloc",
	"forward",
	"aten::mm",
	"[[64, 32], [32, 16]]",
};

static const char *lookup(void *ctx, uint32_t id)
{
	return id < sizeof(strings) / sizeof(strings[0]) ? strings[id] : NULL;
}

/* stack 1: three frames, the outer one below the inner ones; stack 2: one frame; 3: unknown */
static const uint64_t stack1[] = { 0x7f0000001234ull, 0x7f00000ff000ull, 0x55550000abcdull };
static const uint64_t stack2[] = { 0x7f0000002000ull };

static const uint64_t *stack_lookup(void *ctx, uint32_t id, uint32_t *n)
{
	*n = id == 1 ? 3 : 1;
	return id == 1 ? stack1 : id == 2 ? stack2 : NULL;
}

static int put(struct sp_trace_writer *w, struct sp_event ev)
{
	return sp_trace_write(w, &ev) < 0;
}

static struct sp_event kernel(uint64_t at, uint32_t corr, uint32_t name, uint32_t grid)
{
	return (struct sp_event){
		.kind = SP_EV_KERNEL,
		.device = 0,
		.start = T0 + at,
		.end = T0 + at + 2500,
		.corr = corr,
		.name = name,
		.stream = 7,
		.context = 1,
		.u.kernel = { .grid = { grid, 1, 1 }, .block = { 256, 1, 1 }, .regs = 32, .dynamic_smem = 1024 }
	};
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--zstd-version")) {
		puts(ZSTD_versionString());
		return 0;
	}
	if (argc != 2 && argc != 4 && argc != 5) {
		fprintf(stderr,
			"usage: gen_golden OUT.sptrace [RANK RUN_ID [FIRST_STEP]] | gen_golden --zstd-version\n");
		return 2;
	}
	struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_MEMCPY | SP_FEAT_RUNTIME_API | SP_FEAT_NCCL,
				   .pid = 4242,
				   .rank = 1,
				   .world_size = 2,
				   .local_rank = 1,
				   .anchor_mono_ns = T0,
				   .anchor_real_ns = 1764000000000000000ull };
	strcpy(m.host, "golden-host");
	strcpy(m.command, "python train.py --steps 3");
	strcpy(m.run_id, "20261126-103000-4240");
	strcpy(m.producer, "stepprof golden");
	const uint32_t s1 = argc == 5 ? (uint32_t)atoi(argv[4]) : 1, s2 = s1 + 1; /* the two steps */
	if (argc >= 4) {
		m.rank = atoi(argv[2]);
		m.pid += m.rank;
		snprintf(m.run_id, sizeof(m.run_id), "%s", argv[3]);
	}
	struct sp_trace_writer *w = sp_trace_create(argv[1], &m, lookup, NULL, 0);
	if (!w) {
		perror(argv[1]);
		return 1;
	}
	sp_trace_set_stack_lookup(w, stack_lookup, NULL);
	const uint16_t none = SP_NO_DEVICE;
	int bad = 0;
	/* chunk 1: descriptions, window open, one step of CPU and GPU work */
	bad |= put(w, (struct sp_event){ .kind = SP_EV_CLOCK,
					 .device = none,
					 .start = T0,
					 .end = T0,
					 .u.clock.realtime_ns = m.anchor_real_ns });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_THREAD,
					 .device = none,
					 .tid = 4243,
					 .start = T0 + 10,
					 .end = T0 + 10,
					 .name = 7 });
	bad |= put(w, (struct sp_event){
			      .kind = SP_EV_DEVICE,
			      .device = 0,
			      .start = T0 + 20,
			      .end = T0 + 20,
			      .name = 8,
			      .u.dev = { .sm_count = 132, .cc_major = 9, .cc_minor = 0, .memory = 85899345920ull } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_MODULE,
					 .device = none,
					 .start = T0 + 30,
					 .end = T0 + 30,
					 .name = 9,
					 .u.module = { 0x7f0000000000ull, 0x7f0000400000ull, 0x1000 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_WINDOW_BEGIN,
					 .device = none,
					 .start = T0 + 1000,
					 .end = T0 + 1000,
					 .u.window = { .id = 0, .first_step = s1, .last_step = s2 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_ALLOC,
					 .sub = SP_MEM_DEVICE,
					 .device = 0,
					 .tid = 4242,
					 .start = T0 + 500,
					 .end = T0 + 500,
					 .u.mem = { .addr = 0x7f5400000000ull,
						    .size = 4096,
						    .live = 4096,
						    .stack = 1,
						    .flags = SP_MEMF_SNAPSHOT } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_STEP,
					 .sub = SP_ACT_RECORD,
					 .device = none,
					 .tid = 4242,
					 .start = T0 + 1000,
					 .end = T0 + 60000,
					 .name = 5,
					 .u.step.number = s1 });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_MARKER,
					 .device = none,
					 .tid = 4242,
					 .start = T0 + 1100,
					 .end = T0 + 30000,
					 .name = 11,
					 .u.marker = { .domain = 6, .depth = 0 } });
	bad |= put(w,
		   (struct sp_event){
			   .kind = SP_EV_MARKER, /* a torch op (format version 5) */
			   .device = none,
			   .tid = 4242,
			   .start = T0 + 1150,
			   .end = T0 + 1180,
			   .name = 12,
			   .u.marker = { .depth = 0, .flags = SP_MARKF_OP | SP_MARKF_SEQ, .shapes = 13, .seq = 7 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_ALLOC,
					 .sub = SP_MEM_DEVICE,
					 .device = 0,
					 .tid = 4242,
					 .start = T0 + 1200,
					 .end = T0 + 1900,
					 .corr = 9,
					 .name = 10,
					 .u.mem = { .addr = 0x7f5500000000ull,
						    .size = 1 << 20,
						    .live = 4096 + (1 << 20),
						    .stack = 1 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_API,
					 .sub = SP_API_RUNTIME,
					 .device = 0,
					 .tid = 4242,
					 .start = T0 + 2000,
					 .end = T0 + 5000,
					 .corr = 10,
					 .name = 3,
					 .u.api = { .cbid = 211, .status = 0, .stack = 2 } });
	bad |= put(w, kernel(6000, 10, 1, 64));
	bad |= put(w, (struct sp_event){ .kind = SP_EV_MEMCPY,
					 .sub = 1,
					 .device = 0,
					 .start = T0 + 9000,
					 .end = T0 + 12000,
					 .corr = 11,
					 .stream = 7,
					 .context = 1,
					 .u.copy = { .bytes = 1 << 20, .src_kind = 1, .dst_kind = 3, .async = 1 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_MEMSET,
					 .device = 0,
					 .start = T0 + 12500,
					 .end = T0 + 12900,
					 .corr = 12,
					 .stream = 7,
					 .context = 1,
					 .u.copy = { .bytes = 4096, .value = 0, .dst_kind = 3 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_SYNC,
					 .sub = 3,
					 .device = 0,
					 .tid = 4242,
					 .start = T0 + 13000,
					 .end = T0 + 20000,
					 .corr = 13,
					 .stream = 7,
					 .context = 1 });
	bad |= sp_trace_flush(w) < 0;
	/* chunk 2: collectives, a second step reusing names from chunk 1, the window's end */
	bad |= put(w, (struct sp_event){ .kind = SP_EV_COMM,
					 .sub = SP_COMM_INIT,
					 .device = 0,
					 .tid = 4242,
					 .start = T0 + 61000,
					 .end = T0 + 61000,
					 .name = 4,
					 .u.nccl = { .comm = 0x0123456789abcdefull, .comm_rank = 1, .comm_size = 2 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_STEP,
					 .sub = SP_ACT_RECORD_AND_SAVE,
					 .device = none,
					 .tid = 4242,
					 .start = T0 + 62000,
					 .end = T0 + 120000,
					 .name = 5,
					 .u.step = { .number = s2,
						     .how = 1,
						     .flags = 1,
						     .regime = 2,
						     .period = 498,
						     .launches = 497,
						     .every = 1,
						     .confidence = 5,
						     .relocks = 1 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_NCCL,
					 .sub = SP_NCCL_ALLREDUCE,
					 .device = 0,
					 .tid = 4242,
					 .start = T0 + 63000,
					 .end = T0 + 64000,
					 .corr = 14,
					 .name = 4,
					 .stream = 7,
					 .u.nccl = { .count = 262144,
						     .bytes = 1 << 20,
						     .comm = 0x0123456789abcdefull,
						     .seq = 0,
						     .peer = -1,
						     .comm_rank = 1,
						     .comm_size = 2,
						     .dtype = 7,
						     .redop = 0,
						     .group_depth = 0,
						     .stack = 3 } });
	bad |= put(w, kernel(65000, 15, 2, 128));
	bad |= put(w, kernel(68000, 16, 1, 64));
	bad |= put(w, (struct sp_event){ .kind = SP_EV_FREE,
					 .sub = SP_MEM_DEVICE,
					 .device = 0,
					 .tid = 4242,
					 .start = T0 + 100000,
					 .end = T0 + 100500,
					 .corr = 17,
					 .u.mem = { .addr = 0x7f5500000000ull, .size = 1 << 20, .live = 4096 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_ALLOC,
					 .sub = SP_MEM_DEVICE,
					 .device = 0,
					 .start = T0 + 120000,
					 .end = T0 + 120000,
					 .u.mem = { .live = 4096 + (1 << 20), .flags = SP_MEMF_PEAK } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_DROPPED,
					 .sub = SP_DROP_CAP,
					 .device = none,
					 .start = T0 + 120000,
					 .end = T0 + 120000,
					 .u.dropped.count = 3 });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_CLOCK,
					 .device = none,
					 .start = T0 + 120100,
					 .end = T0 + 120100,
					 .u.clock.realtime_ns = m.anchor_real_ns + 120150 });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_WINDOW_END,
					 .device = none,
					 .start = T0 + 120000,
					 .end = T0 + 120000,
					 .u.window = { .id = 0,
						       .capped = 1,
						       .first_step = s1,
						       .last_step = s2,
						       .bytes = 2048,
						       .dropped = 3 } });
	bad |= sp_trace_flush(w) < 0;
	/* chunk 3: after the window */
	bad |= put(w, kernel(130000, 18, 2, 128));
	bad |= put(w, (struct sp_event){ .kind = SP_EV_DROPPED,
					 .sub = SP_DROP_RING,
					 .device = none,
					 .start = T0 + 140000,
					 .end = T0 + 140000,
					 .u.dropped.count = 5 });
	if (sp_trace_close(w) < 0 || bad) {
		fprintf(stderr, "gen_golden: writing %s failed\n", argv[1]);
		return 1;
	}
	return 0;
}
