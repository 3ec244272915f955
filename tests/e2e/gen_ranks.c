/* SPDX-License-Identifier: MIT */
/* gen_ranks.c - writes synthetic traces of a data-parallel job, one per rank, for the cross-rank
 * diagnosis tests (`stepprof steps`): each step a host gap, forward/backward kernels on the compute
 * stream, BUCKETS AllReduce calls (one communicator, sequence numbers shared by all ranks) whose
 * NCCL kernels start when their rank gets there and all end together after the last arrival plus
 * the transfer, an optimizer kernel and a device synchronisation. One rank can be late on the host
 * (a gap before its launches), in compute (longer kernels) or in communication (a slow transfer of
 * its own before the shared collectives); a rank's wall clock can be skewed;
 * ranks can sit on several hosts (own CLOCK_MONOTONIC base each). One rank can end its steps with
 * .item() (a 4-byte copy to the host, then cudaStreamSynchronize with its CUPTI sync record) instead
 * of the device synchronisation, and one rank's NCCL kernels can lack times (start = end = 0, as
 * CUPTI leaves them at times). Deterministic (seeded).
 * Usage: gen_ranks OUTDIR [--ranks N] [--steps S] [--late R --cause host|compute|comm] [--amount NS]
 *                  [--skew R:NS ...] [--hosts K] [--item R] [--untimed-nccl R]
 * writes OUTDIR/rankR.sptrace for R in 0..N-1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "trace/trace.h"

#define KERNELS 8       /* forward + backward kernels per step */
#define BUCKETS 4       /* AllReduce calls per step, after backward kernels 4..7 */
#define REAL0 1764000000000000000ull  /* wall clock at true time 0 */
#define COMM 0x5eed0c0ffee0001ull

static const char *const strings[] = {
	NULL,
	"cudaLaunchKernel",
	"ncclAllReduce",
	"sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x32",
	"ncclDevKernel_AllReduce_Sum_f32_RING_LL",
	"cudaDeviceSynchronize",
	"void at::native::vectorized_elementwise_kernel<4, at::native::AdamFunctor>",
	"python3",
	"NVIDIA H100",
	"cudaMemcpyAsync",
	"cudaStreamSynchronize",
};
enum { S_LAUNCH = 1, S_NCCL, S_GEMM, S_NCCLK, S_SYNC, S_ADAM, S_THREAD, S_DEV, S_MEMCPY, S_STREAM_SYNC };

static const char *lookup(void *ctx, uint32_t id)
{
	return id < sizeof(strings) / sizeof(strings[0]) ? strings[id] : NULL;
}

struct step {     /* one rank's step, true time (ns) */
	uint64_t start, launch, end;
	uint64_t ks[KERNELS], ke[KERNELS];
	uint64_t call[BUCKETS], bs[BUCKETS], be[BUCKETS];
	uint64_t os, oe;        /* optimizer kernel */
	uint64_t xc, xs, xe;    /* --cause comm: its own extra collective (call, kernel) before bucket 0 */
};

static uint64_t rng = 88172645463325252ull;
static uint64_t jitter(uint64_t max)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return max ? rng % max : 0;
}

static int put(struct sp_trace_writer *w, struct sp_event ev)
{
	return sp_trace_write(w, &ev) < 0;
}

/* .item() of a loss on the compute stream, called at t (trace clock) after the optimizer launch:
 * cudaMemcpyAsync of 4 bytes to the host (its copy runs when the stream reaches it, after the
 * optimizer kernel that ends at oe), then cudaStreamSynchronize until just before the step's end
 * with CUPTI's sync record (a stream synchronisation, no thread). Returns nonzero on a write error. */
static int item_call(struct sp_trace_writer *w, uint32_t tid, uint32_t *corr, uint64_t t, uint64_t oe, uint64_t end)
{
	int bad = put(w, (struct sp_event){ .kind = SP_EV_API,
					    .sub = 1,
					    .device = 0,
					    .tid = tid,
					    .start = t,
					    .end = t + 3000,
					    .corr = *corr,
					    .name = S_MEMCPY,
					    .u.api.cbid = 41 });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_MEMCPY,
					 .sub = 2,
					 .device = 0,
					 .start = oe + 1000,
					 .end = oe + 3000,
					 .corr = (*corr)++,
					 .stream = 7,
					 .context = 1,
					 .u.copy = { .bytes = 4, .async = 1 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_API,
					 .sub = 1,
					 .device = 0,
					 .tid = tid,
					 .start = t + 4000,
					 .end = end - 1000,
					 .corr = *corr,
					 .name = S_STREAM_SYNC,
					 .u.api.cbid = 131 });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_SYNC,
					 .sub = 3,
					 .device = SP_NO_DEVICE,
					 .start = t + 4500,
					 .end = end - 1500,
					 .corr = (*corr)++,
					 .stream = 7,
					 .context = 1 });
	return bad;
}

