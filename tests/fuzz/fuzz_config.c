/* SPDX-License-Identifier: MIT */
/* fuzz_config.c - libFuzzer harness for the configuration reader (config/config.c, the same code
 * that runs in every profiled process at cuInit), as a round trip: the input is read as an INI
 * file (or, after a first line "#env", its lines are STEPPROF_* environment entries); when it
 * loads without an error, what sp_cfg_print writes (what `stepprof check` prints) must load
 * again without an error and print the same. A crash, a sanitizer report, a leak, a hang or a
 * round trip that fails is a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config/config.h"

static char dir[64], ini[96], again[96];
static struct sp_config cfg, cfg2;
static struct sp_cfg_errors errs;

static void cleanup(void)
{
	unlink(ini);
	unlink(again);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(dir, sizeof(dir), "%.40s/fuzz_config.XXXXXX", tmp);
	if (!mkdtemp(dir))
		abort();
	atexit(cleanup);
	snprintf(ini, sizeof(ini), "%s/in.ini", dir);
	snprintf(again, sizeof(again), "%s/again.ini", dir);
	return 0;
}

/* Writes n bytes to path. Aborts on failure. */
static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "we");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
		abort();
}

/* cfg printed into a malloc'ed string (the caller frees it). */
static char *printed(const struct sp_config *c, size_t *n)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, n);
	if (!f)
		abort();
	sp_cfg_print(c, f);
	fclose(f);
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	errs.count = 0;
	sp_cfg_defaults(&cfg);
	if (size >= 5 && !memcmp(data, "#env\n", 5)) {
		/* one environment entry per line (NUL-free: the environment cannot hold one) */
		char *text = strndup((const char *)data + 5, size - 5), *env[65], *save = NULL;
		int n = 0;
		for (char *line = strtok_r(text, "\n", &save); line && n < 64; line = strtok_r(NULL, "\n", &save))
			env[n++] = line;
		env[n] = NULL;
		sp_cfg_load_env(&cfg, env, &errs);
		free(text);
	} else {
		write_file(ini, data, size);
		sp_cfg_load_file(&cfg, ini, &errs);
	}
	sp_cfg_finish(&cfg, &errs);
	if (errs.count)
		return 0;
	size_t n1, n2;
	char *first = printed(&cfg, &n1);
	write_file(again, first, n1);
	errs.count = 0;
	sp_cfg_defaults(&cfg2);
	sp_cfg_load_file(&cfg2, again, &errs);
	sp_cfg_finish(&cfg2, &errs);
	if (errs.count) {
		fprintf(stderr, "fuzz_config: the printed configuration does not load back:\n%s\n--\n", first);
		sp_cfg_print_errors(&errs, stderr);
		abort();
	}
	char *second = printed(&cfg2, &n2);
	if (n1 != n2 || memcmp(first, second, n1)) {
		fprintf(stderr, "fuzz_config: printed differently after a reload:\n%s\n--\n%s\n", first, second);
		abort();
	}
	free(first);
	free(second);
	return 0;
}
