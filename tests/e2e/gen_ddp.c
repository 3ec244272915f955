/* SPDX-License-Identifier: MIT */
/* gen_ddp.c - writes the traces a data-parallel training job of RANKS ranks would leave, for the
 * HTA and Perfetto tests (tests/e2e/cli_kineto.sh) and the conversion benchmark
 * (bench/convert_bench.sh): per rank one process on GPU <rank>, WINDOWS windows of STEPS steps;
 * each step copies its batch in (cudaMemcpyAsync + HtoD copy, a memset), launches KERNELS compute
 * kernels on stream 7, an NCCL AllReduce half-way (the call on the main thread launches an NCCL
 * kernel on stream 13 that overlaps the compute kernels that follow; rank 1 and up arrive late),
 * then waits for stream 7 (cudaStreamSynchronize and its CUPTI sync record, which carries no
 * device, as CUPTI's do) and once per window for the whole context (no stream); an NVTX range
 * runs from each step into the next (it nests in neither: viewers need it moved). Thread names,
 * device records and clock anchors as the collector writes them. Deterministic for a seed.
 * Usage: gen_ddp OUT_PREFIX RANKS WINDOWS STEPS KERNELS [SEED]  (writes OUT_PREFIX<rank>.sptrace;
 * exits 1 on a write failure, 2 on bad arguments). The file order of a real trace (for the reader
 * benchmark, bench/reader_bench.sh), if asked: GEN_DDP_QUEUE=N, a launch waits while N kernels are
 * queued on stream 7 (CUDA's launch queue; without it the GPU falls ever further behind); and
 * GEN_DDP_BATCH=N, GPU records are written N at a time (as CUPTI hands out its activity buffers)
 * and at the window's end. GEN_DDP_ALLOCS=N (for `memory`): each compute launch allocates a block
 * of 1-64 MiB on its GPU (every 16th on the host) and frees the one made N launches before; the
 * blocks alive when a window opens are written as its snapshots, the highest level at its end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/trace.h"
#include "config/schedule.h"

#define T0 2000000000000ull /* trace clock at the anchor */
#define US 1000ull

enum {
	S_LAUNCH = 1,
	S_MEMCPY,
	S_MEMSET,
	S_SYNC,
	S_CTX_SYNC,
	S_NCCL_CALL,
	S_LAUNCH_EX,
	S_NCCL_KERNEL,
	S_THREAD,
	S_GPU,
	S_GEMM,
	S_ELEMWISE,
	S_SOFTMAX,
	S_PREFETCH,
	S__COUNT
};

static const char *const names[S__COUNT] = {
	[S_LAUNCH] = "cudaLaunchKernel",
	[S_MEMCPY] = "cudaMemcpyAsync",
	[S_MEMSET] = "cudaMemsetAsync",
	[S_SYNC] = "cudaStreamSynchronize",
	[S_CTX_SYNC] = "cudaDeviceSynchronize",
	[S_NCCL_CALL] = "ncclAllReduce",
	[S_LAUNCH_EX] = "cuLaunchKernelEx",
	[S_NCCL_KERNEL] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
	[S_THREAD] = "pt_main_thread",
	[S_GPU] = "NVIDIA H100 80GB HBM3",
	[S_GEMM] = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_"
		   "kernel__5x_cublas",
	[S_ELEMWISE] = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
		       "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
	[S_SOFTMAX] = "void softmax_forward_kernel<float>(float*, float const*, int, int)",
	[S_PREFETCH] = "prefetch next batch",
};

static uint64_t rng;

static uint64_t below(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % n;
}

static const char *lookup(void *ctx, uint32_t id)
{
	return id && id < S__COUNT ? names[id] : NULL;
}

