/* SPDX-License-Identifier: MIT */
/* gen_ops.c - writes a trace with torch operator and module ranges (format version 5), for
 * tests/e2e/cli_ops.sh: one window of two training steps on an "NVIDIA H200". The program's thread
 * (tid 100) runs the forward pass inside modules Net, Net.fc1 (aten::linear -> t, addmm: a gemm),
 * Net.conv (aten::conv2d -> convolution -> cudnn_convolution, the module's stride and padding),
 * Net.attn (flash attention), then a loss outside modules; autograd's thread (tid 200) runs two
 * backward nodes inside "autograd::engine::evaluate_function: ..." ranges, tied to the forward ops
 * by sequence numbers (10 and 11 in the first step, 110 and 111 in the second); the optimizer's foreach op; a kernel launched outside any op; a
 * plain NVTX range of the program (not an op). Every kernel per step (ns): gemm 4000, conv_fwd
 * 3000, flash_fwd 2000, loss 500, gemm_bwd 3000, conv_bwd 2500, foreach 1000, stray 200.
 * Usage: gen_ops OUT.sptrace */
#include <stdio.h>
#include "trace/trace.h"
#include "config/schedule.h"

#define T0 1000000000000ull

enum {
	S_GEMM = 1,
	S_CONVK,
	S_FLASHK,
	S_LOSSK,
	S_GEMMB,
	S_CONVB,
	S_FOREACHK,
	S_STRAY,
	S_LAUNCH,
	S_DEV,
	S_NET,
	S_FC1,
	S_CONV,
	S_ATTN,
	S_LINEAR,
	S_T,
	S_ADDMM,
	S_CONV2D,
	S_CONVOLUTION,
	S_CUDNN,
	S_FLASH,
	S_MSE,
	S_EVAL_ADDMM,
	S_ADDMM_BWD,
	S_MM,
	S_EVAL_CONV,
	S_CONV_BWD,
	S_CONVOLUTION_BWD,
	S_OPTIM,
	S_FOREACH,
	S_SH_LINEAR,
	S_SH_ADDMM,
	S_SH_CONV2D,
	S_SH_FLASH,
	S_SH_MM,
	S_SH_FOREACH,
	S_PARAMS,
	S_RANGE,
	S_NSTR
};

static const char *const strings[S_NSTR] = {
	[S_GEMM] = "sm90_xmma_gemm_bf16",
	[S_CONVK] = "cudnn_conv_fwd",
	[S_FLASHK] = "flash_fwd_kernel",
	[S_LOSSK] = "mse_kernel",
	[S_GEMMB] = "sm90_xmma_gemm_bf16_bwd",
	[S_CONVB] = "cudnn_conv_bwd",
	[S_FOREACHK] = "multi_tensor_apply_kernel",
	[S_STRAY] = "stray_kernel",
	[S_LAUNCH] = "cudaLaunchKernel",
	[S_DEV] = "NVIDIA H200",
	[S_NET] = "Net",
	[S_FC1] = "Net.fc1",
	[S_CONV] = "Net.conv",
	[S_ATTN] = "Net.attn",
	[S_LINEAR] = "aten::linear",
	[S_T] = "aten::t",
	[S_ADDMM] = "aten::addmm",
	[S_CONV2D] = "aten::conv2d",
	[S_CONVOLUTION] = "aten::convolution",
	[S_CUDNN] = "aten::cudnn_convolution",
	[S_FLASH] = "aten::_scaled_dot_product_flash_attention",
	[S_MSE] = "aten::mse_loss",
	[S_EVAL_ADDMM] = "autograd::engine::evaluate_function: AddmmBackward0",
	[S_ADDMM_BWD] = "AddmmBackward0",
	[S_MM] = "aten::mm",
	[S_EVAL_CONV] = "autograd::engine::evaluate_function: ConvolutionBackward0",
	[S_CONV_BWD] = "ConvolutionBackward0",
	[S_CONVOLUTION_BWD] = "aten::convolution_backward",
	[S_OPTIM] = "Optimizer.step#SGD.step",
	[S_FOREACH] = "aten::_foreach_add_",
	[S_SH_LINEAR] = "[[32, 64], [128, 64], [128]]",
	[S_SH_ADDMM] = "[[128], [32, 64], [64, 128], [], []]",
	[S_SH_CONV2D] = "[[8, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []]",
	[S_SH_FLASH] = "[[2, 4, 128, 64], [2, 4, 128, 64], [2, 4, 128, 64], [], []]",
	[S_SH_MM] = "[[32, 128], [128, 64]]",
	[S_SH_FOREACH] = "[[128, 64], [128], [16, 3, 3, 3], [16], [128, 64], [128], [16, 3, 3, 3], [16], []]",
	[S_PARAMS] = "stride=1,1 padding=1,1 dilation=1,1 groups=1",
	[S_RANGE] = "my_range",
};

