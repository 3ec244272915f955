/* SPDX-License-Identifier: MIT */
/* cmd_convert.c - `stepprof convert`: turns a trace into one viewer file per recorded window
 * (or one for all with --merge), streaming: a window's events are read in passes (windows.h),
 * never held. --merge-ranks writes several ranks' traces into one file, a window of each at a time.
 * Owns the argument parsing and the output file names; the format is the exporter's. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "opts.h"
#include "export.h"
#include "crossrank.h"
#include "commstats.h"
#include "steps.h"

struct convert_opts {
	const char *trace;
	const char *out;        /* -o, or NULL */
	const char *out_dir;    /* -o DIR/: the default names inside it, or NULL */
	int merge;              /* all windows in one file */
	int wall;               /* wall-clock times */
	long long window;       /* only this window id, or -1 */
	const char *phase;      /* only the windows of this phase, or NULL */
	int steps;              /* --steps given: only steps step_lo..step_hi */
	int64_t step_lo, step_hi;
	const struct sp_export_ops *ops;
	int merge_ranks;        /* traces[0..ntraces) in one file */
	char **traces;          /* in argv */
	int ntraces;
};

/* A window cut to the steps of --steps (one per trace being read). */
struct slice {
	struct sp_window w;     /* the cut */
	const struct convert_opts *o;
	struct sp_windows *g;   /* its window's passes, restricted to the cut */
	uint64_t s0, s1;        /* the span of its steps */
};

static int step_wanted(const struct convert_opts *o, const struct sp_event *e)
{
	return e->kind == SP_EV_STEP && e->u.step.number >= o->step_lo && e->u.step.number <= o->step_hi;
}

/* 1 for an event of the cut: its steps, the CPU records that start inside them, the GPU work
 * their calls launched (placed by sp_windows_anchor, the rule of the report's per-step rows) and
 * the window's drop records. */
static int in_cut(void *ctx, const struct sp_event *e)
{
	const struct slice *s = ctx;
	if (e->kind == SP_EV_STEP)
		return step_wanted(s->o, e);
	if (e->kind == SP_EV_DROPPED)
		return 1;
	uint64_t at = sp_ev_is_gpu(e) ? sp_windows_anchor(s->g, e) : e->start;
	return at >= s->s0 && at < s->s1;
}

static void cut_end(void *ctx, const struct sp_event *e)
{
	struct slice *s = ctx;
	if (e->end > s->w.t1)
		s->w.t1 = e->end; /* GPU work launched late in the last step ends after it */
}

/* Window w (the one g handed out last) cut to the steps --steps selects (in_cut). Returns w itself
 * without --steps, the cut (in s, valid until the next call; g's passes restricted to it) or NULL
 * if w holds none of the steps. Exits the CLI if memory runs out. */
static const struct sp_window *cut(const struct convert_opts *o, struct sp_windows *g, const struct sp_window *w,
				   struct slice *s)
{
	uint64_t s0 = UINT64_MAX, s1 = 0;
	int64_t first = INT64_MAX, last = INT64_MIN;

	if (!o->steps)
		return w;
	for (size_t i = 0; i < w->nsteps; i++) {
		const struct sp_event *e = &w->steps[i];
		if (!step_wanted(o, e))
			continue;
		s0 = e->start < s0 ? e->start : s0;
		s1 = e->end > s1 ? e->end : s1;
		first = e->u.step.number < first ? e->u.step.number : first;
		last = e->u.step.number > last ? e->u.step.number : last;
	}
	if (first == INT64_MAX)
		return NULL;
	*s = (struct slice){ .w = *w, .o = o, .g = g, .s0 = s0, .s1 = s1 };
	s->w.first_step = first;
	s->w.last_step = last;
	s->w.t0 = s0;
	s->w.t1 = s1;
	sp_windows_restrict(g, in_cut, s);
	sp_windows_each(g, cut_end, s);
	return &s->w;
}

struct rank_in {                /* one trace of --merge-ranks */
	const char *path;
	struct sp_trace_reader *r;
	struct sp_windows *g;
	const struct sp_window *w; /* its next window to write, NULL when none is left */
	int rc;   /* the last sp_windows_next result */
	int seen;               /* windows selected so far */
	struct slice sl;        /* w cut to --steps */
	int64_t key;            /* rank, or pid if it has none */
};

