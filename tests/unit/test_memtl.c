/* SPDX-License-Identifier: MIT */
/* test_memtl.c - the memory timeline of `stepprof memory` on a synthetic trace worked out by hand
 * (see write_sample): levels from the records' `live`, the live set from snapshots + allocs -
 * frees, the peak and the allocations alive at it, snapshot records written before their
 * window's BEGIN and, for back-to-back windows, before the previous window's END; the text
 * summary, the HTML page (data, no network references, --window) and the thinning of long
 * series. With SP_WRITE_SAMPLE=PATH set it only writes the sample there (for the e2e script). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "scratch.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/memtl.h"
#include "config/schedule.h"
#include "stack_fixture.h"

#define MS 1000000ull
#define KIB 1024ull
#define MIB (1024ull * 1024)
#define T 1000000000000ull /* window 0 opens here */

static char sample[300];

/* stack 1: alloc_weights <- model_forward <- train_loop; 2: launch_gemm <- train_loop; 3: train_loop */
static const uint64_t *lookup_stack(void *ctx, uint32_t id, uint32_t *n)
{
	static uint64_t st[4][3];
	st[1][0] = SX_PC(sx_alloc_weights);
	st[1][1] = SX_PC(sx_model_forward);
	st[1][2] = st[2][1] = st[3][0] = SX_PC(sx_train_loop);
	st[2][0] = SX_PC(sx_launch_gemm);
	*n = id == 1 ? 3 : id == 2 ? 2 : 1;
	return id >= 1 && id <= 3 ? st[id] : NULL;
}

static const char *lookup_string(void *ctx, uint32_t id)
{
	return id == 1 ? "NVIDIA H100 80GB HBM3" : id == 2 ? "cudaLaunchKernel" : NULL;
}

static void put(struct sp_trace_writer *w, struct sp_event e)
{
	assert_true(sp_trace_write(w, &e) > 0);
}

static struct sp_event ev(int kind, uint64_t t)
{
	return (struct sp_event){ .kind = (uint8_t)kind, .device = SP_NO_DEVICE, .start = t, .end = t };
}

/* An ALLOC or FREE: dev 0/1 or SP_NO_DEVICE (host), at t, live after it. */
static struct sp_event mem(int kind, uint16_t dev, uint64_t t, uint64_t addr, uint64_t size, uint64_t live,
			   uint32_t stack, uint32_t flags)
{
	struct sp_event e = ev(kind, t);
	e.sub = dev == SP_NO_DEVICE ? SP_MEM_HOST : SP_MEM_DEVICE;
	e.device = dev, e.tid = 7;
	e.u.mem = (struct sp_ev_mem){ .addr = addr, .size = size, .live = live, .stack = stack, .flags = flags };
	return e;
}

static struct sp_event step(int64_t n, uint64_t s, uint64_t e)
{
	struct sp_event x = ev(SP_EV_STEP, s);
	x.end = e, x.tid = 7, x.sub = SP_ACT_RECORD, x.u.step.number = n;
	return x;
}

static struct sp_event window(int kind, uint32_t id, int64_t stepno, uint64_t t)
{
	struct sp_event x = ev(kind, t);
	x.u.window.id = id, x.u.window.first_step = x.u.window.last_step = stepno;
	return x;
}

/* The sample. Window 0, steps 5 (T..+10ms) and 6 (+10..+20ms), ends at +20 ms:
 *   alive when it opens (snapshots, written before BEGIN): S1 GPU0 0xA000 4 MiB (stack 1, made
 *   T-5s), S2 GPU0 0xB000 1 MiB (no stack), H1 host 0x5000 64 KiB (stack 3): GPU0 at 5 MiB,
 *   host at 64 KiB. Then +1ms C 0xC000 8 MiB (stack 1) -> 13, +2 D 0xD000 2 MiB (stack 2) -> 15,
 *   +3 free S2 -> 14, +12 E 0xE000 3 MiB -> 17 (the peak: C, S1, E, D alive), +15 free C -> 9,
 *   +16 host 0x6000 1 MiB -> host 1 MiB + 64 KiB (its peak), +18 free E -> 6.
 *   PEAK records: GPU0 32 MiB, host 2 MiB since process start.
 * Window 1 opens at +20 ms, right after window 0, so its snapshots (S1, D, H1, the host 0x6000)
 *   are written before window 0's PEAK and END. Step 7 (+20..+30ms), ends at +30 ms: +21 F
 *   0xF000 10 MiB -> 16 (peak: F, S1, D), +22 GPU1 0x1000 1 MiB -> 1, +25 free F -> 6.
 *   A launch with stack 2 at +23 ms. */
