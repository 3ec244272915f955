/* SPDX-License-Identifier: MIT */
/* test_config.c - config/config.c: defaults, the INI fixtures of tests/data, every error class
 * with its exact message and line, STEPPROF_* overrides, profiling_frequency, output path
 * expansion, sizes and the print/load round trip. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "config/config.h"
#include "config/run.h"

static struct sp_config cfg;
static struct sp_cfg_errors errs;

/* $SP_ROOT/tests/data/NAME (SP_ROOT defaults to "."). */
static const char *data(const char *name)
{
	static char path[1024];
	const char *root = getenv("SP_ROOT");

	snprintf(path, sizeof(path), "%s/tests/data/%s", root ? root : ".", name);
	return path;
}

/* Writes text to a fresh temporary file and returns its path. */
static const char *tmpfile_with(const char *text)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/test_config_XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* Loads text as an INI file over the defaults, then finish; returns the error count. */
static int load_text(const char *text)
{
	const char *path = tmpfile_with(text);

	errs.count = 0;
	sp_cfg_defaults(&cfg);
	sp_cfg_load_file(&cfg, path, &errs);
	sp_cfg_finish(&cfg, &errs);
	unlink(path);
	return errs.count;
}

/* Asserts that some error message ends with suffix (after "PATH:LINE: " or "ORIGIN: "). */
static void expect_error(const char *suffix)
{
	for (int i = 0; i < errs.count && i < SP_CFG_MAX_ERRORS; i++) {
		size_t n = strlen(errs.msg[i]), m = strlen(suffix);
		if (n >= m && !strcmp(errs.msg[i] + n - m, suffix))
			return;
	}
	for (int i = 0; i < errs.count && i < SP_CFG_MAX_ERRORS; i++)
		print_message("  got: %s\n", errs.msg[i]);
	fail_msg("no error ends with: %s", suffix);
}

/* The printed form of c, in a static buffer. */
static const char *printed(const struct sp_config *c)
{
	static char buf[8192];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	assert_non_null(f);
	sp_cfg_print(c, f);
	fclose(f);
	return buf;
}

static void test_defaults(void **state)
{
	(void)state;
	char *env[] = { NULL };
	unsetenv("STEPPROF_CONFIG");
	errs.count = 0;
	sp_cfg_defaults(&cfg);
	assert_int_equal(sp_cfg_load_env(&cfg, env, &errs), 0);
	assert_int_equal(sp_cfg_finish(&cfg, &errs), 0);
	assert_true(cfg.enabled);
	assert_string_equal(cfg.output, "stepprof-traces/{run}");
	assert_string_equal(cfg.ranks_text, "0");
	assert_false(cfg.ranks.all);
	assert_int_equal(cfg.ranks.n, 1);
	assert_int_equal(cfg.schedule.skip_first, 0);
	assert_int_equal(cfg.schedule.skip_first_wait, 0);
	assert_int_equal(cfg.schedule.wait, 10);
	assert_int_equal(cfg.schedule.warmup, 1);
	assert_int_equal(cfg.schedule.active, 3);
	assert_int_equal(cfg.schedule.repeat, 1);
	assert_int_equal(cfg.schedule.frequency, 0);
	assert_int_equal(cfg.marker_kind, SP_MARK_AUTO);
	assert_string_equal(cfg.marker_pattern, "");
	assert_int_equal(cfg.marker_every, 1);
	assert_int_equal(cfg.marker_learn, SP_LEARN_AUTO); /* the hooks where they can (session 11) */
	assert_true(cfg.kernels && cfg.memcpy && cfg.memset && cfg.runtime_api && cfg.driver_api && cfg.nccl &&
		    cfg.nvtx && cfg.device_memory && cfg.kernel_shapes);
	assert_false(cfg.host_malloc || cfg.stacks || cfg.sync); /* sync: as torch.profiler, off (BENCHMARKS.md) */
	assert_false(cfg.ops || cfg.modules); /* a program's own first torch.profiler would fail (LIMITS.md) */
	assert_int_equal(cfg.host_malloc_min, 64 * 1024);
	assert_int_equal(cfg.stack_depth, 32);
	assert_false(cfg.torch_memory); /* its history costs the program inside windows */
	assert_int_equal(cfg.torch_memory_entries, 100000);
	assert_int_equal(cfg.window_max_bytes, 256ull << 20);
	assert_int_equal(cfg.ring_events, 65536);
	assert_int_equal(cfg.cupti_buffer_bytes, 8ull << 20);
	assert_string_equal(cfg.cupti_library, "");
	assert_int_equal(cfg.detach_between, SP_DETACH_AUTO);
	assert_string_equal(cfg.source, "");
	for (int i = 0; i < SP_CFG_NKEYS; i++)
		assert_string_equal(cfg.origin[i].name, "");
	/* sp_cfg_load with no file and no variables gives the same */
	struct sp_config c2;
	assert_int_equal(sp_cfg_load(&c2, NULL, &errs), 0);
	assert_string_equal(printed(&c2), printed(&cfg));
}

