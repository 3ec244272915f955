/* SPDX-License-Identifier: MIT */
/* memtorch.c - `stepprof memory`'s second view of a window: PyTorch's caching allocator, from the
 * summary the collector wrote beside its snapshot ([activities] torch_memory:
 * TRACE-without-.sptrace.wN.memory_summary.txt, docs/OUTPUTS.md): the state at the window's end
 * and, from version 2, allocated and reserved bytes over the window with the lines live at its
 * peak; set against the driver's level as text, JSON and the page's data. The file is hostile
 * text: lines, numbers and the series are bounded; what does not parse is skipped. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"
#include "format.h"
#include "memtl.h"

#define LINE_MAX_BYTES 512          /* a longer line keeps its first bytes (a site is cut) */
#define NUM_MAX (1ull << 62)        /* larger numbers are refused */
#define MAP_SLACK_US 10000000ll     /* the history's start this far outside the window: no mapping */

/* One line of f into buf (n bytes, newline cut off); the rest of a longer line is read and
 * dropped. Returns 1, or 0 at the end of the file. Can't fail otherwise. */
static int read_line(FILE *f, char *buf, size_t n)
{
	if (!fgets(buf, (int)n, f))
		return 0;
	size_t len = strcspn(buf, "\n");
	if (buf[len] != '\n') {
		int c;
		while ((c = getc(f)) != EOF && c != '\n')
			;
	}
	buf[len] = 0;
	return 1;
}

/* A decimal number at *p (digits only, at most NUM_MAX), then a space or the end. Moves *p past
 * the space. Returns 0, or -1 (not such a number). */