static void write_sample(const char *path)
{
	struct sp_trace_meta m = { .pid = 4242,
				   .rank = -1,
				   .world_size = -1,
				   .local_rank = -1,
				   .anchor_mono_ns = T - 6000 * MS,
				   .anchor_real_ns = 1700000000000000000ull };
	strcpy(m.host, "node1");
	strcpy(m.command, "python train.py <memory test>");
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup_string, NULL, 0);
	const uint16_t host = SP_NO_DEVICE;
	assert_non_null(w);
	sp_trace_set_stack_lookup(w, lookup_stack, NULL);

	struct sp_event d = ev(SP_EV_DEVICE, T - 2 * MS);
	d.device = 0, d.name = 1;
	put(w, d);
	assert_true(sx_write_modules(w, T - 2 * MS, 100) > 0);
	put(w, mem(SP_EV_ALLOC, 0, T - 5000 * MS, 0xA000, 4 * MIB, 5 * MIB, 1, SP_MEMF_SNAPSHOT));
	put(w, mem(SP_EV_ALLOC, 0, T - 4000 * MS, 0xB000, 1 * MIB, 5 * MIB, 0, SP_MEMF_SNAPSHOT));
	put(w, mem(SP_EV_ALLOC, host, T - 3000 * MS, 0x5000, 64 * KIB, 64 * KIB, 3, SP_MEMF_SNAPSHOT));
	put(w, window(SP_EV_WINDOW_BEGIN, 0, 5, T));
	put(w, mem(SP_EV_ALLOC, 0, T + 1 * MS, 0xC000, 8 * MIB, 13 * MIB, 1, 0));
	put(w, mem(SP_EV_ALLOC, 0, T + 2 * MS, 0xD000, 2 * MIB, 15 * MIB, 2, 0));
	put(w, mem(SP_EV_FREE, 0, T + 3 * MS, 0xB000, 1 * MIB, 14 * MIB, 0, 0));
	put(w, step(5, T, T + 10 * MS));
	put(w, mem(SP_EV_ALLOC, 0, T + 12 * MS, 0xE000, 3 * MIB, 17 * MIB, 0, 0));
	put(w, mem(SP_EV_FREE, 0, T + 15 * MS, 0xC000, 8 * MIB, 9 * MIB, 0, 0));
	put(w, mem(SP_EV_ALLOC, host, T + 16 * MS, 0x6000, 1 * MIB, MIB + 64 * KIB, 3, 0));
	put(w, mem(SP_EV_FREE, 0, T + 18 * MS, 0xE000, 3 * MIB, 6 * MIB, 0, 0));
	put(w, step(6, T + 10 * MS, T + 20 * MS));
	/* window 1's snapshots, sorted by their start, ahead of window 0's end */
	put(w, mem(SP_EV_ALLOC, 0, T - 5000 * MS, 0xA000, 4 * MIB, 6 * MIB, 1, SP_MEMF_SNAPSHOT));
	put(w, mem(SP_EV_ALLOC, host, T - 3000 * MS, 0x5000, 64 * KIB, MIB + 64 * KIB, 3, SP_MEMF_SNAPSHOT));
	put(w, mem(SP_EV_ALLOC, 0, T + 2 * MS, 0xD000, 2 * MIB, 6 * MIB, 2, SP_MEMF_SNAPSHOT));
	put(w, mem(SP_EV_ALLOC, host, T + 16 * MS, 0x6000, 1 * MIB, MIB + 64 * KIB, 3, SP_MEMF_SNAPSHOT));
	put(w, mem(SP_EV_ALLOC, 0, T + 20 * MS, 0, 0, 32 * MIB, 0, SP_MEMF_PEAK));
	put(w, mem(SP_EV_ALLOC, host, T + 20 * MS, 0, 0, 2 * MIB, 0, SP_MEMF_PEAK));
	put(w, window(SP_EV_WINDOW_END, 0, 6, T + 20 * MS));
	put(w, window(SP_EV_WINDOW_BEGIN, 1, 7, T + 20 * MS));
	put(w, mem(SP_EV_ALLOC, 0, T + 21 * MS, 0xF000, 10 * MIB, 16 * MIB, 1, 0));
	put(w, mem(SP_EV_ALLOC, 1, T + 22 * MS, 0x1000, 1 * MIB, 1 * MIB, 0, 0));
	struct sp_event l = ev(SP_EV_API, T + 23 * MS);
	l.end += 5000, l.sub = SP_API_RUNTIME, l.name = 2, l.tid = 7, l.corr = 1, l.u.api.stack = 2;
	put(w, l);
	put(w, mem(SP_EV_FREE, 0, T + 25 * MS, 0xF000, 10 * MIB, 6 * MIB, 0, 0));
	put(w, step(7, T + 20 * MS, T + 30 * MS));
	put(w, mem(SP_EV_ALLOC, 0, T + 30 * MS, 0, 0, 32 * MIB, 0, SP_MEMF_PEAK));
	put(w, window(SP_EV_WINDOW_END, 1, 7, T + 30 * MS));
	assert_int_equal(sp_trace_close(w), 0);
}

