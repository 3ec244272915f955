/* SPDX-License-Identifier: MIT */
/* cmd_run.c - `stepprof run [--config FILE] [--out DIR] [--ranks LIST] [--set SECTION.KEY=VALUE]
 * ... [--] CMD ...`: checks the configuration, puts libstepprof.so (libstepprof-nomalloc.so when
 * host_malloc is off) in front of CMD (LD_PRELOAD and the CUDA injection hook), runs it, and
 * returns its exit status; then names the trace files
 * that appeared. Like `nsys profile`. --set and --ranks become STEPPROF_<SECTION>_<KEY>
 * variables, so every process of the job (launcher, workers) reads the same settings. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "opts.h"
#include "util.h"
#include "config/config.h"
#include "config/run.h"

/* ld.so splits LD_PRELOAD at spaces and colons and knows no quoting, so a library path holding
 * one can't be preloaded as it is. Makes a private directory (mkdtemp, 0700) in $TMPDIR (or
 * /tmp) holding a link "lib" to the library's directory (so that the library's $ORIGIN run path
 * still finds what sits beside it) and writes the path through it to via. Returns 0 (*tmpdir
 * set: remove it with drop_link), or -1 with a message printed. */
static int link_library(const char *lib, char *tmpdir, size_t tlen, char *via, size_t vlen)
{
	char dir[PATH_MAX];
	const char *t = getenv("TMPDIR"), *base = strrchr(lib, '/');
	if (!t || !*t || strpbrk(t, " \t\n:"))
		t = "/tmp";
	snprintf(dir, sizeof dir, "%.*s", base ? (int)(base - lib) : 1, base ? lib : ".");
	snprintf(tmpdir, tlen, "%.200s/stepprof-run.XXXXXX", t);
	if (!mkdtemp(tmpdir)) {
		fprintf(stderr,
			"stepprof run: %s holds a space or a colon, which LD_PRELOAD cannot hold, and no "
			"private link could be made in %s: %s\n",
			lib, t, strerror(errno));
		return -1;
	}
	snprintf(via, vlen, "%.230s/lib/%.255s", tmpdir, base ? base + 1 : lib);
	char link[PATH_MAX + 8];
	snprintf(link, sizeof link, "%s/lib", tmpdir);
	if (symlink(dir, link) < 0) {
		fprintf(stderr, "stepprof run: cannot link %s: %s\n", link, strerror(errno));
		rmdir(tmpdir);
		return -1;
	}
	return 0;
}

/* Removes what link_library made. This function can't fail. */
static void drop_link(const char *tmpdir)
{
	char link[PATH_MAX + 8];
	snprintf(link, sizeof link, "%s/lib", tmpdir);
	unlink(link);
	rmdir(tmpdir);
}

/* Finds the library `name` beside the binary (build/) or in ../lib (dist/). Returns 0 or -1. */
static int find_library(const char *name, char *out, size_t len)
{
	char exe[PATH_MAX], dir[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	snprintf(dir, sizeof dir, "%.*s", (int)sizeof dir - 1, dirname(exe));
	const char *cands[] = { "%s/%s", "%s/../lib/%s" };
	for (size_t i = 0; i < 2; i++) {
		snprintf(out, len, cands[i], dir, name);
		if (access(out, R_OK) == 0) {
			char real[PATH_MAX];
			if (realpath(out, real))
				snprintf(out, len, "%s", real);
			return 0;
		}
	}
	return -1;
}

/* Prints the traces under dir (recursively, one level of template subdirectories) newer than since. */
static int list_traces(const char *dir, time_t since, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char p[PATH_MAX];
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		if (stat(p, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth < 3)
			n += list_traces(p, since, depth + 1);
		else if (S_ISREG(st.st_mode) && st.st_mtime >= since && strstr(e->d_name, ".sptrace")) {
			fprintf(stderr, "stepprof run: trace %s (%lld bytes)\n", p, (long long)st.st_size);
			n++;
		}
	}
	closedir(d);
	return n;
}

const struct sp_cmd_spec sp_spec_run = {
	.name = "run",
	.fn = sp_cmd_run,
	.operands = "[--] CMD [ARGS...]",
	.complete = "CMD",
	.summary = "profile CMD: checks the configuration, preloads stepprof, lists the traces",
	.text = "  Runs CMD with stepprof preloaded; every process it starts shares one run id (" SP_RUN_ENV "),\n"
		"  so one run writes one folder (default output: stepprof-traces/{run}). Options come before\n"
		"  CMD. e.g. stepprof run --ranks 0,7 --set schedule.wait=20 -- torchrun ...\n",
	.stop_at_operand = 1,
	.opt = (const struct sp_opt[]){
		{ "config", 'c', 'c', "INI", "the configuration file" },
		{ "output", 'o', 'o', "DIR", "the output directory ([profile] output)" },
		{ "out", 'o', 0, "DIR", NULL },
		{ "set", 's', 0, "SECTION.KEY=VALUE", "override one key (repeatable): STEPPROF_SECTION_KEY for every process" },
		{ "ranks", 'r', 0, "LIST", "short for --set ranks.ranks=LIST" },
		{ 0 } },
};

/* Prints the usage to f and returns rc. */
static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_run, f);
	return rc;
}

