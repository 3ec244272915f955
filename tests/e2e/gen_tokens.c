/* SPDX-License-Identifier: MIT */
/* gen_tokens.c - writes synthetic token streams (trace/tokens.h) of the program classes that
 * automatic step detection must get right (docs/STEPS.md), each with its truth (a TRUTH token at
 * every true iteration start) and an .ini beside it saying whether it must lock:
 *   gen_tokens DIR   -> DIR/<class>.sptokens and DIR/<class>.ini for every class below.
 * Times model a real run: launches a few microseconds apart, a blocking call followed by the GPU's
 * catch-up, the loop's wrap (Python, data loading) before the first launch of an iteration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/tokens.h"
#include "collector/base/intern.h"

static struct sp_tok_writer *w;
static uint64_t now = 1000000000ull;
static uint64_t rng = 88172645463325252ull;
static uint32_t tid = 4242;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void emit(int kind, int flags, const char *name, uint64_t gap)
{
	struct sp_token t = { .kind = (uint8_t)kind, .flags = (uint8_t)flags, .tid = tid };
	now += gap;
	t.ts = now;
	t.name = name ? sp_intern(name) : 0;
	if (sp_tok_add(w, &t, name) < 0) {
		fprintf(stderr, "gen_tokens: write failed\n");
		exit(1);
	}
}

static void launch(const char *name)
{
	emit(SP_TOK_KERNEL, 0, name, 3000 + rnd(4000));
}

static void dlaunch(const char *name) /* a driver launch (cuBLAS, Triton, XLA, NCCL) */
{
	emit(SP_TOK_KERNEL, SP_TOKF_DRIVER, name, 3000 + rnd(4000));
}

/* A blocking call: the GPU's backlog drains during it (gpu_ns), the next token comes after. */
static void sync_call(const char *name, uint64_t gpu_ns)
{
	emit(SP_TOK_API, SP_TOKF_SYNC | (name[2] == 'd' ? 0 : SP_TOKF_DRIVER), name, 2000 + rnd(1000));
	now += gpu_ns;
}

static void truth(void)
{
	emit(SP_TOK_TRUTH, 0, "truth_step", 0);
}

static void wrap(uint64_t ns) /* the loop's own time between iterations */
{
	now += ns + rnd(ns / 4 + 1);
}

/* n launches named prefix_0 .. prefix_{n-1} (layers repeat the same names: `layer` % kinds) */
static void block(const char *prefix, int n, int kinds, int driver)
{
	char nm[96];
	for (int i = 0; i < n; i++) {
		snprintf(nm, sizeof nm, "%s_%d", prefix, kinds ? i % kinds : i);
		driver ? dlaunch(nm) : launch(nm);
	}
}