/* The allocation sizes alive at s's peak, biggest first, as "4M,2M,..." (MiB or KiB). */
static const char *at_peak(const struct sp_memtl *w, const struct sp_memtl_series *s)
{
	static char buf[256];
	size_t n = 0;
	buf[0] = 0;
	for (size_t i = 0; i < s->n_at_peak; i++) {
		uint64_t b = w->a[s->at_peak[i]].size;
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%llu%s", i ? "," : "",
				      (unsigned long long)(b % MIB ? b / KIB : b / MIB), b % MIB ? "K" : "M");
	}
	return buf;
}

static void test_timeline(void **state)
{
	char err[256];
	struct sp_trace_reader *r = sp_trace_open(sample, err, sizeof(err));
	struct sp_sym *sym = sp_sym_open();
	struct sp_memtl_reader *m = sp_memtl_open(r, sym);
	const struct sp_memtl *w;
	assert_non_null(r);

	assert_int_equal(sp_memtl_next(m, &w), 1);
	assert_int_equal(w->id, 0);
	assert_true(w->complete);
	assert_int_equal(w->t0, T);
	assert_int_equal(w->t1, T + 20 * MS);
	assert_int_equal(w->nstep, 2);
	assert_int_equal(w->step[1].number, 6);
	assert_int_equal(w->na, 3 + 4); /* 3 snapshots, 4 allocations made in the window */
	assert_int_equal(w->ns, 2);
	const struct sp_memtl_series *g = &w->s[0], *h = &w->s[1];
	assert_string_equal(g->label, "GPU 0 (NVIDIA H100 80GB HBM3)");
	assert_string_equal(h->label, "host");
	assert_int_equal(g->n, 1 + 6);
	assert_int_equal(g->pt[0].live, 5 * MIB); /* from the snapshots */
	assert_int_equal(g->pt[6].live, 6 * MIB);
	assert_int_equal(g->peak, 17 * MIB);
	assert_int_equal(g->peak_t, T + 12 * MS);
	assert_int_equal(g->peak_ever, 32 * MIB);
	assert_int_equal(g->allocs, 3);
	assert_int_equal(g->frees, 3);
	assert_string_equal(at_peak(w, g), "8M,4M,3M,2M");
	assert_int_equal(w->a[g->at_peak[1]].snapshot, 1);
	assert_int_equal(w->a[g->at_peak[1]].made, T - 5000 * MS);
	assert_int_equal(w->a[g->at_peak[0]].freed, T + 15 * MS);
	assert_int_equal(h->pt[0].live, 64 * KIB);
	assert_int_equal(h->peak, MIB + 64 * KIB);
	assert_int_equal(h->peak_t, T + 16 * MS);
	assert_int_equal(h->peak_ever, 2 * MIB);
	assert_string_equal(at_peak(w, h), "1M,64K");

	assert_int_equal(sp_memtl_next(m, &w), 1);
	assert_int_equal(w->id, 1);
	assert_int_equal(w->nstep, 1);
	assert_int_equal(w->na, 4 + 2); /* its own snapshots, not window 0's */
	assert_int_equal(w->ns, 3);
	g = &w->s[0];
	assert_int_equal(g->pt[0].live, 6 * MIB);
	assert_int_equal(g->peak, 16 * MIB);
	assert_int_equal(g->peak_t, T + 21 * MS);
	assert_string_equal(at_peak(w, g), "10M,4M,2M");
	assert_string_equal(w->s[1].label, "GPU 1");
	assert_int_equal(w->s[1].pt[0].live, 0); /* worked back from its first allocation */
	assert_int_equal(w->s[1].peak, 1 * MIB);
	assert_int_equal(w->s[1].peak_ever, 0); /* no PEAK record for GPU 1 */
	h = &w->s[2];
	assert_int_equal(h->n, 1);
	assert_int_equal(h->peak, MIB + 64 * KIB);
	assert_int_equal(h->peak_t, T + 20 * MS); /* window 1's start */
	assert_string_equal(at_peak(w, h), "1M,64K");
	assert_int_equal(sp_memtl_next(m, &w), 0);

	sp_memtl_close(m);
	sp_sym_close(sym);
	sp_trace_close_reader(r);
}