static int num(const char **p, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (x > (NUM_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	if (*s && *s != ' ')
		return -1;
	*p = *s ? s + 1 : s;
	*v = x;
	return 0;
}

/* Reads the n numbers of a "KEY N..." line into v. Returns 0, or -1 (another key, fewer numbers, or
 * anything after them). */
static int nums(const char *line, const char *key, uint64_t *v, int n)
{
	size_t k = strlen(key);
	const char *p = line + k;
	if (strncmp(line, key, k) || *p != ' ')
		return -1;
	p++;
	for (int i = 0; i < n; i++)
		if (num(&p, &v[i]) < 0)
			return -1;
	return *p ? -1 : 0;
}

/* A site after the numbers: control bytes as '?', "?" if empty. */
static void site(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", *src ? src : "?");
	for (char *c = dst; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
}

/* A "KEY BYTES [BLOCKS] SITE" line into l (blocks 1 when the line has none). Returns 0, or -1. */
static int site_line(const char *line, const char *key, int with_blocks, struct sp_memtorch_line *l)
{
	size_t k = strlen(key);
	const char *p = line + k;
	uint64_t b = 1;
	if (strncmp(line, key, k) || *p++ != ' ' || num(&p, &l->bytes) < 0 || (with_blocks && num(&p, &b) < 0))
		return -1;
	l->blocks = b;
	site(l->where, sizeof l->where, p);
	return 0;
}

/* A "point T ALLOCATED RESERVED" line, kept if in time order and below the bound. */
static void point_line(struct sp_memtorch *t, const uint64_t *v)
{
	if (t->npt >= SP_MEMTORCH_MAX_POINTS || (t->npt && v[0] < t->pt[t->npt - 1].t_us)) {
		t->dropped++;
		return;
	}
	if (!t->pt && !(t->pt = malloc(SP_MEMTORCH_MAX_POINTS * sizeof *t->pt)))
		sp_oom();
	t->pt[t->npt++] = (struct sp_memtorch_point){ v[0], v[1], v[2] };
}

/* One line of a summary past its header. have: bits of what was read (1 allocated, 2 reserved,
 * 4 history start, 8 series start, 16 peak). */
static void parse_line(struct sp_memtorch *t, const char *line, int *have)
{
	uint64_t v[3];
	if (!nums(line, "allocated", v, 1))
		t->allocated = v[0], *have |= 1;
	else if (!nums(line, "reserved", v, 1))
		t->reserved = v[0], *have |= 2;
	else if (!nums(line, "segments", v, 1))
		t->segments = v[0];
	else if (!nums(line, "blocks", v, 1))
		t->blocks = v[0];
	else if (t->ntop < SP_MEMTORCH_TOP && !site_line(line, "top", 0, &t->top[t->ntop]))
		t->ntop++;
	else if (t->version < 2)
		return;
	else if (!nums(line, "history_start_us", v, 1))
		t->history_us = v[0], *have |= 4;
	else if (!nums(line, "entries", v, 2))
		t->entries = v[0], t->skipped = v[1];
	else if (!nums(line, "cut", v, 1) && v[0] <= 2)
		t->cut = (int)v[0];
	else if (!nums(line, "series_start_us", v, 1))
		t->series_us = v[0], *have |= 8;
	else if (!nums(line, "peak", v, 2))
		t->peak_us = v[0], t->peak = v[1], *have |= 16;
	else if (t->nat < SP_MEMTORCH_TOP && !site_line(line, "at_peak", 1, &t->at_peak[t->nat]))
		t->nat++;
	else if (!nums(line, "point", v, 3))
		point_line(t, v);
}

int sp_memtorch_load(const char *path, struct sp_memtorch *t)
{
	char line[LINE_MAX_BYTES];
	int have = 0;
	FILE *f = fopen(path, "r");
	memset(t, 0, sizeof *t);
	if (!f)
		return -1;
	snprintf(t->path, sizeof t->path, "%s", path);
	if (read_line(f, line, sizeof line))
		t->version = !strcmp(line, "stepprof-torch-memory 1")   ? 1
			     : !strcmp(line, "stepprof-torch-memory 2") ? 2
									: 0;
	while (t->version && read_line(f, line, sizeof line))
		parse_line(t, line, &have);
	fclose(f);
	t->history = (have & 28) == 28 && t->npt > 0 && t->series_us >= t->history_us &&
		     t->pt[0].t_us >= t->series_us && t->peak_us >= t->series_us;
	if (!t->version || (have & 3) != 3) {
		sp_memtorch_free(t);
		return -1;
	}
	return 0;
}

void sp_memtorch_free(struct sp_memtorch *t)
{
	free(t->pt);
	t->pt = NULL;
	t->npt = 0;
}

/* Unix-epoch us of trace time ns by w's clock pair. */
static int64_t wall_us(const struct sp_memtl *w, uint64_t ns)
{
	return ((int64_t)(ns - w->anchor_mono) + (int64_t)w->anchor_real) / 1000;
}

int sp_memtorch_read(const struct sp_memtl *w, const char *trace, struct sp_memtorch *t)
{
	char path[4200];
	size_t len = strlen(trace), ext = strlen(".sptrace");
	if (len > ext && !strcmp(trace + len - ext, ".sptrace"))
		len -= ext;
	int k = snprintf(path, sizeof path, "%.*s.w%u.memory_summary.txt", (int)len, trace, w->id);
	if (k <= 0 || (size_t)k >= sizeof path || sp_memtorch_load(path, t) < 0)
		return -1;
	t->off_us = (int64_t)t->history_us;
	if (t->history && (w->anchor_mono || w->anchor_real)) {
		int64_t a = wall_us(w, w->t0), b = wall_us(w, w->t1 > w->t0 && w->t1 != UINT64_MAX ? w->t1 : w->t0);
		int64_t h = (int64_t)t->history_us;
		t->mapped = h >= a - MAP_SLACK_US && h <= b + MAP_SLACK_US;
		if (t->mapped)
			t->off_us = a;
	}
	return 0;
}

/* ms of unix-epoch us u from the series' origin (the window's start when mapped). */
static double rel_ms(const struct sp_memtorch *t, uint64_t u)
{
	return (double)((int64_t)u - t->off_us) / 1e3;
}

/* The driver's level at w's end if w has exactly one GPU series; -1 otherwise (gpus: how many). */
static int64_t driver_end(const struct sp_memtl *w, int *gpus)
{
	const struct sp_memtl_series *gpu = NULL;
	*gpus = 0;
	for (size_t i = 0; i < w->ns; i++)
		if (w->s[i].device != SP_NO_DEVICE && w->s[i].n) {
			gpu = &w->s[i];
			(*gpus)++;
		}
	return *gpus == 1 ? (int64_t)gpu->pt[gpu->n - 1].live : -1;
}

/* The text of the version 2 part: the peak over the window, a cut history, the lines at the peak. */
static void history_text(const struct sp_memtorch *t, FILE *out)
{
	char b[3][32];
	uint64_t rmax = 0;
	const char *from = t->mapped ? "the window's start"
				     : "the history's start (the trace's clock records do not place it in the window)";
	for (size_t i = 0; i < t->npt; i++)
		rmax = t->pt[i].reserved > rmax ? t->pt[i].reserved : rmax;
	fprintf(out,
		"    over the window (the allocator's history, on from %+.3f ms, %" PRIu64 " events%s): peak %s "
		"allocated at %+.3f ms from %s; reserved %s at most\n",
		rel_ms(t, t->history_us), t->entries, t->skipped ? ", malformed ones skipped" : "",
		sp_memtl_bytes(b[0], 32, t->peak), rel_ms(t, t->peak_us), from, sp_memtl_bytes(b[1], 32, rmax));
	if (t->cut)
		fprintf(out,
			"    the allocator's history was cut: the series starts at %+.3f ms from %s, not at the "
			"window's start (%s)\n",
			rel_ms(t, t->series_us), from,
			t->cut == 1 ? "the window's events filled the ring: raise torch_memory_entries"
				    : "the summary reads the latest 500000 events; the snapshot's pickle has them all");
	if (t->nat)
		fprintf(out,
			"    live at the peak by line (innermost frame outside torch; block sizes of tensors freed "
			"in the window are their requests rounded up to 512 B):\n");
	for (int i = 0; i < t->nat; i++)
		fprintf(out, "      %10s  %5" PRIu64 " block%s  %s\n", sp_memtl_bytes(b[2], 32, t->at_peak[i].bytes),
			t->at_peak[i].blocks, t->at_peak[i].blocks == 1 ? " " : "s", t->at_peak[i].where);
}

void sp_memtorch_text(const struct sp_memtl *w, const struct sp_memtorch *t, FILE *out)
{
	char b[3][32];
	int gpus;
	int64_t end = driver_end(w, &gpus);
	fprintf(out,
		"  PyTorch's caching allocator at the window's end (%s): %s in %" PRIu64 " live block%s (tensors), %s "
		"reserved in %" PRIu64 " segment%s, of which %s cached free for torch's reuse\n",
		t->path, sp_memtl_bytes(b[0], 32, t->allocated), t->blocks, t->blocks == 1 ? "" : "s",
		sp_memtl_bytes(b[1], 32, t->reserved), t->segments, t->segments == 1 ? "" : "s",
		sp_memtl_bytes(b[2], 32, t->reserved > t->allocated ? t->reserved - t->allocated : 0));
	if (end >= 0) {
		uint64_t e = (uint64_t)end;
		fprintf(out,
			"    the driver's view at the window's end: %s in device allocations; %s of them outside "
			"torch's reserve (other libraries' workspaces and buffers: cuBLAS, cuDNN, NCCL, or memory "
			"torch never allocated)%s\n",
			sp_memtl_bytes(b[0], 32, e), sp_memtl_bytes(b[1], 32, e > t->reserved ? e - t->reserved : 0),
			e < t->reserved ? "; the driver saw less than torch reserves: allocations made before stepprof "
					  "tracked device memory"
					: "");
	} else {
		fprintf(out, "    the driver's view: %s\n",
			gpus ? "several GPUs (torch's figures are of every device together)"
			     : "no device memory records in this window");
	}
	if (t->ntop)
		fprintf(out, "    largest live blocks (innermost frame outside torch; '?': allocated before the "
			     "window, no stack):\n");
	for (int i = 0; i < t->ntop; i++)
		fprintf(out, "      %10s  %s\n", sp_memtl_bytes(b[0], 32, t->top[i].bytes), t->top[i].where);
	if (t->history)
		history_text(t, out);
}

/* lines as a JSON array of {"bytes"[,"blocks"],"site"}. */
static void lines_json(struct sp_out *x, const struct sp_memtorch_line *l, int n, int blocks)
{
	sp_out_puts(x, "[");
	for (int i = 0; i < n; i++) {
		sp_out_printf(x, "%s{\"bytes\":%" PRIu64, i ? "," : "", l[i].bytes);
		if (blocks)
			sp_out_printf(x, ",\"blocks\":%" PRIu64, l[i].blocks);
		sp_out_puts(x, ",\"site\":");
		sp_out_json_str(x, l[i].where);
		sp_out_puts(x, "}");
	}
	sp_out_puts(x, "]");
}

/* ns of unix-epoch us u from w's start, or null when the series is not mapped to the trace. */
static void at_ns(struct sp_out *x, const struct sp_memtorch *t, uint64_t u)
{
	if (t->mapped)
		sp_out_printf(x, "%" PRId64, ((int64_t)u - t->off_us) * 1000);
	else
		sp_out_puts(x, "null");
}

/* The series' allocated (or reserved) bytes, comma-separated. */
static void levels(struct sp_out *o, const struct sp_memtorch *t, bool reserved)
{
	for (size_t i = 0; i < t->npt; i++)
		sp_out_printf(o, "%s%" PRIu64, i ? "," : "", reserved ? t->pt[i].reserved : t->pt[i].allocated);
}

/* The version 2 members of the torch object: history, cut, series, peak, at_peak. */
static void history_json(struct sp_out *x, const struct sp_memtorch *t)
{
	sp_out_printf(x,
		      ",\"history_start_us\":%" PRIu64 ",\"entries\":%" PRIu64 ",\"skipped_entries\":%" PRIu64
		      ",\"cut\":%s,\"mapped\":%s,\"series_start_us\":%" PRIu64 ",\"series_start_ns\":",
		      t->history_us, t->entries, t->skipped, t->cut ? "true" : "false", t->mapped ? "true" : "false",
		      t->series_us);
	at_ns(x, t, t->series_us);
	sp_out_printf(x, ",\"peak\":{\"time_us\":%" PRIu64 ",\"at_ns\":", t->peak_us);
	at_ns(x, t, t->peak_us);
	sp_out_printf(x, ",\"allocated_bytes\":%" PRIu64 "},\"at_peak\":", t->peak);
	lines_json(x, t->at_peak, t->nat, 1);
	sp_out_printf(x, ",\"series\":{\"points_dropped\":%zu,\"time_us\":[", t->dropped);
	for (size_t i = 0; i < t->npt; i++)
		sp_out_printf(x, "%s%" PRIu64, i ? "," : "", t->pt[i].t_us);
	sp_out_puts(x, "],\"allocated\":[");
	levels(x, t, false);
	sp_out_puts(x, "],\"reserved\":[");
	levels(x, t, true);
	sp_out_puts(x, "]}");
}

void sp_memtorch_json(struct sp_out *x, const struct sp_memtl *w, const struct sp_memtorch *t)
{
	int gpus;
	int64_t end = driver_end(w, &gpus);
	if (!t) {
		sp_out_puts(x, ",\"torch\":null");
		return;
	}
	sp_out_puts(x, ",\"torch\":{\"summary\":");
	sp_out_json_str(x, t->path);
	sp_out_printf(x,
		      ",\"version\":%d,\"allocated_bytes\":%" PRIu64 ",\"reserved_bytes\":%" PRIu64
		      ",\"segments\":%" PRIu64 ",\"blocks\":%" PRIu64 ",\"driver_end_bytes\":",
		      t->version, t->allocated, t->reserved, t->segments, t->blocks);
	if (end >= 0)
		sp_out_printf(x, "%" PRId64 ",\"outside_reserve_bytes\":%" PRIu64, end,
			      (uint64_t)end > t->reserved ? (uint64_t)end - t->reserved : 0);
	else
		sp_out_puts(x, "null,\"outside_reserve_bytes\":null");
	sp_out_puts(x, ",\"top\":");
	lines_json(x, t->top, t->ntop, 0);
	if (t->history)
		history_json(x, t);
	sp_out_puts(x, "}");
}

void sp_memtorch_html(struct sp_out *o, const struct sp_memtl *w, const struct sp_memtorch *t)
{
	int gpus;
	int64_t end = driver_end(w, &gpus);
	if (!t->history)
		return;
	sp_out_printf(o,
		      "<script>SP_WINDOWS[SP_WINDOWS.length-1].torch={\"mapped\":%s,\"cut\":%s,\"start_ms\":%.6f,"
		      "\"peak\":%" PRIu64 ",\"peak_ms\":%.6f,\"reserved\":%" PRIu64 ",\"driver_end\":%" PRId64
		      ",\"path\":",
		      t->mapped ? "true" : "false", t->cut ? "true" : "false", rel_ms(t, t->series_us), t->peak,
		      rel_ms(t, t->peak_us), t->reserved, end);
	sp_memtl_js_str(o, t->path);
	sp_out_puts(o, ",\"at_peak\":[");
	for (int i = 0; i < t->nat; i++) {
		sp_out_printf(o, "%s[%" PRIu64 ",%" PRIu64 ",", i ? "," : "", t->at_peak[i].bytes,
			      t->at_peak[i].blocks);
		sp_memtl_js_str(o, t->at_peak[i].where);
		sp_out_puts(o, "]");
	}
	sp_out_puts(o, "],\n\"t\":[");
	for (size_t i = 0; i < t->npt; i++)
		sp_out_printf(o, "%s%.3f", i ? "," : "", rel_ms(t, t->pt[i].t_us));
	sp_out_puts(o, "],\"a\":[");
	levels(o, t, false);
	sp_out_puts(o, "],\"r\":[");
	levels(o, t, true);
	sp_out_puts(o, "]};</script>\n");
}
