/* SPDX-License-Identifier: MIT */
/* cli.h - the offline `stepprof` command: one function per subcommand, one file each
 * (cli/cmd_<name>.c). Commands run outside the profiled process: they may print and exit.
 * Exit codes: 0 success, 1 runtime failure (unreadable file...), 2 usage or configuration error. */
#ifndef SP_CLI_H
#define SP_CLI_H

int sp_cmd_check(int argc, char **argv);
int sp_cmd_schedule(int argc, char **argv);
int sp_cmd_convert(int argc, char **argv);
int sp_cmd_report(int argc, char **argv);
int sp_cmd_dump(int argc, char **argv);
int sp_cmd_run(int argc, char **argv);
int sp_cmd_memory(int argc, char **argv);
int sp_cmd_stacks(int argc, char **argv);
int sp_cmd_steps(int argc, char **argv);
int sp_cmd_diff(int argc, char **argv);

/* argv[0] of the stepprof binary as invoked (for locating the library beside it). */
extern const char *sp_cli_argv0;

#endif
