/* SPDX-License-Identifier: MIT */
/* cmd_schedule.c - placeholder until written. */
#include <stdio.h>
#include "cli.h"

int sp_cmd_schedule(int argc, char **argv)
{
	fprintf(stderr, "stepprof schedule: not built yet\n");
	return 1;
}