/* Exports a setting checked by sp_cli_config as STEPPROF_<SECTION>_<KEY>, which every process
 * of the job reads. Returns 0, or -1 after a message for a phase's key (phases are set in the
 * INI file only). */
static int export_set(const char *typed)
{
	char section[64], key[64], var[160];
	const char *value;

	if (sp_cli_set_split(typed, NULL, section, sizeof section, key, sizeof key, &value) < 0)
		return -1; /* sp_cli_config said why */
	if (!strncmp(section, "phase.", 6)) {
		fprintf(stderr, "stepprof run: %s: a phase's keys are set in the INI file only\n", typed);
		return -1;
	}
	int n = snprintf(var, sizeof var, "STEPPROF_%s_%s", section, key);
	for (int k = 9; k < n && k < (int)sizeof var; k++)
		var[k] = (char)toupper((unsigned char)var[k]);
	setenv(var, value, 1);
	return 0;
}

/* Reads the options into *config, *out and sets (--set and --ranks as typed, *nsets of them); stops
 * at CMD. Returns 0, -1 after printing the help for --help, or 2 after the usage for a bad line. */
static int read_options(int argc, char **argv, const char **config, const char **out, char **sets, int *nsets)
{
	int c, bad = 0;

	/* '+': the options end at CMD (or after "--"); the rest is CMD's own */
	optind = 0;
	while (!bad && (c = sp_opts_next(&sp_spec_run, argc, argv)) != -1) {
		switch (c) {
		case 'c':
			*config = optarg;
			break;
		case 'o':
			*out = optarg;
			break;
		case 's':
		case 'r':
			if (asprintf(&sets[(*nsets)++], "%s %s", c == 's' ? "--set" : "--ranks", optarg) < 0)
				sp_oom();
			break;
		case 'h':
			usage(stdout, 0);
			bad = -1;
			break;
		default:
			bad = usage(stderr, 2);
		}
	}
	if (!bad && optind >= argc)
		bad = usage(stderr, 2);
	return bad;
}

/* Puts libstepprof.so (libstepprof-nomalloc.so without host_malloc) first in LD_PRELOAD, through
 * a private link made in tmpdir when its path holds a space or a colon (tmpdir stays "" otherwise).
 * Returns 0, or 1 with a message printed. */
static int preload_library(const struct sp_config *cfg, char *tmpdir, size_t tlen)
{
	char lib[PATH_MAX], preload[2 * PATH_MAX], via[PATH_MAX];

	/* without host_malloc, the library without malloc hooks: the program's allocator calls then
	 * reach libc directly (with the hooks, tracking off still costs a tail call per call) */
	if ((cfg->host_malloc || find_library("libstepprof-nomalloc.so", lib, sizeof lib) < 0) &&
	    find_library("libstepprof.so", lib, sizeof lib) < 0) {
		fprintf(stderr, "stepprof run: libstepprof.so not found beside %s or in ../lib\n", sp_cli_argv0);
		return 1;
	}
	if (strpbrk(lib, " \t\n:")) { /* see link_library */
		if (link_library(lib, tmpdir, tlen, via, sizeof via) < 0)
			return 1;
		snprintf(lib, sizeof lib, "%s", via);
	}
	const char *old = getenv("LD_PRELOAD");
	if (old && (strstr(old, "libasan") || strstr(old, "libtsan") || strstr(old, "libhwasan")))
		snprintf(preload, sizeof preload, "%s %s", old, lib); /* a sanitizer runtime must stay first */
	else
		snprintf(preload, sizeof preload, "%s%s%s", lib, old && *old ? " " : "", old && *old ? old : "");
	setenv("LD_PRELOAD", preload, 1);
	return 0;
}

/* Runs cmd and waits for it, then removes tmpdir's link (if any). Returns 0 with its wait status in
 * *st, or what stepprof run exits with after a message: 1 (no pipe or fork), 127 (cmd not found),
 * 126 (cmd found but not run). */
