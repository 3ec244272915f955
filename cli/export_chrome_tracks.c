/* SPDX-License-Identifier: MIT */
/* export_chrome_tracks.c - the Chrome exporter's event objects (separators, common fields, names
 * looked up once per id, metadata records, flows) and where they land: processes and tracks named
 * on first use, lanes for tracks whose slices may overlap, and the overlap check that keeps every
 * track's slices nested. Writes JSON only through the output stream (export.h). */
#include "export_chrome.h"

/* ---- event objects ---- */

/* The separator before an event at p (room for 2 bytes), counted. Returns the new end. */
static char *put_comma(struct sp_export *x, char *p)
{
	struct chrome *c = x->priv;

	if (!c->first)
		*p++ = ',';
	*p++ = '\n';
	c->first = 0;
	if (++x->events >= c->next_progress) {
		c->next_progress = x->events + PROGRESS_EVERY;
		if (x->progress)
			x->progress(x);
	}
	return p;
}

static void comma(struct sp_export *x)
{
	sp_out_done(x->out, put_comma(x, sp_out_room(x->out, 2)));
}

/* Writes the display name of string id as a JSON string (fallback for id 0), looked up and
 * checked for characters to escape once per id. Exits if memory runs out. */
static void name_of(struct sp_export *x, uint32_t id, const char *fallback)
{
	struct chrome *c = x->priv;
	struct name *n;

	if (!id) {
		sp_out_json_str(x->out, fallback);
		return;
	}
	c->names = sp_xgrow(c->names, &c->names_cap, sizeof(*c->names), id);
	n = &c->names[id];
	if (!n->plain) {
		n->s = sp_display_name(sp_trace_string(x->r, id));
		n->n = strlen(n->s);
		n->plain = 1;
		for (const unsigned char *p = (const unsigned char *)n->s; *p; p++)
			if (*p < 0x20 || *p >= 0x7f || *p == '"' || *p == '\\')
				n->plain = -1;
	}
	if (n->plain < 0) {
		sp_out_json_str(x->out, n->s);
	} else if (n->n <= SP_OUT_ROOM_MAX - 2) {
		char *p = sp_out_room(x->out, n->n + 2);
		*p++ = '"';
		p = sp_put(p, n->s, n->n);
		*p++ = '"';
		sp_out_done(x->out, p);
	} else {
		sp_out_write(x->out, "\"", 1);
		sp_out_write(x->out, n->s, n->n);
		sp_out_write(x->out, "\"", 1);
	}
}

/* Starts one event object with its common fields: {"ph":..,"cat":..,"name":..,"pid":..,"tid":..,"ts":..
 * The name is the string of name_id if not 0, else name. */
void sp_chrome_ev_open_id(struct sp_export *x, const char *ph, const char *cat, uint32_t name_id, const char *name,
			  int64_t pid, uint64_t tid, int64_t ts)
{
	size_t lp = strlen(ph), lc = strlen(cat);
	char *p;

	if (lp + lc <= 256) { /* ph and cat are the exporter's own names, always short */
		p = put_comma(x, sp_out_room(x->out, 2 + 32 + lp + lc));
		p = SP_PUT_LIT(p, "{\"ph\":\"");
		p = sp_put(p, ph, lp);
		p = SP_PUT_LIT(p, "\",\"cat\":\"");
		p = sp_put(p, cat, lc);
		sp_out_done(x->out, SP_PUT_LIT(p, "\",\"name\":"));
	} else {
		comma(x);
		sp_out_puts(x->out, "{\"ph\":\"");
		sp_out_puts(x->out, ph);
		sp_out_puts(x->out, "\",\"cat\":\"");
		sp_out_puts(x->out, cat);
		sp_out_puts(x->out, "\",\"name\":");
	}
	name_of(x, name_id, name);
	p = sp_out_room(x->out, 3 * SP_PUT_NUM_MAX + 32);
	p = SP_PUT_LIT(p, ",\"pid\":");
	p = sp_put_i64(p, pid);
	p = SP_PUT_LIT(p, ",\"tid\":");
	p = sp_put_u64(p, tid);
	p = SP_PUT_LIT(p, ",\"ts\":");
	sp_out_done(x->out, sp_put_us(p, ts));
}

void sp_chrome_ev_open(struct sp_export *x, const char *ph, const char *cat, const char *name, int64_t pid,
		       uint64_t tid, int64_t ts)
{
	sp_chrome_ev_open_id(x, ph, cat, 0, name, pid, tid, ts);
}

