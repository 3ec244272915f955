/* SPDX-License-Identifier: MIT */
/* cmd_check.c - placeholder until written. */
#include <stdio.h>
#include "cli.h"

int sp_cmd_check(int argc, char **argv)
{
	fprintf(stderr, "stepprof check: not built yet\n");
	return 1;
}