static int run_command(char **cmd, const char *tmpdir, int *st)
{
	int ep[2]; /* the child's exec errno, if exec fails (closed on a successful exec) */
	if (pipe2(ep, O_CLOEXEC) < 0) {
		perror("stepprof run: pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("stepprof run: fork");
		if (tmpdir[0])
			drop_link(tmpdir);
		return 1;
	}
	if (pid == 0) {
		close(ep[0]);
		execvp(cmd[0], cmd);
		int e = errno;
		if (write(ep[1], &e, sizeof e) < 0)
			_exit(127);
		_exit(127);
	}
	close(ep[1]);
	int exec_errno = 0;
	*st = 0;
	while (read(ep[0], &exec_errno, sizeof exec_errno) < 0 && errno == EINTR)
		;
	close(ep[0]);
	while (waitpid(pid, st, 0) < 0 && errno == EINTR)
		;
	if (tmpdir[0])
		drop_link(tmpdir);
	if (exec_errno) {
		fprintf(stderr, "stepprof run: cannot run '%s': %s\n", cmd[0], strerror(exec_errno));
		return exec_errno == ENOENT ? 127 : 126;
	}
	return 0;
}

/* Names the traces written since start under the output template's first fixed directory, and the
 * run's folder when the template makes one; or says why there is none. This function can't fail. */
static void say_traces(const struct sp_config *cfg, time_t start, const char *run, const char *how)
{
	char dir[SP_CFG_PATH];
	snprintf(dir, sizeof dir, "%s", cfg->output);
	char *brace = strchr(dir, '{');
	if (brace) {
		*brace = 0;
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = 0;
		else
			snprintf(dir, sizeof dir, ".");
	}
	char folder[SP_CFG_PATH];
	bool one = !strstr(cfg->output, "{pid}") && !strstr(cfg->output, "{rank}") && !strstr(cfg->output, "{host}") &&
		   !sp_cfg_expand(cfg->output, NULL, folder, sizeof folder);
	struct stat dst;
	int there = stat(dir[0] ? dir : ".", &dst) == 0;
	if (there && !S_ISDIR(dst.st_mode)) /* the output failed, not the schedule */
		fprintf(stderr, "stepprof run: no trace written: the output directory %s is not a directory\n",
			dir[0] ? dir : ".");
	else if (!there) /* the collector makes it when it opens a trace */
		fprintf(stderr,
			"stepprof run: no trace written: no process made the output directory %s (no CUDA, rank "
			"not selected, no step recorded, or the stepprof: lines above say why)\n",
			dir[0] ? dir : ".");
	else if (!list_traces(dir[0] ? dir : ".", start, 0))
		fprintf(stderr,
			"stepprof run: no trace written under %s (no CUDA, rank not selected, or no step "
			"recorded: see the schedule with 'stepprof schedule')\n",
			dir[0] ? dir : ".");
	else if (one)
		fprintf(stderr, "stepprof run: run %s (from the %s): %s/\n", run, how, folder);
}

int sp_cmd_run(int argc, char **argv)
{
	const char *config = NULL, *out = NULL;
	char abs[PATH_MAX];
	struct sp_config cfg;
	struct sp_cfg_errors errs = { 0 };
	char **sets = calloc((size_t)argc + 1, sizeof(*sets)); /* --set and --ranks as typed */
	int nsets = 0, bad;

	if (!sets)
		sp_oom();
	bad = read_options(argc, argv, &config, &out, sets, &nsets);
	if (!bad && config) {
		if (!realpath(config, abs)) {
			fprintf(stderr, "stepprof run: %s: %s\n", config, strerror(errno));
			bad = 2;
		} else {
			setenv("STEPPROF_CONFIG", abs, 1);
		}
	}
	if (!bad && out)
		setenv("STEPPROF_PROFILE_OUTPUT", out, 1);
	/* checked as the processes will read it, each --set named as typed; then exported */
	if (!bad && sp_cli_config(&cfg, NULL, sets, nsets, NULL, &errs) > 0) {
		sp_cli_config_errors("run", &errs);
		bad = 2;
	}
	for (int i = 0; i < nsets; i++) {
		if (!bad && export_set(sets[i]) < 0)
			bad = 2;
		free(sets[i]);
	}
	free(sets);
	if (bad)
		return bad < 0 ? 0 : bad;
	char tmpdir[PATH_MAX] = "";
	if (preload_library(&cfg, tmpdir, sizeof tmpdir))
		return 1;
	/* one id for every process of the run (a launcher's workers included): one folder */
	char run[SP_RUN_ID_MAX];
	const char *how;
	sp_run_id(run, sizeof run, &how);
	setenv(SP_RUN_ENV, run, 1);
	time_t start = time(NULL);
	int st, rc = run_command(argv + optind, tmpdir, &st);
	if (rc)
		return rc;
	say_traces(&cfg, start, run, how);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