static void test_good_file(void **state)
{
	(void)state;
	errs.count = 0;
	assert_int_equal(sp_cfg_load(&cfg, data("good.ini"), &errs), 0);
	assert_string_equal(cfg.source, data("good.ini"));
	assert_true(cfg.enabled);
	assert_string_equal(cfg.output, "/tmp/stepprof/{jobid}/{host}-{rank}");
	assert_string_equal(cfg.ranks_text, "0-3, 8");
	assert_int_equal(cfg.ranks.n, 2);
	assert_true(sp_rankset_has(&cfg.ranks, 3) && sp_rankset_has(&cfg.ranks, 8));
	assert_false(sp_rankset_has(&cfg.ranks, 4));
	assert_int_equal(cfg.schedule.skip_first, 10);
	assert_int_equal(cfg.schedule.skip_first_wait, 1);
	assert_int_equal(cfg.schedule.wait, 20);
	assert_int_equal(cfg.schedule.warmup, 2);
	assert_int_equal(cfg.schedule.active, 3);
	assert_int_equal(cfg.schedule.repeat, 2);
	assert_int_equal(cfg.marker_kind, SP_MARK_NCCL);
	assert_string_equal(cfg.marker_pattern, "ncclAllReduce*");
	assert_int_equal(cfg.marker_every, 2);
	assert_true(cfg.kernels && !cfg.memcpy && !cfg.memset && !cfg.sync && cfg.runtime_api);
	assert_true(!cfg.driver_api && cfg.nccl && cfg.nvtx && cfg.host_malloc);
	assert_int_equal(cfg.stacks, SP_STACKS_NATIVE); /* `true` means native stacks, as it always did */
	assert_false(cfg.kernel_shapes);
	assert_int_equal(cfg.host_malloc_min, 4096);
	assert_int_equal(cfg.stack_depth, 16);
	assert_int_equal(cfg.window_max_bytes, 0);
	assert_int_equal(cfg.ring_events, 1024);
	assert_int_equal(cfg.cupti_buffer_bytes, 32ull << 20);
	assert_string_equal(cfg.cupti_library, "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
	assert_int_equal(cfg.detach_between, SP_DETACH_NEVER);
	/* origins: file and line of each key */
	assert_string_equal(cfg.origin[0].name, data("good.ini"));
	assert_int_equal(cfg.origin[0].line, 4);
}

/* Every error class of tests/data/bad.ini, each with its line, collected in one pass. */
static void test_bad_file_collects_all(void **state)
{
	(void)state;
	char p[1400];
	const char *path = data("bad.ini");
	static const char *const want[] = {
		"3: [profile] enabled: not a boolean: 'maybe' (allowed: true, false, yes, no, on, off, 1, 0)",
		"4: [profile] output: unknown placeholder '{foo}' (allowed: a directory path; placeholders "
		"{run} {host} {pid} {rank} {date} {time} {jobid})",
		"7: [schedule] wait: not an integer: 'x' (allowed: integer >= 0)",
		"8: [schedule] warmup: out of range: '-1' (allowed: integer >= 0)",
		"9: [schedule] active: out of range: '0' (allowed: integer >= 1)",
		"10: [schedule] repeat: out of range: '99999999999999999999' (allowed: integer >= 0)",
		"11: [schedule] wiat: unknown key (allowed: skip_first, skip_first_wait, wait, warmup, active, "
		"repeat, profiling_frequency)",
		"12: [schedule] wait: set twice, first at line 7 (allowed: once per file)",
		"13: expected 'key = value', '[section]' or a comment: 'this line has no equals sign'",
		"14: [nosuch]: unknown section (allowed: profile, ranks, schedule, marker, activities, limits, cupti, "
		"ondemand)",
		"16: section header without ']': '[marker'",
		"19: [marker] every: out of range: '0' (allowed: integer >= 1)",
		"20: indented line continues the previous value; multi-line values are not supported (remove "
		"the indentation)",
		"22: [ranks] ranks: bad rank or range 'x' (allowed: all, or ranks and ranges like 0 / 0,1 / 0-3,8)",
		"24: [limits] ring_events: out of range: '1G' (allowed: size 64..16M, as 512, 64K, 256M, 2G; "
		"K, M, G, T are powers of 1024)",
		"25: [limits] cupti_buffer_bytes: not a size: '12Q' (allowed: size 64K..256M, as 512, 64K, 256M, "
		"2G; K, M, G, T are powers of 1024)",
		"27: [activities] stack_depth: out of range: '200' (allowed: integer 1..128)",
		"28: [activities] sync: not a boolean: 'perhaps' (allowed: true, false, yes, no, on, off, 1, 0)",
		"18: [marker] kind: kernel needs a pattern (allowed: [marker] pattern = a glob such as "
		"ncclAllReduce* with kernel, api, nccl, nvtx)",
	};
	char *env[] = { NULL };

	errs.count = 0;
	sp_cfg_defaults(&cfg);
	sp_cfg_load_file(&cfg, path, &errs);
	sp_cfg_load_env(&cfg, env, &errs);
	sp_cfg_finish(&cfg, &errs);
	if (errs.count != (int)(sizeof(want) / sizeof(want[0])))
		for (int i = 0; i < errs.count; i++)
			print_message("  got: %s\n", errs.msg[i]);
	assert_int_equal(errs.count, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		snprintf(p, sizeof(p), "%s:%s", path, want[i]);
		assert_string_equal(errs.msg[i], p);
	}
	/* valid settings survive: nothing in bad.ini is valid, so the defaults remain */
	assert_int_equal(cfg.schedule.wait, 10);
	assert_int_equal(cfg.stack_depth, 32);
}

static void test_cross_key_errors(void **state)
{
	(void)state;
	char p[1400];

	errs.count = 0;
	sp_cfg_defaults(&cfg);
	sp_cfg_load_file(&cfg, data("bad_cross.ini"), &errs);
	assert_int_equal(errs.count, 0);
	assert_int_equal(sp_cfg_finish(&cfg, &errs), 2);
	snprintf(p, sizeof(p),
		 "%s:6: [schedule] profiling_frequency: 10 is less than warmup + active = 11 "
		 "(allowed: 0, or at least warmup + active)",
		 data("bad_cross.ini"));
	assert_string_equal(errs.msg[0], p);
	snprintf(p, sizeof(p),
		 "%s:10: [marker] pattern: must be empty with kind = auto (allowed: empty "
		 "with auto, profiler_range and optimizer)",
		 data("bad_cross.ini"));
	assert_string_equal(errs.msg[1], p);
	assert_int_equal(cfg.schedule.wait, 10); /* unchanged on error */

	/* frequency with repeat > 0: an error, blamed on the frequency's line */
	assert_int_equal(load_text("[schedule]\nrepeat = 2\n\nprofiling_frequency = 10\n"), 1);
	expect_error(":4: [schedule] profiling_frequency: 10 is only allowed with repeat = 0, repeat is 2 "
		     "(allowed: 0 when repeat > 0)");
	/* pattern forbidden for profiler_range, required for every glob kind */
	assert_int_equal(load_text("[marker]\nkind = profiler_range\npattern = x*\n"), 1);
	expect_error(":3: [marker] pattern: must be empty with kind = profiler_range (allowed: empty with "
		     "auto, profiler_range and optimizer)");
	/* optimizer: no pattern (the program's optimizer steps); python: module:qualname, no glob */
	assert_int_equal(load_text("[marker]\nkind = optimizer\n"), 0);
	assert_int_equal(cfg.marker_kind, SP_MARK_OPTIMIZER);
	assert_int_equal(load_text("[marker]\nkind = optimizer\npattern = Adam\n"), 1);
	assert_non_null(strstr(errs.msg[0], ":3: [marker] pattern: must be empty with kind = optimizer"));
	assert_int_equal(load_text("[marker]\nkind = python\n"), 1);
	assert_non_null(strstr(errs.msg[0], ":2: [marker] kind: python needs a pattern (allowed: [marker] pattern = "
					    "module:qualname"));
	static const char *const good_py[] = { "__main__:train_step", "transformers.trainer:Trainer.training_step",
					       "a1._b:C.d_2" };
	static const char *const bad_py[] = { "train_step", "__main__:", ":f",   "a:b:c",  "m:train*",
					      "m.:f",       "m:f.",      "m:1f", "m..n:f", "m:f g" };
	for (size_t i = 0; i < sizeof good_py / sizeof *good_py; i++) {
		char text[128];
		snprintf(text, sizeof(text), "[marker]\nkind = python\npattern = %s\n", good_py[i]);
		assert_int_equal(load_text(text), 0);
		assert_int_equal(cfg.marker_kind, SP_MARK_PYTHON);
	}
	for (size_t i = 0; i < sizeof bad_py / sizeof *bad_py; i++) {
		char text[128];
		snprintf(text, sizeof(text), "[marker]\nkind = python\npattern = %s\n", bad_py[i]);
		assert_int_equal(load_text(text), 1);
		assert_non_null(strstr(errs.msg[0], ":3: [marker] pattern: '"));
		assert_non_null(strstr(errs.msg[0], "' is not module:qualname"));
	}
	static const char *const need[] = { "kernel", "api", "nccl", "nvtx" };
	for (int i = 0; i < 4; i++) {
		char text[64];
		snprintf(text, sizeof(text), "[marker]\nkind = %s\n", need[i]);
		assert_int_equal(load_text(text), 1);
		assert_non_null(strstr(errs.msg[0], ":2: [marker] kind: "));
		assert_non_null(strstr(errs.msg[0], " needs a pattern"));
		snprintf(text, sizeof(text), "[marker]\nkind = %s\npattern = nccl*\n", need[i]);
		assert_int_equal(load_text(text), 0);
	}
	/* an error in the environment names the variable */
	char *env[] = { "STEPPROF_MARKER_KIND=api", NULL };
	errs.count = 0;
	sp_cfg_defaults(&cfg);
	sp_cfg_load_env(&cfg, env, &errs);
	assert_int_equal(sp_cfg_finish(&cfg, &errs), 1);
	assert_string_equal(errs.msg[0],
			    "STEPPROF_MARKER_KIND: [marker] kind: api needs a pattern (allowed: "
			    "[marker] pattern = a glob such as ncclAllReduce* with kernel, api, nccl, nvtx)");
}

static void test_profiling_frequency(void **state)
{
	(void)state;
	errs.count = 0;
	assert_int_equal(sp_cfg_load(&cfg, data("frequency.ini"), &errs), 0);
	assert_int_equal(cfg.schedule.wait, 7);
	assert_int_equal(cfg.schedule.frequency, 10);
	/* the cycle is 10 steps: record step 9, 19, 29 */
	for (int s = 0; s < 40; s++)
		assert_int_equal(sp_schedule_action(&cfg.schedule, s) != SP_ACT_NONE, s % 10 >= 7);
	assert_int_equal(sp_schedule_action(&cfg.schedule, 29), SP_ACT_RECORD_AND_SAVE);
	/* wait is overridden even when set; frequency == warmup + active gives wait 0 */
	assert_int_equal(load_text("[schedule]\nrepeat=0\nwait=50\nwarmup=1\nactive=2\nprofiling_frequency=3\n"), 0);
	assert_int_equal(cfg.schedule.wait, 0);
	assert_int_equal(load_text("[schedule]\nrepeat=0\nwarmup=1\nactive=3\nprofiling_frequency=3\n"), 1);
	expect_error(":5: [schedule] profiling_frequency: 3 is less than warmup + active = 4 (allowed: 0, or "
		     "at least warmup + active)");
	assert_int_equal(load_text("[schedule]\nprofiling_frequency=-1\n"), 1);
	expect_error(":2: [schedule] profiling_frequency: out of range: '-1' (allowed: integer >= 0)");
}

/* stacks = native|python|both|false, or a boolean (true: native); printed as its name */
static void test_stacks_values(void **state)
{
	static const struct {
		const char *v;
		int want;
	} t[] = {
		{ "native", SP_STACKS_NATIVE },
		{ "Python", SP_STACKS_PYTHON },
		{ "both", SP_STACKS_BOTH },
		{ "false", 0 },
		{ "true", SP_STACKS_NATIVE },
		{ "on", SP_STACKS_NATIVE },
		{ "0", 0 },
	};
	char text[128];
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(text, sizeof(text), "[activities]\nstacks = %s\n", t[i].v);
		assert_int_equal(load_text(text), 0);
		assert_int_equal(cfg.stacks, t[i].want);
	}
	assert_non_null(strstr(printed(&cfg), "stacks = false\n"));
	assert_int_equal(load_text("[activities]\nstacks = both\n"), 0);
	assert_non_null(strstr(printed(&cfg), "stacks = both\n"));
}

