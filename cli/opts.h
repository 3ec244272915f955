/* SPDX-License-Identifier: MIT */
/* opts.h - every command's options as one table: getopt_long's list, the --help text and what
 * bash completion offers (`stepprof --complete`) are all made from it, so they cannot disagree;
 * and the parsers of the grammar the commands share (step ranges, counts, -o DIR/). Prints only
 * to stderr, never exits. */
#ifndef SP_OPTS_H
#define SP_OPTS_H

#include <stdint.h>
#include <stdio.h>

/* A number macro as a string literal, for help texts: SP_STR(SP_REPORT_TOP) is "30". */
#define SP_STR_(x) #x
#define SP_STR(x) SP_STR_(x)

/* One option of a command. */
struct sp_opt {
	const char *name;       /* long name, without "--" */
	int key;                /* what sp_opts_next returns for it */
	char letter;            /* short form (-o), or 0 */
	const char *arg;        /* NULL: takes no value; else its metavar (N, FILE, TRACE, INI, DIR,
				   NAME, A[-B], ...) or the values it takes, '|'-separated */
	const char *help;       /* one line for --help; NULL: an old name, still accepted, neither
				   shown nor offered */
};

/* One command: its options and what --help says of it. */
struct sp_cmd_spec {
	const char *name;       /* "report" */
	int (*fn)(int argc, char **argv); /* the command (cli.h) */
	const char *operands;   /* the usage line's operands: "TRACE", "BASE NEW", "-- CMD [ARGS...]" */
	const char *complete;   /* what its operands complete to: TRACE, INI, FILE, CMD or "" */
	const char *summary;    /* one line for `stepprof --help` */
	const char *text;       /* the rest of --help: what it does (lines of two-space indent) */
	int stop_at_operand;    /* options end at the first operand (run: CMD's own options follow) */
	const struct sp_opt *opt; /* ends with a { 0 } entry */
};

/* Each command's table (cli/cmd_<name>.c), and all of them in the order `stepprof --help`
 * lists them; sp_cmd_specs ends with NULL. */
extern const struct sp_cmd_spec sp_spec_run, sp_spec_check, sp_spec_schedule, sp_spec_report, sp_spec_convert,
	sp_spec_dump, sp_spec_memory, sp_spec_diff, sp_spec_steps, sp_spec_autostep, sp_spec_trigger,
	sp_spec_stacks;
extern const struct sp_cmd_spec *const sp_cmd_specs[];

/* Call with optind = 0 before the first call (glibc's full reinitialisation: the tests run
 * several commands in one process). getopt_long over c's table: returns the next option's key
 * (optarg set for one that takes a value), 'h' for -h/--help, -1 when the options end, or '?'
 * after "stepprof CMD: unexpected argument 'X'" or "stepprof CMD: option 'X' wants a value" on
 * stderr. This function can't fail. */
int sp_opts_next(const struct sp_cmd_spec *c, int argc, char **argv);

/* --help: "usage: stepprof CMD [OPTIONS] OPERANDS", the command's text and one line per option,
 * to f. This function can't fail. */
void sp_opts_usage(const struct sp_cmd_spec *c, FILE *f);

/* For an option whose arg lists its values: the index of val among them, or -1 after
 * "stepprof CMD: --NAME wants A, B or C, not 'VAL'" on stderr. This function can't fail. */
int sp_opts_choice(const struct sp_cmd_spec *c, int key, const char *val);

/* What bash completion reads (scripts/stepprof-completion.bash): with cmd NULL the commands, one
 * a line; else "operands KIND" and one line per shown option, "--NAME ARG" (ARG "-" when it takes
 * no value). Returns 0, or 2 after a message for an unknown command. */
int sp_opts_complete(const char *cmd, FILE *f);

/* --steps A, A-B or A- (step numbers; A- runs to INT64_MAX), the same in every command. Returns
 * 0 with *lo, *hi set, or -1 after "stepprof CMD: --steps wants A, A-B or A- (step numbers),
 * not 'ARG'" on stderr. */
int sp_opts_steps(const char *cmd, const char *arg, int64_t *lo, int64_t *hi);

/* A count such as --top N, --count N: a decimal integer in min..max. Returns 0 with *v set, or
 * -1 after "stepprof CMD: --NAME wants a number from MIN to MAX, not 'ARG'" on stderr. */
int sp_opts_count(const char *cmd, const char *name, const char *arg, long long min, long long max, long long *v);

/* -o PATH naming a folder (it ends in '/' or is an existing directory): 1, else 0. Can't fail. */
int sp_opts_is_dir(const char *path);

/* Creates the folder dir of -o DIR/ and its parents, as torch's trace handler does. Returns 0, or
 * -1 after "stepprof CMD: cannot create DIR: reason" on stderr. */
int sp_opts_make_dir(const char *cmd, const char *dir);

#endif
