/* SPDX-License-Identifier: MIT */
/* test_odctl.c - config/odctl.c: the on-demand control files. Requests and statuses round
 * trip; every malformed request is refused with a reason; sp_od_read refuses links, other
 * owners, files others may write, oversize and non-regular files; sp_od_write replaces atomically;
 * sp_od_check_dir refuses a directory others may write. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "config/odctl.h"

static char dir[] = "/tmp/test_odctl.XXXXXX";

static int parse(const char *text, struct sp_od_req *r, char *err)
{
	return sp_od_req_parse(text, strlen(text), r, err, 200);
}

static void test_request_round_trip(void **state)
{
	struct sp_od_req r = { .id = 0xfeedu, .steps = 7, .phase = "train" }, back;
	char buf[256], err[200];
	int n = sp_od_req_format(&r, buf, sizeof buf);
	assert_true(n > 0);
	assert_string_equal(buf, "stepprof-trigger 1\nid 000000000000feed\nsteps 7\nphase train\n");
	assert_int_equal(sp_od_req_parse(buf, (size_t)n, &back, err, sizeof err), 0);
	assert_true(back.id == 0xfeedu && back.steps == 7 && back.ms == 0);
	assert_string_equal(back.phase, "train");
	r = (struct sp_od_req){ .id = 1, .ms = 2500 };
	n = sp_od_req_format(&r, buf, sizeof buf);
	assert_int_equal(sp_od_req_parse(buf, (size_t)n, &back, err, sizeof err), 0);
	assert_true(back.ms == 2500 && back.steps == 0 && !back.phase[0]);
	assert_int_equal(sp_od_req_format(&r, buf, 10), -1); /* does not fit */
	r = (struct sp_od_req){ .id = 2, .steps = 4, .at = 1764160000123456789ull };
	n = sp_od_req_format(&r, buf, sizeof buf);
	assert_int_equal(sp_od_req_parse(buf, (size_t)n, &back, err, sizeof err), 0);
	assert_true(back.at == r.at && back.steps == 4);
}

static void test_request_refused(void **state)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "", "empty" },
		{ "stepprof-trigger 2\nid 1\nsteps 1\n", "not a stepprof control file" },
		{ "id 1\nsteps 1\n", "not a stepprof control file" },
		{ "stepprof-trigger 1\nsteps 1\n", "no request id" },
		{ "stepprof-trigger 1\nid 0\nsteps 1\n", "bad 'id'" },
		{ "stepprof-trigger 1\nid 12345678901234567\nsteps 1\n", "bad 'id'" },
		{ "stepprof-trigger 1\nid xyz\nsteps 1\n", "bad 'id'" },
		{ "stepprof-trigger 1\nid 1\n", "either steps or ms" },
		{ "stepprof-trigger 1\nid 1\nsteps 2\nms 3\n", "either steps or ms" },
		{ "stepprof-trigger 1\nid 1\nsteps 0\n", "bad 'steps'" },
		{ "stepprof-trigger 1\nid 1\nsteps -3\n", "bad 'steps'" },
		{ "stepprof-trigger 1\nid 1\nsteps 100001\n", "bad 'steps'" },
		{ "stepprof-trigger 1\nid 1\nsteps 3x\n", "bad 'steps'" },
		{ "stepprof-trigger 1\nid 1\nms 3600001\n", "bad 'ms'" },
		{ "stepprof-trigger 1\nid 1\nsteps 1\nphase a/b\n", "bad 'phase'" },
		{ "stepprof-trigger 1\nid 1\nsteps 1\nphase \n", "bad 'phase'" },
		{ "stepprof-trigger 1\nid 1\nsteps 1\nrun /bin/sh\n", "bad 'run'" },
		{ "stepprof-trigger 1\nid 1\nsteps 1\nat -5\n", "bad 'at'" },
		{ "stepprof-trigger 1\nid 1\nsteps 1\nat 99999999999999999999\n", "bad 'at'" },
	};
	struct sp_od_req r;
	char err[200];
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err[0] = 0;
		if (parse(bad[i].text, &r, err) != -1 || !strstr(err, bad[i].why))
			fail_msg("'%s': accepted or wrong reason '%s' (want '%s')", bad[i].text, err, bad[i].why);
	}
	/* a NUL byte and an overlong line */
	assert_int_equal(sp_od_req_parse("stepprof-trigger 1\nid 1\0steps 1\n", 30, &r, err, sizeof err), -1);
	assert_non_null(strstr(err, "NUL"));
	char big[1200];
	memset(big, 'x', sizeof big);
	memcpy(big, "stepprof-trigger 1\nphase ", 25);
	assert_int_equal(sp_od_req_parse(big, sizeof big, &r, err, sizeof err), -1);
	assert_non_null(strstr(err, "too long"));
	/* blank lines and a missing final newline are fine */
	assert_int_equal(parse("stepprof-trigger 1\n\nid a\nsteps 2", &r, err), 0);
	assert_true(r.id == 10 && r.steps == 2);
}