static void test_value_errors(void **state)
{
	(void)state;
	static const struct {
		const char *section, *key, *value, *msg;
	} t[] = {
		{ "schedule", "wait", "3x", "not an integer: '3x'" },
		{ "schedule", "wait", "", "not an integer: ''" },
		{ "schedule", "wait", "0x10", "not an integer: '0x10'" },
		{ "schedule", "wait", "1.5", "not an integer: '1.5'" },
		{ "schedule", "wait", "9223372036854775808", "out of range: '9223372036854775808'" },
		{ "schedule", "wait", "1000000001", "out of range: '1000000001'" },
		{ "schedule", "active", "-3", "out of range: '-3'" },
		{ "profile", "enabled", "2", "not a boolean: '2'" },
		{ "limits", "window_max_bytes", "2X", "not a size: '2X'" },
		{ "limits", "window_max_bytes", "-1", "not a size: '-1'" },
		{ "limits", "window_max_bytes", "2T1", "not a size: '2T1'" },
		{ "limits", "cupti_buffer_bytes", "1K", "out of range: '1K'" },
		{ "limits", "ring_events", "63", "out of range: '63'" },
		{ "marker", "kind", "regex", "unknown marker kind: 'regex'" },
		{ "activities", "stacks", "pyhton", "not native, python, both or a boolean: 'pyhton'" },
		{ "cupti", "detach_between", "sometimes", "unknown value: 'sometimes'" },
		{ "marker", "every", "0", "out of range: '0'" },
		{ "ranks", "ranks", "1-", "bad rank or range '1-'" },
		{ "ranks", "ranks", "", "empty rank set" },
		{ "profile", "output", "", "empty" },
		{ "profile", "output", "/x/{rank", "'{' without '}' in '/x/{rank'" },
		{ "profile", "output", "/x/{Rank}", "unknown placeholder '{Rank}'" },
		{ "marker", "pattern", "a ;b", "contains ' ;', which an INI file takes for a comment" },
		{ "marker", "pattern", "a\tb", "contains a control character" },
	};
	char want[400];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		errs.count = 0;
		sp_cfg_defaults(&cfg);
		assert_int_equal(sp_cfg_set(&cfg, t[i].section, t[i].key, t[i].value, "here", 0, &errs), 1);
		snprintf(want, sizeof(want), "here: [%s] %s: %s (allowed: ", t[i].section, t[i].key, t[i].msg);
		if (strncmp(errs.msg[0], want, strlen(want)))
			fail_msg("got '%s', want '%s...'", errs.msg[0], want);
	}
	/* a too long string keeps the old value */
	char big[SP_CFG_PATTERN + 10];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	errs.count = 0;
	sp_cfg_defaults(&cfg);
	assert_int_equal(sp_cfg_set(&cfg, "marker", "pattern", big, "cli", 0, &errs), 1);
	assert_non_null(strstr(errs.msg[0], "too long: 265 characters"));
	assert_string_equal(cfg.marker_pattern, "");
	/* unknown section through sp_cfg_set */
	errs.count = 0;
	assert_int_equal(sp_cfg_set(&cfg, "sched", "wait", "1", "cli", 0, &errs), 1);
	assert_string_equal(errs.msg[0], "cli: [sched] wait: unknown section (allowed: profile, ranks, schedule, "
					 "marker, activities, limits, cupti, ondemand)");
	/* accepted spellings, case-insensitive names, quotes */
	static const char *const yes[] = { "true", "YES", "On", "1" }, *const no[] = { "False", "no", "OFF", "0" };
	for (int i = 0; i < 4; i++) {
		assert_int_equal(sp_cfg_set(&cfg, "Profile", "ENABLED", no[i], "cli", 0, &errs), 0);
		assert_false(cfg.enabled);
		assert_int_equal(sp_cfg_set(&cfg, "profile", "enabled", yes[i], "cli", 0, &errs), 0);
		assert_true(cfg.enabled);
	}
	assert_int_equal(sp_cfg_set(&cfg, "marker", "kind", " Profiler_Range ", "cli", 0, &errs), 0);
	assert_int_equal(cfg.marker_kind, SP_MARK_PROFILER_RANGE);
	assert_int_equal(sp_cfg_set(&cfg, "marker", "pattern", "\" a b \"", "cli", 0, &errs), 0);
	assert_string_equal(cfg.marker_pattern, " a b ");
	assert_int_equal(sp_cfg_set(&cfg, "schedule", "wait", "+7", "cli", 0, &errs), 0);
	assert_int_equal(cfg.schedule.wait, 7);
	assert_string_equal(cfg.origin[6].name, "cli"); /* wait is the 7th key */
}