int main(int argc, char **argv)
{
	int n = 2, steps = 10, late = -1, hosts = 1, cause = 0; /* 1 host, 2 compute, 3 comm */
	int item = -1, untimed = -1;
	uint64_t amount = 0;
	int64_t *skew;
	const char *dir = NULL;

	skew = calloc(65536, sizeof(*skew));
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--ranks") && v)
			n = atoi(argv[++i]);
		else if (!strcmp(o, "--steps") && v)
			steps = atoi(argv[++i]);
		else if (!strcmp(o, "--late") && v)
			late = atoi(argv[++i]);
		else if (!strcmp(o, "--amount") && v)
			amount = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(o, "--hosts") && v)
			hosts = atoi(argv[++i]);
		else if (!strcmp(o, "--item") && v)
			item = atoi(argv[++i]);
		else if (!strcmp(o, "--untimed-nccl") && v)
			untimed = atoi(argv[++i]);
		else if (!strcmp(o, "--cause") && v) {
			i++;
			cause = !strcmp(v, "host")      ? 1
				: !strcmp(v, "compute") ? 2
				: !strcmp(v, "comm")    ? 3
				: !strcmp(v, "none")    ? 0
							: -1;
		} else if (!strcmp(o, "--skew") && v && strchr(v, ':')) {
			int r = atoi(v);
			if (r >= 0 && r < 65536)
				skew[r] = strtoll(strchr(v, ':') + 1, NULL, 10);
			i++;
		} else if (o[0] != '-' && !dir)
			dir = o;
		else
			dir = NULL, i = argc;
	}
	if (!dir || n < 1 || n > 65536 || steps < 1 || hosts < 1 || cause < 0) {
		fprintf(stderr,
			"usage: gen_ranks OUTDIR [--ranks N] [--steps S] [--late R --cause host|compute|comm|none] "
			"[--amount NS] [--skew R:NS ...] [--hosts K] [--item R] [--untimed-nccl R]\n");
		return 2;
	}
	if (!amount)
		amount = cause == 1   ? 5000000
			 : cause == 3 ? 3000000
				      : 2; /* host: a 5 ms gap; compute: kernels 2x
		                                                             longer; comm: a 3 ms transfer of its own */

	/* simulate every rank together: the collectives couple them */
	struct step *st = calloc((size_t)n * (size_t)steps, sizeof(*st));
	uint64_t *t = calloc((size_t)n, sizeof(*t)); /* each rank's next step start */
	if (!st || !t)
		return 1;
	for (int r = 0; r < n; r++)
		t[r] = 1000000000ull + jitter(20000);
	for (int s = 0; s < steps; s++) {
		for (int r = 0; r < n; r++) {
			struct step *x = &st[(size_t)r * steps + s];
			uint64_t gpu = 0, kd = 300000;
			x->start = t[r];
			x->launch = x->start + 30000 + jitter(40000) + (r == late && cause == 1 ? amount : 0);
			if (r == late && cause == 2)
				kd *= amount;
			for (int k = 0; k < KERNELS; k++) {
				uint64_t at = x->launch + (uint64_t)k * 8000;
				x->ks[k] = (at + 4000 > gpu ? at + 4000 : gpu) + jitter(2000);
				x->ke[k] = x->ks[k] + kd + jitter(kd / 20);
				gpu = x->ke[k];
			}
			for (int b = 0; b < BUCKETS; b++) /* after backward kernel 4 + b */
				x->call[b] = x->launch + (uint64_t)(4 + b) * 8000 + 3000;
			if (r == late && cause == 3) { /* e.g. a pipeline transfer on its own slow link */
				x->xc = x->call[0] - 1500;
				x->xs = x->ke[3];
				x->xe = x->xs + amount;
			}
		}
		for (int b = 0; b < BUCKETS; b++) { /* NCCL's stream runs one bucket after the other */
			uint64_t last = 0;
			for (int r = 0; r < n; r++) {
				struct step *x = &st[(size_t)r * steps + s];
				uint64_t ready = x->ke[4 + b] > x->call[b] + 5000 ? x->ke[4 + b] : x->call[b] + 5000;
				uint64_t prev =
					b ? x->be[b - 1] : x->xe; /* NCCL's stream: one kernel after the other */
				x->bs[b] = prev > ready ? prev + 1000 : ready;
				last = x->bs[b] > last ? x->bs[b] : last;
			}
			uint64_t end = last + 150000 + jitter(5000);
			for (int r = 0; r < n; r++) /* a blocking collective ends within microseconds everywhere */
				st[(size_t)r * steps + s].be[b] = end + jitter(3000);
		}
		for (int r = 0; r < n; r++) {
			struct step *x = &st[(size_t)r * steps + s];
			x->os = x->be[BUCKETS - 1] > x->ke[KERNELS - 1] ? x->be[BUCKETS - 1] : x->ke[KERNELS - 1];
			x->os += 2000;
			x->oe = x->os + 80000 + jitter(4000);
			x->end = x->oe + 15000 + jitter(5000);
			t[r] = x->end;
		}
	}

	for (int r = 0; r < n; r++) {
		char path[4096];
		int host = (int)((long)r * hosts / n), bad = 0;
		uint64_t mono0 = 5000000000000ull * (uint64_t)(host + 1); /* CLOCK_MONOTONIC base of its host */
		int64_t ntp = (int64_t)(host * 37000) - 20000;           /* hosts' wall clocks differ a little */
		struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_RUNTIME_API | SP_FEAT_NCCL |
							       (r == item ? SP_FEAT_MEMCPY | SP_FEAT_SYNC : 0),
					   .pid = 10000 + r,
					   .rank = r,
					   .world_size = n,
					   .local_rank = r % 8,
					   .anchor_mono_ns = mono0,
					   .anchor_real_ns = (uint64_t)((int64_t)REAL0 + ntp + skew[r]) };
		snprintf(m.host, sizeof(m.host), "node%03d", host);
		snprintf(m.command, sizeof(m.command), "python train.py (synthetic rank %d of %d)", r, n);
		snprintf(path, sizeof(path), "%s/rank%d.sptrace", dir, r);
		unlink(path); /* a generator replaces its output (sp_trace_create never does) */
		struct sp_trace_writer *w = sp_trace_create(path, &m, lookup, NULL, 0);
		if (!w) {
			perror(path);
			return 1;
		}
		const struct step *x0 = &st[(size_t)r * steps], *xl = &st[(size_t)r * steps + steps - 1];
		const uint16_t none = SP_NO_DEVICE;
		uint32_t corr = 1, tid = 20000 + (uint32_t)r;
		bad |= put(w, (struct sp_event){ .kind = SP_EV_THREAD,
						 .device = none,
						 .tid = tid,
						 .start = mono0,
						 .end = mono0,
						 .name = S_THREAD });
		bad |= put(w, (struct sp_event){ .kind = SP_EV_DEVICE,
						 .device = 0,
						 .start = mono0,
						 .end = mono0,
						 .name = S_DEV,
						 .u.dev = { .sm_count = 132, .cc_major = 9 } });
		bad |= put(w, (struct sp_event){ .kind = SP_EV_WINDOW_BEGIN,
						 .device = none,
						 .start = mono0 + x0->start,
						 .end = mono0 + x0->start,
						 .u.window = { .id = 0, .first_step = 10 } });
		for (int s = 0; s < steps; s++) {
			const struct step *x = &st[(size_t)r * steps + s];
			bad |= put(w, (struct sp_event){ .kind = SP_EV_STEP,
							 .device = none,
							 .tid = tid,
							 .start = mono0 + x->start,
							 .end = mono0 + x->end,
							 .u.step.number = 10 + s });
			for (int k = 0; k < KERNELS; k++) {
				uint64_t at = mono0 + x->launch + (uint64_t)k * 8000;
				bad |= put(w, (struct sp_event){ .kind = SP_EV_API,
								 .sub = 1,
								 .device = 0,
								 .tid = tid,
								 .start = at,
								 .end = at + 3000,
								 .corr = corr,
								 .name = S_LAUNCH,
								 .u.api.cbid = 211 });
				bad |= put(w, (struct sp_event){ .kind = SP_EV_KERNEL,
								 .device = 0,
								 .start = mono0 + x->ks[k],
								 .end = mono0 + x->ke[k],
								 .corr = corr++,
								 .name = S_GEMM,
								 .stream = 7,
								 .context = 1 });
			}
			for (int b = 0; b < BUCKETS; b++) {
				uint64_t c0 = mono0 + x->call[b];
				struct sp_event call = { .kind = SP_EV_NCCL,
							 .sub = SP_NCCL_ALLREDUCE,
							 .device = 0,
							 .tid = tid,
							 .start = c0,
							 .end = c0 + 4000,
							 .corr = corr,
							 .name = S_NCCL };
				call.u.nccl = (struct sp_ev_nccl){ .count = 1 << 20,
								   .bytes = 4 << 20,
								   .comm = COMM,
								   .seq = 1000 + (uint64_t)s * BUCKETS + (uint64_t)b,
								   .peer = -1,
								   .comm_rank = r,
								   .comm_size = n,
								   .dtype = 7 };
				bad |= put(w, call);
				bad |= put(w, (struct sp_event){ .kind = SP_EV_API,
								 .sub = 2,
								 .device = 0,
								 .tid = tid,
								 .start = c0 + 1000,
								 .end = c0 + 3000,
								 .corr = corr,
								 .name = S_LAUNCH,
								 .u.api.cbid = 307 });
				bad |= put(w, (struct sp_event){ .kind = SP_EV_KERNEL,
								 .device = 0,
								 .start = r == untimed ? 0 : mono0 + x->bs[b],
								 .end = r == untimed ? 0 : mono0 + x->be[b],
								 .corr = corr++,
								 .name = S_NCCLK,
								 .stream = 13,
								 .context = 1 });
			}
			if (x->xe) { /* its own collective: a communicator of its own (nothing to pair) */
				uint64_t c0 = mono0 + x->xc;
				struct sp_event call = { .kind = SP_EV_NCCL,
							 .sub = SP_NCCL_ALLREDUCE,
							 .device = 0,
							 .tid = tid,
							 .start = c0,
							 .end = c0 + 1000,
							 .corr = corr,
							 .name = S_NCCL };
				call.u.nccl = (struct sp_ev_nccl){ .count = 1 << 20,
								   .bytes = 4 << 20,
								   .comm = COMM + 1 + (uint64_t)r,
								   .seq = (uint64_t)s,
								   .peer = -1,
								   .comm_rank = 0,
								   .comm_size = 1,
								   .dtype = 7 };
				bad |= put(w, call);
				bad |= put(w, (struct sp_event){ .kind = SP_EV_KERNEL,
								 .device = 0,
								 .start = mono0 + x->xs,
								 .end = mono0 + x->xe,
								 .corr = corr++,
								 .name = S_NCCLK,
								 .stream = 13,
								 .context = 1 });
			}
			uint64_t at = mono0 + x->launch + KERNELS * 8000 + 20000;
			bad |= put(w, (struct sp_event){ .kind = SP_EV_API,
							 .sub = 1,
							 .device = 0,
							 .tid = tid,
							 .start = at,
							 .end = at + 3000,
							 .corr = corr,
							 .name = S_LAUNCH,
							 .u.api.cbid = 211 });
			bad |= put(w, (struct sp_event){ .kind = SP_EV_KERNEL,
							 .device = 0,
							 .start = mono0 + x->os,
							 .end = mono0 + x->oe,
							 .corr = corr++,
							 .name = S_ADAM,
							 .stream = 7,
							 .context = 1 });
			if (r == item)
				bad |= item_call(w, tid, &corr, at + 5000, mono0 + x->oe, mono0 + x->end);
			else
				bad |= put(w, (struct sp_event){ .kind = SP_EV_API,
								 .sub = 1,
								 .device = 0,
								 .tid = tid,
								 .start = at + 5000,
								 .end = mono0 + x->end - 1000,
								 .corr = corr++,
								 .name = S_SYNC,
								 .u.api.cbid = 165 });
		}
		bad |= put(w, (struct sp_event){ .kind = SP_EV_CLOCK,
						 .device = none,
						 .start = mono0 + xl->end,
						 .end = mono0 + xl->end,
						 .u.clock.realtime_ns = m.anchor_real_ns + xl->end });
		bad |= put(w,
			   (struct sp_event){ .kind = SP_EV_WINDOW_END,
					      .device = none,
					      .start = mono0 + xl->end,
					      .end = mono0 + xl->end,
					      .u.window = { .id = 0, .first_step = 10, .last_step = 10 + steps - 1 } });
		if (bad || sp_trace_close(w)) {
			perror(path);
			return 1;
		}
	}
	free(st);
	free(t);
	free(skew);
	return 0;
}