struct gen {
	struct sp_trace_writer *w;
	int bad;
	int rank, ranks;
	uint32_t tid, corr;
	uint16_t dev;
	uint64_t t;             /* CPU time now */
	uint64_t s7, s13;       /* when streams 7 and 13 are free */
	uint64_t prefetch;      /* start of the NVTX range open across the step boundary, 0 none */
	uint64_t *queued;       /* GEN_DDP_QUEUE: ends of the last `queue` kernels on stream 7 */
	size_t queue, nqueued;
	struct sp_event *held;  /* GEN_DDP_BATCH: GPU records not written yet */
	size_t batch, nheld;
	struct sp_event *blk;   /* GEN_DDP_ALLOCS: the ALLOC records of the last `allocs` blocks */
	size_t allocs, nblk;
	uint64_t level[2], top[2]; /* live bytes of the GPU and the host, and their highest */
};

/* Writes the GPU records held back. */
static void flush_gpu(struct gen *g)
{
	for (size_t i = 0; i < g->nheld; i++)
		g->bad |= sp_trace_write(g->w, &g->held[i]) < 0;
	g->nheld = 0;
}

static void put(struct gen *g, struct sp_event e)
{
	if (g->batch && (sp_ev_is_gpu(&e) || e.kind == SP_EV_SYNC)) {
		g->held[g->nheld++] = e;
		if (g->nheld == g->batch)
			flush_gpu(g);
		return;
	}
	g->bad |= sp_trace_write(g->w, &e) < 0;
}

static struct sp_event ev(int kind, uint64_t start, uint64_t end)
{
	return (struct sp_event){ .kind = (uint8_t)kind, .device = SP_NO_DEVICE, .start = start, .end = end };
}

/* A CUDA call of dur ns on the main thread at g->t (which moves past it); returns its correlation id. */
static uint32_t api(struct gen *g, int sub, uint32_t name, uint32_t cbid, uint64_t dur)
{
	struct sp_event e = ev(SP_EV_API, g->t, g->t + dur);
	e.sub = (uint8_t)sub, e.tid = g->tid, e.corr = ++g->corr, e.name = name, e.device = g->dev;
	e.u.api.cbid = cbid;
	put(g, e);
	g->t += dur + 2 * US;
	return e.corr;
}

/* GPU work of kind on stream (7 or 13) for dur ns, launched by corr no earlier than at. */
static void gpu(struct gen *g, int kind, uint32_t corr, uint32_t name, uint32_t stream, uint64_t at, uint64_t dur)
{
	uint64_t *free_at = stream == 7 ? &g->s7 : &g->s13;
	uint64_t s = at > *free_at ? at : *free_at;
	struct sp_event e = ev(kind, s, s + dur);
	e.corr = corr, e.name = name, e.stream = stream, e.device = g->dev, e.context = 1;
	if (kind == SP_EV_KERNEL) {
		e.u.kernel.grid[0] = name == S_NCCL_KERNEL ? 24 : 132 * (1 + (uint32_t)below(8));
		e.u.kernel.grid[1] = e.u.kernel.grid[2] = 1;
		e.u.kernel.block[0] = name == S_NCCL_KERNEL ? 640 : 128 << below(3);
		e.u.kernel.block[1] = e.u.kernel.block[2] = 1;
		e.u.kernel.regs = (uint16_t)(32 + 8 * below(12));
		e.u.kernel.static_smem = name == S_GEMM ? 0 : 1024;
		e.u.kernel.dynamic_smem = name == S_GEMM ? 98304 : 0;
	} else {
		e.sub = kind == SP_EV_MEMCPY ? 1 : 0; /* HtoD */
		e.u.copy.bytes = kind == SP_EV_MEMCPY ? 4u << 20 : 1u << 20;
		e.u.copy.src_kind = kind == SP_EV_MEMCPY ? 2 : 0; /* pinned */
		e.u.copy.dst_kind = 3;                            /* device */
		e.u.copy.async = 1;
	}
	put(g, e);
	*free_at = s + dur;
}

/* The CPU waits in cudaStreamSynchronize (stream 7) or cudaDeviceSynchronize (stream 0: no
 * stream) until the GPU work is done; the CUPTI sync record lies inside the call. */
