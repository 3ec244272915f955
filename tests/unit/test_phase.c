/* SPDX-License-Identifier: MIT */
/* test_phase.c - config/phase.c: [phase.NAME] sections parsed with the values and messages of
 * [marker] and [schedule], the rules between phases (one auto phase at most, no plain [marker] or
 * [schedule] key beside phases, names, count, keys set twice), command-line settings and the
 * print/load round trip. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config/config.h"

static struct sp_config cfg, again;
static struct sp_cfg_errors errs;

/* Loads text as an INI file into c over the defaults, then finish; returns the error count. */
static int load_into(struct sp_config *c, const char *text)
{
	char path[64];
	strcpy(path, "/tmp/test_phase_XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	errs.count = 0;
	sp_cfg_defaults(c);
	sp_cfg_load_file(c, path, &errs);
	sp_cfg_finish(c, &errs);
	unlink(path);
	return errs.count;
}

/* Asserts that some error contains text. */
static void expect_error(const char *text)
{
	for (int i = 0; i < errs.count && i < SP_CFG_MAX_ERRORS; i++)
		if (strstr(errs.msg[i], text))
			return;
	for (int i = 0; i < errs.count && i < SP_CFG_MAX_ERRORS; i++)
		print_message("error: %s\n", errs.msg[i]);
	fail_msg("no error contains '%s'", text);
}

static const char rl[] = "[phase.fwd]\nkind = nvtx\npattern = generate*\nwait = 0\nwarmup = 0\nactive = 1\n"
			 "repeat = 0\n\n[phase.fwd_bwd]\nkind = kernel\npattern = *SoftMaxBackward*\n"
			 "wait = 5\nwarmup = 2\nactive = 1\nrepeat = 1\n";

static void test_two_phases(void **state)
{
	(void)state;
	assert_int_equal(load_into(&cfg, rl), 0);
	assert_int_equal(cfg.phases.n, 2);
	const struct sp_phase *f = sp_phase_find(&cfg, "FWD"), *b = sp_phase_find(&cfg, "fwd_bwd");
	assert_non_null(f);
	assert_non_null(b);
	assert_null(sp_phase_find(&cfg, "train"));
	assert_string_equal(f->name, "fwd");
	assert_int_equal(f->marker_kind, SP_MARK_NVTX);
	assert_string_equal(f->marker_pattern, "generate*");
	assert_int_equal(f->marker_every, 1);
	assert_int_equal(f->schedule.wait, 0);
	assert_int_equal(f->schedule.active, 1);
	assert_int_equal(f->schedule.repeat, 0);
	assert_int_equal(b->marker_kind, SP_MARK_KERNEL);
	assert_int_equal(b->schedule.wait, 5);
	assert_int_equal(b->schedule.warmup, 2);
	/* keys a phase does not set keep the built-in defaults of [schedule] */
	assert_int_equal(b->schedule.skip_first, 0);
	assert_int_equal(b->origin[5].line, 12); /* wait, in the order of phase.c's table */
	/* the plain sections are untouched */
	assert_int_equal(cfg.marker_kind, SP_MARK_AUTO);
	assert_int_equal(cfg.schedule.wait, 10);
	assert_int_equal(sp_schedule_action(&b->schedule, 7), SP_ACT_RECORD_AND_SAVE);
	assert_int_equal(sp_schedule_action(&f->schedule, 3), SP_ACT_RECORD_AND_SAVE);
}

static void test_errors(void **state)
{
	(void)state;
	assert_int_equal(load_into(&cfg, "[phase.a]\nwait = -1\nkind = bogus\nfoo = 1\n"), 3);
	expect_error(":2: [phase.a] wait: out of range: '-1' (allowed: integer >= 0)");
	expect_error(":3: [phase.a] kind: unknown marker kind: 'bogus' (allowed: auto, kernel, api, nccl, nvtx, "
		     "profiler_range, optimizer, python)");
	expect_error(":4: [phase.a] foo: unknown key (allowed: kind, pattern, every,");
	assert_true(load_into(&cfg, "[phase.a b]\nwait = 1\n") >= 1);
	expect_error("bad phase name 'a b'");
	assert_true(load_into(&cfg, "[phase.]\nwait = 1\n") >= 1);
	expect_error("bad phase name ''");
	assert_true(load_into(&cfg, "[phase.../x]\nwait = 1\n") >= 1);
	expect_error("bad phase name '../x'");
	assert_int_equal(load_into(&cfg, "[phase.a]\nwait = 1\nwait = 2\n"), 1);
	expect_error(":3: [phase.a] wait: set twice, first at line 2");
	/* the same key in two phases is fine; so are two sections of one phase */
	assert_int_equal(load_into(&cfg, "[phase.a]\nwait = 1\n[phase.b]\nwait = 2\nkind = api\npattern = cudaFree\n"
					 "[phase.A]\nactive = 2\n"),
			 0);
	assert_int_equal(cfg.phases.n, 2);
	assert_int_equal(sp_phase_find(&cfg, "a")->schedule.active, 2);
	/* cross-key rules, blamed on the phase */
	assert_int_equal(load_into(&cfg, "[phase.a]\nkind = nvtx\n"), 1);
	expect_error("[phase.a] kind: nvtx needs a pattern");
	assert_int_equal(load_into(&cfg, "[phase.a]\npattern = x*\n"), 1);
	expect_error("[phase.a] pattern: must be empty with kind = auto");
	/* python phases (an RL loop's generate and its training step); no optimizer phase */
	assert_int_equal(load_into(&cfg, "[phase.gen]\nkind = python\npattern = __main__:generate\n"
					 "[phase.train]\nkind = python\npattern = __main__:train_step\n"),
			 0);
	assert_int_equal(sp_phase_find(&cfg, "gen")->marker_kind, SP_MARK_PYTHON);
	assert_int_equal(load_into(&cfg, "[phase.a]\nkind = python\npattern = gen*\n"), 1);
	expect_error(":3: [phase.a] pattern: 'gen*' is not module:qualname");
	assert_int_equal(load_into(&cfg, "[phase.a]\nkind = nvtx\npattern = g\n[phase.b]\nkind = optimizer\n"), 1);
	expect_error(":5: [phase.b] kind: optimizer in a phase (allowed: kind = python");
	assert_int_equal(load_into(&cfg, "[phase.a]\nrepeat = 0\nprofiling_frequency = 3\nwarmup = 2\nactive = 2\n"),
			 1);
	expect_error("[phase.a] profiling_frequency:");
	/* rules between phases */
	assert_int_equal(load_into(&cfg, "[phase.a]\nwait = 1\n[phase.b]\nwait = 2\n"), 1);
	expect_error(":4: [phase.b] kind: a second phase with kind = auto"); /* its first line: kind is default */
	assert_int_equal(load_into(&cfg, "[schedule]\nwait = 1\n[marker]\nkind = nvtx\npattern = x\n"
					 "[phase.a]\nkind = api\npattern = cudaFree\n"),
			 3);
	expect_error(":2: [schedule] wait: not used with [phase.NAME] sections");
	expect_error(":4: [marker] kind: not used with [phase.NAME] sections");
	char many[1024] = "";
	for (int i = 0; i <= SP_MAX_PHASES; i++)
		snprintf(many + strlen(many), sizeof many - strlen(many), "[phase.p%d]\nkind = api\npattern = c%d\n", i,
			 i);
	assert_true(load_into(&cfg, many) >= 1);
	expect_error("[phase.p8]: too many phases (allowed: at most 8");
}

static void test_set_and_env(void **state)
{
	(void)state;
	errs.count = 0;
	sp_cfg_defaults(&cfg);
	assert_int_equal(sp_cfg_set(&cfg, "phase.x", "active", "4", "command line", 0, &errs), 0);
	assert_int_equal(sp_cfg_set(&cfg, "phase.x", "active", "5", "command line", 0, &errs),
			 0); /* no line: no "twice" */
	assert_int_equal(sp_phase_find(&cfg, "x")->schedule.active, 5);
	assert_int_equal(sp_cfg_set(&cfg, "phase.x", "active", "0", "command line", 0, &errs), 1);
	expect_error("command line: [phase.x] active: out of range: '0' (allowed: integer >= 1)");
	/* phases come from files (and sp_cfg_set): a STEPPROF_PHASE_* variable is an unknown one */
	char *env[] = { "STEPPROF_PHASE_X_WAIT=3", NULL };
	errs.count = 0;
	assert_int_equal(sp_cfg_load_env(&cfg, env, &errs), 1);
	expect_error("STEPPROF_PHASE_X_WAIT: unknown variable");
}

static void test_round_trip(void **state)
{
	(void)state;
	char *a = NULL, *b = NULL;
	size_t na, nb;
	assert_int_equal(load_into(&cfg, rl), 0);
	FILE *f = open_memstream(&a, &na);
	sp_cfg_print(&cfg, f);
	fclose(f);
	assert_non_null(strstr(a, "[phase.fwd]\nkind = nvtx\npattern = \"generate*\"\nevery = 1\n"));
	assert_null(strstr(a, "[schedule]")); /* beside phases it would be an error */
	assert_null(strstr(a, "[marker]"));
	assert_int_equal(load_into(&again, a), 0);
	f = open_memstream(&b, &nb);
	sp_cfg_print(&again, f);
	fclose(f);
	assert_string_equal(a, b);
	free(a);
	free(b);
	/* without phases the printout is as before: [schedule] and [marker], no phase */
	assert_int_equal(load_into(&cfg, "[schedule]\nwait = 2\n"), 0);
	f = open_memstream(&a, &na);
	sp_cfg_print(&cfg, f);
	fclose(f);
	assert_non_null(strstr(a, "[schedule]\nskip_first = 0\nskip_first_wait = false\nwait = 2\n"));
	assert_null(strstr(a, "[phase."));
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_phases),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_set_and_env),
		cmocka_unit_test(test_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
