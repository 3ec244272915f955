/* SPDX-License-Identifier: MIT */
/* cmd_memory.c - `stepprof memory TRACE [-o FILE|DIR/] [--window N|all] [--json]`: the memory
 * timeline page of every recorded window (or one) and a short summary of each on stdout, as text
 * or one JSON object (memtl.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "opts.h"
#include "symbols.h"
#include "export.h"
#include "memtl.h"

#define SUMMARY_TOP 10 /* allocations alive at the peak listed per series */

/* ,"owners":[...] of GPU series s: per owner with blocks, its key, label, bytes and blocks alive at
 * the peak, own peak in the window and blocks (memtl.h, sp_memtl_owners). */
static void owners_json(struct sp_out *x, const struct sp_memtl *w, const struct sp_memtl_series *s,
			const struct sp_trace_reader *r, struct sp_sym *sym)
{
	struct sp_memtl_owned o;
	int first = 1;
	sp_memtl_owners(w, s, r, sym, &o);
	sp_out_puts(x, ",\"owners\":[");
	for (int k = 0; k < SP_OWNER__N; k++) {
		if (!o.blocks[k])
			continue;
		sp_out_printf(x,
			      "%s{\"owner\":\"%s\",\"label\":\"%s\",\"bytes_at_peak\":%llu,\"blocks_at_peak\":%llu,"
			      "\"own_peak_bytes\":%llu,\"blocks\":%llu}",
			      first ? "" : ",", sp_memtl_owner_key(k), sp_memtl_owner_label(k),
			      (unsigned long long)o.at_peak[k], (unsigned long long)o.blocks_at_peak[k],
			      (unsigned long long)o.peak[k], (unsigned long long)o.blocks[k]);
		first = 0;
	}
	sp_out_puts(x, "]");
}

/* One window's summary as a JSON object (members of stepprof.memory's "windows"): its steps and
 * span, and per series the peak, when (ns from the window's start), the peak since process
 * start, allocations and frees, and the allocations alive at the peak (largest first, all of
 * them: size, kind, made relative to the window's start, innermost frame, and on a GPU its owner
 * and how that was told), and per GPU the bytes of each owner. Can't fail. */
static void window_json(struct sp_out *x, const struct sp_memtl *w, const struct sp_trace_reader *r, struct sp_sym *sym,
			const struct sp_memtorch *t, int first)
{
	sp_out_printf(x,
		      "%s{\"id\":%u,\"first_step\":%lld,\"last_step\":%lld,\"duration_ns\":%llu,"
		      "\"complete\":%s,\"series\":[",
		      first ? "\n" : ",\n", w->id, (long long)w->first_step, (long long)w->last_step,
		      (unsigned long long)(w->t1 - w->t0), w->complete ? "true" : "false");
	for (size_t k = 0; k < w->ns; k++) {
		const struct sp_memtl_series *s = &w->s[k];
		sp_out_puts(x, k ? ",{\"label\":" : "{\"label\":");
		sp_out_json_str(x, s->label);
		sp_out_printf(x,
			      ",\"peak_bytes\":%llu,\"peak_at_ns\":%lld,\"peak_since_start_bytes\":%llu,"
			      "\"allocations\":%llu,\"frees\":%llu,\"alive_at_peak\":[",
			      (unsigned long long)s->peak, (long long)(s->peak_t - w->t0),
			      (unsigned long long)s->peak_ever, (unsigned long long)s->allocs,
			      (unsigned long long)s->frees);
		for (size_t i = 0; i < s->n_at_peak; i++) {
			const struct sp_memtl_alloc *a = &w->a[s->at_peak[i]];
			uint32_t n = 0;
			const uint64_t *pcs = a->stack ? sp_trace_stack(r, a->stack, &n) : NULL;
			sp_out_printf(x, "%s{\"bytes\":%llu,\"kind\":", i ? "," : "", (unsigned long long)a->size);
			sp_out_json_str(x, sp_mem_kind_name(a->kind));
			sp_out_printf(x, ",\"made_ns\":%lld,\"site\":", (long long)(a->made - w->t0));
			if (n)
				sp_out_json_str(x, sp_sym_frame(sym, pcs[0]));
			else
				sp_out_puts(x, "null");
			if (s->device != SP_NO_DEVICE) {
				char why[128];
				int q = sp_memtl_owner(sym, pcs, pcs ? n : 0, why, sizeof(why));
				sp_out_printf(x, ",\"owner\":\"%s\",\"owner_how\":", sp_memtl_owner_key(q));
				sp_out_json_str(x, why);
			}
			sp_out_puts(x, "}");
		}
		sp_out_puts(x, "]");
		if (s->device != SP_NO_DEVICE)
			owners_json(x, w, s, r, sym);
		sp_out_puts(x, "}");
	}
	sp_out_puts(x, "]");
	sp_memtorch_json(x, w, t);
	sp_out_puts(x, "}");
}

const struct sp_cmd_spec sp_spec_memory = {
	.name = "memory",
	.fn = sp_cmd_memory,
	.operands = "TRACE",
	.complete = "TRACE",
	.summary = "memory timeline page (HTML) and the peaks of each window",
	.text = "  Writes a self-contained HTML page of live GPU and host memory per recorded window, into\n"
		"  the current directory as TRACE's name without .sptrace plus .memory.html (-o FILE: that\n"
		"  file; -o DIR/: that name inside DIR, made if missing), and prints each window's peaks.\n",
	.opt = (const struct sp_opt[]){
		{ "output", 'o', 'o', "FILE|DIR/", "the page's file, or the folder for its default name" },
		{ "window", 'w', 0, "N|all", "only window N (default all)" },
		{ "json", 'j', 0, NULL, "the peaks as one JSON object (every allocation alive at each peak)" },
		{ "no-symbols", 'N', 0, NULL, "open no file that the trace names (symbols from the trace only)" },
		{ 0 } },
};

