/* SPDX-License-Identifier: MIT */
/* cmd_run.c - placeholder until written. */
#include <stdio.h>
#include "cli.h"

int sp_cmd_run(int argc, char **argv)
{
	fprintf(stderr, "stepprof run: not built yet\n");
	return 1;
}
