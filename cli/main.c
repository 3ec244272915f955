/* SPDX-License-Identifier: MIT */
/* main.c - `stepprof` entry: dispatches to the subcommands of cli.h; --help (the man page is
 * generated from it and from each command's --help: scripts/gen-man.sh) and --version. */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "opts.h"
#include "config/version.h"
#include "trace/trace.h"



static void usage(FILE *f)
{
	fprintf(f, "usage: stepprof COMMAND [ARGS]     (stepprof COMMAND --help: its options)\n"
		   "       stepprof --version\n\n");
	for (size_t i = 0; sp_cmd_specs[i]; i++)
		fprintf(f, "  %-10s %s\n", sp_cmd_specs[i]->name, sp_cmd_specs[i]->summary);
	fprintf(f, "\nProfiles unmodified GPU programs: LD_PRELOAD=libstepprof.so (or stepprof run) in front of any\n"
		   "launcher, an INI file picks ranks and a torch.profiler-style schedule, and each selected rank\n"
		   "writes a compact trace (.sptrace) that the other commands read. Exit status: 0 success,\n"
		   "1 runtime failure, 2 usage or configuration error.\n"
		   "Documentation: README.md, docs/RECIPES.md, docs/CONFIG.md (in the source tree, or under\n"
		   "share/doc/stepprof/ of an installed or dist copy), man stepprof.\n");
}

int main(int argc, char **argv)
{
	sp_cli_argv0 = argv[0];
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("stepprof %s (trace format %d, reads %d..%d)\n", SP_VERSION, SP_TRACE_VERSION,
		       SP_TRACE_MIN_VERSION, SP_TRACE_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "--complete")) /* for bash completion: scripts/stepprof-completion.bash */
		return sp_opts_complete(argc > 2 ? argv[2] : NULL, stdout);
	for (size_t i = 0; sp_cmd_specs[i]; i++)
		if (!strcmp(argv[1], sp_cmd_specs[i]->name)) {
			sp_cli_cmd = sp_cmd_specs[i]->name;
			return sp_cmd_specs[i]->fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "stepprof: unknown command '%s' (commands:", argv[1]);
	for (size_t i = 0; sp_cmd_specs[i]; i++)
		fprintf(stderr, " %s", sp_cmd_specs[i]->name);
	fprintf(stderr, "; stepprof --help)\n");
	return 2;
}
