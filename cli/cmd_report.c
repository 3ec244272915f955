/* SPDX-License-Identifier: MIT */
/* cmd_report.c - placeholder until written. */
#include <stdio.h>
#include "cli.h"

int sp_cmd_report(int argc, char **argv)
{
	fprintf(stderr, "stepprof report: not built yet\n");
	return 1;
}
