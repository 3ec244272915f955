/* SPDX-License-Identifier: MIT */
/* cmd_convert.c - `stepprof convert`: turns a trace into one viewer file per recorded window
 * (or one for all with --merge), streaming: the trace is read once, one window in memory.
 * Owns the argument parsing and the output file names; the format is the exporter's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "export.h"

struct convert_opts {
	const char *trace;
	const char *out;        /* -o, or NULL */
	int merge;              /* all windows in one file */
	int wall;               /* wall-clock times */
	long long window;       /* only this window id, or -1 */
	const struct sp_export_ops *ops;
};

static int usage(void)
{
	fprintf(stderr, "usage: stepprof convert TRACE [-o OUT[.json|.json.gz]] [--merge] [--wall] [--window N]"
			" [--format chrome]\n"
			"  writes OUT.w<ID>.json per recorded window (OUT defaults to TRACE without .sptrace);\n"
			"  --merge: all windows in OUT.json on the wall clock; '-o -' writes stdout (implies --merge)\n");
	return 2;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* Splits the output name into stem and extension (the format's suffix, plus ".gz" if asked):
 * "run.json.gz" -> "run" + ".json.gz"; "run" -> "run" + ".json". Exits if memory runs out. */
static void out_name(const struct convert_opts *o, char **stem, char **ext)
{
	const char *suffix = o->ops->suffix;
	char *s;
	int gz;

	if (o->out) {
		s = strdup(o->out);
	} else {
		s = strdup(o->trace);
		if (s && ends_with(s, ".sptrace"))
			s[strlen(s) - strlen(".sptrace")] = 0;
	}
	if (!s)
		sp_oom();
	gz = ends_with(s, ".gz");
	if (gz)
		s[strlen(s) - 3] = 0;
	if (ends_with(s, suffix))
		s[strlen(s) - strlen(suffix)] = 0;
	*stem = s;
	if (asprintf(ext, "%s%s", suffix, gz ? ".gz" : "") < 0)
		sp_oom();
}

static int parse(int argc, char **argv, struct convert_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->window = -1;
	o->ops = &sp_export_chrome;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *end;
		if (!strcmp(a, "--merge")) {
			o->merge = 1;
		} else if (!strcmp(a, "--wall")) {
			o->wall = 1;
		} else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc) {
			o->out = argv[++i];
		} else if (!strcmp(a, "--window") && i + 1 < argc) {
			o->window = strtoll(argv[++i], &end, 10);
			if (*end || o->window < 0 || end == argv[i]) {
				fprintf(stderr, "stepprof convert: --window wants a window id, not '%s'\n", argv[i]);
				return usage();
			}
		} else if (!strcmp(a, "--format") && i + 1 < argc) {
			o->ops = sp_export_find(argv[++i]);
			if (!o->ops) {
				fprintf(stderr, "stepprof convert: unknown format '%s' (known: chrome)\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			return 1;
		} else if (a[0] == '-' || o->trace) {
			fprintf(stderr, "stepprof convert: unexpected argument '%s'\n", a);
			return usage();
		} else {
			o->trace = a;
		}
	}
	if (!o->trace)
		return usage();
	if (o->out && !strcmp(o->out, "-"))
		o->merge = 1;
	if (o->merge)
		o->wall = 1;
	return 0;
}

/* Ends the file of x: the exporter's end, then close (kept only if all went well). */
static int finish(struct sp_export *x, int failed)
{
	failed |= x->ops->end(x) != 0;
	failed |= sp_out_close(x->out, !failed) != 0;
	x->out = NULL;
	return failed;
}

int sp_cmd_convert(int argc, char **argv)
{
	struct convert_opts o;
	struct sp_trace_reader *r;
	struct sp_windows *g;
	const struct sp_window *w;
	struct sp_export x;
	char err[256], *stem, *ext, *path = NULL;
	int rc = 0, failed = 0, nwin = 0, ret;

	if ((ret = parse(argc, argv, &o)))
		return ret == 1 ? 0 : ret;
	r = sp_trace_open(o.trace, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "stepprof convert: %s\n", err);
		return 1;
	}
	out_name(&o, &stem, &ext);
	g = sp_windows_open(r);
	x = (struct sp_export){ .ops = o.ops, .r = r, .hdr = sp_trace_header(r), .g = g, .source = o.trace,
				.wall = o.wall };

	while (!failed && (rc = sp_windows_next(g, &w)) == 1) {
		if (o.window >= 0 && w->id != o.window)
			continue;
		if (!x.out) {
			free(path);
			if (o.out && !strcmp(o.out, "-"))
				path = strdup("-");
			else if (o.merge ? asprintf(&path, "%s%s", stem, ext) < 0
					 : asprintf(&path, "%s.w%u%s", stem, w->id, ext) < 0)
				path = NULL;
			if (!path)
				sp_oom();
			x.out = sp_out_open(path, err, sizeof(err));
			x.events = 0;
			if (!x.out) {
				fprintf(stderr, "stepprof convert: %s\n", err);
				failed = 1;
				break;
			}
			if (x.ops->begin(&x)) {
				sp_out_close(x.out, 0);
				x.out = NULL;
				failed = 1;
				break;
			}
		}
		failed |= x.ops->window(&x, w) != 0;
		nwin++;
		if (!o.merge) {
			failed |= finish(&x, failed);
			if (!failed)
				fprintf(stderr, "wrote %s: window %u, steps %lld-%lld, %llu events%s\n", path, w->id,
					(long long)w->first_step, (long long)w->last_step, (unsigned long long)x.events,
					w->complete ? "" : " (incomplete)");
		}
	}
	if (x.out) {
		failed |= finish(&x, failed);
		if (!failed)
			fprintf(stderr, "wrote %s: %d window%s, %llu events\n", path, nwin, nwin == 1 ? "" : "s",
				(unsigned long long)x.events);
	}
	if (!failed && rc < 0) {
		fprintf(stderr, "stepprof convert: %s: %s\n", o.trace, sp_trace_error(r));
		failed = 1;
	} else if (!failed && !nwin) {
		if (o.window >= 0)
			fprintf(stderr, "stepprof convert: %s has no window %lld\n", o.trace, o.window);
		else
			fprintf(stderr, "stepprof convert: %s holds no recorded window\n", o.trace);
		failed = 1;
	} else if (sp_trace_truncated(r)) {
		fprintf(stderr, "stepprof convert: note: %s was cut short; what followed the cut is lost\n", o.trace);
	}
	free(path);
	free(stem);
	free(ext);
	sp_windows_close(g);
	sp_trace_close_reader(r);
	return failed;
}
