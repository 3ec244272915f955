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
int sp_cmd_trigger(int argc, char **argv);

/* For getopt_long's '?' (unknown option, or a value given to an option that takes none) and ':'
 * (missing value: the optstring starts with ':', after a '+') returns c: prints
 * "stepprof CMD: unexpected argument 'X'" or "stepprof CMD: option 'X' wants a value" to stderr.
 * This function can't fail. */
void sp_cli_bad_option(const char *cmd, int c, int argc, char **argv);
/* Checks that min..max arguments follow the options (argv[optind..argc)). Returns 0, or -1 for
 * too few (nothing printed: the usage says it) or too many (after "stepprof CMD: unexpected
 * argument 'X'" for the first extra one). */
int sp_cli_operands(const char *cmd, int argc, char **argv, int min, int max);

/* For commands that read several ranks' traces as one job (steps, convert --merge-ranks): checks
 * that paths[0..n) come from one run (the same run id in their headers) and that no rank appears
 * twice. Returns 0, or 1 (the inputs disagree: exit status 1) after printing to stderr which traces belong to which run (or which two
 * claim the same rank). Unreadable files are left to the command. This function can't fail. */
int sp_cli_one_run(const char *cmd, char *const *paths, size_t n);

/* --window ARG, the same in every command: a window id (0, 1, ...) or "all" (-1: every window).
 * Returns 0 with *window set, or -1 after "stepprof CMD: --window wants N (a window id) or all,
 * not 'ARG'" on stderr (*window unchanged). */
int sp_cli_window(const char *cmd, const char *arg, long long *window);

/* The default path of a command's output file: trace's file name without its ".sptrace" (if it
 * has more than that), then suffix (".memory.html"; "" for the stem alone), in the folder dir
 * (NULL: the current directory, i.e. the bare name). Returns a string to free; exits the CLI if
 * memory runs out. */
char *sp_cli_out_path(const char *dir, const char *trace, const char *suffix);

/* 1 if s ends with suffix. This function can't fail. */
int sp_cli_ends_with(const char *s, const char *suffix);

/* Appends id to the list of window ids in ids[0..n) ("0, 1, 2", then "..." once full). This
 * function can't fail. */
void sp_cli_ids_add(char *ids, size_t n, unsigned id);

/* After a command read the windows of trace and found none to use (seen: how many it has, ids:
 * their list from sp_cli_ids_add, truncated: the file was cut short): "stepprof CMD: TRACE has no
 * window W; its windows: 0, 1" for --window W (window >= 0), else "stepprof CMD: TRACE holds no
 * recorded window" and why (cut short before its first window was complete, or nothing recorded),
 * on stderr. This function can't fail. */
void sp_cli_no_window(const char *cmd, const char *trace, long long window, int seen, const char *ids,
		      int truncated);

/* Every JSON object the CLI writes starts with these members: "schema" ("stepprof.CMD"),
 * "schema_version" (SP_JSON_SCHEMA_VERSION: bumped when a member changes meaning or goes away;
 * new members may appear without a bump) and "stepprof_version". Writes them and a trailing
 * comma after the object's opening brace. This function can't fail. */
#define SP_JSON_SCHEMA_VERSION 1
struct sp_out;
void sp_cli_json_head(struct sp_out *x, const char *cmd);

/* A progress line on stderr for long reads: call it as reading goes (it looks at the clock only
 * every 4096 calls). Only when stderr is a terminal, and only once the command has run for more
 * than a second: "\rstepprof CMD: reading the trace: 43% of 1.20GiB", at most 5 times a second; the
 * line is erased when the command exits. STEPPROF_NO_PROGRESS=1 turns it off;
 * STEPPROF_PROGRESS_AFTER=SECONDS changes the one second (tests). This function can't fail. */
struct sp_trace_reader;
void sp_cli_progress(const struct sp_trace_reader *r);

/* The configuration a command reads, as the profiled process reads it: the built-in defaults,
 * file (NULL: $STEPPROF_CONFIG, if set), the STEPPROF_* environment, then each of sets[0..nsets)
 * as the user typed it ("--set SECTION.KEY=VALUE", "--ranks LIST" for ranks.ranks, or a bare
 * "[SECTION.]KEY=VALUE" where section names the default section; NULL: a section is needed; a
 * [schedule] key goes to section when it names a phase, as schedule --phase wants), then
 * the rules between keys. An error about a setting names it as typed. Returns the number of errors,
 * kept in errs. This function can't fail. */
struct sp_config;
struct sp_cfg_errors;
int sp_cli_config(struct sp_config *cfg, const char *file, char *const *sets, int nsets, const char *section,
		  struct sp_cfg_errors *errs);
/* Splits one of sp_cli_config's sets into section, key and value. Returns 0, or -1 when it is not
 * [SECTION.]KEY=VALUE (a section needed where section is NULL). This function can't fail. */
int sp_cli_set_split(const char *typed, const char *section, char *sec, size_t slen, char *key, size_t klen,
		     const char **value);
/* Every error of errs on stderr, one a line, with the prefix "stepprof CMD: ". Can't fail. */
void sp_cli_config_errors(const char *cmd, const struct sp_cfg_errors *errs);

/* The running command's name, for messages (set by main). */
extern const char *sp_cli_cmd;

/* argv[0] of the stepprof binary as invoked (for locating the library beside it). */
extern const char *sp_cli_argv0;

#endif