/* A metadata record ("M"): name is process_name, thread_name, ...; the value is a string (s) or
 * an integer (s NULL). */
static void meta(struct sp_export *x, const char *name, int64_t pid, uint64_t tid, const char *key, const char *s,
		 long long v)
{
	comma(x);
	sp_out_printf(x->out,
		      "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%lld,\"tid\":%llu,\"ts\":0,\"args\":{\"%s\":", name,
		      (long long)pid, (unsigned long long)tid, key);
	if (s)
		sp_out_json_str(x->out, s);
	else
		sp_out_printf(x->out, "%lld", v);
	sp_out_puts(x->out, "}}");
}
void sp_chrome_dur_ns(struct sp_export *x, uint64_t d)
{
	char *p = sp_out_room(x->out, SP_PUT_NUM_MAX + 8);
	sp_out_done(x->out, sp_put_us(SP_PUT_LIT(p, ",\"dur\":"), (int64_t)d));
}

void sp_chrome_dur(struct sp_export *x, const struct sp_event *e)
{
	sp_chrome_dur_ns(x, e->end > e->start ? e->end - e->start : 0);
}

/* A flow arrow's start ('s') or end ('f', bound to the enclosing slice); cat is its name too. */
void sp_chrome_flow(struct sp_export *x, char ph, uint64_t id, const char *cat, int64_t pid, uint64_t tid, int64_t ts)
{
	size_t lc = strlen(cat); /* "ac2g" or "nccl" */
	char *p = put_comma(x, sp_out_room(x->out, 2 + 4 * SP_PUT_NUM_MAX + 80 + 2 * lc));

	p = ph == 's' ? SP_PUT_LIT(p, "{\"ph\":\"s\",\"id\":") : SP_PUT_LIT(p, "{\"ph\":\"f\",\"id\":");
	p = sp_put_u64(p, id);
	p = SP_PUT_LIT(p, ",\"pid\":");
	p = sp_put_i64(p, pid);
	p = SP_PUT_LIT(p, ",\"tid\":");
	p = sp_put_u64(p, tid);
	p = SP_PUT_LIT(p, ",\"ts\":");
	p = sp_put_us(p, ts);
	p = SP_PUT_LIT(p, ",\"cat\":\"");
	p = sp_put(p, cat, lc);
	p = SP_PUT_LIT(p, "\",\"name\":\"");
	p = sp_put(p, cat, lc);
	p = ph == 'f' ? SP_PUT_LIT(p, "\",\"bp\":\"e\"}") : SP_PUT_LIT(p, "\"}");
	sp_out_done(x->out, p);
}

const char *sp_chrome_str(const struct sp_export *x, uint32_t id, const char *fallback)
{
	return id ? sp_display_name(sp_trace_string(x->r, id)) : fallback;
}

/* 1 if kernel name id is an NCCL kernel (cached by id). Exits if memory runs out. */
int sp_chrome_is_nccl_kernel(struct sp_export *x, uint32_t id)
{
	struct chrome *c = x->priv;

	if (!id)
		return 0;
	c->nccl_name = sp_xgrow(c->nccl_name, &c->nccl_cap, 1, id);
	if (!c->nccl_name[id])
		c->nccl_name[id] = sp_nccl_is_kernel(sp_trace_string(x->r, id)) ? 2 : 1;
	return c->nccl_name[id] == 2;
}

/* The lane of a track with lanes (tid base .. base + LANES - 1) that is free at start: the first
 * whose last slice ended by then; the last lane if none is (its slices may then overlap). */
uint64_t sp_chrome_lane(struct sp_export *x, int64_t pid, uint64_t base, uint64_t start, uint64_t end)
{
	struct chrome *c = x->priv;
	struct lane *best = NULL;

	for (uint64_t l = 0; l < LANES; l++) {
		struct lane *ln = NULL;
		for (size_t i = 0; i < c->nlanes; i++)
			if (c->lanes[i].pid == pid && c->lanes[i].tid == base + l) {
				ln = &c->lanes[i];
				break;
			}
		if (!ln) {
			c->lanes = sp_xgrow(c->lanes, &c->lanes_cap, sizeof(*c->lanes), c->nlanes);
			ln = &c->lanes[c->nlanes++];
			*ln = (struct lane){ pid, base + l, 0 };
		}
		best = ln;
		if (ln->end <= start)
			break;
	}
	if (end > best->end)
		best->end = end;
	return best->tid;
}