static void test_summary(void **state)
{
	char err[256], *buf = NULL;
	size_t len = 0;
	struct sp_trace_reader *r = sp_trace_open(sample, err, sizeof(err));
	struct sp_sym *sym = sp_sym_open();
	struct sp_memtl_reader *m = sp_memtl_open(r, sym);
	const struct sp_memtl *w;
	FILE *f = open_memstream(&buf, &len);

	assert_int_equal(sp_memtl_next(m, &w), 1);
	sp_memtl_summary(w, r, sym, 3, f);
	fclose(f);
	assert_string_equal(
		buf,
		"Window 0: steps 5-6, 20.000ms\n"
		"  GPU 0 (NVIDIA H100 80GB HBM3): peak 17.00MiB at +12.000ms (step 6), peak since process start "
		"32.00MiB; 3 allocations, 3 frees in the window\n"
		"    alive at the peak: 4 allocations, 17.00MiB\n"
		"    by owner (the library that allocated each block, from its stack): at the peak, own peak\n"
		"      other library                        14.00MiB (3 blocks), own peak 14.00MiB\n"
		"      unknown                               3.00MiB (1 block), own peak 3.00MiB; first: no stack\n"
		"       8.00MiB  device       made +1.000ms  sx_alloc_weights+0x4 (test_memtl)  [other library]\n"
		"       4.00MiB  device       made -5.000s  sx_alloc_weights+0x4 (test_memtl)  [other library]\n"
		"       3.00MiB  device       made +12.000ms  (no stack)  [unknown: no stack]\n"
		"    ... 1 more\n"
		"  host: peak 1.06MiB at +16.000ms (step 6), peak since process start 2.00MiB; 1 allocation, 0 frees "
		"in the window\n"
		"    alive at the peak: 2 allocations, 1.06MiB\n"
		"       1.00MiB  host         made +16.000ms  sx_train_loop+0x4 (test_memtl)\n"
		"      64.00KiB  host         made -3.000s  sx_train_loop+0x4 (test_memtl)\n");
	free(buf);
	sp_memtl_close(m);
	sp_sym_close(sym);
	sp_trace_close_reader(r);
}

/* Runs `stepprof memory` with argv (NULL-terminated, after "memory"), stdout to a file. */
static int memory_cmd(const char *const *args)
{
	char *argv[16];
	int argc = 0, rc;
	char log[320];
	snprintf(log, sizeof(log), "%s/memory.log", dir);
	argv[argc++] = "memory";
	while (*args)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	fflush(stdout);
	int saved = dup(1);
	assert_non_null(freopen(log, "w", stdout));
	rc = sp_cmd_memory(argc, argv);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	return rc;
}