/* inih syntax errors are all reported, each with its line, and do not stop the reading. */
static void test_syntax_errors(void **state)
{
	(void)state;
	assert_int_equal(load_text("wait = 1\n[schedule]\nnoequals\nwait = 2\n[broken\n  \n\xEF\xBB\xBFx\n"
				   "warmup = 3\n"),
			 4);
	expect_error(":1: wait: key outside any [section] (allowed: a key after its [section] line)");
	expect_error(":3: expected 'key = value', '[section]' or a comment: 'noequals'");
	expect_error(":5: section header without ']': '[broken'");
	expect_error(":7: expected 'key = value', '[section]' or a comment: '\xEF\xBB\xBFx'");
	assert_int_equal(cfg.schedule.wait, 2);
	assert_int_equal(cfg.schedule.warmup, 3);
	/* a BOM on line 1 is fine; ':' separates too; inline and whole-line comments */
	assert_int_equal(load_text("\xEF\xBB\xBF[schedule]\nwait: 9 ; nine\n# c\n; c\n\n"), 0);
	assert_int_equal(cfg.schedule.wait, 9);
	/* an indented key right after a section line is a key, after a key it is a continuation */
	assert_int_equal(load_text("[schedule]\n  wait = 4\n  warmup = 2\n"), 1);
	expect_error(":3: indented line continues the previous value; multi-line values are not supported "
		     "(remove the indentation)");
	assert_int_equal(cfg.schedule.wait, 4);
	assert_int_equal(cfg.schedule.warmup, 1);
	/* keys of an unknown section are not reported one by one */
	assert_int_equal(load_text("[Schedule]\nwait=1\n[foo]\na=1\nb=2\n[ marker ]\nevery=3\n"), 1);
	assert_int_equal(cfg.marker_every, 3);
	/* a line too long for inih: reported, the lines after it still count */
	char text[600];
	snprintf(text, sizeof(text), "[cupti]\nlibrary = /%0300d\n[schedule]\nwait = 0\n", 0);
	assert_int_equal(load_text(text), 1);
	expect_error(":2: line longer than 199 characters (inih's limit)");
	assert_int_equal(cfg.schedule.wait, 0);
}

