/* SPDX-License-Identifier: MIT */
/* scratch.h - one scratch directory per test binary: `dir` is made by make_scratch() in main (or
 * a group setup) and removed with everything in it by the group teardown remove_scratch(). */
#ifndef SP_TEST_SCRATCH_H
#define SP_TEST_SCRATCH_H

#include <stdio.h>
#include <stdlib.h>

static char dir[96];

/* Creates /tmp/sp_test_<name>.XXXXXX into dir. Returns 0, or -1 if mkdtemp failed. */
static int make_scratch(const char *name)
{
	snprintf(dir, sizeof(dir), "/tmp/sp_test_%s.XXXXXX", name);
	return mkdtemp(dir) ? 0 : -1;
}

static int remove_scratch(void **state)
{
	char cmd[160];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

#endif
