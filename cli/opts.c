/* SPDX-License-Identifier: MIT */
/* opts.c - the option tables of opts.h turned into getopt_long's list, --help and completion
 * lines, and the parsers of the grammar the commands share. Prints only to stderr (and to the
 * stream --help or --complete is given); never exits. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli.h"
#include "opts.h"

#define MAX_OPTS 40 /* options of one command, --help included */
#define HELP_COLUMN 30 /* where an option's help starts in --help */
#define HELP_WRAP 96 /* where a long list of values wraps */

const struct sp_cmd_spec *const sp_cmd_specs[] = {
	&sp_spec_run,  &sp_spec_check, &sp_spec_schedule, &sp_spec_report,   &sp_spec_convert, &sp_spec_dump,
	&sp_spec_memory, &sp_spec_diff, &sp_spec_steps, &sp_spec_autostep, &sp_spec_trigger, &sp_spec_stacks,
	NULL,
};

int sp_opts_next(const struct sp_cmd_spec *c, int argc, char **argv)
{
	struct option lo[MAX_OPTS + 1];
	char so[2 * MAX_OPTS + 4];
	size_t n = 0, k = 0;
	int r;

	opterr = 0;
	if (c->stop_at_operand)
		so[k++] = '+';
	so[k++] = ':';
	so[k++] = 'h';
	for (const struct sp_opt *o = c->opt; o->name && n < MAX_OPTS - 1; o++) {
		lo[n++] = (struct option){ o->name, o->arg ? required_argument : no_argument, NULL, o->key };
		if (o->letter) {
			so[k++] = o->letter;
			if (o->arg)
				so[k++] = ':';
		}
	}
	lo[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[n] = (struct option){ 0 };
	so[k] = 0;
	r = getopt_long(argc, argv, so, lo, NULL);
	if (r == '?' || r == ':') {
		sp_cli_bad_option(c->name, r, argc, argv);
		return '?';
	}
	return r;
}

static const struct sp_opt *find(const struct sp_cmd_spec *c, int key)
{
	for (const struct sp_opt *o = c->opt; o->name; o++)
		if (o->key == key)
			return o;
	return NULL;
}

/* One line of --help: "  -o, --output FILE" (or "      --json") and the help, in the column; a
 * long list of values is wrapped at its '|'. */
static void usage_line(FILE *f, char letter, const char *name, const char *arg, const char *help)
{
	int n = fprintf(f, "  %c%c%c --%s%s", letter ? '-' : ' ', letter ? letter : ' ', letter ? ',' : ' ', name,
			arg ? " " : "");

	for (const char *p = arg; p && *p;) {
		int len = (int)strcspn(p + 1, "|") + 1;
		if (n + len > HELP_WRAP) {
			fprintf(f, "\n%*s", HELP_COLUMN - 4, "");
			n = HELP_COLUMN - 4;
		}
		n += fprintf(f, "%.*s", len, p);
		p += len;
	}
	if (n < HELP_COLUMN - 1)
		fprintf(f, "%*s%s\n", HELP_COLUMN - n, "", help);
	else
		fprintf(f, "\n%*s%s\n", HELP_COLUMN, "", help);
}

void sp_opts_usage(const struct sp_cmd_spec *c, FILE *f)
{
	fprintf(f, "usage: stepprof %s [OPTIONS] %s\n%s", c->name, c->operands, c->text);
	fprintf(f, "options:\n");
	for (const struct sp_opt *o = c->opt; o->name; o++)
		if (o->help) /* else an old name */
			usage_line(f, o->letter, o->name, o->arg, o->help);
	usage_line(f, 'h', "help", NULL, "print this help");
}

int sp_opts_choice(const struct sp_cmd_spec *c, int key, const char *val)
{
	const struct sp_opt *o = find(c, key);
	const char *p = o && o->arg ? o->arg : "";
	size_t n = strlen(val);
	int i = 0;

	for (const char *q = p; *q; i++) {
		size_t len = strcspn(q, "|");
		if (len == n && !strncmp(q, val, n))
			return i;
		q += len + (q[len] == '|');
	}
	fprintf(stderr, "stepprof %s: --%s wants ", c->name, o ? o->name : "?");
	for (int k = 0; *p; k++) {
		size_t len = strcspn(p, "|");
		fprintf(stderr, "%s%.*s", !k ? "" : p[len] ? ", " : " or ", (int)len, p);
		p += len + (p[len] == '|');
	}
	fprintf(stderr, ", not '%s'\n", val);
	return -1;
}

int sp_opts_complete(const char *cmd, FILE *f)
{
	for (size_t i = 0; sp_cmd_specs[i]; i++) {
		const struct sp_cmd_spec *c = sp_cmd_specs[i];
		if (!cmd) {
			fprintf(f, "%s\n", c->name);
			continue;
		}
		if (strcmp(cmd, c->name))
			continue;
		fprintf(f, "operands %s\n", c->complete[0] ? c->complete : "-");
		for (const struct sp_opt *o = c->opt; o->name; o++)
			if (o->help)
				fprintf(f, "--%s %s\n", o->name, o->arg ? o->arg : "-");
		fprintf(f, "--help -\n");
		return 0;
	}
	if (!cmd)
		return 0;
	fprintf(stderr, "stepprof: --complete: unknown command '%s'\n", cmd);
	return 2;
}

/* A decimal number of at most 18 digits at s: returns its end, or NULL. */
static const char *number(const char *s, int64_t *v)
{
	char *end;
	if (*s < '0' || *s > '9' || strspn(s, "0123456789") > 18)
		return NULL;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return errno ? NULL : end;
}

int sp_opts_steps(const char *cmd, const char *arg, int64_t *lo, int64_t *hi)
{
	int64_t a, b;
	const char *p = number(arg, &a);

	if (p && !*p) {
		*lo = *hi = a;
		return 0;
	}
	if (p && *p == '-' && !p[1]) {
		*lo = a, *hi = INT64_MAX;
		return 0;
	}
	if (p && *p == '-' && (p = number(p + 1, &b)) && !*p && b >= a) {
		*lo = a, *hi = b;
		return 0;
	}
	fprintf(stderr, "stepprof %s: --steps wants A, A-B or A- (step numbers, A <= B), not '%s'\n", cmd, arg);
	return -1;
}

int sp_opts_count(const char *cmd, const char *name, const char *arg, long long min, long long max, long long *v)
{
	int64_t x;
	const char *p = number(arg, &x);

	if (p && !*p && x >= min && x <= max) {
		*v = x;
		return 0;
	}
	fprintf(stderr, "stepprof %s: --%s wants a number from %lld to %lld, not '%s'\n", cmd, name, min, max, arg);
	return -1;
}

int sp_opts_is_dir(const char *path)
{
	struct stat st;
	size_t n = strlen(path);

	return (n && path[n - 1] == '/') || (!stat(path, &st) && S_ISDIR(st.st_mode));
}

int sp_opts_make_dir(const char *cmd, const char *dir)
{
	char path[4096];
	size_t n = strlen(dir);

	if (n >= sizeof path) {
		fprintf(stderr, "stepprof %s: cannot create %s: name too long\n", cmd, dir);
		return -1;
	}
	memcpy(path, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i])
			continue;
		char c = path[i];
		path[i] = 0;
		if (mkdir(path, 0777) < 0 && errno != EEXIST) {
			fprintf(stderr, "stepprof %s: cannot create %s: %s\n", cmd, path, strerror(errno));
			return -1;
		}
		path[i] = c;
	}
	return 0;
}
