/* SPDX-License-Identifier: MIT */
/* cli.h - the offline `stepprof` command: one function per subcommand, one file each
 * (cli/cmd_<name>.c). Commands run outside the profiled process: they may print and exit.
 * Exit codes: 0 success, 1 runtime failure (unreadable file...), 2 usage or configuration error.
 * Each command parses its arguments with getopt_long(3): optind = 0 first (glibc's full
 * reinitialisation: the tests run several commands in one process), opterr = 0 (the messages
 * are the command's, printed by the helpers below), then its usage to stderr and exit 2. */
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
int sp_cmd_autostep(int argc, char **argv);

/* For getopt_long's '?' (unknown option, or a value given to an option that takes none) and ':'
 * (missing value: the optstring starts with ':', after a '+') returns c: prints
 * "stepprof CMD: unexpected argument 'X'" or "stepprof CMD: option 'X' wants a value" to stderr.
 * This function can't fail. */
void sp_cli_bad_option(const char *cmd, int c, int argc, char **argv);
/* Checks that min..max arguments follow the options (argv[optind..argc)). Returns 0, or -1 for
 * too few (nothing printed: the usage says it) or too many (after "stepprof CMD: unexpected
 * argument 'X'" for the first extra one). */
int sp_cli_operands(const char *cmd, int argc, char **argv, int min, int max);

/* argv[0] of the stepprof binary as invoked (for locating the library beside it). */
extern const char *sp_cli_argv0;

#endif