/* Reads a whole file (NULL if unreadable). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0;
	if (!f)
		return NULL;
	FILE *o = open_memstream(&buf, &len);
	int c;
	while ((c = getc(f)) != EOF)
		putc(c, o);
	fclose(f);
	fclose(o);
	return buf;
}

static void test_html_page(void **state)
{
	char html[320];
	snprintf(html, sizeof(html), "%s/page.html", dir);
	assert_int_equal(memory_cmd((const char *[]){ sample, "-o", html, NULL }), 0);
	char *s = slurp(html);
	assert_non_null(s);
	assert_true(strncmp(s, "<!DOCTYPE html>", 15) == 0);
	assert_null(strstr(s, "http://"));
	assert_null(strstr(s, "https://"));
	assert_null(strstr(s, "<memory test>")); /* the command line is escaped */
	assert_non_null(strstr(s, "&lt;memory test&gt;"));
	assert_non_null(strstr(s, "<section id=\"w0\">"));
	assert_non_null(strstr(s, "<section id=\"w1\">"));
	assert_non_null(strstr(s, "\"label\":\"GPU 0 (NVIDIA H100 80GB HBM3)\",\"peak\":17825792"));
	assert_non_null(strstr(s, "\"peak_ever\":33554432,\"n_at_peak\":4"));
	assert_non_null(strstr(s, "\"steps\":[[5,0.000000,10.000000],[6,10.000000,20.000000]]"));
	assert_non_null(strstr(s, "\"sx_alloc_weights+0x4 (test_memtl)\",\"sx_model_forward+0x4 (test_memtl)\""));
	assert_non_null(strstr(s, "ProfilerStep#"));
	assert_non_null(strstr(s, "SP_WINDOWS.forEach(render);"));
	assert_true(strstr(s, "</html>\n") && !strstr(s, "</html>\n")[8]);
	free(s);
	s = slurp(strcat(strcpy(html, dir), "/memory.log"));
	assert_non_null(strstr(s, "Window 1: steps 7-7, 10.000ms\n"));
	assert_non_null(strstr(s, "wrote "));
	free(s);

	/* one window; errors */
	snprintf(html, sizeof(html), "%s/one.html", dir);
	assert_int_equal(memory_cmd((const char *[]){ sample, "--window", "1", "-o", html, NULL }), 0);
	s = slurp(html);
	assert_null(strstr(s, "<section id=\"w0\">"));
	assert_non_null(strstr(s, "<section id=\"w1\">"));
	free(s);
	snprintf(html, sizeof(html), "%s/none.html", dir);
	assert_int_equal(memory_cmd((const char *[]){ sample, "--window", "9", "-o", html, NULL }), 1);
	assert_int_equal(access(html, F_OK), -1); /* nothing left behind */
	assert_int_equal(memory_cmd((const char *[]){ sample, "--window", "x", NULL }), 2);
	assert_int_equal(memory_cmd((const char *[]){ NULL }), 2);
	assert_int_equal(memory_cmd((const char *[]){ "/nonexistent.sptrace", NULL }), 1);
}

/* 6000 allocate/free pairs in one window (12001 points): the page keeps at most about 4000 of
 * them, the peak among them; an unterminated window ends at its last record. */
static void test_thinning_and_incomplete(void **state)
{
	char path[320], html[320];
	snprintf(path, sizeof(path), "%s/long.sptrace", dir);
	snprintf(html, sizeof(html), "%s/long.html", dir);
	struct sp_trace_meta m = { .rank = -1 };
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup_string, NULL, 0);
	assert_non_null(w);
	put(w, window(SP_EV_WINDOW_BEGIN, 3, 0, T));
	for (uint64_t i = 0; i < 6000; i++) {
		uint64_t size = i == 4321 ? 999 * MIB : MIB;
		put(w, mem(SP_EV_ALLOC, 0, T + (2 * i + 1) * 1000, 0x100000 + i, size, size, 0, 0));
		put(w, mem(SP_EV_FREE, 0, T + (2 * i + 2) * 1000, 0x100000 + i, size, 0, 0, 0));
	}
	assert_int_equal(sp_trace_close(w), 0);

	char err[256];
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	struct sp_memtl_reader *mr = sp_memtl_open(r, NULL);
	const struct sp_memtl *tl;
	assert_int_equal(sp_memtl_next(mr, &tl), 1);
	assert_false(tl->complete);
	assert_int_equal(tl->t1, T + 12000 * 1000);
	assert_int_equal(tl->s[0].n_all, 12001);
	assert_true(tl->s[0].n <= 4001); /* thinned as the reader goes: the page's points */
	assert_int_equal(tl->s[0].peak, 999 * MIB);
	assert_string_equal(at_peak(tl, &tl->s[0]), "999M");
	sp_memtl_close(mr);
	sp_trace_close_reader(r);

	assert_int_equal(memory_cmd((const char *[]){ path, "-o", html, NULL }), 0);
	char *s = slurp(html), *v = strstr(s, "\"v\":[");
	assert_non_null(v);
	*strchr(v, ']') = 0;
	int points = 1;
	for (const char *p = v; *p; p++)
		points += *p == ',';
	printf("long series: %d of 12001 points kept\n", points);
	assert_true(points > 1000 && points <= 4001);
	assert_non_null(strstr(v, ",1047527424,")); /* 999 MiB */
	free(s);
}

/* 24000 allocations of 1..1000 KiB, each freed at once, after 3 blocks of 999 MiB that stay (the
 * peak: the first 1000 KiB one alive beside them): the reader keeps the 20000 largest and those
 * alive at the peak, not every allocation; the page embeds 20000. */
