/* SPDX-License-Identifier: MIT */
/* gen_hostile.c - writes hand-made hostile traces for tests/e2e/cli_hostile.sh, each built
 * from raw records (zstd chunks written here, not by the trace writer, so that they can break
 * its rules): ids spread to the top of their range, ids past it, string and event bombs, a chunk
 * claiming 2^32 records, 200,000 thread records, 10,000 windows, module records naming a FIFO
 * and a device.
 * Usage: gen_hostile DIR FIFO_PATH   (writes DIR/<name>.sptrace; exits 1 on a write failure) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define T0 1000000000000ull
enum {
	EV_KERNEL = 1,
	EV_API = 5,
	EV_ALLOC = 7,
	EV_STEP = 10,
	EV_WBEGIN = 11,
	EV_WEND = 12,
	EV_THREAD = 14,
	EV_MODULE = 18,
	STRING = 0xff,
	STACK = 0xfe
};

static uint8_t *buf;
static size_t len, cap;
static FILE *out;

static void byte(uint8_t b)
{
	if (len == cap && !(buf = realloc(buf, cap = cap ? cap * 2 : 1 << 16)))
		exit(1);
	buf[len++] = b;
}

static void uv(uint64_t v)
{
	for (; v >= 0x80; v >>= 7)
		byte((uint8_t)v | 0x80);
	byte((uint8_t)v);
}

static void sv(int64_t v)
{
	uv(((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Starts a file: the v1 header. */
static void begin(const char *dir, const char *name)
{
	char path[512];
	uint8_t h[376] = "STEPPROF";
	snprintf(path, sizeof(path), "%s/%s.sptrace", dir, name);
	if (!(out = fopen(path, "wb")))
		exit(1);
	le(h + 8, 1, 2);
	le(h + 10, 1, 2);
	le(h + 12, 376, 4);
	le(h + 16, 0xfff, 8); /* every feature claimed: stacks as well (stacks exits 1 on a file without) */
	le(h + 24, 4242, 4);
	le(h + 40, T0, 8);
	memcpy(h + 56, "hostile", 7);
	fwrite(h, 1, sizeof(h), out);
	len = 0;
}

/* Writes the records in buf as one chunk claiming count records (rsize as given if nonzero). */
static void chunk(uint32_t count, uint32_t claim_rsize)
{
	size_t bound = ZSTD_compressBound(len);
	uint8_t *c = malloc(16 + bound);
	size_t n = c ? ZSTD_compress(c + 16, bound, buf, len, 3) : 0;
	if (!c || ZSTD_isError(n))
		exit(1);
	/* the writer sets the checksum flag; plain ZSTD_compress does not: readers accept both */
	le(c, 0x4b435053u, 4);
	le(c + 4, n, 4);
	le(c + 8, claim_rsize ? claim_rsize : len, 4);
	le(c + 12, count, 4);
	if (fwrite(c, 1, 16 + n, out) != 16 + n)
		exit(1);
	free(c);
	len = 0;
}

static void finish(void)
{
	if (fclose(out) != 0)
		exit(1);
}

/* The common part of an event record. */
static void ev(uint8_t kind, int64_t dstart, uint64_t dur, uint32_t corr, uint32_t name, uint32_t tid)
{
	byte(kind);
	sv(dstart);
	sv((int64_t)dur);
	uv(corr ? 1 + (((uint64_t)corr << 1)) : 0); /* against 0: one per chunk here */
	uv(name);
	uv(0);          /* sub */
	uv(1);          /* device 0 */
	uv(tid);
	uv(7);          /* stream */
	uv(1);          /* context */
}

static void kernel(int64_t dstart, uint32_t name)
{
	ev(EV_KERNEL, dstart, 1000, 0, name, 0);
	for (int i = 0; i < 12; i++)
		uv(1);
}

static void string(uint64_t id, const char *s, size_t n)
{
	byte(STRING);
	uv(id);
	uv(n);
	for (size_t i = 0; i < n; i++)
		byte((uint8_t)s[i % strlen(s)]);
}

static void window(uint8_t kind, int64_t dstart)
{
	ev(kind, dstart, 0, 0, 0, 0);
	uv(0);
	uv(0);
	sv(0);
	sv(5);
	uv(0);
	uv(0);
}

static void step(int64_t dstart, int64_t number)
{
	ev(EV_STEP, dstart, 100000, 0, 0, 100);
	sv(number);
}

static void api(int64_t dstart, uint32_t name, uint32_t stack)
{
	ev(EV_API, dstart, 500, 0, name, 100);
	uv(211);
	sv(0);
	uv(stack);
}

