/* SPDX-License-Identifier: MIT */
/* gen_stream.c - turns a recorded token stream (tests/data/corpus/NAME.tokens: a real program's kernel
 * launches, copy/set/sync calls and NVTX ranges with their CPU times) into the trace the collector
 * would write for one long window over it, for the trace size tests and benchmarks
 * (tests/e2e/trace_size.sh, bench/writer_bench.c). The CPU side is the recording's: each launch or
 * call is an API record starting at its token, each NVTX push/pop pair a marker record, each true
 * iteration a step record. What the tokens lack is modelled on the GPU traces of tests/data (H100,
 * H200; the tables below are their quantiles): API durations, the GPU's gaps between back-to-back
 * kernels, each kernel's duration jitter around its own base (a base per kernel shape, 1.5-150 us),
 * GPU times on a 32 ns grid read through a clock that drifts 10 ppm against the CPU's (as CUPTI's
 * converted timestamps are), launch latency 3-6 us, correlation ids that skip the calls the
 * collector does not record. Records reach the file as the writer thread drains them: CPU records
 * every 2 ms pass, sorted by start; GPU records in CUPTI buffers of 30,000 records or at the end.
 * Deterministic for a seed.
 * Usage: gen_stream TOKENS OUT.sptrace [SEED [REPEAT]]  (REPEAT: the recording that many times over,
 * one after the other, for long traces; prints "kernels N"; exits 1 on a read or write failure, 2 on
 * bad arguments) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/trace.h"
#include "trace/tokens.h"
#include "collector/base/intern.h"

#define PASS_NS 2000000ull      /* the writer thread's pass */
#define GPU_BATCH 30000         /* GPU records per CUPTI buffer (8 MiB of activity records) */
#define MAX_PENDING (1u << 20)  /* records staged at most */
#define MAX_DEPTH 64            /* NVTX nesting followed */

/* Quantiles (1/31 apart) measured on the GPU traces of tests/data: launch-call durations (ns),
 * gaps between back-to-back kernels of a stream (ns), a kernel's duration against its shape's
 * median (1e-4; the extreme last quantile left out). */
static const double api_q[31] = { 3311, 3950, 4159, 4309, 4431, 4556, 4688, 4812,  4959, 5110, 5250,
				  5407, 5571, 5712, 5843, 5970, 6114, 6230, 6363,  6507, 6655, 6820,
				  7007, 7232, 7478, 7820, 8174, 8733, 9505, 10921, 15138 };
static const double gap_q[31] = { 960,  1088, 1120, 1184, 1216, 1280, 1312, 1376, 1408, 1440, 1472,
				  1504, 1536, 1568, 1600, 1663, 1696, 1760, 1856, 1984, 2144, 2272,
				  2336, 2400, 2432, 2465, 2528, 2624, 2816, 4128, 4353 };
static const double rel_q[31] = { -5934, -2123, -1487, -972, -591, -357, -258, -200, -160, -125, -91,
				  -65,   -44,   -25,   -8,   0,    0,    13,   32,   54,   77,   107,
				  141,   184,   226,   313,  436,  618,  1000, 1800, 3590 };

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A draw from a quantile table, interpolated. */
static double draw(const double *q)
{
	double x = (double)(next_rand() % 30000) / 1000.0;
	int i = (int)x;
	return q[i] + (q[i + 1] - q[i]) * (x - i);
}