static void sync_gpu(struct gen *g, uint32_t stream)
{
	uint64_t done = g->s7 > g->s13 ? g->s7 : g->s13, start = g->t, end;
	if (stream)
		done = g->s7;
	end = (done > start + 3 * US ? done : start + 3 * US) + 2 * US;
	struct sp_event e = ev(SP_EV_API, start, end);
	e.sub = SP_API_RUNTIME, e.tid = g->tid, e.corr = ++g->corr, e.device = g->dev;
	e.name = stream ? S_SYNC : S_CTX_SYNC, e.u.api.cbid = stream ? 131 : 165;
	put(g, e);
	struct sp_event s = ev(SP_EV_SYNC, start + US, end - US);
	s.sub = stream ? 3 : 4; /* CUPTI: stream sync, context sync */
	s.corr = e.corr, s.stream = stream, s.context = 1;
	put(g, s);
	g->t = end + 2 * US;
}

/* GEN_DDP_ALLOCS: the block made N launches ago is freed, a new one made (at g->t). */
static void churn(struct gen *g)
{
	struct sp_event *b = &g->blk[g->nblk++ % g->allocs];
	if (b->kind == SP_EV_ALLOC) {
		int host = b->device == SP_NO_DEVICE;
		struct sp_event f = *b;
		g->level[host] -= b->u.mem.size;
		f.kind = SP_EV_FREE, f.start = f.end = g->t, f.u.mem.live = g->level[host], f.u.mem.stack = 0;
		put(g, f);
		g->t += 1 * US;
	}
	int host = g->nblk % 16 == 0;
	*b = ev(SP_EV_ALLOC, g->t, g->t);
	b->sub = host ? SP_MEM_HOST : SP_MEM_DEVICE, b->tid = g->tid, b->device = host ? SP_NO_DEVICE : g->dev;
	b->u.mem.addr = 0x7f0000000000ull + (uint64_t)g->nblk * 0x10000000ull;
	b->u.mem.size = (1 + below(64)) << 20;
	g->level[host] += b->u.mem.size;
	g->top[host] = g->level[host] > g->top[host] ? g->level[host] : g->top[host];
	b->u.mem.live = g->level[host];
	put(g, *b);
	g->t += 1 * US;
}

/* As a window opens: GEN_DDP_ALLOCS's blocks alive then (its snapshots). */
static void window_opens(struct gen *g)
{
	for (size_t i = 0; i < g->allocs; i++)
		if (g->blk[i].kind == SP_EV_ALLOC) {
			struct sp_event e = g->blk[i];
			e.u.mem.flags = SP_MEMF_SNAPSHOT, e.u.mem.live = g->level[e.device == SP_NO_DEVICE];
			put(g, e);
		}
}

/* As a window closes: the collector flushes CUPTI's buffers; GEN_DDP_ALLOCS's highest levels. */
static void window_closes(struct gen *g)
{
	flush_gpu(g);
	for (int host = 0; g->allocs && host < 2; host++) {
		struct sp_event e = ev(SP_EV_ALLOC, g->t, g->t);
		e.sub = host ? SP_MEM_HOST : SP_MEM_DEVICE, e.device = host ? SP_NO_DEVICE : g->dev;
		e.u.mem.flags = SP_MEMF_PEAK, e.u.mem.live = g->top[host];
		put(g, e);
	}
}

/* GEN_DDP_QUEUE: a launch waits while the queue is full (for the oldest kernel in it to end);
 * returns the queue's slot for the kernel's end (a scratch word without a queue). */
static uint64_t *queue_slot(struct gen *g)
{
	static uint64_t none;
	if (!g->queue)
		return &none;
	uint64_t *slot = &g->queued[g->nqueued++ % g->queue];
	if (*slot > g->t)
		g->t = *slot;
	return slot;
}

