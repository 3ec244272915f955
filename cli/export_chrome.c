/* SPDX-License-Identifier: MIT */
/* export_chrome.c - Chrome Trace Event JSON as torch.profiler (Kineto's output_json.cpp) writes
 * it, so that HTA, the TensorBoard profiler plugin and Perfetto open it unchanged: metadata first
 * (schemaVersion, distributedInfo, deviceProperties, traceName, baseTimeNanoseconds), then
 * traceEvents ("X" slices with Kineto's categories and arg names, "s"/"f" ac2g flows from a
 * launch to its GPU work, "C" memory counters, "M" track names), then stepprof's otherData.
 * Per-rank files: CPU pid = OS pid, GPU pid = device ordinal (Kineto's layout). --merge-ranks:
 * pids, correlation ids and flow ids made unique per rank, "nccl" flows between the calls of one
 * collective. Keeps Perfetto's import rules: every flow has both ends, slices of a track nest
 * (syncs and extra spans get lanes of their own), consecutive ProfilerStep#N never overlap,
 * even after the reader's float arithmetic. Streams: writes each event as it goes.
 * This file: the exporter's callbacks, the metadata around traceEvents and the window's two passes
 * (indexes in file order, export_chrome_index.c; then the events by start: memory is what the file
 * is out of time order, never a window); export_chrome_tracks.c and export_chrome_events.c write
 * the events (export_chrome.h). */
#include "config/version.h"
#include "export_chrome.h"

/* ---- the file ---- */

/* Index in traces of the trace x is on now (added if new). Exits if memory runs out. */
static size_t trace_index(struct sp_export *x)
{
	struct chrome *c = x->priv;
	size_t i = 0;

	while (i < c->ntraces && c->traces[i].hdr != x->hdr)
		i++;
	if (i == c->ntraces) {
		c->traces = sp_xrealloc(c->traces, (c->ntraces + 1) * sizeof(*c->traces));
		c->traces[c->ntraces++] = (struct trace_info){ x->r, x->hdr, x->g, x->source };
	}
	return i;
}

/* deviceProperties: every GPU with a device record, then the GPUs the window uses without one
 * (used: a bit per device). */
static void device_properties(struct sp_export *x, uint64_t used)
{
	struct chrome *c = x->priv;
	int n = 0;

	sp_out_puts(x->out, "\"deviceProperties\": [");
	for (size_t t = 0; t < c->ntraces; t++)
		for (unsigned d = 0; d < SP_WIN_MAX_DEVICES; d++) {
			const struct sp_event *e = sp_windows_device(c->traces[t].g, d);
			const struct arch *a = sp_chrome_arch_of(e);
			if (!e && !(t == c->trace && (used >> d & 1)))
				continue;
			sp_out_printf(x->out, "%s\n  {\"id\": %u, \"name\": ", n++ ? "," : "", d);
			if (!e) {
				sp_out_puts(x->out,
					    "\"\", \"stepprof note\": \"the trace has no record of this device\"}");
				continue;
			}
			sp_out_json_str(x->out, e->name ? sp_trace_string(c->traces[t].r, e->name) : "");
			sp_out_printf(x->out,
				      ", \"totalGlobalMem\": %llu, \"computeMajor\": %u, \"computeMinor\": %u, "
				      "\"numSms\": %u",
				      (unsigned long long)e->u.dev.memory, e->u.dev.cc_major, e->u.dev.cc_minor,
				      e->u.dev.sm_count);
			if (a)
				sp_out_printf(x->out,
					      ", \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": %u, "
					      "\"regsPerBlock\": 65536, \"warpSize\": 32, \"sharedMemPerBlock\": "
					      "49152, "
					      "\"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": %u, "
					      "\"sharedMemPerMultiprocessor\": %u",
					      a->max_warps * 32u, a->smem_optin, a->smem_sm);
			if (x->merged)
				sp_out_printf(x->out, ", \"rank\":%d", c->traces[t].hdr->meta.rank);
			sp_out_puts(x->out, "}");
		}
	sp_out_puts(x->out, "],\n");
}

/* The metadata before traceEvents, as Kineto writes it; readers (HTA) take the rank from the
 * first '"rank": N' of the file. window: the first window was indexed (else there is none). */
static void header(struct sp_export *x, int window)
{
	struct chrome *c = x->priv;
	const struct sp_trace_meta *m = &x->hdr->meta;

	c->header = 1;
	sp_out_puts(x->out, "{\n\"schemaVersion\": 1,\n");
	if (!x->merged && m->rank >= 0) {
		int nccl = (m->features & SP_FEAT_NCCL) || (window && c->has_nccl); /* or NCCL calls recorded */
		sp_out_puts(x->out, "\"distributedInfo\": {");
		if (nccl)
			sp_out_puts(x->out, "\"backend\": \"nccl\", ");
		sp_out_printf(x->out, "\"rank\": %d, \"world_size\": %d},\n", m->rank, m->world_size);
	}
	if (!x->merged)
		device_properties(x, window ? c->used : 0);
	sp_out_puts(x->out, "\"traceName\": ");
	sp_out_json_str(x->out, x->dest ? x->dest : "");
	sp_out_printf(x->out, ",\n\"displayTimeUnit\": \"ns\",\n\"baseTimeNanoseconds\": %llu,\n\"traceEvents\": [",
		      (unsigned long long)c->base);
}

