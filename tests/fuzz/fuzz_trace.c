/* SPDX-License-Identifier: MIT */
/* fuzz_trace.c - libFuzzer harness for the trace reader behind every reading command: the input
 * becomes a .sptrace file and each command that reads traces (dump, report in all its forms,
 * convert to Chrome JSON, memory, stacks, steps, diff) runs on it in this process, as the CLI
 * would, with --no-symbols (a fuzzer must not open the files a trace names). A crash, a sanitizer
 * report, a leak, a hang (-timeout) or memory over -rss_limit_mb is a finding. Commands may only
 * return 0 or 1 here (2 is a usage error: the harness is wrong).
 * Two input forms, so that mutations reach the records behind zstd's checksum:
 * - an input that starts with "STEPPROF" is the file itself (header and chunk framing);
 * - any other is "records": 40 bytes of header fields (offset 16.. of the header), then chunks,
 *   each u16 raw length, u32 record count (both little-endian) and that many raw record bytes,
 *   which the harness compresses into a well-framed chunk. The file is of format version 1,
 *   unless the input starts with "SPRV" and a version byte (then that version, 1 to
 *   SP_TRACE_VERSION: version 5's chunks hold columns).
 * FUZZ_VERBOSE=1 keeps the commands' stderr (to read a finding). FUZZ_RECORDS=IN,OUT converts
 * the trace IN to the records form in OUT and exits (to make seeds). */
#include <zstd.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/symbols.h"
#include "trace/trace.h"

static char dir[64], trace[96], out_json[96], out_html[96], out_txt[96];
static int devnull = -1, verbose;

static int convert_seed(const char *spec);

static void cleanup(void)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_trace: could not remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	if (getenv("FUZZ_RECORDS"))
		exit(convert_seed(getenv("FUZZ_RECORDS")));
	snprintf(dir, sizeof(dir), "%.40s/fuzz_trace.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		perror("fuzz_trace: mkdtemp");
		abort();
	}
	atexit(cleanup);
	snprintf(trace, sizeof(trace), "%s/in.sptrace", dir);
	snprintf(out_json, sizeof(out_json), "%s/out.json", dir);
	snprintf(out_html, sizeof(out_html), "%s/out.html", dir);
	snprintf(out_txt, sizeof(out_txt), "%s/out.txt", dir);
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	verbose = getenv("FUZZ_VERBOSE") && *getenv("FUZZ_VERBOSE") == '1';
	if (!freopen("/dev/null", "w", stdout))
		abort();
	return 0;
}

