/* SPDX-License-Identifier: MIT */
/* main.c - `stepprof` entry: dispatches to the subcommands of cli.h; --help (the man page is
 * generated from it and from each command's --help: scripts/gen-man.sh) and --version. */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "config/version.h"
#include "trace/trace.h"

const char *sp_cli_argv0;

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} cmds[] = {
	{ "run", sp_cmd_run,
	  "run [-c FILE] [-o DIR] [--ranks LIST] [--set SECTION.KEY=VALUE] -- CMD ...   profile CMD" },
	{ "check", sp_cmd_check, "check [[-c] FILE]             print the effective configuration or every error" },
	{ "schedule", sp_cmd_schedule,
	  "schedule [-c FILE] [--count N | --steps A-B] [KEY=VALUE ...]   dry-run the schedule" },
	{ "report", sp_cmd_report,
	  "report TRACE [--sort KEY] [--top N] [--window N] [--json]   kernel, step, NCCL tables, findings" },
	{ "convert", sp_cmd_convert, "convert TRACE [-o OUT[.json|.json.gz]] [--merge]   Chrome/Perfetto JSON" },
	{ "dump", sp_cmd_dump, "dump TRACE                    every record as text (stable, for diffs)" },
	{ "memory", sp_cmd_memory, "memory TRACE [-o OUT.html] [--window N]   memory timeline page and peaks" },
	{ "diff", sp_cmd_diff, "diff BASE NEW [--window N] [--top N]   kernel time per step, what changed" },
	{ "steps", sp_cmd_steps, "steps TRACE [TRACE ...]       per-step table; several ranks side by side" },
	{ "autostep", sp_cmd_autostep,
	  "autostep FILE [--json] [--check]   replay a recorded token stream (STEPPROF_RECORD_TOKENS)" },
	{ "trigger", sp_cmd_trigger,
	  "trigger [--steps N | --ms MS] [--wait] PID ... | --job DIR   record a window now, on demand" },
	{ "stacks", sp_cmd_stacks,
	  "stacks TRACE [--by bytes|calls] [--kind alloc|launch|nccl|all] [-o FILE]   folded stacks" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: stepprof COMMAND [ARGS]     (stepprof COMMAND --help: its options)\n"
		   "       stepprof --version\n\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %s\n", cmds[i].help);
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
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			sp_cli_cmd = cmds[i].name;
			return cmds[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "stepprof: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