static int chrome_begin(struct sp_export *x)
{
	struct chrome *c = calloc(1, sizeof(*c));

	if (!c) {
		fprintf(stderr, "stepprof: out of memory\n");
		return -1;
	}
	c->first = 1;
	c->next_progress = PROGRESS_EVERY;
	x->priv = c;
	return 0;
}

/* The pass that writes: the window's events by start, longest first, then file order. */
static void write_event(void *ctx, const struct sp_event *e)
{
	struct sp_export *x = ctx;
	struct chrome *c = x->priv;

	if (e->kind == SP_EV_STEP)
		c->step_at = c->step_seen++;
	if (e->end < e->start) { /* CUPTI gives a record no times when it could not take them */
		c->untimed++;
		return;
	}
	if (sp_ev_is_gpu(e))
		sp_chrome_gpu_event(x, c->w, e);
	else if (e->kind == SP_EV_API)
		sp_chrome_api_event(x, c->w, e);
	else if (e->kind == SP_EV_NCCL)
		sp_chrome_nccl_event(x, c->w, e);
	else
		sp_chrome_cpu_event(x, c->w, e);
	c->wins[c->nwins - 1].steps += e->kind == SP_EV_STEP;
}

static int chrome_window(struct sp_export *x, const struct sp_window *w)
{
	struct chrome *c = x->priv;
	const struct sp_trace_meta *m = &x->hdr->meta;
	struct win_info *wi;

	c->trace = trace_index(x);
	c->key = m->rank >= 0 ? m->rank : m->pid;
	c->w = w;
	/* names by id hold the trace's strings: a later chunk may redefine an id (and the reader frees
	 * the old text), and with --merge-ranks ids are another trace's: look them up anew per window */
	if (c->names)
		memset(c->names, 0, c->names_cap * sizeof(*c->names));
	if (c->nccl_name)
		memset(c->nccl_name, 0, c->nccl_cap);
	sp_chrome_index_begin(x, w);
	sp_windows_each(x->g, sp_chrome_index_event, x);
	sp_chrome_index_end(x);
	if (!x->wall || !c->base_set) { /* no negative ts: HTA's alignment of ranks breaks on them */
		c->base = sp_window_wall(w, c->first_start < w->t0 ? c->first_start : w->t0);
		if (x->wall)
			c->base -= c->base % NS_PER_DAY;
		c->base_set = 1;
	}
	if (!c->header)
		header(x, 1);
	c->wins = sp_xrealloc(c->wins, (c->nwins + 1) * sizeof(*c->wins));
	wi = &c->wins[c->nwins++];
	wi->w = *w;
	wi->steps = 0;
	wi->trace = c->trace;

	sp_chrome_ops_window(x, w);
	sp_chrome_name_tracks(x);
	sp_windows_sorted(x->g, NULL, write_event, x);
	sp_chrome_extra_spans(x);
	if (!w->complete) {
		char name[80];
		snprintf(name, sizeof(name), "window %u (incomplete): cut at step %lld", w->id, (long long)w->last_step);
		sp_chrome_ev_open(x, "i", "stepprof", name, cpu_pid(x), 0, ts_of(x, w, w->t1));
		sp_out_puts(x->out, ",\"s\":\"g\"}");
	}
	return 0;
}

/* "source":..,"host":..,"command":..,"run_id":..,"written_by":..,"pid":..,"rank":..,"world_size":..,"local_rank":..,"trace_version":.. */
static void trace_meta(struct sp_export *x, const struct trace_info *t)
{
	const struct sp_trace_meta *m = &t->hdr->meta;

	sp_out_puts(x->out, "\"source\":");
	sp_out_json_str(x->out, t->source);
	sp_out_puts(x->out, ",\"host\":");
	sp_out_json_str(x->out, m->host);
	sp_out_puts(x->out, ",\"command\":");
	sp_out_json_str(x->out, m->command);
	sp_out_puts(x->out, ",\"run_id\":");
	sp_out_json_str(x->out, m->run_id);
	sp_out_puts(x->out, ",\"written_by\":");
	sp_out_json_str(x->out, m->producer);
	sp_out_printf(x->out, ",\"pid\":%d,\"rank\":%d,\"world_size\":%d,\"local_rank\":%d,\"trace_version\":%u",
		      m->pid, m->rank, m->world_size, m->local_rank, t->hdr->version);
}