static void test_many_allocations(void **state)
{
	char path[320], html[320], err[256];
	snprintf(path, sizeof(path), "%s/many.sptrace", dir);
	snprintf(html, sizeof(html), "%s/many.html", dir);
	struct sp_trace_meta m = { .rank = -1 };
	struct sp_trace_writer *w = sp_trace_create(path, &m, lookup_string, NULL, 0);
	uint64_t t = T, live = 3 * 999 * MIB;
	assert_non_null(w);
	put(w, window(SP_EV_WINDOW_BEGIN, 0, 0, T));
	for (uint64_t i = 0; i < 3; i++)
		put(w, mem(SP_EV_ALLOC, 0, t++, 0x900000 + i, 999 * MIB, (i + 1) * 999 * MIB, 0, 0));
	for (uint64_t i = 0; i < 24000; i++) {
		uint64_t size = (i % 1000 + 1) * KIB;
		put(w, mem(SP_EV_ALLOC, 0, t++, 0x100000 + i, size, live + size, 0, 0));
		put(w, mem(SP_EV_FREE, 0, t++, 0x100000 + i, size, live, 0, 0));
	}
	put(w, window(SP_EV_WINDOW_END, 0, 0, t));
	assert_int_equal(sp_trace_close(w), 0);

	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	struct sp_sym *sym = sp_sym_open();
	struct sp_memtl_reader *mr = sp_memtl_open(r, sym);
	const struct sp_memtl *tl;
	struct sp_memtl_owned o;
	assert_int_equal(sp_memtl_next(mr, &tl), 1);
	assert_int_equal(tl->na_all, 24003);
	sp_memtl_owners(tl, &tl->s[0], r, sym, &o); /* over all 24003 blocks, not the 20000 kept */
	assert_int_equal(o.blocks[SP_OWNER_UNKNOWN], 24003);
	assert_int_equal(o.peak[SP_OWNER_UNKNOWN], 3 * 999 * MIB + 1000 * KIB);
	assert_int_equal(o.at_peak[SP_OWNER_UNKNOWN], 3 * 999 * MIB + 1000 * KIB);
	assert_int_equal(o.blocks_at_peak[SP_OWNER_UNKNOWN], 4);
	assert_string_equal(o.unknown_why, "no stack");
	assert_int_equal(tl->na, 20000); /* the 20000 largest hold the 4 alive at the peak */
	assert_int_equal(tl->s[0].n_at_peak, 4);
	assert_int_equal(tl->s[0].peak, 3 * 999 * MIB + 1000 * KIB);
	uint64_t least = UINT64_MAX;
	for (size_t i = 0; i < tl->na; i++) {
		least = tl->a[i].size < least ? tl->a[i].size : least;
		assert_true(i == 0 || tl->a[i].made > tl->a[i - 1].made); /* in the order made */
	}
	assert_int_equal(least, 167 * KIB); /* 19997 small ones: 24 of each size from 1000 KiB to 168, 5 of 167 */
	sp_memtl_close(mr);
	sp_sym_close(sym);
	sp_trace_close_reader(r);

	assert_int_equal(memory_cmd((const char *[]){ path, "-o", html, NULL }), 0);
	char *page = slurp(html), *a = strstr(page, "\"allocs\":["), *end = strstr(page, "],\n\"stacks\"");
	assert_non_null(a);
	assert_non_null(end);
	size_t rows = 1;
	for (const char *p = a; p < end; p++)
		rows += *p == '\n';
	assert_int_equal(rows, 20000);
	free(page);
}

/* ---- who made each block (memtl_owner.c) ---- */

#define LIB(i) (0x7f0000000000ull + (uint64_t)(i) * 0x100000ull) /* module i's text */

static const char *const owner_libs[] = {
	"/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13",
	"/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so",
	"/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
	"/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
};

/* stacks: 4 cudart <- c10_cuda (the caching allocator); 5 nccl; 6 cudart <- cublasLt; 7 a Python
 * frame only; 8 an address in no module; 9 cudart only */
static const uint64_t *owner_stack(void *ctx, uint32_t id, uint32_t *n)
{
	static const uint64_t st[][3] = { { LIB(0) + 0x40, LIB(1) + 0x80, SP_PYFRAME_TAG | 1 },
					  { LIB(2) + 0x100 },
					  { LIB(0) + 0x40, LIB(3) + 0x200 },
					  { SP_PYFRAME_TAG | 1 },
					  { 0x5555000 },
					  { LIB(0) + 0x44 } };
	static const uint32_t len[] = { 3, 1, 2, 1, 1, 1 };
	if (id < 4 || id > 9)
		return NULL;
	*n = len[id - 4];
	return st[id - 4];
}

static const char *owner_string(void *ctx, uint32_t id)
{
	return id == 20 ? "/home/u/train.py" : id == 21 ? "main" : NULL;
}