static void step(struct gen *g, int64_t n, int kernels, uint64_t comm, uint64_t *seq, int last)
{
	uint64_t start = g->t;
	uint32_t c;

	g->t += 20 * US;
	if (g->prefetch) { /* a range from the last step into this one: it nests in neither step */
		struct sp_event m = ev(SP_EV_MARKER, g->prefetch, g->t - 5 * US);
		m.tid = g->tid, m.name = S_PREFETCH;
		put(g, m);
		g->prefetch = 0;
	}
	c = api(g, SP_API_RUNTIME, S_MEMCPY, 41, 8 * US);
	gpu(g, SP_EV_MEMCPY, c, 0, 7, g->t - 8 * US, 300 * US);
	c = api(g, SP_API_RUNTIME, S_MEMSET, 51, 4 * US);
	gpu(g, SP_EV_MEMSET, c, 0, 7, g->t - 4 * US, 5 * US);
	for (int k = 0; k < kernels; k++) {
		static const uint32_t kn[] = { S_GEMM, S_ELEMWISE, S_SOFTMAX, S_ELEMWISE };
		if (k == kernels / 2) { /* the gradient AllReduce; later ranks arrive later */
			struct sp_event call = ev(SP_EV_NCCL, g->t, 0);
			uint64_t at;
			g->t += (uint64_t)g->rank * 150 * US;
			call.start = g->t;
			g->t += 5 * US;
			c = api(g, SP_API_DRIVER, S_LAUNCH_EX, 307, 6 * US);
			at = g->t;
			call.end = g->t + 3 * US;
			call.sub = SP_NCCL_ALLREDUCE, call.tid = g->tid, call.device = g->dev, call.stream = 13;
			call.name = S_NCCL_CALL;
			call.u.nccl = (struct sp_ev_nccl){ .count = 25u << 20,
							   .bytes = 100u << 20,
							   .comm = comm,
							   .seq = (*seq)++,
							   .peer = -1,
							   .comm_rank = g->rank,
							   .comm_size = g->ranks,
							   .dtype = 7,
							   .redop = 0 };
			put(g, call);
			g->t = call.end + 2 * US;
			gpu(g, SP_EV_KERNEL, c, S_NCCL_KERNEL, 13, at, 900 * US + below(200) * US);
		}
		uint64_t *slot = queue_slot(g);
		if (g->allocs)
			churn(g);
		c = api(g, SP_API_RUNTIME, S_LAUNCH, 211, 4 * US + below(4) * US);
		gpu(g, SP_EV_KERNEL, c, kn[k % 4], 7, g->t, 10 * US + below(190) * US);
		*slot = g->s7; /* its end */
	}
	if (!last)
		g->prefetch = g->t - 3 * US;
	sync_gpu(g, 7);
	if (last)
		sync_gpu(g, 0);
	struct sp_event s = ev(SP_EV_STEP, start, g->t);
	s.sub = last ? SP_ACT_RECORD_AND_SAVE : SP_ACT_RECORD, s.tid = g->tid, s.u.step.number = n;
	put(g, s);
}

/* The file order asked for in the environment (GEN_DDP_QUEUE, GEN_DDP_BATCH: see the top); exits
 * if memory runs out. */
