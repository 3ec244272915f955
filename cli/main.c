/* SPDX-License-Identifier: MIT */
/* main.c - `stepprof` entry: dispatches to the subcommands of cli.h. */
#include <stdio.h>
#include <string.h>
#include "cli.h"

const char *sp_cli_argv0;

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} cmds[] = {
	{ "run", sp_cmd_run, "run [--config FILE] [--out DIR] [--ranks LIST] [--set SECTION.KEY=VALUE] -- CMD ...   profile CMD" },
	{ "check", sp_cmd_check, "check [FILE]                  print the effective configuration or every error" },
	{ "schedule", sp_cmd_schedule, "schedule [--config FILE] [--steps N] [KEY=VALUE ...]   dry-run the schedule" },
	{ "report", sp_cmd_report, "report TRACE [--sort KEY] [--top N] [--window N] [--json]   kernel, step, NCCL tables, findings" },
	{ "convert", sp_cmd_convert, "convert TRACE [-o OUT[.json|.json.gz]] [--merge]   Chrome/Perfetto JSON" },
	{ "dump", sp_cmd_dump, "dump TRACE                    every record as text (stable, for diffs)" },
	{ "memory", sp_cmd_memory, "memory TRACE [-o OUT.html] [--window N]   memory timeline page and peaks" },
	{ "diff", sp_cmd_diff, "diff BASE NEW [--window N] [--top N]   kernel time per step, what changed" },
	{ "steps", sp_cmd_steps, "steps TRACE [TRACE ...]       per-step table; several ranks side by side" },
	{ "autostep", sp_cmd_autostep, "autostep FILE [--json] [--check]   replay a recorded token stream (STEPPROF_RECORD_TOKENS)" },
	{ "stacks", sp_cmd_stacks, "stacks TRACE [--by bytes|calls] [--kind alloc|launch|nccl|all] [-o FILE]   folded stacks" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: stepprof COMMAND [ARGS]\n\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %s\n", cmds[i].help);
	fprintf(f, "\nSee README.md for the INI keys and examples.\n");
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
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "stepprof: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
