/* SPDX-License-Identifier: MIT */
/* gen_pytrace.c - writes a small version-3 trace whose stacks hold Python frames, for
 * tests/e2e/cli_pystacks.sh: launches from the program's own lines through library frames, an
 * optimizer step, a stack without Python frames (the autograd thread's), a launch without a stack,
 * one with library frames only, a kernel without a launch record, a block made before the window (its stack merged:
 * native allocator frame, then Python lines), and a backward kernel (autograd's thread: its native frame, the mark
 * SP_FRAME_BACKWARD, then the frames of the thread in backward(): torch's, then train.py:45). With --trainer, an
 * HF Trainer-like program instead, whose own code is the single line run.py:30 trainer.train(): forward kernels
 * under transformers' BERT layers, backward under accelerate's Accelerator.backward, an optimizer step.
 * Usage: gen_pytrace OUT.sptrace [--trainer] */
#include <stdio.h>
#include <string.h>
#include "trace/trace.h"
#include "config/schedule.h"

#define T0 1000000000000ull
#define PY(id) (SP_PYFRAME_TAG | (id))

static const char *const strings[] = {
	NULL,
	"ampere_sgemm_128x64_tn",
	"elementwise_add",
	"cudaLaunchKernel",
	"/home/u/train.py",
	"train_step",
	"/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py",
	"Linear.forward",
	"main",
	"<module>",
	"/opt/venv/lib/python3.12/site-packages/torch/optim/adam.py",
	"Adam.step",
	"cudaMalloc",
	"NVIDIA H100",
	"/opt/venv/lib/python3.12/site-packages/torch/autograd/graph.py",
	"_engine_run_backward",
	"/opt/venv/lib/python3.12/site-packages/torch/_tensor.py",
	"Tensor.backward",
	"/home/u/run.py",
	"/opt/venv/lib/python3.12/site-packages/transformers/trainer.py",
	"Trainer.train",
	"Trainer.training_step",
	"/opt/venv/lib/python3.12/site-packages/transformers/models/bert/modeling_bert.py",
	"BertSelfAttention.forward",
	"BertIntermediate.forward",
	"/opt/venv/lib/python3.12/site-packages/accelerate/accelerator.py",
	"Accelerator.backward",
};

static const char *lookup(void *ctx, uint32_t id)
{
	return id < sizeof(strings) / sizeof(strings[0]) ? strings[id] : NULL;
}

/* Python frames: (file, function, line) as string ids */
static const uint32_t frames[][3] = {
	{ 0, 0, 0 },      { 4, 5, 42 },      { 6, 7, 125 },     { 4, 8, 100 },   { 4, 9, 120 },
	{ 10, 11, 200 },  { 4, 5, 44 },      { 4, 5, 43 },      { 14, 15, 769 }, { 16, 17, 626 },
	{ 4, 5, 45 },     { 18, 9, 30 },     { 19, 20, 2123 },  { 19, 21, 3700 }, { 22, 23, 350 },
	{ 22, 24, 480 },  { 25, 26, 2240 },
};

static int py_lookup(void *ctx, uint32_t id, uint32_t *file, uint32_t *func, uint32_t *line)
{
	if (!id || id >= sizeof(frames) / sizeof(frames[0]))
		return -1;
	*file = frames[id][0];
	*func = frames[id][1];
	*line = frames[id][2];
	return 0;
}

static const uint64_t s1[] = { 0x7f0000001000ull, PY(2), PY(1), PY(3), PY(4) }; /* forward, line 42 */
static const uint64_t s2[] = { PY(5), PY(6), PY(3), PY(4) };                     /* optimizer, line 44 */
static const uint64_t s3[] = { 0x7f0000002000ull };                              /* autograd thread */
static const uint64_t s4[] = { PY(5), PY(2) };                                   /* library frames only */
static const uint64_t s5[] = { 0x7f0000003000ull, PY(7), PY(3), PY(4) };         /* allocation, line 43 */
static const uint64_t s6[] = { 0x7f0000004000ull, SP_FRAME_BACKWARD, PY(8), PY(9), PY(10), PY(3), PY(4) };
/* --trainer: attention and MLP forward, backward through accelerate, the optimizer */
static const uint64_t t1[] = { 0x7f0000001000ull, PY(2), PY(14), PY(13), PY(12), PY(11) };
static const uint64_t t2[] = { 0x7f0000001000ull, PY(2), PY(15), PY(13), PY(12), PY(11) };
static const uint64_t t3[] = { 0x7f0000004000ull, SP_FRAME_BACKWARD, PY(8), PY(9), PY(16), PY(13), PY(12), PY(11) };
static const uint64_t t4[] = { PY(5), PY(12), PY(11) };
#define N(a) (uint32_t)(sizeof(a) / sizeof(a[0]))
static const struct {
	const uint64_t *pcs;
	uint32_t n;
} stacks[] = { { NULL, 0 }, { s1, N(s1) }, { s2, N(s2) }, { s3, N(s3) }, { s4, N(s4) }, { s5, N(s5) },
	       { s6, N(s6) }, { t1, N(t1) }, { t2, N(t2) }, { t3, N(t3) }, { t4, N(t4) } };

static const uint64_t *stack_lookup(void *ctx, uint32_t id, uint32_t *n)
{
	if (!id || id >= sizeof(stacks) / sizeof(stacks[0]))
		return NULL;
	*n = stacks[id].n;
	return stacks[id].pcs;
}