static int owner_pyframe(void *ctx, uint32_t id, uint32_t *file, uint32_t *func, uint32_t *line)
{
	if (id != 1)
		return -1;
	*file = 20, *func = 21, *line = 3;
	return 0;
}

/* GPU 0: snapshots A 100 MiB (stack 4), B 64 MiB (5) -> 164; in the window +1 C 20 MiB (4) -> 184,
 * the peak; +2 free C -> 164; +3 D 8 MiB (6) -> 172; +4 E 2 MiB (7), +5 G 1 MiB (8), +6 H 1 MiB (9)
 * -> 176; +7 I 4 MiB without a stack -> 180. */
static void write_owners(const char *path)
{
	struct sp_trace_meta m = { .features = SP_FEAT_STACKS | SP_FEAT_PYSTACKS | SP_FEAT_DEVICE_MEM,
				   .pid = 99,
				   .rank = -1,
				   .world_size = -1,
				   .local_rank = -1,
				   .anchor_mono_ns = T - 6000 * MS };
	struct sp_trace_writer *w = sp_trace_create(path, &m, owner_string, NULL, 0);
	assert_non_null(w);
	sp_trace_set_stack_lookup(w, owner_stack, NULL);
	sp_trace_set_pyframe_lookup(w, owner_pyframe, NULL);
	for (uint32_t i = 0; i < 4; i++) {
		struct sp_event e = ev(SP_EV_MODULE, T - MS);
		e.name = 10 + i;
		e.u.module.start = LIB(i), e.u.module.end = LIB(i) + 0x10000;
		assert_true(sp_trace_write_string(w, e.name, owner_libs[i]) >= 0);
		put(w, e);
	}
	put(w, mem(SP_EV_ALLOC, 0, T - 50 * MS, 0xA000, 100 * MIB, 100 * MIB, 4, SP_MEMF_SNAPSHOT));
	put(w, mem(SP_EV_ALLOC, 0, T - 40 * MS, 0xB000, 64 * MIB, 164 * MIB, 5, SP_MEMF_SNAPSHOT));
	put(w, window(SP_EV_WINDOW_BEGIN, 0, 5, T));
	put(w, mem(SP_EV_ALLOC, 0, T + 1 * MS, 0xC000, 20 * MIB, 184 * MIB, 4, 0));
	put(w, mem(SP_EV_FREE, 0, T + 2 * MS, 0xC000, 20 * MIB, 164 * MIB, 0, 0));
	put(w, mem(SP_EV_ALLOC, 0, T + 3 * MS, 0xD000, 8 * MIB, 172 * MIB, 6, 0));
	put(w, mem(SP_EV_ALLOC, 0, T + 4 * MS, 0xE000, 2 * MIB, 174 * MIB, 7, 0));
	put(w, mem(SP_EV_ALLOC, 0, T + 5 * MS, 0xE800, 1 * MIB, 175 * MIB, 8, 0));
	put(w, mem(SP_EV_ALLOC, 0, T + 6 * MS, 0xF000, 1 * MIB, 176 * MIB, 9, 0));
	put(w, mem(SP_EV_ALLOC, 0, T + 7 * MS, 0xF800, 4 * MIB, 180 * MIB, 0, 0));
	put(w, step(5, T, T + 10 * MS));
	put(w, window(SP_EV_WINDOW_END, 0, 5, T + 10 * MS));
	assert_int_equal(sp_trace_close(w), 0);
}