static void order_knobs(struct gen *g)
{
	const char *queue = getenv("GEN_DDP_QUEUE"), *batch = getenv("GEN_DDP_BATCH"), *allocs = getenv("GEN_DDP_ALLOCS");
	g->queue = queue ? strtoul(queue, NULL, 10) : 0;
	g->batch = batch ? strtoul(batch, NULL, 10) : 0;
	g->allocs = allocs ? strtoul(allocs, NULL, 10) : 0;
	g->queued = calloc(g->queue + 1, sizeof(*g->queued));
	g->held = calloc(g->batch + 1, sizeof(*g->held));
	g->blk = calloc(g->allocs + 1, sizeof(*g->blk));
	if (!g->queued || !g->held || !g->blk) {
		fprintf(stderr, "gen_ddp: out of memory\n");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc < 6 || argc > 7) {
		fprintf(stderr, "usage: gen_ddp OUT_PREFIX RANKS WINDOWS STEPS KERNELS [SEED]\n");
		return 2;
	}
	int ranks = atoi(argv[2]), windows = atoi(argv[3]), steps = atoi(argv[4]), kernels = atoi(argv[5]);
	if (ranks < 1 || ranks > 64 || windows < 1 || steps < 1 || kernels < 1) {
		fprintf(stderr, "gen_ddp: RANKS 1..64, WINDOWS, STEPS and KERNELS >= 1\n");
		return 2;
	}
	for (int r = 0; r < ranks; r++) {
		char path[4096];
		struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_MEMCPY | SP_FEAT_MEMSET |
						       SP_FEAT_SYNC | SP_FEAT_RUNTIME_API | SP_FEAT_DRIVER_API |
						       SP_FEAT_NCCL,
					   .pid = 31000 + r,
					   .rank = r,
					   .world_size = ranks,
					   .local_rank = r,
					   .anchor_mono_ns = T0,
					   .anchor_real_ns = 1764000000000000000ull + 37 * US * r };
		struct gen g = { .rank = r, .ranks = ranks, .tid = 31000 + r, .dev = (uint16_t)r, .t = T0 + 1000 * US };
		order_knobs(&g);
		uint64_t seq = 0, comm = 0x5eed0000c0ffee00ull;
		rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(argc > 6 ? atoll(argv[6]) : 1) ^ (uint64_t)r << 32;
		snprintf(path, sizeof(path), "%s%d.sptrace", argv[1], r);
		strcpy(m.host, "node0");
		snprintf(m.command, sizeof(m.command), "python train_ddp.py --rank %d", r);
		g.w = sp_trace_create(path, &m, lookup, NULL, 0);
		if (!g.w) {
			perror(path);
			return 1;
		}
		struct sp_event e = ev(SP_EV_CLOCK, T0, T0);
		e.u.clock.realtime_ns = m.anchor_real_ns;
		put(&g, e);
		e = ev(SP_EV_THREAD, T0, T0);
		e.tid = g.tid, e.name = S_THREAD;
		put(&g, e);
		e = ev(SP_EV_DEVICE, T0, T0);
		e.device = g.dev, e.name = S_GPU;
		e.u.dev = (struct sp_ev_device){ .sm_count = 132, .cc_major = 9, .cc_minor = 0, .memory = 85ull << 30 };
		put(&g, e);
		e = ev(SP_EV_COMM, T0 + 10 * US, T0 + 10 * US);
		e.sub = SP_COMM_INIT, e.tid = g.tid, e.device = g.dev;
		e.u.nccl.comm = comm, e.u.nccl.comm_rank = r, e.u.nccl.comm_size = ranks;
		put(&g, e);
		for (int w = 0; w < windows; w++) {
			int64_t first = 10 + (int64_t)w * (steps + 5);
			g.t += 5000 * US; /* steps outside the windows are not recorded */
			window_opens(&g);
			put(&g, (struct sp_event){
					.kind = SP_EV_WINDOW_BEGIN,
					.device = SP_NO_DEVICE,
					.start = g.t,
					.end = g.t,
					.u.window = { .id = (uint32_t)w, .first_step = first, .last_step = first } });
			for (int s = 0; s < steps; s++)
				step(&g, first + s, kernels, comm, &seq, s == steps - 1);
			window_closes(&g);
			e = ev(SP_EV_CLOCK, g.t, g.t);
			e.u.clock.realtime_ns = m.anchor_real_ns + (g.t - T0);
			put(&g, e);
			put(&g, (struct sp_event){ .kind = SP_EV_WINDOW_END,
						   .device = SP_NO_DEVICE,
						   .start = g.t,
						   .end = g.t,
						   .u.window = { .id = (uint32_t)w,
								 .first_step = first,
								 .last_step = first + steps - 1 } });
		}
		free(g.queued), free(g.held), free(g.blk);
		if (sp_trace_close(g.w) < 0 || g.bad) {
			fprintf(stderr, "gen_ddp: writing %s failed\n", path);
			return 1;
		}
	}
	return 0;
}
