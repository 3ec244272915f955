/* SPDX-License-Identifier: MIT */
/* encode_bench.c - what the trace format costs per record, without a GPU: loads every event of a
 * trace (its strings and stacks too) into memory, then writes them again through sp_trace_write
 * into a new file (the writer thread's encoding and zstd, nothing else) and reads that file back
 * with sp_trace_next, ROUNDS times each; prints the median CPU time per record of both, the file's bytes
 * per kernel and the records of each kind. Build and run (against any build's libspcore.a, to
 * compare formats):
 *   gcc -O2 -I. bench/encode_bench.c build/libspcore.a -lzstd -lunwind -lpthread -o /tmp/eb
 *   build/tests/e2e/gen_stream tests/data/corpus/llmc.tokens /tmp/llmc.sptrace 1 34
 *   /tmp/eb /tmp/llmc.sptrace /tmp/eb.out.sptrace [ROUNDS]
 * Exits 1 if a file cannot be read or written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "trace/trace.h"

static struct sp_trace_reader *src;

static const char *lookup(void *ctx, uint32_t id)
{
	return sp_trace_string(src, id);
}

static const uint64_t *stack_lookup(void *ctx, uint32_t id, uint32_t *n)
{
	return sp_trace_stack(src, id, n);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the host is shared */
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: encode_bench IN.sptrace OUT.sptrace [ROUNDS]\n");
		return 2;
	}
	int rounds = argc > 3 ? atoi(argv[3]) : 5;
	rounds = rounds < 1 ? 1 : rounds > 99 ? 99 : rounds;
	char err[256];
	if (!(src = sp_trace_open(argv[1], err, sizeof(err)))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	size_t n = 0, cap = 1 << 16, kinds[SP_EV__COUNT] = { 0 };
	struct sp_event *ev = malloc(cap * sizeof(*ev));
	while (ev && sp_trace_next(src, &ev[n]) == 1) {
		kinds[ev[n].kind]++;
		if (++n == cap)
			ev = realloc(ev, (cap *= 2) * sizeof(*ev));
	}
	if (!ev || !n)
		return 1;
	struct sp_trace_meta meta = sp_trace_header(src)->meta;
	double wt[99], rt[99];
	struct stat st = { 0 };
	for (int k = 0; k < rounds; k++) {
		unlink(argv[2]);
		double t0 = now();
		struct sp_trace_writer *w = sp_trace_create(argv[2], &meta, lookup, NULL, 0);
		if (!w)
			return 1;
		sp_trace_set_stack_lookup(w, stack_lookup, NULL);
		for (size_t i = 0; i < n; i++)
			if (sp_trace_write(w, &ev[i]) < 0)
				return 1;
		if (sp_trace_close(w) < 0)
			return 1;
		wt[k] = (now() - t0) / (double)n;
		t0 = now();
		struct sp_trace_reader *r = sp_trace_open(argv[2], err, sizeof(err));
		struct sp_event e;
		size_t m = 0;
		while (r && sp_trace_next(r, &e) == 1)
			m++;
		rt[k] = (now() - t0) / (double)n;
		if (!r || m != n) {
			fprintf(stderr, "read back %zu of %zu records\n", m, n);
			return 1;
		}
		sp_trace_close_reader(r);
		stat(argv[2], &st);
	}
	qsort(wt, (size_t)rounds, sizeof(double), cmp);
	qsort(rt, (size_t)rounds, sizeof(double), cmp);
	printf("%zu records (", n);
	for (int k = 1; k < SP_EV__COUNT; k++)
		if (kinds[k])
			printf("%s%s %zu", k > 1 && kinds[k] != n ? " " : "", sp_ev_kind_name((unsigned)k), kinds[k]);
	printf("), %lld bytes, %.2f bytes/kernel; write %.0f ns/record, read %.0f ns/record (median of %d)\n",
	       (long long)st.st_size, kinds[SP_EV_KERNEL] ? (double)st.st_size / (double)kinds[SP_EV_KERNEL] : 0.0,
	       wt[rounds / 2], rt[rounds / 2], rounds);
	sp_trace_close_reader(src);
	free(ev);
	return 0;
}