static const char *lookup(void *ctx, uint32_t id)
{
	return id < S_NSTR ? strings[id] : NULL;
}

static struct sp_trace_writer *w;
static int bad;
static uint64_t base; /* the step's start */
static int64_t sq;    /* the step's first sequence number (torch's grow for the whole run) */

static void put(struct sp_event ev)
{
	bad |= sp_trace_write(w, &ev) < 0;
}

/* A range on tid from base + a to base + b: an op (seq < 0: none), a module or a plain range. */
static void range(uint32_t tid, uint64_t a, uint64_t b, uint32_t name, uint32_t flags, int depth, int64_t seq,
		  uint32_t shapes)
{
	put((struct sp_event){ .kind = SP_EV_MARKER,
			       .device = SP_NO_DEVICE,
			       .tid = tid,
			       .start = base + a,
			       .end = base + b,
			       .name = name,
			       .u.marker = { .depth = depth,
					     .flags = flags | (seq >= 0 ? SP_MARKF_SEQ : 0),
					     .shapes = shapes,
					     .seq = seq >= 0 ? seq : 0 } });
}

static void op(uint32_t tid, uint64_t a, uint64_t b, uint32_t name, int depth, int64_t seq, uint32_t shapes)
{
	range(tid, a, b, name, SP_MARKF_OP, depth, seq, shapes);
}

static void module(uint64_t a, uint64_t b, uint32_t name, int depth, uint32_t params)
{
	range(100, a, b, name, SP_MARKF_MODULE, depth, -1, params);
}

/* A launch on tid at base + at (correlation id corr) and its kernel, dur ns, later on the GPU. */
static void launch(uint32_t tid, uint64_t at, uint32_t corr, uint32_t kname, uint64_t dur)
{
	put((struct sp_event){ .kind = SP_EV_API,
			       .sub = SP_API_RUNTIME,
			       .device = SP_NO_DEVICE,
			       .tid = tid,
			       .start = base + at,
			       .end = base + at + 50,
			       .corr = corr,
			       .name = S_LAUNCH,
			       .u.api = { .cbid = 211 } });
	put((struct sp_event){ .kind = SP_EV_KERNEL,
			       .device = 0,
			       .start = base + at + 5000,
			       .end = base + at + 5000 + dur,
			       .corr = corr,
			       .name = kname,
			       .stream = 7,
			       .context = 1 });
}