/* otherData: the trace's metadata (with --merge-ranks: a "ranks" list of them) and the windows. */
static void other_data(struct sp_export *x)
{
	struct chrome *c = x->priv;
	int merged = c->ntraces > 1;

	sp_out_puts(x->out, ",\n\"otherData\":{\"producer\":\"stepprof\",\"stepprof_version\":\"" SP_VERSION "\",");
	if (merged) {
		sp_out_puts(x->out, "\"ranks\":[");
		for (size_t i = 0; i < c->ntraces; i++) {
			sp_out_puts(x->out, i ? ",\n{" : "\n{");
			trace_meta(x, &c->traces[i]);
			sp_out_puts(x->out, "}");
		}
		sp_out_puts(x->out, "]");
	} else {
		trace_meta(x, &c->traces[trace_index(x)]);
	}
	sp_out_printf(x->out,
		      ",\"clock\":\"%s\",\"slices moved to overlap tracks\":%llu,"
		      "\"records without valid times (left out)\":%llu,\"windows\":[",
		      x->wall ? "wall" : "window", (unsigned long long)c->overlaps, (unsigned long long)c->untimed);
	for (size_t i = 0; i < c->nwins; i++) {
		const struct sp_window *w = &c->wins[i].w;
		const struct sp_trace_meta *m = &c->traces[c->wins[i].trace].hdr->meta;
		char cut[24];
		snprintf(cut, sizeof cut, "%lld", (long long)w->last_step);
		sp_out_puts(x->out, i ? ",\n{" : "\n{");
		if (merged)
			sp_out_printf(x->out, "\"rank\":%d,\"pid\":%d,", m->rank, m->pid);
		sp_out_printf(x->out,
			      "\"id\":%u,\"first_step\":%lld,\"last_step\":%lld,\"steps\":%llu,\"complete\":%s,"
			      "\"cut_at_step\":%s,\"inferred\":%s,"
			      "\"capped\":%s,\"start_ns\":%llu,\"end_ns\":%llu,\"bytes\":%llu,\"dropped\":{\"total\":%"
			      "llu",
			      w->id, (long long)w->first_step, (long long)w->last_step,
			      (unsigned long long)c->wins[i].steps, w->complete ? "true" : "false",
			      w->complete ? "null" : cut, w->inferred ? "true" : "false", w->capped ? "true" : "false",
			      (unsigned long long)sp_window_wall(w, w->t0), (unsigned long long)sp_window_wall(w, w->t1),
			      (unsigned long long)w->bytes,
			      (unsigned long long)w->dropped_total);
		for (unsigned s = 1; s < SP_DROP__COUNT; s++)
			sp_out_printf(x->out, ",\"%s\":%llu", sp_drop_source_name(s),
				      (unsigned long long)w->dropped[s]);
		sp_out_puts(x->out, "}}");
	}
	sp_out_puts(x->out, "]}");
}

static int chrome_end(struct sp_export *x)
{
	struct chrome *c = x->priv;

	c->trace = trace_index(x); /* a file without windows still describes its trace */
	if (!c->header)
		header(x, 0);
	sp_out_puts(x->out, "\n]");
	if (x->merged) {
		const struct sp_trace_meta *m = &x->hdr->meta;
		sp_out_printf(x->out, ",\n\"distributedInfo\": {\"world_size\": %d, \"ranks\":[", m->world_size);
		for (size_t t = 0; t < c->ntraces; t++)
			sp_out_printf(x->out, "%s%d", t ? "," : "", c->traces[t].hdr->meta.rank);
		sp_out_puts(x->out, "]},\n");
		device_properties(x, 0);
		sp_out_puts(x->out, "\"stepprof view\": \"merged ranks\"");
	}
	other_data(x);
	sp_out_puts(x->out, "\n}\n");
	if (c->untimed)
		fprintf(stderr,
			"stepprof convert: note: %llu records end before they start (CUPTI took no times for "
			"them): left out of %s\n",
			(unsigned long long)c->untimed, x->dest ? x->dest : "the file");
	sp_idset_free(&c->pids);
	sp_idset_free(&c->tracks);
	sp_chrome_index_free(c);
	free(c->lanes);
	for (size_t i = 0; i < c->nts; i++)
		free(c->ts[i].end);
	free(c->ts);
	free(c->nccl_name);
	free(c->names);
	free(c->wins);
	free(c->traces);
	sp_chrome_ops_free(x);
	free(c);
	x->priv = NULL;
	return 0;
}

const struct sp_export_ops sp_export_chrome = {
	.name = "chrome",
	.suffix = ".pt.trace.json",
	.begin = chrome_begin,
	.window = chrome_window,
	.end = chrome_end,
};