static uint32_t hash(const char *s, uint32_t salt)
{
	uint32_t h = 2166136261u ^ salt;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

struct stage {
	struct sp_event *ev;
	size_t n;
};

static struct {
	struct sp_trace_writer *w;
	struct stage cpu, gpu;  /* CPU records waiting for their pass; GPU records for their buffer */
	uint64_t pass_end;      /* end of the current pass (trace time) */
	uint64_t gpu_free;      /* when the GPU's stream is free next (GPU clock, ns) */
	uint64_t gpu_phase;     /* the GPU clock's offset against the CPU's */
	uint64_t t0;            /* the first token's time: the clocks' drift counts from there */
	uint32_t corr;
	uint64_t kernels;
	int bad;
} g;

static const char *lookup(void *ctx, uint32_t id)
{
	return sp_intern_lookup(id);
}

static void stage_add(struct stage *s, const struct sp_event *ev)
{
	if (s->n == MAX_PENDING) {
		g.bad = 1;
		return;
	}
	if (!s->ev && !(s->ev = malloc(MAX_PENDING * sizeof(*s->ev)))) {
		g.bad = 1;
		return;
	}
	s->ev[s->n++] = *ev;
}

/* qsort order of pointers into a stage: by start, then by place in the stage (stable). */
static int by_start(const void *a, const void *b)
{
	const struct sp_event *x = *(const struct sp_event *const *)a, *y = *(const struct sp_event *const *)b;
	return x->start < y->start ? -1 : x->start > y->start ? 1 : (x < y ? -1 : x > y);
}

/* Sorts and writes a stage, as one writer pass does. */
static void drain(struct stage *s)
{
	static const struct sp_event **order;
	if (!order && !(order = malloc(MAX_PENDING * sizeof(*order)))) {
		g.bad = 1;
		return;
	}
	for (size_t i = 0; i < s->n; i++)
		order[i] = &s->ev[i];
	qsort(order, s->n, sizeof(*order), by_start);
	for (size_t i = 0; i < s->n; i++)
		if (sp_trace_write(g.w, order[i]) <= 0)
			g.bad = 1;
	s->n = 0;
}

/* The CPU time of a GPU clock reading: a 32 ns tick, read through a clock 10 ppm fast. */
static uint64_t gpu_time(uint64_t gpu_ns)
{
	uint64_t tick = gpu_ns / 32 * 32;
	return tick + (tick - g.t0) / 100000 + g.gpu_phase;
}

/* Runs work of dur ns on the GPU once it is launched at t (CPU clock); fills start and end. */
static void gpu_run(struct sp_event *ev, uint64_t t, double dur)
{
	uint64_t ready = t - g.gpu_phase + 3000 + next_rand() % 3000;
	uint64_t after = g.gpu_free + (uint64_t)draw(gap_q);
	uint64_t s = ready > after ? ready : after, e = s + (uint64_t)(dur > 32 ? dur : 32);
	g.gpu_free = e;
	ev->start = gpu_time(s);
	ev->end = gpu_time(e);
}

/* Stages a GPU record; a full buffer goes to the writer. */
static void gpu_record(const struct sp_event *ev)
{
	stage_add(&g.gpu, ev);
	if (g.gpu.n >= GPU_BATCH)
		drain(&g.gpu);
}

/* An API record of name (a launch when kind_gpu is SP_EV_KERNEL) at t, ending before next. */
static struct sp_event api_at(const char *name, int driver, uint64_t t, uint64_t next)
{
	struct sp_event a = { .kind = SP_EV_API,
			      .sub = driver ? SP_API_DRIVER : SP_API_RUNTIME,
			      .device = SP_NO_DEVICE,
			      .start = t };
	uint64_t d = (uint64_t)draw(api_q);
	if (next > t + 200 && d > (next - t) * 9 / 10)
		d = (next - t) * 9 / 10;
	a.end = t + d;
	a.name = sp_intern(name);
	a.corr = g.corr += 1 + hash(name, 1) % 3; /* the calls in between that are not recorded */
	a.u.api.cbid = hash(name, 2) % 700;
	return a;
}

/* A kernel launch token: its API record and its kernel. */
static void launch(const struct sp_token *t, const char *kname, const char *prev, uint64_t next)
{
	int driver = !!(t->flags & SP_TOKF_DRIVER);
	struct sp_event a = api_at(driver ? "cuLaunchKernelEx" : "cudaLaunchKernel", driver, t->ts, next);
	a.tid = t->tid;
	stage_add(&g.cpu, &a);
	uint32_t shape = hash(kname, 3) ^ hash(prev, 4) % 4; /* a kernel has a few shapes by call site */
	struct sp_event k = { .kind = SP_EV_KERNEL, .device = 0, .corr = a.corr, .stream = 7, .context = 1 };
	k.name = sp_intern(kname);
	k.u.kernel.grid[0] = 1 + shape % 2048;
	k.u.kernel.grid[1] = 1 + (shape >> 11) % 3;
	k.u.kernel.grid[2] = 1;
	k.u.kernel.block[0] = 32u << (shape >> 13) % 5;
	k.u.kernel.block[1] = k.u.kernel.block[2] = 1;
	k.u.kernel.regs = (uint16_t)(16 + (shape >> 16) % 112);
	k.u.kernel.static_smem = (shape >> 20) % 3 * 1024;
	k.u.kernel.dynamic_smem = driver ? 200704 : 0;
	k.u.kernel.launch = driver && shape % 3 == 0 ? SP_LAUNCH_CLUSTER : SP_LAUNCH_NORMAL;
	double base = 1500.0 * (1 << (shape >> 24) % 7) * (1.0 + (shape >> 27) % 8 / 8.0);
	gpu_run(&k, t->ts, base * (1.0 + draw(rel_q) / 1e4));
	gpu_record(&k);
	g.kernels++;
}

/* A copy, set or sync call: its API record, and the copy or set it does on the GPU. */
static void call(const struct sp_token *t, const char *name, uint64_t next)
{
	struct sp_event a = api_at(name, !!(t->flags & SP_TOKF_DRIVER), t->ts, next);
	a.tid = t->tid;
	int copy = strstr(name, "Memcpy") != NULL, set = strstr(name, "Memset") != NULL;
	if (copy || set) {
		struct sp_event c = { .kind = (uint8_t)(copy ? SP_EV_MEMCPY : SP_EV_MEMSET),
				      .sub = copy ? 2 : 0,
				      .device = 0,
				      .corr = a.corr,
				      .stream = 7,
				      .context = 1 };
		c.u.copy.bytes = copy ? 4096 + hash(name, 5) % 65536 : 4u << (hash(name, 6) % 12);
		c.u.copy.dst_kind = 3;
		c.u.copy.src_kind = copy ? 2 : 0;
		c.u.copy.async = strstr(name, "Async") != NULL;
		gpu_run(&c, t->ts, 700.0 + (double)(c.u.copy.bytes / 20));
		gpu_record(&c);
	}
	if (t->flags & SP_TOKF_SYNC) { /* returns once the GPU has caught up */
		uint64_t done = gpu_time(g.gpu_free) + 2000;
		if (done > a.end)
			a.end = done;
	}
	stage_add(&g.cpu, &a);
}

struct range {
	uint64_t start;
	uint32_t name;
};

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: gen_stream TOKENS OUT.sptrace [SEED [REPEAT]]\n");
		return 2;
	}
	if (argc >= 4)
		rng ^= strtoull(argv[3], NULL, 0) * 0x9e3779b97f4a7c15ull;
	long repeat = argc == 5 ? strtol(argv[4], NULL, 10) : 1;
	if (repeat < 1 || repeat > 1000) {
		fprintf(stderr, "gen_stream: REPEAT 1..1000\n");
		return 2;
	}
	char err[256];
	struct sp_tok_reader *r = sp_tok_open(argv[1], err, sizeof(err));
	if (!r) {
		fprintf(stderr, "gen_stream: %s\n", err);
		return 1;
	}
	struct sp_token *tok = NULL, t;
	size_t n = 0, cap = 0;
	int rc;
	while ((rc = sp_tok_next(r, &t, err, sizeof(err))) == 1) {
		if (n == cap && !(tok = realloc(tok, (cap = cap ? cap * 2 : 4096) * sizeof(*tok))))
			return 1;
		t.name = sp_intern(sp_tok_name(r, t.name) ? sp_tok_name(r, t.name) : "?");
		tok[n++] = t;
	}
	if (rc < 0 || !n) {
		fprintf(stderr, "gen_stream: %s: %s\n", argv[1], rc < 0 ? err : "no tokens");
		return 1;
	}
	size_t once = n;
	uint64_t span = tok[n - 1].ts - tok[0].ts + 1000000;
	if (repeat > 1 && !(tok = realloc(tok, once * (size_t)repeat * sizeof(*tok))))
		return 1;
	for (long k = 1; k < repeat; k++, n += once)
		for (size_t i = 0; i < once; i++) {
			tok[n + i] = tok[i];
			tok[n + i].ts += span * (uint64_t)k;
		}
	struct sp_trace_meta m = { .features = SP_FEAT_KERNELS | SP_FEAT_MEMCPY | SP_FEAT_MEMSET | SP_FEAT_RUNTIME_API |
					       SP_FEAT_DRIVER_API | SP_FEAT_NVTX,
				   .pid = 4242,
				   .rank = -1,
				   .world_size = -1,
				   .local_rank = -1,
				   .anchor_mono_ns = tok[0].ts };
	snprintf(m.command, sizeof(m.command), "gen_stream %s", argv[1]);
	if (!(g.w = sp_trace_create(argv[2], &m, lookup, NULL, 0))) {
		perror(argv[2]);
		return 1;
	}
	g.gpu_phase = 17;
	g.t0 = tok[0].ts;
	g.gpu_free = tok[0].ts;
	g.pass_end = tok[0].ts + PASS_NS;
	struct sp_event e = { .kind = SP_EV_THREAD,
			      .device = SP_NO_DEVICE,
			      .tid = tok[0].tid,
			      .start = tok[0].ts,
			      .end = tok[0].ts,
			      .name = sp_intern("main") };
	stage_add(&g.cpu, &e);
	e = (struct sp_event){ .kind = SP_EV_WINDOW_BEGIN,
			       .device = SP_NO_DEVICE,
			       .start = tok[0].ts,
			       .end = tok[0].ts };
	stage_add(&g.cpu, &e);
	struct range open[MAX_DEPTH];
	int depth = 0;
	uint64_t step_start = 0;
	int64_t step = 0;
	uint32_t prev = sp_intern("");
	for (size_t i = 0; i < n && !g.bad; i++) {
		const struct sp_token *k = &tok[i];
		uint64_t next = i + 1 < n ? tok[i + 1].ts : k->ts + 10000;
		while (k->ts >= g.pass_end) { /* the passes that ended before this token */
			drain(&g.cpu);
			g.pass_end += PASS_NS;
		}
		const char *name = sp_intern_lookup(k->name);
		if (k->kind == SP_TOK_KERNEL) {
			launch(k, name, sp_intern_lookup(prev), next);
			prev = k->name;
		} else if (k->kind == SP_TOK_API || k->kind == SP_TOK_GRAPH || k->kind == SP_TOK_NCCL) {
			call(k, name, next);
		} else if (k->kind == SP_TOK_NVTX_PUSH && depth < MAX_DEPTH) {
			open[depth++] = (struct range){ k->ts, k->name };
		} else if (k->kind == SP_TOK_NVTX_POP && depth > 0) {
			depth--;
			struct sp_event mk = { .kind = SP_EV_MARKER,
					       .device = SP_NO_DEVICE,
					       .tid = k->tid,
					       .start = open[depth].start,
					       .end = k->ts,
					       .name = open[depth].name };
			mk.u.marker.depth = depth;
			stage_add(&g.cpu, &mk);
		} else if (k->kind == SP_TOK_TRUTH) {
			if (step_start) {
				struct sp_event s = { .kind = SP_EV_STEP,
						      .device = SP_NO_DEVICE,
						      .tid = k->tid,
						      .start = step_start,
						      .end = k->ts,
						      .name = k->name };
				s.u.step.number = step++;
				s.u.step.how = 5;
				s.u.step.every = 1;
				stage_add(&g.cpu, &s);
			}
			step_start = k->ts;
		}
	}
	uint64_t end = tok[n - 1].ts;
	e = (struct sp_event){ .kind = SP_EV_WINDOW_END, .device = SP_NO_DEVICE, .start = end, .end = end };
	e.u.window.last_step = step - 1;
	drain(&g.cpu);
	drain(&g.gpu);
	if (sp_trace_write(g.w, &e) <= 0)
		g.bad = 1;
	if (sp_trace_close(g.w) < 0 || g.bad) {
		fprintf(stderr, "gen_stream: writing %s failed\n", argv[2]);
		return 1;
	}
	printf("kernels %llu\n", (unsigned long long)g.kernels);
	sp_tok_close_reader(r);
	free(tok);
	return 0;
}