/* One training step at base; corr ids from c. */
static void step(uint32_t c)
{
	module(1000, 20000, S_NET, 0, 0);
	module(2000, 8000, S_FC1, 1, 0);
	op(100, 2100, 7900, S_LINEAR, 0, sq + 10, S_SH_LINEAR);
	op(100, 2200, 2500, S_T, 1, sq + 10, 0);
	op(100, 2600, 7800, S_ADDMM, 1, sq + 10, S_SH_ADDMM);
	launch(100, 3000, c + 1, S_GEMM, 4000);
	module(9000, 15000, S_CONV, 1, S_PARAMS);
	op(100, 9100, 14900, S_CONV2D, 0, sq + 11, S_SH_CONV2D);
	op(100, 9200, 14800, S_CONVOLUTION, 1, sq + 11, 0);
	op(100, 9300, 14700, S_CUDNN, 2, -1, 0);
	launch(100, 10000, c + 2, S_CONVK, 3000);
	module(15500, 19500, S_ATTN, 1, 0);
	op(100, 16000, 19000, S_FLASH, 0, sq + 12, S_SH_FLASH);
	launch(100, 17000, c + 3, S_FLASHK, 2000);
	op(100, 21000, 23000, S_MSE, 0, sq + 13, 0);
	launch(100, 22000, c + 4, S_LOSSK, 500);
	range(100, 24000, 26000, S_RANGE, 0, 0, -1, 0); /* the program's own NVTX range */
	op(200, 30000, 40000, S_EVAL_ADDMM, 0, -1, 0);
	op(200, 30100, 39900, S_ADDMM_BWD, 1, sq + 10, 0);
	op(200, 30200, 35000, S_MM, 2, sq + 20, S_SH_MM);
	launch(200, 31000, c + 5, S_GEMMB, 3000);
	op(200, 41000, 45000, S_EVAL_CONV, 0, -1, 0);
	op(200, 41100, 44900, S_CONV_BWD, 1, sq + 11, 0);
	op(200, 41200, 44800, S_CONVOLUTION_BWD, 2, sq + 21, 0);
	launch(200, 42000, c + 6, S_CONVB, 2500);
	op(100, 50000, 60000, S_OPTIM, 0, -1, 0);
	op(100, 51000, 59000, S_FOREACH, 1, sq + 22, S_SH_FOREACH);
	launch(100, 52000, c + 7, S_FOREACHK, 1000);
	launch(100, 65000, c + 8, S_STRAY, 200); /* outside any op and module */
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_ops OUT.sptrace\n");
		return 2;
	}
	struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_RUNTIME_API | SP_FEAT_NVTX | SP_FEAT_OPS |
					       SP_FEAT_MODULES,
				   .pid = 4242,
				   .rank = -1,
				   .world_size = -1,
				   .local_rank = -1,
				   .anchor_mono_ns = T0 };
	snprintf(m.host, sizeof m.host, "ops-host");
	snprintf(m.command, sizeof m.command, "python train.py");
	w = sp_trace_create(argv[1], &m, lookup, NULL, 0);
	if (!w) {
		perror(argv[1]);
		return 1;
	}
	const uint16_t none = SP_NO_DEVICE;
	put((struct sp_event){ .kind = SP_EV_DEVICE, .device = 0, .start = T0, .end = T0, .name = S_DEV });
	put((struct sp_event){ .kind = SP_EV_WINDOW_BEGIN,
			       .device = none,
			       .start = T0 + 500,
			       .end = T0 + 500,
			       .u.window = { .id = 0, .first_step = 11, .last_step = 12 } });
	for (int s = 0; s < 2; s++) {
		base = T0 + 500 + (uint64_t)s * 100000;
		put((struct sp_event){ .kind = SP_EV_STEP,
				       .sub = s ? SP_ACT_RECORD_AND_SAVE : SP_ACT_RECORD,
				       .device = none,
				       .tid = 100,
				       .start = base,
				       .end = base + 100000,
				       .u.step.number = 11 + s });
		sq = 100 * s;
		step(1000 + 100 * (uint32_t)s);
	}
	put((struct sp_event){ .kind = SP_EV_WINDOW_END,
			       .device = none,
			       .start = T0 + 200500,
			       .end = T0 + 200500,
			       .u.window = { .id = 0, .first_step = 11, .last_step = 12 } });
	if (sp_trace_close(w) < 0 || bad) {
		fprintf(stderr, "gen_ops: writing %s failed\n", argv[1]);
		return 1;
	}
	return 0;
}
