// SPDX-License-Identifier: MIT
/* graph_fin_probe.cu - does a CUDA graph survive CUPTI's detach (cuptiFinalize)? Two modes.
 *
 * Cell mode, `graph_fin_probe KEY=VALUE,...` (graph_fin_matrix.sh runs the matrix): one process,
 * one CUPTI state; prints one line "CELL spec: OK ..." or "CELL spec: FAIL <where>: <CUDA error>"
 * (or "SETUP" when CUPTI refused the attach itself). Keys (cupti_probe.h has A, C and T):
 *   G  the graph: k (20 kernels that add to a buffer) | t (torch-like: a memset node, 5 kernels, a
 *      device-to-device copy node, a cuBLAS SGEMM with a preset workspace, 10 kernels)
 *   I  when the graph is made: under (captured and instantiated while attached) | pre (both before
 *      the attach) | split (captured before, instantiated while attached)
 *   X  1: instantiated with cudaGraphInstantiateFlagAutoFreeOnLaunch (as torch does), 0: flags 0
 *   F  how the detach meets the GPU: sync (everything finished first) | inflight (200 replays
 *      queued and not waited for) | race (the program thread keeps replaying while another thread
 *      detaches, as the writer thread does under a program)
 *   R  after the detach: same (replay the same executable graph) | reinst (destroy it, instantiate
 *      the graph again, replay) | update (cudaGraphExecUpdate from the graph, replay)
 * Under CUPTI: 20 replays and 20 eager kernels (A=win: inside a window of KM kinds); after the
 * detach: 20 of each again; then the buffer's sum, the copy node's result and the GEMM (small
 * integers: exact whatever the algorithm) are checked against what was launched. Exit 0 OK,
 * 1 FAIL, 2 SETUP.
 *
 * Sequence mode, `graph_fin_probe LETTERS` (tests/gpu/graph_detach.sh): one step per letter, each
 * reported with the CUDA error it met:
 *   i  attach: activity callbacks, subscribe, the kernel and graph launch callbacks
 *   t  (after i) CUPTI's timestamps from a CLOCK_MONOTONIC callback, as stepprof's
 *   d  (after i) every runtime and driver API callback on, as while recording API calls
 *   k  CONCURRENT_KERNEL on      K  every kind off, flushed
 *   m  MEMCPY, MEMSET and SYNCHRONIZATION on    M  the same as K
 *   f  detach: kinds off, unsubscribe, cuptiFinalize (from a thread of its own, as stepprof's writer)
 *   c  capture a graph of 20 kernels (each adds to a buffer) and instantiate it
 *   l  launch the graph 20 times and 20 eager kernels, synchronise, check the buffer's sum
 * Exit 0 if every launch step got the right sum and no CUDA error, else 1.
 * Build: nvcc -O2 -o graph_fin_probe graph_fin_probe.cu -lcupti -lcublas (CUPTI's include and lib
 * dirs). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include "cupti_probe.h"

__global__ void add_one(int *p) { atomicAdd(p + threadIdx.x, 1); }

enum { NGEMM = 64, REPLAYS = 20 };

/* The device side of a cell: buffers, stream, cuBLAS, the graph and what it should have done. */
struct cell {
	char G[8], I[8], X[8], F[16], R[16];
	int *buf, *tmp, *cp;
	float *A, *B, *C, *ws;
	float Cref[NGEMM * NGEMM];
	cudaStream_t st;
	cublasHandle_t blas;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	long expect; /* what buf[0] must hold */
	int per;     /* what one replay adds to buf[0] */
};

#define TRY(x)                                                                                        \
	do {                                                                                          \
		cudaError_t e_ = (x);                                                                 \
		if (e_ != cudaSuccess)                                                                \
			return fail(spec, #x, e_);                                                    \
	} while (0)

static int fail(const char *spec, const char *where, cudaError_t e)
{
	printf("CELL %s: FAIL %s: %s (%s) [records %llu, callbacks %llu]\n", spec, where, cudaGetErrorName(e),
	       cudaGetErrorString(e), probe.records, probe.callbacks);
	fflush(stdout);
	return 1;
}

/* Captures the cell's graph on its stream. */
static cudaError_t capture(struct cell *c)
{
	cudaError_t e = cudaStreamBeginCapture(c->st, cudaStreamCaptureModeGlobal);
	if (e)
		return e;
	if (!strcmp(c->G, "t")) {
		cudaMemsetAsync(c->tmp, 0, 32 * sizeof(int), c->st);
		for (int k = 0; k < 5; k++)
			add_one<<<1, 32, 0, c->st>>>(c->tmp);
		cudaMemcpyAsync(c->cp, c->tmp, 32 * sizeof(int), cudaMemcpyDeviceToDevice, c->st);
		const float one = 1.0f, zero = 0.0f;
		cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, NGEMM, NGEMM, NGEMM, &one, c->A, NGEMM, c->B, NGEMM, &zero,
			    c->C, NGEMM);
	}
	for (int k = 0; k < (strcmp(c->G, "t") ? 20 : 10); k++)
		add_one<<<1, 32, 0, c->st>>>(c->buf);
	return cudaStreamEndCapture(c->st, &c->graph);
}