const struct sp_cmd_spec sp_spec_convert = {
	.name = "convert",
	.fn = sp_cmd_convert,
	.operands = "TRACE | --merge-ranks -o FILE TRACE TRACE ...",
	.complete = "TRACE",
	.summary = "Chrome/Perfetto JSON laid out as torch.profiler's (HTA, TensorBoard, Perfetto)",
	.text = "  Writes torch.profiler-style Chrome JSON (HTA, TensorBoard, Perfetto open it), one file per\n"
		"  recorded window, into the current directory: STEM.<window id>.pt.trace.json.gz, STEM being\n"
		"  TRACE's file name without .sptrace (a phase's windows go into a folder of the phase's name).\n"
		"  -o FILE with a single window (or --window N, --steps) writes exactly FILE; with several,\n"
		"  STEM is FILE without .pt.trace.json[.gz] or .json[.gz] (plain JSON if FILE does not end in\n"
		"  .gz); -o DIR/ writes the default names inside DIR (made if missing); '-o -' writes stdout.\n"
		"  --merge-ranks: every trace's windows in FILE on one wall clock, NCCL collectives linked\n"
		"  across ranks.\n",
	.opt = (const struct sp_opt[]){
		{ "output", 'o', 'o', "FILE|DIR/", "the file, or the folder for the default names" },
		{ "window", 'w', 0, "N|all", "only window N (default all)" },
		{ "steps", 's', 0, "A[-B]", "only steps A-B (A-: from A on) of each window, with the GPU work they launched" },
		{ "phase", 'P', 0, "NAME", "only the windows of [phase.NAME]" },
		{ "merge", 'm', 0, NULL, "all windows in one file, on the wall clock" },
		{ "merge-ranks", 'M', 0, NULL, "several ranks' traces of one run in one file (needs -o)" },
		{ "wall", 'W', 0, NULL, "wall-clock times (default: the trace's clock from the window's start)" },
		{ "format", 'f', 0, "chrome", "the output format" },
		{ 0 } },
};

/* Prints the usage to f and returns rc. */
static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_convert, f);
	return rc;
}

/* Splits the output name into stem and extension: the extension is the format's suffix
 * (".pt.trace.json", the name torch.profiler's files have and the TensorBoard plugin looks for)
 * plus ".gz" unless -o names a plain file: "run.json.gz" -> "run" + ".pt.trace.json.gz",
 * "run.json" -> "run" + ".pt.trace.json", TRACE.sptrace -> "TRACE" + ".pt.trace.json.gz" (in
 * the current directory, or in -o DIR/). Exits if memory runs out. */
static void out_name(const struct convert_opts *o, char **stem, char **ext)
{
	const char *suffix = o->ops->suffix;
	char *s;
	int gz = 1;

	if (!o->out || o->out_dir) {
		s = sp_cli_out_path(o->out, o->trace, "");
	} else {
		s = sp_xstrdup(o->out);
		gz = sp_cli_ends_with(s, ".gz");
		if (gz)
			s[strlen(s) - 3] = 0;
		if (sp_cli_ends_with(s, suffix))
			s[strlen(s) - strlen(suffix)] = 0;
		else if (sp_cli_ends_with(s, ".json"))
			s[strlen(s) - strlen(".json")] = 0;
	}
	*stem = s;
	if (asprintf(ext, "%s%s", suffix, gz ? ".gz" : "") < 0)
		sp_oom();
}

/* Progress on stderr while a conversion runs: a line rewritten in place, from one second on,
 * only if stderr is a terminal; after the reader's own line (sp_cli_progress) while the trace is
 * read, with the same settings: STEPPROF_NO_PROGRESS=1 turns it off, STEPPROF_PROGRESS_AFTER
 * moves the second (tests/e2e/cli_convert_progress.sh). */
struct progress {
	int tty;                /* stderr is a terminal */
	double after;           /* seconds before the line may show */
	int shown;              /* a line is on screen (to be ended) */
	struct timespec t0, last;
	const char *what;       /* the trace being read */
};

