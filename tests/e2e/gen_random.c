/* SPDX-License-Identifier: MIT */
/* gen_random.c - writes traces of random but well-formed records, for tests/e2e/cli_random.sh:
 * every record kind with random sub codes, devices and payload bytes (string and stack ids within
 * the format's bounds, which the reader enforces), times that mostly rise
 * but sometimes run backwards, steps and windows in any order, names and call stacks the lookup
 * knows or does not. A trace a buggy or future collector could write; the CLI must read it
 * without crashing. Deterministic for a seed.
 * Usage: gen_random OUT_PREFIX COUNT SEED   (writes OUT_PREFIX0.sptrace ... ; exits 1 on a write
 * failure) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/trace.h"

#define T0 1000000000000ull

static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t below(uint64_t n)
{
	return n ? next() % n : 0;
}

static const char *const names[] = {
	NULL,
	"vec_add",
	"ncclDevKernel_AllReduce_Sum_f32_RING_LL",
	"cudaLaunchKernel",
	"ncclAllReduce",
	"train_step",
	"",
	"a \"quoted\"\tname\n",
	"NVIDIA H200",
	"/usr/lib/libcuda.so.1",
	"cudaMalloc",
	"void gemm<float, 128>(float const*, float*, int)",
	"cudaDeviceSynchronize",
	"forward",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* Ids past the table are unknown to the writer: written as "?". */
static const char *lookup(void *ctx, uint32_t id)
{
	return id < NNAMES ? names[id] : NULL;
}

static uint64_t stack_pcs[64];

/* Stacks 1..7 have 1..64 random frames; others are unknown (written empty). */
static const uint64_t *stack_lookup(void *ctx, uint32_t id, uint32_t *n)
{
	if (id == 0 || id > 7)
		return NULL;
	*n = 1 + (uint32_t)below(64);
	for (uint32_t i = 0; i < *n; i++)
		stack_pcs[i] = below(4) ? 0x7f0000000000ull + below(1u << 24) : next();
	return stack_pcs;
}

/* A value that is usually small and sometimes extreme. */
static uint64_t wild(uint64_t usual)
{
	switch (below(16)) {
	case 0:
		return 0;
	case 1:
		return UINT64_MAX;
	case 2:
		return next();
	case 3:
		return (uint64_t)INT64_MAX + below(3);
	default:
		return below(usual + 1);
	}
}

static struct sp_event random_event(uint64_t *t)
{
	struct sp_event ev;
	memset(&ev, 0, sizeof ev);
	for (size_t i = 0; i < sizeof ev.u; i += 8) { /* any payload bytes */
		uint64_t r = below(3) ? below(1000) : next();
		memcpy((char *)&ev.u + i, &r, sizeof ev.u - i < 8 ? sizeof ev.u - i : 8);
	}
	ev.kind = (uint8_t)(1 + below(SP_EV__COUNT - 1));
	ev.sub = (uint8_t)(below(4) ? below(12) : below(256));
	ev.device = (uint16_t)(below(4) ? below(3) : below(3) ? SP_NO_DEVICE : below(65536));
	ev.tid = (uint32_t)(100 + below(4));
	*t += below(8) ? below(50000) : wild(1000000);
	ev.start = below(32) ? *t : wild(T0);
	ev.end = below(16) ? ev.start + below(20000) : wild(T0);
	ev.corr = (uint32_t)below(200);
	ev.name = (uint32_t)(below(8) ? below(NNAMES) : below(100));
	ev.stream = (uint32_t)below(5);
	ev.context = (uint32_t)below(3);
	switch (ev.kind) {
	case SP_EV_STEP:
		ev.u.step.number = below(4) ? (int64_t)below(40) : (int64_t)next();
		break;
	case SP_EV_WINDOW_BEGIN:
	case SP_EV_WINDOW_END:
		ev.u.window.id = (uint32_t)below(4);
		ev.u.window.first_step = (int64_t)below(40) - 2;
		ev.u.window.last_step = ev.u.window.first_step + (int64_t)below(5) - 1;
		break;
	case SP_EV_API:
		ev.u.api.stack = (uint32_t)below(10);
		break;
	case SP_EV_MARKER:
		ev.u.marker.domain = (uint32_t)below(NNAMES + 3); /* a string id */
		ev.u.marker.flags = (uint32_t)below(8);          /* ops, modules, seq (version 5) */
		ev.u.marker.shapes = (uint32_t)below(NNAMES + 3);
		ev.u.marker.seq = below(4) ? (int64_t)below(50) : (int64_t)next();
		ev.u.marker.depth = (int32_t)below(5);
		break;
	case SP_EV_NCCL:
	case SP_EV_COMM:
		ev.u.nccl.stack = (uint32_t)below(10);
		ev.u.nccl.bytes = wild(1u << 26);
		ev.u.nccl.comm_size = below(4) ? (int32_t)(1 + below(8)) : (int32_t)next();
		break;
	case SP_EV_ALLOC:
	case SP_EV_FREE:
		ev.u.mem.stack = (uint32_t)below(10);
		ev.u.mem.addr = 0x7f0000000000ull + below(64) * 4096;
		ev.u.mem.size = wild(1u << 30);
		ev.u.mem.live = wild(1ull << 34);
		ev.u.mem.flags = (uint32_t)below(4);
		break;
	default:
		break;
	}
	return ev;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: gen_random OUT_PREFIX COUNT SEED\n");
		return 2;
	}
	int count = atoi(argv[2]);
	rng = strtoull(argv[3], NULL, 0) | 1;
	for (int f = 0; f < count; f++) {
		char path[4096];
		snprintf(path, sizeof path, "%s%d.sptrace", argv[1], f);
		struct sp_trace_meta m = { .features = next(),
					   .pid = (int32_t)below(100000),
					   .rank = (int32_t)below(4) - 1,
					   .world_size = (int32_t)below(9) - 1,
					   .local_rank = (int32_t)below(3) - 1,
					   .anchor_mono_ns = T0,
					   .anchor_real_ns = below(2) ? 1764000000000000000ull : wild(T0) };
		snprintf(m.host, sizeof m.host, "host%d", f);
		snprintf(m.command, sizeof m.command, "python train.py --seed %d", f);
		/* small chunks sometimes, so that strings and stacks cross chunk boundaries */
		struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, below(2) ? 0 : 512 + below(4096));
		if (!w) {
			perror(path);
			return 1;
		}
		sp_trace_set_stack_lookup(w, stack_lookup, NULL);
		uint64_t t = T0, n = below(3000);
		for (uint64_t i = 0; i < n; i++) {
			struct sp_event ev = random_event(&t);
			if (sp_trace_write(w, &ev) < 0) {
				perror(path);
				return 1;
			}
		}
		if (sp_trace_close(w) < 0) {
			perror(path);
			return 1;
		}
	}
	return 0;
}