static cudaError_t instantiate(struct cell *c)
{
	return cudaGraphInstantiate(&c->exec, c->graph, !strcmp(c->X, "1") ? cudaGraphInstantiateFlagAutoFreeOnLaunch : 0);
}

/* n replays and n eager kernels on the cell's stream (not waited for). */
static cudaError_t launch(struct cell *c, int n)
{
	for (int k = 0; k < n; k++) {
		cudaError_t e = cudaGraphLaunch(c->exec, c->st);
		if (e)
			return e;
		add_one<<<1, 32, 0, c->st>>>(c->buf);
		c->expect += c->per + 1;
	}
	return cudaGetLastError();
}

/* The device buffers, the GEMM's inputs and its eager result (before any CUPTI). */
static cudaError_t setup(struct cell *c)
{
	static float ha[NGEMM * NGEMM], hb[NGEMM * NGEMM];
	cudaError_t e;
	if ((e = cudaFree(0)) || (e = cudaMalloc(&c->buf, 3 * 32 * sizeof(int))))
		return e;
	c->tmp = c->buf + 32, c->cp = c->buf + 64;
	if ((e = cudaMemset(c->buf, 0, 3 * 32 * sizeof(int))) || (e = cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking)))
		return e;
	c->per = strcmp(c->G, "t") ? 20 : 10;
	if (strcmp(c->G, "t"))
		return cudaSuccess;
	for (int i = 0; i < NGEMM * NGEMM; i++)
		ha[i] = (float)(i % 4), hb[i] = (float)((i / 3) % 3);
	if ((e = cudaMalloc(&c->A, 3 * NGEMM * NGEMM * sizeof(float))) || (e = cudaMalloc(&c->ws, 4 << 20)))
		return e;
	c->B = c->A + NGEMM * NGEMM, c->C = c->B + NGEMM * NGEMM;
	cudaMemcpy(c->A, ha, sizeof ha, cudaMemcpyHostToDevice);
	cudaMemcpy(c->B, hb, sizeof hb, cudaMemcpyHostToDevice);
	if (cublasCreate(&c->blas) || cublasSetStream(c->blas, c->st) || cublasSetWorkspace(c->blas, c->ws, 4 << 20))
		return cudaErrorUnknown;
	const float one = 1.0f, zero = 0.0f;
	cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, NGEMM, NGEMM, NGEMM, &one, c->A, NGEMM, c->B, NGEMM, &zero, c->C, NGEMM);
	if ((e = cudaStreamSynchronize(c->st)))
		return e;
	if ((e = cudaMemcpy(c->Cref, c->C, sizeof c->Cref, cudaMemcpyDeviceToHost)))
		return e;
	return cudaMemset(c->C, 0, NGEMM * NGEMM * sizeof(float));
}

/* The detach as F says; returns the first CUDA error met while replaying through it. */
static cudaError_t detach(struct cell *c, CUptiResult *fin)
{
	cudaError_t e = cudaSuccess;
	if (!strcmp(c->F, "sync"))
		e = cudaStreamSynchronize(c->st);
	else if (!strcmp(c->F, "inflight"))
		e = launch(c, 200);
	if (e)
		return e;
	probe_fin_start();
	for (int k = 0; !strcmp(c->F, "race") && probe_fin_busy() && k < 2000 && !e; k++)
		e = launch(c, 1);
	*fin = probe_fin_join();
	return e;
}

/* After the detach: R's way back to a graph to replay. */
static cudaError_t after(struct cell *c)
{
	cudaError_t e = cudaSuccess;
	if (!strcmp(c->R, "reinst")) {
		if ((e = cudaStreamSynchronize(c->st)) || (e = cudaGraphExecDestroy(c->exec)))
			return e;
		e = instantiate(c);
	} else if (!strcmp(c->R, "update")) {
		cudaGraphExecUpdateResultInfo info;
		if ((e = cudaStreamSynchronize(c->st)))
			return e;
		e = cudaGraphExecUpdate(c->exec, c->graph, &info);
	}
	return e;
}

