/* SPDX-License-Identifier: MIT */
/* cli.c - what the subcommands of cli.h share in parsing their arguments: the messages for a
 * bad option and for arguments beyond those a command takes. Prints only to stderr. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"

void sp_cli_bad_option(const char *cmd, int c, int argc, char **argv)
{
	const char *arg = argv[optind - 1];
	char letter[3] = { '-', (char)optopt, 0 };

	/* A long option is the whole argument optind has just passed (optopt is 0 when unknown);
	 * a short one is the letter optopt, maybe inside a cluster (-xy) optind has not passed yet. */
	if (optopt && (strncmp(arg, "--", 2) ||
		       (optind < argc && argv[optind][0] == '-' && argv[optind][1] != '-' &&
			strchr(argv[optind], optopt))))
		arg = letter;
	if (c == ':')
		fprintf(stderr, "stepprof %s: option '%s' wants a value\n", cmd, arg);
	else
		fprintf(stderr, "stepprof %s: unexpected argument '%s'\n", cmd, arg);
}

int sp_cli_operands(const char *cmd, int argc, char **argv, int min, int max)
{
	if (argc - optind > max) {
		fprintf(stderr, "stepprof %s: unexpected argument '%s'\n", cmd, argv[optind + max]);
		return -1;
	}
	return argc - optind < min ? -1 : 0;
}