static void open_class(const char *dir, const char *name, const char *truth_spec, int must_lock, const char *what)
{
	char path[512], err[256];
	struct sp_tok_header h = { .pid = 1 };
	snprintf(h.stepprof, sizeof h.stepprof, "synthetic");
	snprintf(h.truth, sizeof h.truth, "%s", truth_spec);
	snprintf(h.command, sizeof h.command, "gen_tokens %s", name);
	snprintf(path, sizeof path, "%s/%s.sptokens", dir, name);
	if (!(w = sp_tok_create(path, &h, err, sizeof err))) {
		fprintf(stderr, "gen_tokens: %s\n", err);
		exit(1);
	}
	snprintf(path, sizeof path, "%s/%s.ini", dir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	fprintf(f, "# synthetic (tests/e2e/gen_tokens.c): %s\nprogram = %s\ntruth = %s\nexpect = %s\n", what, name,
		truth_spec, must_lock ? "lock" : "nolock");
	fclose(f);
}

static void close_class(void)
{
	if (sp_tok_close(w) < 0) {
		fprintf(stderr, "gen_tokens: close failed\n");
		exit(1);
	}
}

static void setup(void) /* parameter uploads: copy, synchronise, a few init kernels */
{
	for (int i = 0; i < 60; i++) {
		emit(SP_TOK_API, SP_TOKF_SYNC, "cudaMemcpy", 20000 + rnd(5000));
		if (i % 3 == 0)
			launch("init_kernel");
	}
}

/* A GPT-2 style pass: 12 identical layers of 12 kernels, a head of 4. */
static void forward(void)
{
	block("layer_fwd", 144, 12, 1);
	block("head_fwd", 4, 0, 0);
}

/* 20 validation passes (148 kernels, a blocking copy of the loss), then training (497 kernels, a
 * blocking copy), with 5 validation passes at the end of every 25th iteration. */
static void eval_train(const char *dir)
{
	open_class(dir, "eval_train", "nvtx:truth_step", 1, "validation before training and every 25 steps");
	setup();
	for (int v = 0; v < 20; v++) {
		forward();
		sync_call("cudaMemcpy", 900000);
		wrap(40000);
	}
	for (int it = 0; it < 120; it++) {
		truth();
		forward();
		block("layer_bwd", 288, 24, 1);
		block("head_bwd", 12, 0, 0);
		block("adamw", 49, 0, 0);
		sync_call("cudaMemcpy", 3000000);
		if (it % 25 == 24)
			for (int v = 0; v < 5; v++) {
				forward();
				sync_call("cudaMemcpy", 900000);
				wrap(40000);
			}
		wrap(300000);
	}
	close_class();
}

/* 4 micro-batches (no host sync), then the optimizer and loss.item(): the step is the optimizer's. */
static void grad_accum(const char *dir)
{
	open_class(dir, "grad_accum", "nvtx:truth_step", 1, "gradient accumulation, 4 micro-batches per step");
	setup();
	for (int it = 0; it < 60; it++) {
		truth();
		for (int m = 0; m < 4; m++) {
			wrap(150000); /* the data loader */
			block("mlp_fwd", 24, 3, 0);
			block("mlp_bwd", 48, 6, 0);
			emit(SP_TOK_API, 0, "cudaMemcpyAsync", 4000);
		}
		block("adam", 4, 0, 0);
		emit(SP_TOK_API, 0, "cudaMemcpyAsync", 4000);
		sync_call("cudaStreamSynchronize", 2000000);
		wrap(100000);
	}
	close_class();
}

/* torch.compile(mode="reduce-overhead"): eager warm-up, capture, then one graph launch and one
 * eager kernel per iteration, no host synchronisation. */
static void graphs(const char *dir)
{
	open_class(dir, "graphs", "nvtx:truth_step", 1, "CUDA graphs, no host sync per step");
	setup();
	for (int it = 0; it < 80; it++) {
		truth();
		if (it < 2) {
			block("triton_poi_fused", 40, 0, 1);
		} else if (it == 2) {
			block("triton_poi_fused", 40, 0, 1); /* captured: CUPTI still sees the launches */
			emit(SP_TOK_API, SP_TOKF_SYNC, "cudaStreamSynchronize", 5000);
		} else {
			emit(SP_TOK_GRAPH, 0, "cudaGraphLaunch", 5000);
		}
		launch("copy_kernel");
		wrap(120000);
	}
	close_class();
}

/* JAX jit: driver launches, asynchronous dispatch, start-up autotuning that repeats (and
 * synchronises) a few times, then 8 kernels per iteration without host synchronisation. */
static void jax(const char *dir)
{
	open_class(dir, "jax", "nvtx:truth_step", 1, "JAX jit, autotuning at start-up, no host sync per step");
	for (int c = 0; c < 6; c++) /* autotuning: a repeated block of 12 per candidate */
		for (int k = 0; k < 5; k++) {
			dlaunch("RepeatBufferKernelImpl");
			dlaunch("RedzoneAllocatorKernelImpl");
			block(c % 2 ? "gemm_candidate_a" : "gemm_candidate_b", 6, 0, 1);
			dlaunch("xla_fp_comparison");
			dlaunch("xla_fp_comparison");
			dlaunch("RedzoneAllocatorKernelImpl");
			sync_call("cuCtxSynchronize", 300000);
			wrap(2000000);
		}
	for (int it = 0; it < 80; it++) {
		truth();
		block("fusion", 8, 0, 1);
		wrap(90000);
	}
	close_class();
}

/* DDP: gradient buckets all-reduced with NCCL during backward; the loop's cudaDeviceSynchronize,
 * followed in the first ten iterations by DDP's eight cudaEventSynchronize. */
/* DDP: forward, backward buckets each all-reduced, SGD, cudaDeviceSynchronize; DDP's eight
 * cudaEventSynchronize of its runtime statistics in the first ten iterations only. With eval_at > 0,
 * a forward-only evaluation (5 passes, each ending in the loop's own sync) at the start of iteration
 * eval_at (nanoGPT's estimate_loss on rank 0, tests/data/corpus/nanogpt_ddp.rank0): the training
 * loop re-locks without the event syncs, a period of other length, and must keep its numbering.
 * With change_at > 0 the loop launches one kernel more from that iteration on (another GEMM for a
 * new shape): a new training regime, whose steps must number on from the first's. */
static void ddp_loop(const char *dir, const char *name, int eval_at, int change_at, int iters, const char *what)
{
	open_class(dir, name, "nvtx:truth_step", 1, what);
	setup();
	for (int it = 0; it < iters; it++) {
		truth();
		for (int v = 0; eval_at && it == eval_at && v < 5; v++) {
			block("fwd", 30, 10, 0);
			sync_call("cudaDeviceSynchronize", 900000);
			wrap(40000);
		}
		block("fwd", 30, 10, 0);
		if (change_at && it >= change_at)
			launch("gemm_new_shape");
		for (int b = 0; b < 4; b++) {
			block("bwd", 15, 5, 0);
			emit(SP_TOK_NCCL, 0, "ncclAllReduce", 3000);
			dlaunch("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
		}
		block("sgd", 20, 0, 0);
		sync_call("cudaDeviceSynchronize", 2500000);
		for (int e = 0; it < 10 && e < 8; e++)
			sync_call("cudaEventSynchronize", 1000);
		wrap(200000);
	}
	close_class();
}

static void ddp(const char *dir)
{
	ddp_loop(dir, "ddp", 0, 0, 60, "DDP with NCCL all-reduce, changing syncs");
}

/* One rank of tests/gpu/corpus/ddp_train.py (DDP under torchrun): pinned batches copied without a
 * sync, forward on the main thread, backward on autograd's device thread with DDP's two gradient
 * buckets all-reduced there, gradient clipping and AdamW(foreach), loss.item() every log_every-th
 * iteration (none in the others), and an evaluation pass (8 forward-only batches, their loss
 * all-reduced and read once) at the start of iteration 0 and of every 50th. */
static void ddp_eval_pass(void)
{
	for (int b = 0; b < 8; b++) {
		emit(SP_TOK_API, 0, "cudaMemcpyAsync", 4000);
		emit(SP_TOK_API, 0, "cudaMemcpyAsync", 4000);
		block("fwd", 26, 13, 0);
		block("xent_eval", 3, 0, 0);
		launch("add_eval");
	}
	emit(SP_TOK_NCCL, 0, "ncclAllReduce", 3000);
	dlaunch("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
	emit(SP_TOK_API, 0, "cudaMemcpyAsync", 4000);
	sync_call("cudaStreamSynchronize", 900000);
}

static void ddp_eval(const char *dir, const char *name, int log_every, int must_lock, const char *what)
{
	open_class(dir, name, "nvtx:truth_step", must_lock, what);
	setup();
	for (int it = 0; it < 200; it++) {
		truth();
		if (it % 50 == 0)
			ddp_eval_pass();
		emit(SP_TOK_API, 0, "cudaMemcpyAsync", 4000);
		emit(SP_TOK_API, 0, "cudaMemcpyAsync", 4000);
		block("fwd", 26, 13, 0);
		block("xent", 3, 0, 0);
		tid = 4243; /* autograd's device thread */
		block("bwd", 24, 12, 0);
		emit(SP_TOK_NCCL, 0, "ncclAllReduce", 3000);
		dlaunch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
		block("bwd_head", 24, 12, 0);
		emit(SP_TOK_NCCL, 0, "ncclAllReduce", 3000);
		dlaunch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
		tid = 4242;
		block("clip_norm", 5, 0, 0);
		block("adamw_foreach", 10, 0, 0);
		if (it % log_every == 0) {
			emit(SP_TOK_API, 0, "cudaMemcpyAsync", 4000);
			sync_call("cudaStreamSynchronize", 2000000);
		}
		wrap(250000);
	}
	close_class();
}

/* The first iterations differ (cuDNN/cuBLAS autotuning, extra kernels), then the loop settles. */
static void warmup(const char *dir)
{
	open_class(dir, "warmup", "nvtx:truth_step", 1, "first iterations differ");
	setup();
	for (int it = 0; it < 60; it++) {
		truth();
		if (it < 3)
			for (int k = 0; k < 20 + 7 * it; k++)
				launch(k % 2 ? "cudnn_find_algo" : "cublas_heuristic_probe");
		block("conv", 50, 0, 0);
		emit(SP_TOK_API, 0, "cudaMemcpyAsync", 4000);
		sync_call("cudaStreamSynchronize", 1500000);
		wrap(150000);
	}
	close_class();
}

/* Mixture of experts: the experts each iteration runs depend on the data: must not lock. */
static void datadep(const char *dir)
{
	char nm[64];
	open_class(dir, "datadep", "nvtx:truth_step", 0, "data-dependent kernels (MoE routing)");
	setup();
	for (int it = 0; it < 80; it++) {
		truth();
		block("shared", 20, 0, 0);
		for (int e = 0, n = 2 + (int)rnd(5); e < n; e++) {
			snprintf(nm, sizeof nm, "expert_gemm_%u", rnd(8));
			for (int k = 0; k < 3; k++)
				launch(nm);
		}
		sync_call("cudaStreamSynchronize", 1000000);
		wrap(150000);
	}
	close_class();
}

/* A CUDA C program calling cuBLAS in a loop (driver launches), no NVTX; cudaDeviceSynchronize per
 * iteration; truth from an API call the program makes once per iteration. */
static void cublas(const char *dir)
{
	open_class(dir, "cublas", "api:cuDriverGetVersion", 1, "CUDA C + cuBLAS loop, no NVTX");
	for (int it = 0; it < 60; it++) {
		emit(SP_TOK_TRUTH, 0, "cuDriverGetVersion", 1000);
		block("sm90_xmma_gemm", 6, 0, 1);
		launch("bias_act");
		sync_call("cudaDeviceSynchronize", 800000);
		wrap(30000);
	}
	close_class();
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_tokens DIR\n");
		return 2;
	}
	eval_train(argv[1]);
	grad_accum(argv[1]);
	graphs(argv[1]);
	jax(argv[1]);
	ddp(argv[1]);
	ddp_eval(argv[1], "ddp_eval", 1, 1,
		 "DDP (ddp_train.py): NCCL buckets on autograd's thread, eval every 50 steps");
	/* the same loop reading its loss only every 10th iteration: no iteration but every 10th has a host
	 * sync, and the one-iteration period never repeats the NOSYNC_REPEATS copies a CPU-gap wrap
	 * needs (autostep.c). Today's answer is "undecided" at exit: no step at all, never a wrong
	 * one (nolock also refuses a lock on the ten-iteration period). A detector that learns such
	 * loops turns this into a class that must lock. */
	ddp_eval(argv[1], "ddp_log10", 10, 0, "DDP as ddp_eval, loss read every 10th step: undecided today");
	/* issue 12 (nanogpt_ddp on 2 GPUs): before the fix the re-lock after the evaluation was a new
	 * regime numbered from its first iteration, and the default schedule recorded steps 11-13 twice */
	ddp_loop(argv[1], "ddp_evalmid", 20, 0, 60, "DDP, event syncs stop at 10, evaluation at 20: one loop");
	ddp_loop(argv[1], "train_change", 20, 30, 70, "training whose kernels change at 30: numbered on");
	warmup(argv[1]);
	datadep(argv[1]);
	cublas(argv[1]);
	return 0;
}