static int run_cell(const char *spec)
{
	static struct cell c;
	const char *what = "";
	char a[16];
	int host[96];
	probe_get(spec, "G", c.G, sizeof c.G);
	probe_get(spec, "I", c.I, sizeof c.I);
	probe_get(spec, "X", c.X, sizeof c.X);
	probe_get(spec, "F", c.F, sizeof c.F);
	probe_get(spec, "R", c.R, sizeof c.R);
	probe_get(spec, "A", a, sizeof a);
	TRY(setup(&c));
	if (strcmp(c.I, "under"))
		TRY(capture(&c));
	if (!strcmp(c.I, "pre"))
		TRY(instantiate(&c));
	CUptiResult r = probe_attach(spec, &what);
	if (r != CUPTI_SUCCESS) {
		const char *s = "";
		cuptiGetResultString(r, &s);
		printf("CELL %s: SETUP %s: CUPTI %d %s\n", spec, what, (int)r, s);
		return 2;
	}
	if (!strcmp(c.I, "under"))
		TRY(capture(&c));
	if (strcmp(c.I, "pre"))
		TRY(instantiate(&c));
	if (!strcmp(a, "win"))
		probe_window(1);
	TRY(launch(&c, REPLAYS));
	TRY(cudaStreamSynchronize(c.st));
	if (!strcmp(a, "win"))
		probe_window(0);
	CUptiResult fin = CUPTI_SUCCESS;
	TRY(detach(&c, &fin));
	TRY(after(&c));
	TRY(launch(&c, REPLAYS));
	TRY(cudaStreamSynchronize(c.st));
	TRY(cudaMemcpy(host, c.buf, sizeof host, cudaMemcpyDeviceToHost));
	int bad = host[0] != c.expect || host[31] != c.expect || (!strcmp(c.G, "t") && host[64] != 5);
	if (!strcmp(c.G, "t")) {
		static float hc[NGEMM * NGEMM];
		TRY(cudaMemcpy(hc, c.C, sizeof hc, cudaMemcpyDeviceToHost));
		bad |= memcmp(hc, c.Cref, sizeof hc) != 0;
	}
	printf("CELL %s: %s sum %d (expected %ld), copy %d, cuptiFinalize %d, records %llu, callbacks %llu%s%s\n", spec,
	       bad ? "FAIL wrong result:" : "OK", host[0], c.expect, host[64], (int)fin, probe.records, probe.callbacks,
	       probe.note[0] ? ";" : "", probe.note);
	return bad;
}

/* The sequence mode of the first probe (one letter a step; see the header). */
static int run_sequence(const char *seq)
{
	static struct cell c;
	int host[32], bad = 0;
	strcpy(c.G, "k");
	if (setup(&c))
		return 1;
	c.expect = 0;
	for (const char *p = seq; *p; p++) {
		cudaError_t e = cudaSuccess;
		CUptiResult r = CUPTI_SUCCESS;
		const char *what;
		switch (*p) {
		case 'i': r = probe_attach("C=launch,T=0,A=none", &what); break;
		case 't': r = cuptiActivityRegisterTimestampCallback(probe_mono); break;
		case 'd': r = probe_callbacks("domains"); break;
		case 'k': probe_kinds("K"); break;
		case 'm':
			probe_kind(CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY");
			probe_kind(CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET");
			probe_kind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION");
			break;
		case 'K':
		case 'M': r = probe_kinds_off(); break;
		case 'f': probe_fin_start(); r = probe_fin_join(); break;
		case 'c':
			e = capture(&c);
			if (!e)
				e = instantiate(&c);
			break;
		case 'l':
			if (c.exec)
				e = launch(&c, REPLAYS);
			else
				for (int k = 0; k < REPLAYS; k++)
					add_one<<<1, 32, 0, c.st>>>(c.buf), c.expect++;
			if (!e)
				e = cudaStreamSynchronize(c.st);
			if (!e)
				e = cudaMemcpy(host, c.buf, sizeof host, cudaMemcpyDeviceToHost);
			if (!e && host[0] != c.expect) {
				printf("  sum %d, expected %ld\n", host[0], c.expect);
				bad = 1;
			}
			break;
		}
		printf("%s step %ld '%c': %s%s cupti %d\n", seq, (long)(p - seq), *p, e ? "CUDA ERROR " : "",
		       e ? cudaGetErrorString(e) : "ok", (int)r);
		if (e)
			return 1;
	}
	printf("%s: %s (%llu records)\n", seq, bad ? "WRONG SUM" : "fine", probe.records);
	return bad;
}

int main(int argc, char **argv)
{
	const char *arg = argc > 1 ? argv[1] : "iclklKfl";
	return strchr(arg, '=') ? run_cell(arg) : run_sequence(arg);
}
