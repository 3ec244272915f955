/* SPDX-License-Identifier: MIT */
/* cmd_dump.c - placeholder until written. */
#include <stdio.h>
#include "cli.h"

int sp_cmd_dump(int argc, char **argv)
{
	fprintf(stderr, "stepprof dump: not built yet\n");
	return 1;
}
