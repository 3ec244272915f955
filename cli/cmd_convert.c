/* SPDX-License-Identifier: MIT */
/* cmd_convert.c - placeholder until written. */
#include <stdio.h>
#include "cli.h"

int sp_cmd_convert(int argc, char **argv)
{
	fprintf(stderr, "stepprof convert: not built yet\n");
	return 1;
}