static void alloc(int64_t dstart, uint64_t addr, uint32_t stack)
{
	ev(EV_ALLOC, dstart, 10, 0, 0, 100);
	uv(addr);
	uv(4096);
	uv(4096);
	uv(stack);
	uv(0);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: gen_hostile DIR FIFO_PATH\n");
		return 2;
	}
	const char *dir = argv[1];
	uint32_t n;

	/* ids: 2,000 kernel names and 2,000 stacks with ids spread up to 2^24 - 1 (valid, sparse) */
	begin(dir, "ids");
	window(EV_WBEGIN, T0);
	step(0, 0);
	n = 2;
	for (uint32_t i = 0; i < 2000; i++, n += 4) {
		uint32_t id = (1u << 24) - 1 - i * 8191;
		string(id, "kernel_name_", 20);
		kernel(10, id);
		byte(STACK);
		uv(id);
		uv(2);
		sv(0x7f0000001000);
		sv(16);
		api(10, id, id);
	}
	window(EV_WEND, 10);
	chunk(n + 1, 0);
	finish();

	/* bigstack: an event names stack id 2^31 (past the limit: refused as corrupt) */
	begin(dir, "bigstack");
	window(EV_WBEGIN, T0);
	alloc(10, 0x1000, 1u << 31);
	window(EV_WEND, 10);
	chunk(3, 0);
	finish();

	/* strbomb: 16 chunks of sixty-three 64 KiB strings (one compresses to almost nothing) */
	begin(dir, "strbomb");
	for (uint32_t c = 0; c < 16; c++) {
		for (uint32_t i = 0; i < 63; i++)
			string(1 + c * 63 + i, "A", 64 << 10);
		chunk(63, 0);
	}
	finish();

	/* longstring: one string record of 16 MiB (the writer never writes one over 64 KiB) */
	begin(dir, "longstring");
	string(1, "B", 16 << 20);
	chunk(1, 0);
	finish();

	/* evbomb: chunks of 4 MiB of identical kernel records, in one window */
	begin(dir, "evbomb");
	window(EV_WBEGIN, T0);
	chunk(1, 0);
	for (int c = 0; c < 12; c++) {
		uint32_t k = 0;
		while (len < (4u << 20) - 64) {
			kernel(0, 1);
			k++;
		}
		chunk(k, 0);
	}
	finish();

	/* count: a chunk claiming 2^32 - 1 records in a few bytes; rsize: one claiming 1 GiB */
	begin(dir, "count");
	kernel(T0, 0);
	chunk(UINT32_MAX, 0);
	finish();
	begin(dir, "rsize");
	kernel(T0, 0);
	chunk(1, 1u << 30);
	finish();

	/* threads: 200,000 thread records (distinct tids, one name), then a window with a kernel */
	begin(dir, "threads");
	string(1, "worker", 6);
	n = 1;
	for (uint32_t t = 0; t < 200000; t++) {
		ev(EV_THREAD, len ? 0 : (int64_t)T0, 0, 0, 1, 1000 + t);
		if (++n && len > (1u << 20)) {
			chunk(n, 0);
			n = 0;
		}
	}
	window(EV_WBEGIN, len ? 10 : (int64_t)T0);
	step(0, 0);
	kernel(10, 1);
	window(EV_WEND, 10);
	chunk(n + 4, 0);
	finish();

	/* windows: 10,000 windows, each with a step, a kernel, an allocation and a release (time and
	 * memory must stay linear in windows, steps and allocations) */
	begin(dir, "windows");
	string(1, "k", 1);
	n = 1;
	for (uint32_t w = 0; w < 10000; w++) {
		ev(EV_WBEGIN, len ? 1000 : (int64_t)T0, 0, 0, 0, 0);
		uv(w);
		uv(0);
		sv(w);
		sv(w);
		uv(0);
		uv(0);
		step(10, w);
		kernel(10, 1);
		alloc(10, 0x100000 + (uint64_t)w * 4096, 0);
		ev(8, 10, 0, 0, 0, 100); /* free */
		uv(0x100000 + (uint64_t)w * 4096);
		uv(4096);
		uv(0);
		uv(0);
		uv(0);
		ev(EV_WEND, 10, 0, 0, 0, 0);
		uv(w);
		uv(0);
		sv(w);
		sv(w);
		uv(0);
		uv(0);
		n += 6;
		if (len > (256u << 10)) {
			chunk(n, 0);
			n = 0;
		}
	}
	chunk(n, 0);
	finish();

	/* paths: module records naming a FIFO, /dev/zero and a directory; allocations and launches
	 * with stacks inside them (so that stacks, memory and report symbolise) */
	begin(dir, "paths");
	window(EV_WBEGIN, T0);
	step(0, 0);
	const char *paths[] = { argv[2], "/dev/zero", "/dev/tty", "/" };
	n = 2;
	for (uint32_t i = 0; i < 4; i++, n += 5) {
		uint64_t base = 0x7f0000000000ull + ((uint64_t)i << 24);
		string(i + 1, paths[i], strlen(paths[i]));
		ev(EV_MODULE, 10, 0, 0, i + 1, 0);
		uv(base);
		uv(base + (1u << 20));
		uv(0);
		byte(STACK);
		uv(i + 1);
		uv(1);
		sv((int64_t)(base + 0x100));
		alloc(10, 0x10000 + i * 0x1000, i + 1);
		api(10, i + 1, i + 1);
	}
	window(EV_WEND, 10);
	chunk(n + 1, 0);
	finish();
	return 0;
}