static void test_status_round_trip(void **state)
{
	struct sp_od_status s = { .pid = 42,
				  .rank = 3,
				  .host = "node-1",
				  .start = 123456,
				  .pidns = 4026532177u,
				  .poll_ms = 500,
				  .request = 0xabcu,
				  .state = "written",
				  .first = 10,
				  .last = 14,
				  .window = 2,
				  .trace = "/out/rank3.node-1.42.sptrace",
				  .note = "a note, with spaces" },
			    back;
	char buf[1024], err[200];
	int n = sp_od_status_format(&s, buf, sizeof buf);
	assert_true(n > 0);
	assert_int_equal(sp_od_status_parse(buf, (size_t)n, &back, err, sizeof err), 0);
	assert_memory_equal(&s, &back, sizeof s);
	const char *no_host = "stepprof-status 1\npid 4\n",
		   *bad_state = "stepprof-status 1\npid 4\nhost h\nstate x y\n";
	assert_int_equal(sp_od_status_parse(no_host, strlen(no_host), &back, err, sizeof err), -1);
	assert_int_equal(sp_od_status_parse(bad_state, strlen(bad_state), &back, err, sizeof err), -1);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_read_hostile(void **state)
{
	char path[256], other[256], buf[SP_OD_MAX_BYTES + 1], err[400];
	snprintf(path, sizeof path, "%s/trigger", dir);
	snprintf(other, sizeof other, "%s/real", dir);
	assert_int_equal(sp_od_read(path, buf, sizeof buf, err, sizeof err), 0); /* absent */
	write_file(path, "stepprof-trigger 1\nid 1\nsteps 1\n", 0600);
	assert_int_equal(sp_od_read(path, buf, sizeof buf, err, sizeof err), 32);
	assert_string_equal(buf, "stepprof-trigger 1\nid 1\nsteps 1\n");
	assert_int_equal(sp_od_read(path, buf, 100, err, sizeof err), -1); /* a buffer too small is refused */
	assert_int_equal(chmod(path, 0620), 0);
	assert_int_equal(sp_od_read(path, buf, sizeof buf, err, sizeof err), -1);
	assert_non_null(strstr(err, "other users"));
	assert_int_equal(chmod(path, 0602), 0);
	assert_int_equal(sp_od_read(path, buf, sizeof buf, err, sizeof err), -1);
	unlink(path);
	write_file(other, "stepprof-trigger 1\nid 1\nsteps 1\n", 0600);
	assert_int_equal(symlink(other, path), 0);
	assert_int_equal(sp_od_read(path, buf, sizeof buf, err, sizeof err), -1); /* never followed */
	unlink(path);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(sp_od_read(path, buf, sizeof buf, err, sizeof err), -1);
	assert_non_null(strstr(err, "regular"));
	rmdir(path);
	char *big = malloc(SP_OD_MAX_BYTES + 2);
	memset(big, 'x', SP_OD_MAX_BYTES + 1);
	big[SP_OD_MAX_BYTES + 1] = 0;
	write_file(path, big, 0600);
	free(big);
	assert_int_equal(sp_od_read(path, buf, sizeof buf, err, sizeof err), -1);
	assert_non_null(strstr(err, "larger"));
	if (geteuid() == 0) { /* another owner: only root can make one here */
		write_file(path, "stepprof-trigger 1\nid 1\nsteps 1\n", 0600);
		assert_int_equal(chown(path, 65534, 65534), 0);
		assert_int_equal(sp_od_read(path, buf, sizeof buf, err, sizeof err), -1);
		assert_non_null(strstr(err, "belongs to uid 65534"));
	}
	unlink(path);
	unlink(other);
}

static void test_write_and_dir(void **state)
{
	char ctl[256], path[300], buf[SP_OD_MAX_BYTES + 1], err[400];
	snprintf(ctl, sizeof ctl, "%s/ctl", dir);
	assert_int_equal(sp_od_check_dir(ctl, 0, err, sizeof err), -1); /* absent, not created */
	assert_int_equal(sp_od_check_dir(ctl, 1, err, sizeof err), 0);
	struct stat st;
	assert_int_equal(stat(ctl, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(sp_od_write(ctl, "f", "one\n"), 0);
	assert_int_equal(sp_od_write(ctl, "f", "two\n"), 0); /* replaced */
	snprintf(path, sizeof path, "%s/f", ctl);
	assert_int_equal(sp_od_read(path, buf, sizeof buf, err, sizeof err), 4);
	assert_string_equal(buf, "two\n");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	unlink(path);
	assert_int_equal(chmod(ctl, 0777), 0);
	assert_int_equal(sp_od_check_dir(ctl, 1, err, sizeof err), -1);
	assert_non_null(strstr(err, "written by other users"));
	rmdir(ctl);
	write_file(ctl, "x", 0600);
	assert_int_equal(sp_od_check_dir(ctl, 1, err, sizeof err), -1); /* a file, not a directory */
	unlink(ctl);
}

static void test_ids_and_proc(void **state)
{
	uint64_t a = sp_od_new_id(), b = sp_od_new_id();
	assert_true(a && b && a != b);
	assert_true(sp_od_proc_start(getpid()) > 0);
	assert_true(sp_od_proc_start(getpid()) == sp_od_proc_start(getpid()));
	assert_true(sp_od_proc_start(0x7ffffff0) == 0);
}

static int setup(void **state)
{
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_round_trip), cmocka_unit_test(test_request_refused),
		cmocka_unit_test(test_status_round_trip),  cmocka_unit_test(test_read_hostile),
		cmocka_unit_test(test_write_and_dir),      cmocka_unit_test(test_ids_and_proc),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