static void test_owners(void **state)
{
	char path[320], err[256], why[128], *buf = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/owners.sptrace", dir);
	write_owners(path);
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	struct sp_sym *sym = sp_sym_open();
	struct sp_memtl_reader *m = sp_memtl_open(r, sym);
	const struct sp_memtl *w;
	struct sp_memtl_owned o;
	assert_non_null(r);
	sp_sym_use_trace(sym, r);
	assert_int_equal(sp_memtl_next(m, &w), 1);

	/* each stack: its owner and how it was told */
	static const struct {
		uint32_t stack;
		int owner;
		const char *why;
	} want[] = { { 4, SP_OWNER_TORCH_CACHE, "a frame in libc10_cuda.so" },
		     { 5, SP_OWNER_NCCL, "a frame in libnccl.so.2" },
		     { 6, SP_OWNER_CUBLAS, "a frame in libcublasLt.so.13" },
		     { 7, SP_OWNER_UNKNOWN, "no native frame (stacks = python by a version that kept none)" },
		     { 8, SP_OWNER_UNKNOWN, "no module recorded for its frames" },
		     { 9, SP_OWNER_UNKNOWN, "only CUDA runtime and driver frames" },
		     { 0, SP_OWNER_UNKNOWN, "no stack" } };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint32_t n = 0;
		const uint64_t *pcs = want[i].stack ? sp_trace_stack(r, want[i].stack, &n) : NULL;
		assert_int_equal(sp_memtl_owner(sym, pcs, n, why, sizeof(why)), want[i].owner);
		assert_string_equal(why, want[i].why);
	}
	sp_memtl_owners(w, &w->s[0], r, sym, &o);
	assert_int_equal(w->s[0].peak, 184 * MIB);
	assert_int_equal(o.at_peak[SP_OWNER_TORCH_CACHE], 120 * MIB);
	assert_int_equal(o.blocks_at_peak[SP_OWNER_TORCH_CACHE], 2);
	assert_int_equal(o.at_peak[SP_OWNER_NCCL], 64 * MIB);
	assert_int_equal(o.at_peak[SP_OWNER_CUBLAS] + o.at_peak[SP_OWNER_UNKNOWN], 0);
	assert_int_equal(o.peak[SP_OWNER_TORCH_CACHE], 120 * MIB);
	assert_int_equal(o.peak[SP_OWNER_CUBLAS], 8 * MIB);
	assert_int_equal(o.peak[SP_OWNER_UNKNOWN], 8 * MIB);
	assert_int_equal(o.blocks[SP_OWNER_UNKNOWN], 4);

	FILE *f = open_memstream(&buf, &len);
	sp_memtl_summary(w, r, sym, 2, f);
	fclose(f);
	assert_string_equal(
		buf,
		"Window 0: steps 5-5, 10.000ms\n"
		"  GPU 0: peak 184.00MiB at +1.000ms (step 5); 6 allocations, 1 free in the window\n"
		"    alive at the peak: 3 allocations, 184.00MiB\n"
		"    by owner (the library that allocated each block, from its stack): at the peak, own peak\n"
		"      PyTorch caching allocator           120.00MiB (2 blocks), own peak 120.00MiB: beside "
		"torch.cuda.max_memory_reserved()\n"
		"      NCCL                                 64.00MiB (1 block), own peak 64.00MiB\n"
		"      cuBLAS                                     0B (0 blocks), own peak 8.00MiB\n"
		"      unknown                                    0B (0 blocks), own peak 8.00MiB; first: no native frame "
		"(stacks = python by a version that kept none)\n"
		"     100.00MiB  device       made -50.000ms  main (/home/u/train.py:3)  [PyTorch caching allocator]\n"
		"      64.00MiB  device       made -40.000ms  0x7f0000200100 (libnccl.so.2+0x100)  [NCCL]\n"
		"    ... 1 more\n");
	free(buf);
	sp_memtl_close(m);
	sp_sym_close(sym);
	sp_trace_close_reader(r);

	/* stepprof memory --json: the owners per GPU and each block's owner */
	char json[320], *text;
	snprintf(json, sizeof(json), "%s/owners.html", dir);
	assert_int_equal(memory_cmd((const char *[]){ path, "-o", json, "--json", NULL }), 0);
	snprintf(json, sizeof(json), "%s/memory.log", dir);
	assert_non_null(text = slurp(json));
	assert_non_null(strstr(text, "\"owners\":[{\"owner\":\"unknown\",\"label\":\"unknown\",\"bytes_at_peak\":0,"
				     "\"blocks_at_peak\":0,\"own_peak_bytes\":8388608,\"blocks\":4},{\"owner\":"
				     "\"torch_caching_allocator\",\"label\":\"PyTorch caching allocator\",\"bytes_at_peak\":"
				     "125829120,\"blocks_at_peak\":2,\"own_peak_bytes\":125829120,\"blocks\":2}"));
	assert_non_null(strstr(text, "\"owner\":\"nccl\",\"owner_how\":\"a frame in libnccl.so.2\""));
	free(text);
}

static int setup(void **state)
{
	if (make_scratch("memtl") < 0)
		return -1;
	snprintf(sample, sizeof(sample), "%s/mem.sptrace", dir);
	write_sample(sample);
	return 0;
}

int main(void)
{
	const char *out = getenv("SP_WRITE_SAMPLE");
	if (out) {
		write_sample(out);
		return 0;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timeline),
		cmocka_unit_test(test_summary),
		cmocka_unit_test(test_html_page),
		cmocka_unit_test(test_thinning_and_incomplete),
		cmocka_unit_test(test_many_allocations),
		cmocka_unit_test(test_owners),
	};
	return cmocka_run_group_tests(tests, setup, remove_scratch);
}