/* Runs one command (argv NULL-terminated) with stderr silenced; aborts on a usage error. */
static void run(int (*fn)(int, char **), const char *const *args)
{
	char *argv[16];
	int argc = 0, saved = -1;
	for (; args[argc]; argc++)
		argv[argc] = (char *)args[argc];
	argv[argc] = NULL;
	if (!verbose) {
		fflush(stderr);
		saved = dup(2);
		dup2(devnull, 2);
	}
	int rc = fn(argc, argv);
	fflush(stdout);
	if (saved >= 0) {
		fflush(stderr);
		dup2(saved, 2);
		close(saved);
	}
	if (rc != 0 && rc != 1) {
		fprintf(stderr, "fuzz_trace: stepprof %s exited %d\n", args[0], rc);
		abort();
	}
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes the records form (see the top) as a trace file to f. Aborts on a write error. */
static void write_records(FILE *f, const uint8_t *data, size_t size)
{
	static uint8_t comp[ZSTD_COMPRESSBOUND(65535) + 16];
	uint8_t h[472] = "STEPPROF";
	unsigned version = 1;
	if (size >= 5 && !memcmp(data, "SPRV", 4)) {
		version = data[4] >= 1 && data[4] <= SP_TRACE_VERSION ? data[4] : SP_TRACE_VERSION;
		data += 5;
		size -= 5;
	}
	size_t hsize = version == 1 ? 376 : 472;
	put_le(h + 8, version, 2);
	put_le(h + 10, version, 2);
	put_le(h + 12, hsize, 4);
	memcpy(h + 16, data, size < 40 ? size : 40);
	memcpy(h + 56, "fuzz-host", 9);
	memcpy(h + 120, "fuzz command", 12);
	if (fwrite(h, 1, hsize, f) != hsize)
		abort();
	size_t pos = size < 40 ? size : 40;
	for (int chunks = 0; pos + 6 <= size && chunks < 64; chunks++) {
		size_t len = data[pos] | (size_t)data[pos + 1] << 8;
		uint32_t count = data[pos + 2] | (uint32_t)data[pos + 3] << 8 | (uint32_t)data[pos + 4] << 16 |
				 (uint32_t)data[pos + 5] << 24;
		pos += 6;
		if (len > size - pos)
			len = size - pos;
		size_t c = ZSTD_compress(comp + 16, sizeof(comp) - 16, data + pos, len, 1);
		if (ZSTD_isError(c))
			abort();
		put_le(comp, 0x4b435053u, 4);
		put_le(comp + 4, c, 4);
		put_le(comp + 8, len, 4);
		put_le(comp + 12, count, 4);
		if (fwrite(comp, 1, 16 + c, f) != 16 + c)
			abort();
		pos += len;
	}
}

/* FUZZ_RECORDS=IN,OUT: writes the records form of trace IN (chunks decompressed) to OUT; a trace
 * of version 2 or later gets the "SPRV" prefix with its version. */
static int convert_seed(const char *spec)
{
	char in[512], *out;
	snprintf(in, sizeof(in), "%s", spec);
	if (!(out = strchr(in, ',')))
		return 2;
	*out++ = 0;
	FILE *f = fopen(in, "rb"), *g = fopen(out, "wb");
	static uint8_t buf[1 << 22], raw[1 << 16];
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0, pos = 376;
	if (!g || n < pos)
		return 1;
	pos = buf[12] | (size_t)buf[13] << 8;
	if (buf[8] >= 2) {
		uint8_t pre[5] = { 'S', 'P', 'R', 'V', buf[8] };
		fwrite(pre, 1, 5, g);
	}
	fwrite(buf + 16, 1, 40, g);
	while (pos + 16 <= n) {
		uint32_t csize = buf[pos + 4] | buf[pos + 5] << 8 | buf[pos + 6] << 16 | (uint32_t)buf[pos + 7] << 24;
		size_t r = ZSTD_decompress(raw, sizeof(raw), buf + pos + 16, csize);
		if (ZSTD_isError(r))
			return 1;
		uint8_t hd[6] = { (uint8_t)r,    (uint8_t)(r >> 8), buf[pos + 12],
				  buf[pos + 13], buf[pos + 14],     buf[pos + 15] };
		fwrite(hd, 1, 6, g);
		fwrite(raw, 1, r, g);
		pos += 16 + csize;
	}
	return fclose(g) != 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fopen(trace, "we");
	if (!f)
		abort();
	if (size >= 8 && !memcmp(data, "STEPPROF", 8)) {
		if (fwrite(data, 1, size, f) != size)
			abort();
	} else {
		write_records(f, data, size);
	}
	if (fclose(f) != 0)
		abort();
	run(sp_cmd_dump, (const char *const[]){ "dump", trace, NULL });
	run(sp_cmd_dump, (const char *const[]){ "dump", "--relative", trace, NULL });
	run(sp_cmd_report, (const char *const[]){ "report", trace, "--no-symbols", NULL });
	run(sp_cmd_report, (const char *const[]){ "report", trace, "--json", "--no-symbols", NULL });
	run(sp_cmd_report, (const char *const[]){ "report", trace, "--sort", "name", "--top", "0", "--window", "1",
						  "--wide", "--no-symbols", NULL });
	run(sp_cmd_report, (const char *const[]){ "report", trace, "--by", "line", "--json", "--no-symbols", NULL });
	run(sp_cmd_report, (const char *const[]){ "report", trace, "--by", "op", "--shapes", "--no-symbols", NULL });
	run(sp_cmd_report, (const char *const[]){ "report", trace, "--by", "module", "--json", "--no-symbols", NULL });
	run(sp_cmd_convert, (const char *const[]){ "convert", trace, "--merge", "-o", out_json, NULL });
	run(sp_cmd_convert,
	    (const char *const[]){ "convert", trace, "--steps", "1-3", "--wall", "-o", out_json, NULL });
	run(sp_cmd_convert, (const char *const[]){ "convert", "--merge-ranks", "-o", out_json, trace, trace, NULL });
	run(sp_cmd_memory, (const char *const[]){ "memory", trace, "-o", out_html, "--no-symbols", NULL });
	run(sp_cmd_stacks,
	    (const char *const[]){ "stacks", trace, "--kind", "all", "-o", out_txt, "--no-symbols", NULL });
	run(sp_cmd_steps, (const char *const[]){ "steps", trace, trace, NULL });
	run(sp_cmd_diff, (const char *const[]){ "diff", trace, trace, NULL });
	sp_display_names_free(); /* the CLI keeps them for its lifetime; this process lives on */
	return 0;
}