static void test_file_errors(void **state)
{
	(void)state;
	errs.count = 0;
	sp_cfg_defaults(&cfg);
	assert_int_equal(sp_cfg_load_file(&cfg, "/nonexistent/x.ini", &errs), 1);
	assert_string_equal(errs.msg[0], "/nonexistent/x.ini: cannot open: No such file or directory");
	errs.count = 0;
	assert_int_equal(sp_cfg_load_file(&cfg, "/tmp", &errs), 1);
	assert_string_equal(errs.msg[0], "/tmp: is a directory, not an INI file");
	/* STEPPROF_CONFIG names the file when no path is given */
	setenv("STEPPROF_CONFIG", data("frequency.ini"), 1);
	assert_int_equal(sp_cfg_load(&cfg, NULL, &errs), 0);
	assert_int_equal(cfg.schedule.frequency, 10);
	assert_int_equal(sp_cfg_load(&cfg, data("good.ini"), &errs), 0); /* an explicit path wins */
	assert_int_equal(cfg.schedule.frequency, 0);
	unsetenv("STEPPROF_CONFIG");
	/* more errors than are kept: all counted */
	char text[4096] = "[schedule]\n";
	for (int i = 0; i < 70; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), "k%d = 1\n", i);
	assert_int_equal(load_text(text), 70);
	assert_non_null(strstr(errs.msg[SP_CFG_MAX_ERRORS - 1], "k63: unknown key"));
	char out[256];
	FILE *f = fmemopen(out, sizeof(out), "w");
	struct sp_cfg_errors two = { .count = SP_CFG_MAX_ERRORS + 2 };
	for (int i = 0; i < SP_CFG_MAX_ERRORS; i++)
		strcpy(two.msg[i], i ? "" : "first");
	sp_cfg_print_errors(&two, f);
	fclose(f);
	assert_memory_equal(out, "first\n", 6);
	assert_non_null(strstr(out, "\n... and 2 more errors\n"));
}

static void test_env(void **state)
{
	(void)state;
	char *env[] = {
		"PATH=/bin",
		"STEPPROF_SCHEDULE_WAIT=3",
		"STEPPROF_PROFILE_OUTPUT=/tmp/x",
		"STEPPROF_CONFIG=/nonexistent.ini",
		"STEPPROF_RANK=4",
		"STEPPROF_WORLD_SIZE=8",
		"STEPPROF_VERBOSE=1",
		"STEPPROF_SCHEDULE_SKIP_FIRST_WAIT=yes",
		"STEPPROF_ACTIVITIES_HOST_MALLOC_MIN=1M",
		"STEPPROF_RANKS_RANKS=all",
		"STEPPROF_MARKER_PATTERN=  ",
		NULL,
	};
	errs.count = 0;
	sp_cfg_defaults(&cfg);
	assert_int_equal(sp_cfg_load_env(&cfg, env, &errs), 0);
	assert_int_equal(cfg.schedule.wait, 3);
	assert_string_equal(cfg.output, "/tmp/x");
	assert_int_equal(cfg.schedule.skip_first_wait, 1);
	assert_int_equal(cfg.host_malloc_min, 1 << 20);
	assert_true(cfg.ranks.all);
	assert_string_equal(cfg.origin[6].name, "STEPPROF_SCHEDULE_WAIT");
	assert_int_equal(cfg.origin[6].line, 0);

	char *bad[] = { "STEPPROF_SCHEDULE_WAIT=x",
			"STEPPROF_SCHEDULE_WAITT=1",
			"STEPPROF_LIMITS_RING_EVENTS=1",
			"STEPPROF_PROFILE_=1",
			"STEPPROF_SCHEDUL_WAIT=2",
			"STEPPROF_CONFG=/x.ini",
			NULL };
	errs.count = 0;
	assert_int_equal(sp_cfg_load_env(&cfg, bad, &errs), 6);
	/* a misspelt section or variable is an error, never ignored */
	assert_non_null(
		strstr(errs.msg[4], "STEPPROF_SCHEDUL_WAIT: unknown variable (allowed: STEPPROF_<SECTION>_<KEY>"));
	assert_non_null(strstr(errs.msg[5], "STEPPROF_CONFG: unknown variable"));
	assert_string_equal(errs.msg[0], "STEPPROF_SCHEDULE_WAIT: [schedule] wait: not an integer: 'x' (allowed: "
					 "integer >= 0)");
	assert_string_equal(errs.msg[1],
			    "STEPPROF_SCHEDULE_WAITT: [schedule] waitt: unknown key (allowed: "
			    "skip_first, skip_first_wait, wait, warmup, active, repeat, profiling_frequency)");
	assert_non_null(strstr(errs.msg[2], "STEPPROF_LIMITS_RING_EVENTS: [limits] ring_events: out of range: '1'"));
	assert_non_null(strstr(errs.msg[3], "STEPPROF_PROFILE_: [profile] : unknown key"));
	assert_int_equal(cfg.schedule.wait, 3); /* kept */

	/* the environment wins over the file */
	char *env2[] = { "STEPPROF_SCHEDULE_WAIT=1", NULL };
	errs.count = 0;
	sp_cfg_defaults(&cfg);
	sp_cfg_load_file(&cfg, data("good.ini"), &errs);
	sp_cfg_load_env(&cfg, env2, &errs);
	assert_int_equal(sp_cfg_finish(&cfg, &errs), 0);
	assert_int_equal(cfg.schedule.wait, 1);
	/* sp_cfg_load reads environ */
	setenv("STEPPROF_SCHEDULE_ACTIVE", "6", 1);
	assert_int_equal(sp_cfg_load(&cfg, data("good.ini"), &errs), 0);
	assert_int_equal(cfg.schedule.active, 6);
	unsetenv("STEPPROF_SCHEDULE_ACTIVE");
}