static double since(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static void progress_cb(struct sp_export *x)
{
	struct progress *p = x->progress_ctx;
	struct timespec now;

	if (!p || !p->tty)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (since(&p->t0, &now) < p->after || (p->shown && since(&p->last, &now) < 0.25))
		return;
	p->last = now;
	p->shown = 1;
	fprintf(stderr, "\r\033[Kstepprof convert: %s: %llu events written, %.1f s", p->what,
		(unsigned long long)x->events, since(&p->t0, &now));
}

static void progress_start(struct progress *p, const char *what)
{
	const char *after = getenv("STEPPROF_PROGRESS_AFTER");

	p->tty = isatty(2) && !getenv("STEPPROF_NO_PROGRESS");
	p->shown = 0;
	p->after = after && *after ? atof(after) : 1.0;
	p->what = what;
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
}

/* Ends the progress line, if one may be shown (this one or the reader's), before a message. */
static void progress_done(struct progress *p)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (p->shown || (p->tty && since(&p->t0, &now) >= p->after))
		fputs("\r\033[K", stderr);
	p->shown = 0;
}

/* Fills o from the command line. Returns 0, 1 for --help (the usage printed), or 2 for a usage
 * error (printed). */
static int parse(int argc, char **argv, struct convert_opts *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->window = -1;
	o->ops = &sp_export_chrome;
	optind = 0;
	while ((c = sp_opts_next(&sp_spec_convert, argc, argv)) != -1) {
		switch (c) {
		case 'm':
			o->merge = 1;
			break;
		case 'W':
			o->wall = 1;
			break;
		case 'P':
			o->phase = optarg;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'w':
			if (sp_cli_window("convert", optarg, &o->window) < 0)
				return usage(stderr, 2);
			break;
		case 's':
			o->steps = 1;
			if (sp_opts_steps("convert", optarg, &o->step_lo, &o->step_hi) < 0)
				return usage(stderr, 2);
			break;
		case 'f':
			if (sp_opts_choice(&sp_spec_convert, c, optarg) < 0 || !(o->ops = sp_export_find(optarg)))
				return usage(stderr, 2);
			break;
		case 'M':
			o->merge_ranks = 1;
			break;
		case 'h':
			usage(stdout, 0);
			return 1;
		default:
			return usage(stderr, 2);
		}
	}
	o->traces = argv + optind;
	o->ntraces = argc - optind;
	if (!o->ntraces)
		return usage(stderr, 2);
	o->trace = o->traces[0];
	if (o->merge_ranks && !o->out) {
		fprintf(stderr, "stepprof convert: --merge-ranks needs -o FILE (or -o DIR/)\n");
		return usage(stderr, 2);
	}
	if (!o->merge_ranks && o->ntraces > 1) {
		fprintf(stderr, "stepprof convert: unexpected argument '%s' (several traces need --merge-ranks)\n",
			o->traces[1]);
		return usage(stderr, 2);
	}
	if (o->out && !strcmp(o->out, "-"))
		o->merge = 1;
	else if (o->out && sp_opts_is_dir(o->out))
		o->out_dir = o->out;
	else if (o->out && !sp_cli_ends_with(o->out, ".json") && !sp_cli_ends_with(o->out, ".json.gz"))
		fprintf(stderr,
			"stepprof convert: warning: %s gets Chrome trace JSON%s; name it .pt.trace.json.gz for "
			"TensorBoard, HTA and Perfetto\n",
			o->out, sp_cli_ends_with(o->out, ".gz") ? " (gzip)" : " (plain, not gzip: the name does not end in .gz)");
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

/* The next window of in that --window selects, cut to --steps (windows without those steps are
 * passed over), or NULL (in->rc says why; after window N was found, the rest of the file is not
 * read). */
static const struct sp_window *next_window(const struct convert_opts *o, struct rank_in *in)
{
	const struct sp_window *w;

	while (!(o->window >= 0 && in->seen) && (in->rc = sp_windows_next(in->g, &w)) == 1)
		if (o->window < 0 || w->id == o->window) {
			in->seen++;
			if ((w = cut(o, in->g, w, &in->sl)))
				return w;
		}
	return NULL;
}

/* Traces with a rank first, by rank; then the others by pid. */
static int cmp_rank_in(const void *pa, const void *pb)
{
	const struct rank_in *a = pa, *b = pb;
	int na = sp_trace_header(a->r)->meta.rank < 0, nb = sp_trace_header(b->r)->meta.rank < 0;

	return na != nb ? na - nb : (a->key > b->key) - (a->key < b->key);
}

/* Opens the traces of --merge-ranks into in, by rank; *n those opened. Returns 0, or 1 after a
 * message (one does not open, or two have the same rank). */
static int open_ranks(const struct convert_opts *o, struct rank_in *in, int *n)
{
	char err[256];

	for (; *n < o->ntraces; (*n)++) {
		struct rank_in *k = &in[*n];
		*k = (struct rank_in){ .path = o->traces[*n], .r = sp_trace_open(o->traces[*n], err, sizeof(err)) };
		if (!k->r) {
			fprintf(stderr, "stepprof convert: %s\n", err);
			return 1;
		}
		const struct sp_trace_meta *meta = &sp_trace_header(k->r)->meta;
		k->key = meta->rank >= 0 ? meta->rank : meta->pid;
		k->g = sp_windows_open(k->r);
		sp_windows_set_phase(k->g, o->phase);
	}
	int failed = 0;
	sp_sort(in, (size_t)*n, sizeof(*in), cmp_rank_in);
	for (int i = 1; i < *n; i++)
		if (in[i].key == in[i - 1].key) {
			fprintf(stderr, "stepprof convert: %s and %s are both %s %lld\n", in[i - 1].path, in[i].path,
				sp_trace_header(in[i].r)->meta.rank >= 0 ? "rank" : "pid", (long long)in[i].key);
			failed = 1;
		}
	return failed;
}

/* Writes the windows of the n traces in into x's file, a round per window id (the lowest not
 * written yet), their NCCL calls paired by m first; *nwin counts them. Returns 1 if one failed. */
static int write_rounds(const struct convert_opts *o, struct rank_in *in, int n, struct sp_export *x,
			struct sp_nccl_match *m, int *nwin)
{
	int failed = 0;

	while (!failed) {
		long long id = -1;
		for (int i = 0; i < n; i++)
			if (in[i].w && (id < 0 || in[i].w->id < id))
				id = in[i].w->id;
		if (id < 0)
			break;
		sp_nccl_match_reset(m);
		for (int i = 0; i < n; i++)
			if (in[i].w && in[i].w->id == id)
				sp_nccl_match_add(m, in[i].key, in[i].w);
		sp_nccl_match_build(m);
		for (int i = 0; i < n && !failed; i++)
			if (in[i].w && in[i].w->id == id) {
				x->r = in[i].r, x->hdr = sp_trace_header(in[i].r), x->g = in[i].g;
				x->source = in[i].path;
				failed |= x->ops->window(x, in[i].w) != 0;
				(*nwin)++;
				in[i].w = next_window(o, &in[i]);
			}
	}
	return failed;
}

/* Says per trace of --merge-ranks what was wrong with it: a corrupt chunk (returns 1: the command
 * fails, the file is kept), no window, a cut file. */
static int say_ranks(const struct convert_opts *o, const struct rank_in *in, int n)
{
	int failed = 0;

	for (int i = 0; i < n; i++) {
		if (in[i].rc < 0) {
			fprintf(stderr, "stepprof convert: %s: %s\n", in[i].path, sp_trace_error(in[i].r));
			failed = 1;
		} else if (!in[i].seen) {
			fprintf(stderr, "stepprof convert: note: %s has no window%s\n", in[i].path,
				o->window >= 0 ? " of that id" : "");
		} else if (sp_trace_truncated(in[i].r)) {
			fprintf(stderr, "stepprof convert: note: %s was cut short; what followed the cut is lost\n",
				in[i].path);
		}
	}
	return failed;
}

/* --merge-ranks: the selected windows of every trace in one file on the wall clock. Windows with
 * the same id are written together, in rank order, after their NCCL calls are paired by
 * (comm, seq); a window of each trace at a time, read in passes. Returns 0, or 1 (message on
 * stderr; also when the traces come from different runs). */
static int merge_ranks(const struct convert_opts *o)
{
	if (sp_cli_one_run("convert", o->traces, (size_t)o->ntraces))
		return 1;
	struct rank_in *in = sp_xrealloc(NULL, (size_t)o->ntraces * sizeof(*in));
	struct sp_nccl_match *m = sp_nccl_match_new();
	struct progress pr;
	struct sp_export x = { .ops = o->ops,
			       .wall = 1,
			       .match = m,
			       .merged = 1,
			       .progress = progress_cb,
			       .progress_ctx = &pr };
	char err[256], *stem, *ext, *path = NULL;
	int n = 0, failed = 0, nwin = 0;
	struct sp_xrank *arrivals = sp_xrank_new(); /* waits of NCCL kernels (ranks.h): a first pass */

	for (int i = 0; i < o->ntraces; i++)
		if (sp_xrank_load(arrivals, o->traces[i], err, sizeof(err)) < 0)
			break; /* reported by the pass below */
	sp_xrank_analyse(arrivals);
	x.arrivals = arrivals;

	failed = open_ranks(o, in, &n);
	for (int i = 0; !failed && i < n; i++)
		in[i].w = next_window(o, &in[i]);
	out_name(o, &stem, &ext);
	/* one file: exactly the one named, or the default name in -o DIR/ */
	path = o->out_dir ? sp_cli_out_path(o->out_dir, "merged", ext) : sp_xstrdup(o->out);
	x.dest = path;
	progress_start(&pr, "all ranks");
	if (!failed) {
		x.r = in[0].r, x.hdr = sp_trace_header(in[0].r), x.g = in[0].g, x.source = in[0].path;
		x.out = sp_out_open(path, err, sizeof(err));
		if (!x.out)
			fprintf(stderr, "stepprof convert: %s\n", err);
		else if (x.ops->begin(&x)) {
			sp_out_close(x.out, 0);
			x.out = NULL;
		}
		failed = !x.out;
	}
	if (!failed)
		failed = write_rounds(o, in, n, &x, m, &nwin);
	if (x.out) {
		if (!nwin)
			fprintf(stderr, "stepprof convert: no window to write\n");
		failed = finish(&x, failed || !nwin);
		progress_done(&pr);
		if (!failed)
			fprintf(stderr,
				"wrote %s: %d traces, %d windows, %llu events, %llu NCCL collectives paired across "
				"ranks\n",
				path, n, nwin, (unsigned long long)x.events,
				(unsigned long long)sp_nccl_match_paired(m));
		failed |= say_ranks(o, in, n);
	}
	for (int i = 0; i < n; i++) {
		sp_windows_close(in[i].g);
		sp_trace_close_reader(in[i].r);
	}
	free(in);
	free(path);
	free(stem);
	free(ext);
	sp_nccl_match_free(m);
	sp_xrank_free(arrivals);
	return failed;
}

/* Appends window w's steps to the list in held[0..n) ("steps 10-12 (window 0), ..."). Can't fail. */
static void held_add(char *held, size_t n, const struct sp_window *w)
{
	size_t len = strnlen(held, n);

	if (len + 48 < n)
		snprintf(held + len, n - len, "%s%lld-%lld (window %u)", len ? ", " : "steps ", (long long)w->first_step,
			 (long long)w->last_step, w->id);
	else if (len + 5 < n && strcmp(held + len - 3, "..."))
		snprintf(held + len, n - len, ", ...");
}

/* --steps as the user gave it, normalised ("16", "10-12", "10-"), in buf. Returns buf. */
static const char *steps_text(const struct convert_opts *o, char *buf, size_t n)
{
	if (o->step_hi == o->step_lo)
		snprintf(buf, n, "%lld", (long long)o->step_lo);
	else if (o->step_hi == INT64_MAX)
		snprintf(buf, n, "%lld-", (long long)o->step_lo);
	else
		snprintf(buf, n, "%lld-%lld", (long long)o->step_lo, (long long)o->step_hi);
	return buf;
}

/* The line that reports a window file written. */
static void window_line(char *buf, size_t n, const char *path, const struct sp_window *w, uint64_t events)
{
	char cut[64] = "";
	if (!w->complete)
		snprintf(cut, sizeof cut, " (incomplete: cut at step %lld)", (long long)w->last_step);
	snprintf(buf, n, "wrote %s: window %u%s, steps %lld-%lld, %llu events%s\n", path, w->id,
		 w->inferred ? " (its beginning is not in the trace: found from its steps)" : "",
		 (long long)w->first_step, (long long)w->last_step, (unsigned long long)events, cut);
}

/* The file of a window of a phase without -o FILE: DIR/PHASE/BASE.<id><ext> for the stem DIR/BASE
 * (PHASE/BASE.<id><ext> for a bare BASE), in the phase's folder (created), as torch.profiler's
 * handlers put each schedule's traces in its own folder; DIR/BASE.<id><ext> if DIR is already
 * named PHASE. A phase name that is not [A-Za-z0-9_-] (a hostile trace) is not used as a folder:
 * the window then goes to DIR/BASE.<id><ext>, with a note. Returns a new string; exits if memory runs out. */
static char *phase_path(const char *stem, const struct sp_window *w, const char *ext)
{
	const char *base = strrchr(stem, '/');
	char *dir = NULL, *path = NULL;
	size_t n = strlen(w->phase);
	int dn = base ? (int)(base - stem) : 1;

	if (strspn(w->phase, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != n) {
		fprintf(stderr,
			"stepprof convert: note: window %u names the phase '%s', not a folder name: "
			"written without a phase folder\n",
			w->id, w->phase);
		if (asprintf(&path, "%s.%u%s", stem, w->id, ext) < 0)
			sp_oom();
		return path;
	}
	/* a trace the collector wrote into its phase's folder (OUTPUT/PHASE/): its windows go beside it */
	if (dn >= (int)n && !strncmp(stem + dn - n, w->phase, n) && (dn == (int)n || stem[dn - n - 1] == '/')) {
		if (asprintf(&path, "%s.%u%s", stem, w->id, ext) < 0)
			sp_oom();
		return path;
	}
	if ((base ? asprintf(&dir, "%.*s/%s", dn, stem, w->phase) : asprintf(&dir, "%s", w->phase)) < 0 ||
	    asprintf(&path, "%s/%s.%u%s", dir, base ? base + 1 : stem, w->id, ext) < 0)
		sp_oom();
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		fprintf(stderr, "stepprof convert: cannot create %s: %s\n", dir,
			strerror(errno)); /* the open says it again */
	free(dir);
	return path;
}

/* Opens x's file for window w (the first of the file): -o FILE (exactly, with --merge or for a
 * single window: exact), a phase's folder, or STEM[.<id>]EXT; begins it. The path in *path (the
 * one before freed). Returns 0, or 1 after a message. */
static int open_file(const struct convert_opts *o, struct sp_export *x, const struct sp_window *w, const char *stem,
		     const char *ext, int exact, char **path)
{
	char err[256];

	free(*path);
	if (o->out && !o->out_dir && (o->merge || exact))
		*path = strdup(o->out);
	else if ((!o->out || o->out_dir) && !o->merge && w->phase[0])
		*path = phase_path(stem, w, ext);
	else if (o->merge ? asprintf(path, "%s%s", stem, ext) < 0 : asprintf(path, "%s.%u%s", stem, w->id, ext) < 0)
		*path = NULL;
	if (!*path)
		sp_oom();
	x->dest = *path;
	x->out = sp_out_open(*path, err, sizeof(err));
	x->events = 0;
	if (!x->out) {
		fprintf(stderr, "stepprof convert: %s\n", err);
		return 1;
	}
	if (x->ops->begin(x)) {
		sp_out_close(x->out, 0);
		x->out = NULL;
		return 1;
	}
	return 0;
}

/* Without --merge: ends window w's file and says so. The first window of -o FILE (only: exact)
 * is said once it is known to be the only one (*first: its own name, first_line: its line); a
 * second window renames it. Returns failed, or 1 if this fails. */
static int window_done(const struct convert_opts *o, struct sp_export *x, struct progress *pr,
		       const struct sp_window *w, int failed, int only, const char *stem, const char *ext, char **first,
		       char *first_line, size_t fl_len)
{
	char line[4400];

	failed |= finish(x, failed);
	progress_done(pr);
	if (failed)
		return 1;
	if (only) { /* FILE; reported once it is known to be the only window */
		if (asprintf(first, "%s.%u%s", stem, w->id, ext) < 0)
			sp_oom();
		window_line(first_line, fl_len, o->out, w, x->events);
		return 0;
	}
	if (*first) { /* a second window: the first takes its own name */
		if (rename(o->out, *first)) {
			fprintf(stderr, "stepprof convert: %s -> %s: %s\n", o->out, *first, strerror(errno));
			return 1;
		}
		fprintf(stderr, "wrote %s%s", *first, strchr(first_line, ':'));
		free(*first);
		*first = NULL;
	}
	window_line(line, sizeof(line), x->dest, w, x->events);
	fputs(line, stderr);
	return 0;
}

/* What convert says at the end of a trace (failed: what went wrong so far was said; rc: the last
 * sp_windows_next result; nwin windows written of seen; ids: their ids, held: their steps).
 * Returns 1 if the command fails. */
static int say_end(const struct convert_opts *o, struct sp_trace_reader *r, struct sp_windows *g, int failed, int rc,
		   int nwin, int seen, const char *ids, const char *held)
{
	char err[256];

	if (!failed && rc < 0) {
		fprintf(stderr, "stepprof convert: %s: %s\n", o->trace, sp_trace_error(r));
		return 1;
	}
	if (!failed && !nwin) {
		if (o->steps && held[0])
			fprintf(stderr, "stepprof convert: %s has no recorded step in --steps %s; it holds %s\n",
				o->trace, steps_text(o, err, sizeof err), held);
		else if (o->phase)
			fprintf(stderr, "stepprof convert: %s has no window%s of phase '%s' (%llu of other phases)\n",
				o->trace, o->window >= 0 ? " of that id" : "", o->phase,
				(unsigned long long)sp_windows_other_phase(g));
		else
			sp_cli_no_window("convert", o->trace, o->window, seen, ids, sp_trace_truncated(r));
		return 1;
	}
	if (sp_trace_truncated(r))
		fprintf(stderr, "stepprof convert: note: %s was cut short; what followed the cut is lost\n", o->trace);
	return failed;
}

/* One trace: a file per window (<stem>.<window id><ext>), or one for all (--merge). With -o FILE
 * the first window goes to exactly FILE; if a second one follows, FILE is renamed to the first
 * window's own name (no other file is written to meanwhile). Returns 0, or 1 (message on stderr). */
static int convert_one(struct convert_opts o)
{
	struct sp_trace_reader *r;
	struct sp_windows *g;
	const struct sp_window *w;
	struct sp_export x;
	struct progress pr;
	char err[256], *stem, *ext, *path = NULL, *first = NULL, first_line[4400] = "", ids[96] = "", held[200] = "";
	int rc = 0, failed = 0, nwin = 0, seen = 0;
	int exact = o.out && strcmp(o.out, "-") && !o.out_dir; /* -o FILE: a single window's file is FILE */
	struct slice sl = { 0 };

	r = sp_trace_open(o.trace, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "stepprof convert: %s\n", err);
		return 1;
	}
	out_name(&o, &stem, &ext);
	g = sp_windows_open(r);
	sp_windows_set_phase(g, o.phase);
	progress_start(&pr, o.trace);
	x = (struct sp_export){ .ops = o.ops,
				.r = r,
				.hdr = sp_trace_header(r),
				.g = g,
				.source = o.trace,
				.wall = o.wall,
				.progress = progress_cb,
				.progress_ctx = &pr };

	while (!failed && (rc = sp_windows_next(g, &w)) == 1) {
		seen++;
		sp_cli_ids_add(ids, sizeof ids, w->id);
		if (o.window >= 0 && w->id != o.window)
			continue;
		held_add(held, sizeof held, w);
		if (!(w = cut(&o, g, w, &sl)))
			continue; /* none of the --steps in this window */
		if (!x.out && open_file(&o, &x, w, stem, ext, exact && !nwin, &path)) {
			failed = 1;
			break;
		}
		failed |= x.ops->window(&x, w) != 0;
		nwin++;
		if (!o.merge && (failed = window_done(&o, &x, &pr, w, failed, exact && nwin == 1, stem, ext, &first,
						      first_line, sizeof(first_line))))
			break;
	}
	if (x.out) {
		failed |= finish(&x, failed);
		progress_done(&pr);
		if (!failed)
			fprintf(stderr, "wrote %s: %d window%s, %llu events\n", path, nwin, nwin == 1 ? "" : "s",
				(unsigned long long)x.events);
	}
	if (first) { /* the only window: FILE */
		fputs(first_line, stderr);
		free(first);
	}
	failed = say_end(&o, r, g, failed, rc, nwin, seen, ids, held);
	free(path);
	free(stem);
	free(ext);
	sp_windows_close(g);
	sp_trace_close_reader(r);
	return failed;
}

int sp_cmd_convert(int argc, char **argv)
{
	struct convert_opts o;
	int ret = parse(argc, argv, &o);

	if (!ret && o.out_dir && sp_opts_make_dir("convert", o.out_dir) < 0)
		ret = 1;
	else if (!ret)
		ret = o.merge_ranks ? merge_ranks(&o) : convert_one(o);
	else if (ret == 1) /* --help */
		ret = 0;
	return ret;
}
