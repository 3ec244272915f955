/* SPDX-License-Identifier: MIT */
/* tok_perturb.c - rewrites a recorded token stream (STEPPROF_RECORD_TOKENS, trace/tokens.h) with
 * one change a real program makes and the recording did not have, so that `stepprof autostep
 * --check --windows` shows what automatic step detection does with it (bench/tok_perturb.sh runs
 * the corpus through every mode). The truth tokens stay where they were. Modes:
 *   jitter S  every gap between tokens times exp(N(0, S)) (a noisier machine)
 *   log N     a synchronising device-to-host copy (cudaMemcpyAsync, cudaStreamSynchronize) before
 *             every N-th true iteration, on its thread (`if it % N == 0: print(loss.item())`)
 *   logmid N  the same two thirds into every N-th iteration's launches (a gradient norm read
 *             between backward and the optimizer step)
 *   ckpt N    a checkpoint save before every N-th true iteration: 64 synchronising device-to-host
 *             copies, then a file write's pause of 50 ms (`torch.save(model.state_dict())`)
 *   thin N    the synchronising calls of every iteration but each N-th removed (the loop reads its
 *             loss only every N iterations: no other host synchronisation)
 *   drop P    each kernel launch dropped with probability P (data-dependent launches)
 *   extra N   one more kernel launch in every N-th iteration
 * Build and run after `make`:
 *   gcc -O2 -I. bench/tok_perturb.c build/libspcore.a -lzstd -lm -lpthread -o /tmp/tok_perturb
 *   /tmp/tok_perturb IN.tokens OUT.sptokens MODE ARG SEED */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/tokens.h"

/* name ids of the tokens this tool adds: past any id a recording defines (ids are dense) */
enum { ID_COPY = 1000001, ID_SYNC, ID_KERNEL };

static double gauss(void)
{
	double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = (rand() + 1.0) / (RAND_MAX + 2.0);
	return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* A token at `at` of the given kind, flags and name on thread tid. Returns 0 or -1. */
static int add(struct sp_tok_writer *w, uint64_t at, uint32_t tid, int kind, int flags, uint32_t id, const char *name)
{
	struct sp_token c = { .ts = at, .tid = tid, .kind = (uint8_t)kind, .flags = (uint8_t)flags, .name = id };
	return sp_tok_add(w, &c, name);
}

int main(int argc, char **argv)
{
	char err[256];
	if (argc != 6) {
		fprintf(stderr, "usage: tok_perturb IN OUT jitter|log|thin|drop|extra ARG SEED\n");
		return 2;
	}
	const char *mode = argv[3];
	double arg = atof(argv[4]);
	long every = arg >= 1 ? (long)arg : 1;
	srand((unsigned)atoi(argv[5]));
	struct sp_tok_reader *r = sp_tok_open(argv[1], err, sizeof err);
	if (!r) {
		fprintf(stderr, "tok_perturb: %s\n", err);
		return 2;
	}
	struct sp_tok_header h = *sp_tok_get_header(r);
	struct sp_tok_writer *w = sp_tok_create(argv[2], &h, err, sizeof err);
	if (!w) {
		fprintf(stderr, "tok_perturb: %s\n", err);
		return 2;
	}
	struct sp_token t;
	uint64_t last_in = 0, last_out = 0;
	long iter = 0, kin = 0, kprev = 0; /* launches in this true iteration so far, in the last one */
	int rc, bad = 0;
	while ((rc = sp_tok_next(r, &t, err, sizeof err)) == 1) {
		const char *name = sp_tok_name(r, t.name);
		int64_t gap = last_in ? (int64_t)(t.ts - last_in) : 0; /* threads interleave: may be < 0 */
		last_in = t.ts;
		if (!strcmp(mode, "jitter"))
			gap = (int64_t)((double)gap * exp(arg * gauss()));
		uint64_t ts = last_out ? (uint64_t)((int64_t)last_out + gap) : t.ts;
		int kind = t.kind & 0x0f, room = ts > last_out + 3;
		uint64_t a1 = room ? last_out + (ts - last_out) / 3 : ts,
			 a2 = room ? last_out + 2 * (ts - last_out) / 3 : ts;
		kin += kind == SP_TOK_KERNEL;
		if (kind == SP_TOK_KERNEL && !strcmp(mode, "logmid") && iter > 1 && iter % every == 0 &&
		    kin == kprev * 2 / 3 + 1) /* before the launch that follows two thirds of them */
			bad |= add(w, a1, t.tid, SP_TOK_API, SP_TOKF_SYNC, ID_COPY, "cudaMemcpyAsync") |
			       add(w, a2, t.tid, SP_TOK_API, SP_TOKF_SYNC, ID_SYNC, "cudaStreamSynchronize");
		if (kind == SP_TOK_TRUTH) {
			kprev = kin, kin = 0;
			iter++;
			if (!strcmp(mode, "log") && iter > 1 && iter % every == 0)
				bad |= add(w, a1, t.tid, SP_TOK_API, SP_TOKF_SYNC, ID_COPY, "cudaMemcpyAsync") |
				       add(w, a2, t.tid, SP_TOK_API, SP_TOKF_SYNC, ID_SYNC, "cudaStreamSynchronize");
			if (!strcmp(mode, "ckpt") && iter > 1 && iter % every == 0) {
				for (int c = 0; c < 64; c++)
					bad |= add(w, a1 + (uint64_t)c * 2000, t.tid, SP_TOK_API, SP_TOKF_SYNC, ID_COPY,
						   "cudaMemcpyAsync");
				ts += 50000000 + 64 * 2000; /* the copies, then the write: the rest moves later */
			}
			if (!strcmp(mode, "extra") && iter > 1 && iter % every == 0)
				bad |= add(w, a1, t.tid, SP_TOK_KERNEL, 0, ID_KERNEL, "extra_logging_kernel");
		}
		last_out = ts;
		if ((!strcmp(mode, "thin") && kind == SP_TOK_API && (t.flags & SP_TOKF_SYNC) && iter % every) ||
		    (!strcmp(mode, "drop") && kind == SP_TOK_KERNEL && rand() < arg * RAND_MAX))
			continue;
		t.ts = ts;
		bad |= sp_tok_add(w, &t, name);
	}
	if (rc < 0)
		fprintf(stderr, "tok_perturb: %s: %s\n", argv[1], err);
	sp_tok_close_reader(r);
	if (sp_tok_close(w) < 0 || bad) {
		fprintf(stderr, "tok_perturb: writing %s failed\n", argv[2]);
		return 2;
	}
	return rc < 0 ? 2 : 0;
}