/* sp_cfg_print writes an INI file that loads back to the same configuration. */
/* The hostile files of issue 18: each refused with FILE:LINE, while reading. */
static void test_hostile_files(void **state)
{
	(void)state;
	/* CR-only line endings: the keys would be dropped (one line); CRLF is fine */
	assert_int_equal(load_text("[schedule]\rwait = 3\r"), 1);
	assert_non_null(strstr(errs.msg[0], ":1: carriage return inside the line: CR-only line endings?"));
	assert_int_equal(load_text("[schedule]\r\nwait = 3\r\n"), 0);
	assert_int_equal(cfg.schedule.wait, 3);
	/* a NUL byte in a value: an error at its line, not a truncated value */
	static const char nul[] = "[schedule]\nwait = 3\0 7\n";
	const char *path = tmpfile_with("");
	FILE *f = fopen(path, "w");
	fwrite(nul, 1, sizeof(nul) - 1, f);
	fclose(f);
	errs.count = 0;
	sp_cfg_defaults(&cfg);
	assert_int_equal(sp_cfg_load_file(&cfg, path, &errs), 1);
	assert_non_null(strstr(errs.msg[0], ":2: NUL byte in the line"));
	assert_int_equal(cfg.schedule.wait, 10);
	/* a line over inih's limit: an error at its line, the next lines still read */
	char text[4096] = "[schedule]\n; ";
	memset(text + strlen(text), 'x', 300);
	strcat(text, "\nwait = 4\n");
	assert_int_equal(load_text(text), 1);
	assert_non_null(strstr(errs.msg[0], ":2: line longer than"));
	assert_int_equal(cfg.schedule.wait, 4);
	/* more than 1 MiB: refused at the byte past the limit (a file of comments) */
	f = fopen(path, "w");
	for (int i = 0; i < 20000; i++)
		fputs("; a comment line of about sixty characters, repeated forever\n", f);
	fclose(f);
	errs.count = 0;
	assert_int_equal(sp_cfg_load_file(&cfg, path, &errs), 1);
	assert_non_null(strstr(errs.msg[0], "the file is larger than 1048576 bytes"));
	unlink(path);
	/* not a regular file: /dev/zero (would never end) and a FIFO (would block) */
	errs.count = 0;
	assert_int_equal(sp_cfg_load_file(&cfg, "/dev/zero", &errs), 1);
	assert_string_equal(errs.msg[0], "/dev/zero: not a regular file (a FIFO, socket or device is refused)");
	char fifo[64];
	snprintf(fifo, sizeof(fifo), "/tmp/test_config_fifo.%d", (int)getpid());
	assert_int_equal(mkfifo(fifo, 0600), 0);
	errs.count = 0;
	assert_int_equal(sp_cfg_load_file(&cfg, fifo, &errs), 1);
	assert_non_null(strstr(errs.msg[0], "not a regular file"));
	unlink(fifo);
}

/* Any value the configuration accepts, from any source, prints as a line that reads back. */
static void test_long_values_read_back(void **state)
{
	(void)state;
	char value[1100], var[1200], first[8192];
	for (size_t n = 150; n < sizeof(value) - 1; n += 50) {
		memset(value, 'a', n);
		value[n] = 0;
		snprintf(var, sizeof(var), "STEPPROF_CUPTI_LIBRARY=/%s", value);
		char *env[] = { var, NULL };
		errs.count = 0;
		sp_cfg_defaults(&cfg);
		int bad = sp_cfg_load_env(&cfg, env, &errs);
		if (bad) { /* refused up front, saying the limit */
			assert_non_null(strstr(errs.msg[0], "too long"));
			continue;
		}
		strcpy(first, printed(&cfg));
		assert_int_equal(load_text(first), 0);
		assert_string_equal(printed(&cfg), first);
	}
}

static void test_print_round_trip(void **state)
{
	(void)state;
	char first[8192];
	char *env[] = { "STEPPROF_MARKER_KIND=nvtx", "STEPPROF_MARKER_PATTERN=\" step \\\"x\\\" #1;\"",
			"STEPPROF_PROFILE_OUTPUT=/a b/{pid}", "STEPPROF_LIMITS_WINDOW_MAX_BYTES=3073", NULL };
	static const char *const files[] = { "good.ini", "frequency.ini", NULL };

	for (int i = 0; i < 3; i++) {
		errs.count = 0;
		sp_cfg_defaults(&cfg);
		if (files[i])
			sp_cfg_load_file(&cfg, data(files[i]), &errs);
		else
			sp_cfg_load_env(&cfg, env, &errs);
		assert_int_equal(sp_cfg_finish(&cfg, &errs), 0);
		strcpy(first, printed(&cfg));
		struct sp_config before = cfg;
		assert_int_equal(load_text(first), 0);
		assert_string_equal(printed(&cfg), first);
		assert_memory_equal(&cfg.schedule, &before.schedule, sizeof(cfg.schedule));
		assert_memory_equal(&cfg.ranks, &before.ranks, sizeof(cfg.ranks));
		assert_string_equal(cfg.marker_pattern, before.marker_pattern);
		assert_string_equal(cfg.output, before.output);
	}
	assert_string_equal(cfg.marker_pattern, " step \\\"x\\\" #1;");
	assert_non_null(strstr(first, "\nwindow_max_bytes = 3073\n"));
	assert_non_null(strstr(first, "[schedule]\nskip_first = 0\nskip_first_wait = false\nwait = 10\n"));
}

static void test_parse_size(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 },
		{ "512", 512 },
		{ "64K", 65536 },
		{ "64k", 65536 },
		{ "256M", 256ull << 20 },
		{ "2G", 2ull << 30 },
		{ "3T", 3ull << 40 },
		{ "16777215T", 16777215ull << 40 },
		{ "18446744073709551615", UINT64_MAX },
	};
	static const char *const bad[] = {
		"", "K", "1KB", "1 K", " 1", "1.5M", "-1", "+1", "0x10", "16777216T", "18446744073709551616", "1P"
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(sp_parse_size(ok[i].s, &v), 0);
		assert_true(v == ok[i].v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		if (sp_parse_size(bad[i], &v) != -1)
			fail_msg("'%s' parsed", bad[i]);
		assert_int_equal(v, 7);
	}
}