/* The track a slice [ts, ts + d) (ns) of track (pid, tid) is written on: its own, unless it would
 * partly overlap a slice open there (viewers nest the slices of a track; Perfetto drops what does
 * not nest), then a lane of "<kind> <tid> (overlapping)". Slices come in start order. Exits if
 * memory runs out. */
uint64_t sp_chrome_fit(struct sp_export *x, int64_t pid, uint64_t tid, int64_t ts, uint64_t d, int gpu)
{
	struct chrome *c = x->priv;
	struct tstack *t = c->nts ? &c->ts[c->ts_last] : NULL;
	int64_t end = add_ns(ts, d);

	if (!t || t->pid != pid || t->tid != tid) {
		size_t i = 0;
		while (i < c->nts && (c->ts[i].pid != pid || c->ts[i].tid != tid))
			i++;
		if (i == c->nts) {
			c->ts = sp_xgrow(c->ts, &c->ts_cap, sizeof(*c->ts), c->nts);
			c->ts[c->nts++] = (struct tstack){ .pid = pid, .tid = tid };
		}
		c->ts_last = i;
		t = &c->ts[i];
	}
	while (t->n && t->end[t->n - 1] <= ts)
		t->n--;
	if (t->n && end > t->end[t->n - 1]) {
		uint64_t base = OVER_TID_BASE + tid * LANES,
			 l = sp_chrome_lane(x, pid, base, (uint64_t)ts, (uint64_t)end);
		char name[80];
		snprintf(name, sizeof(name), "%s %llu (overlapping)%s", gpu ? "stream" : "thread",
			 (unsigned long long)tid, l == base ? "" : " +");
		sp_chrome_name_track_as(x, pid, l, name, (long long)l);
		c->overlaps++;
		return l;
	}
	t->end = sp_xgrow(t->end, &t->cap, sizeof(*t->end), t->n);
	t->end[t->n++] = end;
	return tid;
}
/* ---- tracks ---- */

void sp_chrome_name_process(struct sp_export *x, int64_t pid, int device)
{
	struct chrome *c = x->priv;
	const struct sp_trace_meta *m = &x->hdr->meta;
	char name[160], label[32];
	int n;

	if (!sp_idset_add(&c->pids, (uint64_t)pid))
		return;
	n = m->rank >= 0 ? snprintf(name, sizeof(name), "%s rank %d", m->host, m->rank)
			 : snprintf(name, sizeof(name), "%s pid %d", m->host, m->pid);
	if (device >= 0)
		snprintf(name + n, sizeof(name) - (size_t)n, " GPU %d", device);
	else if (device == -2)
		snprintf(name + n, sizeof(name) - (size_t)n, " GPU (device unknown)");
	if (device >= 0)
		snprintf(label, sizeof(label), "GPU %d", device);
	else
		snprintf(label, sizeof(label), "%s", device == -2 ? "GPU" : "CPU");
	meta(x, "process_name", pid, 0, "name", name, 0);
	meta(x, "process_labels", pid, 0, "labels", label, 0);
	meta(x, "process_sort_index", pid, 0, "sort_index", NULL,
	     x->merged      ? c->key * 100 + (device >= 0    ? 1 + device
					      : device == -2 ? 99
							     : 0)
	     : device == -1 ? 0
			    : 0x1000000 + (device >= 0 ? device : 0xffff));
}

void sp_chrome_name_track_as(struct sp_export *x, int64_t pid, uint64_t tid, const char *name, long long sort)
{
	struct chrome *c = x->priv;

	if (!sp_idset_add(&c->tracks, ((uint64_t)pid << 40) ^ tid))
		return;
	meta(x, "thread_name", pid, tid, "name", name, 0);
	meta(x, "thread_sort_index", pid, tid, "sort_index", NULL, sort);
}

void sp_chrome_name_track(struct sp_export *x, int64_t pid, uint32_t tid, int gpu)
{
	char name[48];
	const char *s;

	if (gpu)
		snprintf(name, sizeof(name), "stream %u", tid);
	else
		snprintf(name, sizeof(name), "thread %u", tid);
	s = gpu ? NULL : sp_windows_thread_name(x->g, tid);
	sp_chrome_name_track_as(x, pid, tid, s && *s ? s : name, tid);
}

/* The GPU process of device (-1: unknown), named on first use. */
int64_t sp_chrome_gpu_process(struct sp_export *x, int device)
{
	int64_t pid = gpu_pid(x, device);
	sp_chrome_name_process(x, pid, device >= 0 ? device : -2);
	return pid;
}