static int put(struct sp_trace_writer *w, struct sp_event ev)
{
	return sp_trace_write(w, &ev) < 0;
}

static struct sp_event launch(uint64_t at, uint32_t corr, uint32_t stack)
{
	return (struct sp_event){ .kind = SP_EV_API,
				  .sub = SP_API_RUNTIME,
				  .device = SP_NO_DEVICE,
				  .tid = 7,
				  .start = T0 + at,
				  .end = T0 + at + 100,
				  .corr = corr,
				  .name = 3,
				  .u.api = { .cbid = 211, .stack = stack } };
}

static struct sp_event kernel(uint64_t at, uint64_t dur, uint32_t corr, uint32_t name)
{
	return (struct sp_event){ .kind = SP_EV_KERNEL,
				  .device = 0,
				  .start = T0 + at,
				  .end = T0 + at + dur,
				  .corr = corr,
				  .name = name,
				  .stream = 7,
				  .context = 1 };
}

int main(int argc, char **argv)
{
	int trainer = argc == 3 && !strcmp(argv[2], "--trainer");
	if (argc != 2 && !trainer) {
		fprintf(stderr, "usage: gen_pytrace OUT.sptrace [--trainer]\n");
		return 2;
	}
	struct sp_trace_meta m = { .features =
					   SP_FEAT_KERNELS | SP_FEAT_RUNTIME_API | SP_FEAT_STACKS | SP_FEAT_PYSTACKS,
				   .pid = 7,
				   .rank = -1,
				   .world_size = -1,
				   .local_rank = -1,
				   .anchor_mono_ns = T0 };
	strcpy(m.host, "py-host");
	strcpy(m.command, "python train.py");
	struct sp_trace_writer *w = sp_trace_create(argv[1], &m, lookup, NULL, 0);
	if (!w) {
		perror(argv[1]);
		return 1;
	}
	sp_trace_set_stack_lookup(w, stack_lookup, NULL);
	sp_trace_set_pyframe_lookup(w, py_lookup, NULL);
	const uint16_t none = SP_NO_DEVICE;
	int bad = 0;
	bad |= put(w, (struct sp_event){ .kind = SP_EV_DEVICE, .device = 0, .start = T0, .end = T0, .name = 13 });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_WINDOW_BEGIN,
					 .device = none,
					 .start = T0 + 1000,
					 .end = T0 + 1000,
					 .u.window = { .id = 0, .first_step = 3, .last_step = 3 } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_ALLOC,
					 .sub = SP_MEM_DEVICE,
					 .device = 0,
					 .tid = 7,
					 .start = T0 + 500,
					 .end = T0 + 500,
					 .u.mem = { .addr = 0x7f5400000000ull,
						    .size = 64 << 20,
						    .live = 64 << 20,
						    .stack = 5,
						    .flags = SP_MEMF_SNAPSHOT } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_STEP,
					 .sub = SP_ACT_RECORD_AND_SAVE,
					 .device = none,
					 .tid = 7,
					 .start = T0 + 1000,
					 .end = T0 + 90000,
					 .u.step.number = 3 });
	if (trainer) {
		static const uint32_t st[] = { 7, 8, 9, 10 }, ns[] = { 6000, 3000, 8000, 1000 };
		for (uint32_t i = 0; i < 4; i++) {
			bad |= put(w, launch(2000 + 1000 * i, 10 + i, st[i]));
			bad |= put(w, kernel(10000 + 10000 * i, ns[i], 10 + i, 1));
		}
	} else {
		bad |= put(w, launch(2000, 10, 1));
		bad |= put(w, launch(3000, 11, 2));
		bad |= put(w, launch(4000, 12, 3));
		bad |= put(w, launch(5000, 13, 4));
		bad |= put(w, launch(6000, 14, 1));
		bad |= put(w, launch(7000, 15, 0)); /* a thread without Python frames: no stack with stacks = python */
		bad |= put(w, launch(8000, 16, 6)); /* autograd's thread during backward(): borrowed frames */
		bad |= put(w, kernel(10000, 5000, 10, 1));
		bad |= put(w, kernel(20000, 3000, 11, 2));
		bad |= put(w, kernel(30000, 2000, 12, 1));
		bad |= put(w, kernel(40000, 1000, 13, 2));
		bad |= put(w, kernel(50000, 5000, 14, 1));
		bad |= put(w, kernel(60000, 500, 99, 2)); /* its launch record is not in the window */
		bad |= put(w, kernel(70000, 1500, 15, 2));
		bad |= put(w, kernel(80000, 4000, 16, 1));
	}
	bad |= put(w, (struct sp_event){ .kind = SP_EV_ALLOC,
					 .sub = SP_MEM_DEVICE,
					 .device = 0,
					 .start = T0 + 90000,
					 .end = T0 + 90000,
					 .u.mem = { .live = 64 << 20, .flags = SP_MEMF_PEAK } });
	bad |= put(w, (struct sp_event){ .kind = SP_EV_WINDOW_END,
					 .device = none,
					 .start = T0 + 90000,
					 .end = T0 + 90000,
					 .u.window = { .id = 0, .first_step = 3, .last_step = 3 } });
	if (sp_trace_close(w) < 0 || bad) {
		fprintf(stderr, "gen_pytrace: writing %s failed\n", argv[1]);
		return 1;
	}
	return 0;
}