/* The run id: one per launch, from the launcher's variables, a safe file name, stable. */
static void test_run_id(void **state)
{
	(void)state;
	const char *vars[] = { "STEPPROF_RUN_ID",
			       "SLURM_JOB_ID",
			       "SLURM_STEP_ID",
			       "TORCHELASTIC_RUN_ID",
			       "TORCHELASTIC_RESTART_COUNT",
			       "PMIX_NAMESPACE",
			       "OMPI_MCA_ess_base_jobid",
			       "PMI_RANK",
			       "MV2_COMM_WORLD_RANK" };
	char a[SP_RUN_ID_MAX], b[SP_RUN_ID_MAX], want[SP_RUN_ID_MAX];
	const char *how;

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	/* alone: start time and pid, the same on every call */
	sp_run_id(a, sizeof(a), &how);
	sp_run_id(b, sizeof(b), NULL);
	assert_string_equal(a, b);
	assert_string_equal(how, "process start time and pid");
	snprintf(want, sizeof(want), "-%d", (int)getpid());
	assert_int_equal(strlen(a), 15 + strlen(want));
	assert_string_equal(a + 15, want);
	assert_int_equal(a[8], '-');
	/* torchrun without --rdzv-id: the launcher (parent) and this host */
	setenv("TORCHELASTIC_RUN_ID", "none", 1);
	sp_run_id(a, sizeof(a), &how);
	assert_string_equal(how, "launcher start time, host and pid");
	snprintf(want, sizeof(want), "-%d", (int)getppid());
	assert_string_equal(a + strlen(a) - strlen(want), want);
	setenv("PMIX_NAMESPACE", "prterun-node1-4242@1", 1);
	sp_run_id(a, sizeof(a), NULL);
	assert_string_equal(a, "mpi-prterun-node1-4242_1");
	setenv("TORCHELASTIC_RUN_ID", "abc123", 1);
	sp_run_id(a, sizeof(a), NULL);
	assert_string_equal(a, "torchrun-abc123");
	setenv("SLURM_JOB_ID", "777", 1);
	setenv("SLURM_STEP_ID", "2", 1);
	sp_run_id(a, sizeof(a), &how);
	assert_string_equal(a, "slurm-777.2");
	assert_string_equal(how, "Slurm job id");
	/* stepprof run's variable wins; hostile bytes become '_', never a hidden or parent folder */
	setenv("STEPPROF_RUN_ID", "../x y/\n", 1);
	sp_run_id(a, sizeof(a), NULL);
	assert_string_equal(a, "_._x_y__");
	assert_int_equal(sp_cfg_expand("t/{run}", NULL, b, sizeof(b)), 0);
	assert_string_equal(b, "t/_._x_y__");
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void test_expand(void **state)
{
	(void)state;
	struct sp_rank_info ri = { .rank = 3, .world_size = 8, .local_rank = 3, .source = "torchrun" };
	char out[256], want[256], host[256];

	unsetenv("SLURM_JOB_ID");
	unsetenv("PBS_JOBID");
	unsetenv("TORCHELASTIC_RUN_ID");
	assert_int_equal(sp_cfg_expand("d/{rank}/{jobid}/{pid}", &ri, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "d/3/nojob/%d", (int)getpid());
	assert_string_equal(out, want);
	ri.rank = -1;
	assert_int_equal(sp_cfg_expand("r{rank}", &ri, out, sizeof(out)), 0);
	assert_string_equal(out, "rnorank");
	assert_int_equal(sp_cfg_expand("r{rank}", NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "rnorank");
	setenv("TORCHELASTIC_RUN_ID", "te", 1);
	assert_int_equal(sp_cfg_expand("{jobid}", &ri, out, sizeof(out)), 0);
	assert_string_equal(out, "te");
	setenv("PBS_JOBID", "12.pbs/x", 1);
	assert_int_equal(sp_cfg_expand("{jobid}", &ri, out, sizeof(out)), 0);
	assert_string_equal(out, "12.pbs_x"); /* a '/' in a value does not make a directory */
	setenv("SLURM_JOB_ID", "777", 1);
	assert_int_equal(sp_cfg_expand("{jobid}", &ri, out, sizeof(out)), 0);
	assert_string_equal(out, "777");
	unsetenv("SLURM_JOB_ID");
	unsetenv("PBS_JOBID");
	unsetenv("TORCHELASTIC_RUN_ID");
	gethostname(host, sizeof(host));
	assert_int_equal(sp_cfg_expand("{host}", &ri, out, sizeof(out)), 0);
	assert_string_equal(out, host);
	assert_int_equal(sp_cfg_expand("{date}-{time}", &ri, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), 15);
	for (int i = 0; i < 15; i++)
		assert_true(i == 8 ? out[i] == '-' : (out[i] >= '0' && out[i] <= '9'));
	assert_memory_equal(out, "20", 2);
	assert_int_equal(sp_cfg_expand("plain}", &ri, out, sizeof(out)), 0);
	assert_string_equal(out, "plain}");
	assert_int_equal(sp_cfg_expand("x/{nope}", &ri, out, sizeof(out)), -1);
	assert_int_equal(sp_cfg_expand("x/{rank", &ri, out, sizeof(out)), -1);
	assert_int_equal(sp_cfg_expand("abcdef", &ri, out, 6), -1);
	assert_int_equal(sp_cfg_expand("abcde", &ri, out, 6), 0);
	assert_int_equal(sp_cfg_expand("a{rank}", &ri, out, 6), -1);
}

/* 1 if no component of path is "", "." or ".." (after the first, which the template names). */
static int components_safe(const char *path)
{
	const char *p = strchr(path, '/');
	while (p) {
		const char *next = strchr(p + 1, '/');
		size_t n = next ? (size_t)(next - p - 1) : strlen(p + 1);
		if (!n || (n == 1 && p[1] == '.') || (n == 2 && p[1] == '.' && p[2] == '.'))
			return 0;
		p = next;
	}
	return 1;
}

/* a placeholder's value from the environment never leaves the configured directory, and says so */
static void test_expand_hostile(void **state)
{
	(void)state;
	static const struct {
		const char *var, *value, *want;
	} cases[] = {
		{ "SLURM_JOB_ID", "..", "R/_./x" },      { "SLURM_JOB_ID", ".", "R/_/x" },
		{ "SLURM_JOB_ID", "../../etc", "R/_._.._etc/x" }, { "SLURM_JOB_ID", "/", "R/_/x" },
		{ "TORCHELASTIC_RUN_ID", "..", "R/_./x" }, { "PBS_JOBID", "a\nb\x01", "R/a_b_/x" },
		{ "SLURM_JOB_ID", ".hidden", "R/_hidden/x" },
	};
	char out[256], note[400];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		unsetenv("SLURM_JOB_ID");
		unsetenv("PBS_JOBID");
		unsetenv("TORCHELASTIC_RUN_ID");
		setenv(cases[i].var, cases[i].value, 1);
		assert_int_equal(sp_cfg_expand_note("R/{jobid}/x", NULL, out, sizeof out, note, sizeof note), 0);
		assert_string_equal(out, cases[i].want);
		assert_true(components_safe(out));
		assert_non_null(strstr(note, cases[i].var)); /* the note names where the value came from */
		assert_null(strchr(note, '\n'));
		assert_int_equal(sp_cfg_expand("R/{jobid}/x", NULL, out, sizeof out), 0);
		assert_string_equal(out, cases[i].want);
	}
	setenv("SLURM_JOB_ID", "1234_5", 1); /* a plain value: no note */
	assert_int_equal(sp_cfg_expand_note("R/{jobid}/x", NULL, out, sizeof out, note, sizeof note), 0);
	assert_string_equal(out, "R/1234_5/x");
	assert_string_equal(note, "");
	unsetenv("SLURM_JOB_ID");
}

/* the names of a process's files: its pid, and a tag drawn once per process where pid and host may
 * repeat (a pid namespace; STEPPROF_TEST_NAME_PID forces it) */
static void test_name_pid(void **state)
{
	(void)state;
	char tag[16], again[16], child[16];
	int fd[2];
	setenv(SP_NAME_PID_ENV, "7", 1);
	assert_int_equal(sp_name_pid(tag, sizeof tag), 7);
	assert_int_equal(strlen(tag), 9);
	assert_int_equal(tag[0], '.');
	assert_int_equal(strspn(tag + 1, "0123456789abcdef"), 8);
	assert_int_equal(sp_name_pid(again, sizeof again), 7);
	assert_string_equal(tag, again); /* once per process */
	assert_int_equal(pipe(fd), 0);
	pid_t pid = fork();
	if (pid == 0) { /* a child (another process of the same forced pid): its own tag */
		sp_name_pid(child, sizeof child);
		(void)!write(fd[1], child, sizeof child);
		_exit(0);
	}
	assert_int_equal(read(fd[0], child, sizeof child), (ssize_t)sizeof child);
	waitpid(pid, NULL, 0);
	assert_string_not_equal(child, tag);
	unsetenv(SP_NAME_PID_ENV);
	assert_true(sp_pidns() > 0);
}

/* [marker] learn: where automatic detection learns, and why CUPTI all the same */
static void test_learn_why(void **state)
{
	(void)state;
	struct sp_config c;
	sp_cfg_defaults(&c);
	assert_int_equal(c.marker_learn, SP_LEARN_AUTO); /* the default: hooks where they can */
	c.marker_kind = SP_MARK_AUTO;
	assert_null(sp_cfg_learn_cupti_why(&c));
	c.marker_learn = SP_LEARN_CUPTI;
	assert_non_null(sp_cfg_learn_cupti_why(&c));
	c.marker_learn = SP_LEARN_HOOKS;
	assert_null(sp_cfg_learn_cupti_why(&c)); /* device_memory on: the allocation hooks keep it */
	c.marker_learn = SP_LEARN_AUTO;
	assert_true(c.device_memory);
	assert_null(sp_cfg_learn_cupti_why(&c)); /* the same */
	c.device_memory = false;
	assert_null(sp_cfg_learn_cupti_why(&c));
	c.detach_between = SP_DETACH_NEVER;
	assert_non_null(strstr(sp_cfg_learn_cupti_why(&c), "never"));
	c.detach_between = SP_DETACH_AUTO;
	c.ondemand_delay_ms = 5;
	assert_non_null(strstr(sp_cfg_learn_cupti_why(&c), "ondemand"));
	c.ondemand_delay_ms = 0;
	c.marker_kind = SP_MARK_API;
	assert_non_null(strstr(sp_cfg_learn_cupti_why(&c), "explicit"));
	/* from the environment, checked against its names */
	setenv("STEPPROF_MARKER_LEARN", "hooks", 1);
	errs.count = 0;
	assert_int_equal(sp_cfg_load(&c, NULL, &errs), 0);
	assert_int_equal(c.marker_learn, SP_LEARN_HOOKS);
	setenv("STEPPROF_MARKER_LEARN", "sometimes", 1);
	errs.count = 0;
	assert_true(sp_cfg_load(&c, NULL, &errs) > 0);
	unsetenv("STEPPROF_MARKER_LEARN");
}

static void test_marker_kind_name(void **state)
{
	(void)state;
	assert_string_equal(sp_marker_kind_name(SP_MARK_AUTO), "auto");
	assert_string_equal(sp_marker_kind_name(SP_MARK_PROFILER_RANGE), "profiler_range");
	assert_string_equal(sp_marker_kind_name((enum sp_marker_kind)99), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_good_file),
		cmocka_unit_test(test_bad_file_collects_all),
		cmocka_unit_test(test_cross_key_errors),
		cmocka_unit_test(test_profiling_frequency),
		cmocka_unit_test(test_value_errors),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_print_round_trip),
		cmocka_unit_test(test_hostile_files),
		cmocka_unit_test(test_long_values_read_back),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_expand_hostile),
		cmocka_unit_test(test_name_pid),
		cmocka_unit_test(test_run_id),
		cmocka_unit_test(test_marker_kind_name),
		cmocka_unit_test(test_learn_why),
		cmocka_unit_test(test_stacks_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