static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_memory, f);
	return rc;
}

/* Reads the options (-o into *out, --window, --json); leaves optind at the trace. Returns -1 to go
 * on, or the exit status (help printed: 0; a usage error: 2). */
static int parse(int argc, char **argv, const char **out, long long *window, int *json)
{
	int c;

	optind = 0;
	while ((c = sp_opts_next(&sp_spec_memory, argc, argv)) != -1) {
		switch (c) {
		case 'o':
			*out = optarg;
			break;
		case 'j':
			*json = 1;
			break;
		case 'w':
			if (sp_cli_window("memory", optarg, window) < 0)
				return usage(stderr, 2);
			break;
		case 'N': /* open no file that the trace names */
			sp_sym_no_files();
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			return usage(stderr, 2);
		}
	}
	return sp_cli_operands("memory", argc, argv, 1, 1) ? usage(stderr, 2) : -1;
}

/* Begins --json's object on stdout (trace, its page out), up to its windows. */
static struct sp_out *json_begin(const char *trace, const char *out)
{
	struct sp_out *jx = sp_out_stream(stdout);
	sp_out_puts(jx, "{");
	sp_cli_json_head(jx, "memory");
	sp_out_puts(jx, "\"trace\":");
	sp_out_json_str(jx, trace);
	sp_out_puts(jx, ",\"page\":");
	sp_out_json_str(jx, out);
	sp_out_puts(jx, ",\"windows\":[");
	return jx;
}

/* One window: its page section, then its JSON object (jx) or its text summary, each with PyTorch's
 * allocator view when the summary beside trace exists. */
static void show(struct sp_out *o, struct sp_out *jx, const struct sp_memtl *w, const struct sp_trace_reader *r,
		 struct sp_sym *sym, const char *trace, int first)
{
	struct sp_memtorch t;
	int torch = sp_memtorch_read(w, trace, &t) == 0;
	sp_memtl_html_window(o, w, r, sym);
	if (torch)
		sp_memtorch_html(o, w, &t);
	if (jx)
		window_json(jx, w, r, sym, torch ? &t : NULL, first);
	else {
		sp_memtl_summary(w, r, sym, SUMMARY_TOP, stdout);
		if (torch)
			sp_memtorch_text(w, &t, stdout);
	}
	sp_memtorch_free(&t);
}

/* Exit status: 0 written; 1 unreadable trace, no (such) window, corrupt chunk (the page is still
 * written with the windows before it) or write error; 2 usage. */
int sp_cmd_memory(int argc, char **argv)
{
	const char *trace, *out = NULL;
	char *def = NULL, err[512], ids[96] = "";
	long long window = -1;
	int json = 0, exit_rc = parse(argc, argv, &out, &window, &json);

	if (exit_rc >= 0)
		return exit_rc;
	trace = argv[optind];
	if (out && sp_opts_is_dir(out) && sp_opts_make_dir("memory", out) < 0)
		return 1;
	if (!out || sp_opts_is_dir(out))
		out = def = sp_cli_out_path(out, trace, ".memory.html");
	else if (!sp_cli_ends_with(out, ".html") && !sp_cli_ends_with(out, ".htm"))
		fprintf(stderr, "stepprof memory: warning: %s gets an HTML page (name it .html)%s\n", out,
			sp_cli_ends_with(out, ".json") ? "; --json prints the peaks as JSON on stdout" : "");

	struct sp_trace_reader *r = sp_trace_open(trace, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "stepprof memory: %s\n", err);
		free(def);
		return 1;
	}
	struct sp_sym *sym = sp_sym_open();
	sp_sym_use_trace(sym, r); /* Python frames */
	struct sp_memtl_reader *m = sp_memtl_open(r, sym);
	struct sp_out *o = sp_out_open(out, err, sizeof(err));
	const struct sp_memtl *w;
	int rc, seen = 0, shown = 0, ret = 0;

	if (!o) {
		fprintf(stderr, "stepprof memory: %s\n", err);
		ret = 1;
		goto done;
	}
	struct sp_out *jx = json ? json_begin(trace, out) : NULL;
	sp_memtl_html_begin(o, trace, sp_trace_header(r));
	while ((rc = sp_memtl_next(m, &w)) == 1) {
		seen++;
		sp_cli_ids_add(ids, sizeof ids, w->id);
		if (window >= 0 && w->id != window)
			continue;
		show(o, jx, w, r, sym, trace, !shown);
		shown++;
	}
	sp_memtl_html_end(o);
	if (jx) {
		sp_out_puts(jx, "]}\n");
		sp_out_close(jx, 1);
	}
	if (rc < 0) {
		fprintf(stderr, "stepprof memory: %s: %s\n", trace, sp_trace_error(r));
		ret = 1;
	} else if (!shown) {
		sp_cli_no_window("memory", trace, window, seen, ids, sp_trace_truncated(r));
		ret = 1;
	}
	if (sp_out_close(o, shown > 0) != 0)
		ret = 1;
	else if (shown)
		fprintf(json ? stderr : stdout, "wrote %s: %d window%s\n", out, shown, shown == 1 ? "" : "s");
done:
	sp_memtl_close(m);
	sp_sym_close(sym);
	sp_trace_close_reader(r);
	free(def);
	return ret;
}
