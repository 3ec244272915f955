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
 * This file: the exporter's callbacks, the metadata around traceEvents and the window's indexes;
 * export_chrome_tracks.c and export_chrome_events.c write the events (export_chrome.h). */
#include "config/version.h"
#include "export_chrome.h"

/* ---- orders ---- */

/* Start ascending, then end descending (an enclosing slice before what it encloses, as viewers
 * nest slices of a track in file order at equal times), then file order. */
static int cmp_order(const void *pa, const void *pb)
{
	const struct sp_event *a = *(const struct sp_event *const *)pa, *b = *(const struct sp_event *const *)pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->end != b->end)
		return a->end > b->end ? -1 : 1;
	return a < b ? -1 : a > b;
}

static int cmp_tid_start(const void *pa, const void *pb)
{
	const struct sp_event *a = *(const struct sp_event *const *)pa, *b = *(const struct sp_event *const *)pb;

	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return cmp_order(pa, pb);
}

/* ---- the window's indexes: correlation ids, devices of contexts, steps, NCCL calls ---- */

/* Sets up k for w's correlation ids: flags by id when the ids are dense (they count up as the
 * program runs: one byte per id, read in about the order written), hash sets otherwise. Exits
 * if memory runs out. */
static void corrs_reset(struct corrs *k, const struct sp_window *w)
{
	uint32_t lo = UINT32_MAX, hi = 0;

	for (size_t i = 0; i < w->n; i++)
		if (w->ev[i].corr) {
			lo = w->ev[i].corr < lo ? w->ev[i].corr : lo;
			hi = w->ev[i].corr > hi ? w->ev[i].corr : hi;
		}
	for (int b = 0; b < 4; b++)
		sp_idset_clear(&k->set[b]);
	k->lo = lo;
	k->n = lo <= hi && (uint64_t)hi - lo < 4 * (uint64_t)w->n + 65536 ? (size_t)(hi - lo) + 1 : 0;
	if (k->n > k->cap) {
		k->cap = k->n;
		k->flags = sp_xrealloc(k->flags, k->cap);
	}
	if (k->n)
		memset(k->flags, 0, k->n);
}

/* 1 if id (not 0) has flag bit. This function can't fail. */
int sp_chrome_corrs_has(const struct corrs *k, uint32_t id, unsigned bit)
{
	if (!k->n)
		return sp_idset_has(&k->set[__builtin_ctz(bit)], id);
	return id >= k->lo && id - k->lo < k->n && (k->flags[id - k->lo] & bit);
}

/* Sets flag bit of id (an id of the window, not 0). Returns 1 if it was not set. Exits if memory
 * runs out. */
int sp_chrome_corrs_add(struct corrs *k, uint32_t id, unsigned bit)
{
	if (!k->n)
		return sp_idset_add(&k->set[__builtin_ctz(bit)], id);
	if (id < k->lo || id - k->lo >= k->n || (k->flags[id - k->lo] & bit))
		return 0;
	k->flags[id - k->lo] |= (uint8_t)bit;
	return 1;
}

/* The device of a GPU or sync record: its own, else the device of its CUDA context in this
 * window, else the window's only device; -1 if none of these is known. */
int sp_chrome_device_of(const struct chrome *c, const struct sp_event *e)
{
	if (e->device != SP_NO_DEVICE)
		return e->device;
	for (size_t i = 0; e->context && i < c->nctx; i++)
		if (c->ctx[i].context == e->context)
			return c->ctx[i].device;
	return c->only_dev;
}

static void call_map_put(struct call_map *m, uint32_t corr, const struct sp_event *call)
{
	if (2 * (m->n + 1) > m->cap) {
		struct call_map old = *m;
		m->cap = m->cap ? 2 * m->cap : 64;
		m->key = calloc(m->cap, sizeof(*m->key));
		m->call = calloc(m->cap, sizeof(*m->call));
		if (!m->key || !m->call)
			sp_oom();
		m->n = 0;
		for (size_t i = 0; i < old.cap; i++)
			if (old.key[i])
				call_map_put(m, old.key[i], old.call[i]);
		free(old.key);
		free(old.call);
	}
	size_t i = (corr * 2654435761u) & (m->cap - 1);
	while (m->key[i] && m->key[i] != corr)
		i = (i + 1) & (m->cap - 1);
	m->n += !m->key[i];
	m->key[i] = corr;
	m->call[i] = call;
}

const struct sp_event *sp_chrome_call_map_get(const struct call_map *m, uint32_t corr)
{
	if (!m->n || !corr)
		return NULL;
	for (size_t i = (corr * 2654435761u) & (m->cap - 1); m->key[i]; i = (i + 1) & (m->cap - 1))
		if (m->key[i] == corr)
			return m->call[i];
	return NULL;
}

/* The NCCL call on e's thread whose span holds e's start, or NULL. */
static const struct sp_event *enclosing_call(const struct chrome *c, const struct sp_event *e)
{
	size_t lo = 0, hi = c->nncall;

	while (lo < hi) { /* first call after (tid, start) */
		size_t mid = (lo + hi) / 2;
		const struct sp_event *m = c->ncall[mid];
		if (m->tid < e->tid || (m->tid == e->tid && m->start <= e->start))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i-- > 0 && c->ncall[i]->tid == e->tid && k < 4; k++) /* calls seldom nest */
		if (c->ncall[i]->end >= e->start)
			return c->ncall[i];
	return NULL;
}

/* Builds the window's indexes (order, flow ends, devices of contexts, steps, NCCL calls). Exits
 * if memory runs out. */
static void index_window(struct sp_export *x, const struct sp_window *w)
{
	struct chrome *c = x->priv;

	corrs_reset(&c->corrs, w);
	c->nctx = c->nsteps = c->nncall = c->step_at = 0;
	c->only_dev = -2;
	if (c->calls.n) {
		memset(c->calls.key, 0, c->calls.cap * sizeof(*c->calls.key));
		c->calls.n = 0;
	}
	if (w->n > c->order_cap) {
		c->order_cap = w->n;
		c->order = sp_xrealloc(c->order, c->order_cap * sizeof(*c->order));
	}
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = &w->ev[i];
		c->order[i] = e;
		if (e->end < e->start)
			continue; /* not written: no flow may end there */
		if (e->kind == SP_EV_API && e->corr)
			sp_chrome_corrs_add(&c->corrs, e->corr, CORR_API);
		else if (sp_ev_is_gpu(e)) {
			if (e->corr)
				sp_chrome_corrs_add(&c->corrs, e->corr, CORR_GPU);
			if (e->device != SP_NO_DEVICE) {
				size_t k = 0;
				while (k < c->nctx && c->ctx[k].context != e->context)
					k++;
				if (k == c->nctx && e->context) {
					c->ctx = sp_xgrow(c->ctx, &c->ctx_cap, sizeof(*c->ctx), c->nctx);
					c->ctx[c->nctx++] = (struct ctxdev){ e->context, e->device };
				}
				c->only_dev = c->only_dev == -2 || c->only_dev == e->device ? e->device : -1;
			}
		} else if (e->kind == SP_EV_NCCL) {
			c->ncall = sp_xgrow(c->ncall, &c->ncall_cap, sizeof(*c->ncall), c->nncall);
			c->ncall[c->nncall++] = e;
		}
	}
	if (c->only_dev == -2)
		c->only_dev = -1;
	if (w->n)
		sp_sort(c->order, w->n, sizeof(*c->order), cmp_order);
	for (size_t i = 0; i < w->n; i++)
		if (c->order[i]->kind == SP_EV_STEP) {
			c->steps = sp_xgrow(c->steps, &c->steps_cap, sizeof(*c->steps), c->nsteps);
			c->steps[c->nsteps++] = c->order[i];
		}
	if (!c->nncall)
		return;
	sp_sort(c->ncall, c->nncall, sizeof(*c->ncall), cmp_tid_start);
	for (size_t i = 0; i < c->nncall; i++)
		if (c->ncall[i]->corr)
			call_map_put(&c->calls, c->ncall[i]->corr, c->ncall[i]);
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = &w->ev[i], *call;
		if (e->kind == SP_EV_API && e->corr && !sp_chrome_call_map_get(&c->calls, e->corr) &&
		    (call = enclosing_call(c, e)))
			call_map_put(&c->calls, e->corr, call);
	}
}
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

/* deviceProperties: every GPU with a device record, then the GPUs the window uses without one. */
static void device_properties(struct sp_export *x, const struct sp_window *w)
{
	struct chrome *c = x->priv;
	uint64_t used = 0;
	int n = 0;

	for (size_t i = 0; w && i < w->n; i++)
		if (sp_ev_is_gpu(&w->ev[i]) && w->ev[i].device < 64)
			used |= 1ull << w->ev[i].device;
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
 * first '"rank": N' of the file. w: the first window, or NULL. */
static void header(struct sp_export *x, const struct sp_window *w)
{
	struct chrome *c = x->priv;
	const struct sp_trace_meta *m = &x->hdr->meta;

	c->header = 1;
	sp_out_puts(x->out, "{\n\"schemaVersion\": 1,\n");
	if (!x->merged && m->rank >= 0) {
		int nccl = (m->features & SP_FEAT_NCCL) != 0; /* or NCCL calls recorded all the same */
		for (size_t i = 0; w && !nccl && i < w->n; i++)
			nccl = w->ev[i].kind == SP_EV_NCCL;
		sp_out_puts(x->out, "\"distributedInfo\": {");
		if (nccl)
			sp_out_puts(x->out, "\"backend\": \"nccl\", ");
		sp_out_printf(x->out, "\"rank\": %d, \"world_size\": %d},\n", m->rank, m->world_size);
	}
	if (!x->merged)
		device_properties(x, w);
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

static int chrome_window(struct sp_export *x, const struct sp_window *w)
{
	struct chrome *c = x->priv;
	const struct sp_trace_meta *m = &x->hdr->meta;
	struct win_info *wi;

	c->trace = trace_index(x);
	c->key = m->rank >= 0 ? m->rank : m->pid;
	/* names by id hold the trace's strings: a later chunk may redefine an id (and the reader frees
	 * the old text), and with --merge-ranks ids are another trace's: look them up anew per window */
	if (c->names)
		memset(c->names, 0, c->names_cap * sizeof(*c->names));
	if (c->nccl_name)
		memset(c->nccl_name, 0, c->nccl_cap);
	if (!x->wall || !c->base_set) {
		uint64_t first = w->t0; /* no negative ts: HTA's alignment of ranks breaks on them */
		for (size_t i = 0; i < w->n; i++)
			if (w->ev[i].start < first && w->ev[i].end >= w->ev[i].start &&
			    !(w->ev[i].kind == SP_EV_ALLOC && (w->ev[i].u.mem.flags & SP_MEMF_SNAPSHOT)))
				first = w->ev[i].start;
		c->base = sp_window_wall(w, first);
		if (x->wall)
			c->base -= c->base % NS_PER_DAY;
		c->base_set = 1;
	}
	if (!c->header)
		header(x, w);
	c->wins = sp_xrealloc(c->wins, (c->nwins + 1) * sizeof(*c->wins));
	wi = &c->wins[c->nwins++];
	wi->w = *w;
	wi->steps = 0;
	wi->trace = c->trace;

	index_window(x, w);
	sp_chrome_ops_window(x, w);
	sp_chrome_name_tracks(x);
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = c->order[i];
		if (e->end < e->start) { /* CUPTI gives a record no times when it could not take them */
			c->untimed++;
			continue;
		}
		if (sp_ev_is_gpu(e))
			sp_chrome_gpu_event(x, w, e);
		else if (e->kind == SP_EV_API)
			sp_chrome_api_event(x, w, e);
		else if (e->kind == SP_EV_NCCL)
			sp_chrome_nccl_event(x, w, e);
		else
			sp_chrome_cpu_event(x, w, e);
		wi->steps += e->kind == SP_EV_STEP;
	}
	sp_chrome_extra_spans(x);
	if (!w->complete) {
		char name[80];
		snprintf(name, sizeof(name), "window %u (incomplete): trace cut short", w->id);
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
		sp_out_puts(x->out, i ? ",\n{" : "\n{");
		if (merged)
			sp_out_printf(x->out, "\"rank\":%d,\"pid\":%d,", m->rank, m->pid);
		sp_out_printf(x->out,
			      "\"id\":%u,\"first_step\":%lld,\"last_step\":%lld,\"steps\":%llu,\"complete\":%s,"
			      "\"capped\":%s,\"start_ns\":%llu,\"end_ns\":%llu,\"bytes\":%llu,\"dropped\":{\"total\":%"
			      "llu",
			      w->id, (long long)w->first_step, (long long)w->last_step,
			      (unsigned long long)c->wins[i].steps, w->complete ? "true" : "false",
			      w->capped ? "true" : "false", (unsigned long long)sp_window_wall(w, w->t0),
			      (unsigned long long)sp_window_wall(w, w->t1), (unsigned long long)w->bytes,
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
		header(x, NULL);
	sp_out_puts(x->out, "\n]");
	if (x->merged) {
		const struct sp_trace_meta *m = &x->hdr->meta;
		sp_out_printf(x->out, ",\n\"distributedInfo\": {\"world_size\": %d, \"ranks\":[", m->world_size);
		for (size_t t = 0; t < c->ntraces; t++)
			sp_out_printf(x->out, "%s%d", t ? "," : "", c->traces[t].hdr->meta.rank);
		sp_out_puts(x->out, "]},\n");
		device_properties(x, NULL);
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
	for (int b = 0; b < 4; b++)
		sp_idset_free(&c->corrs.set[b]);
	free(c->corrs.flags);
	free(c->calls.key);
	free(c->calls.call);
	free(c->ctx);
	free(c->steps);
	free(c->ncall);
	free(c->lanes);
	for (size_t i = 0; i < c->nts; i++)
		free(c->ts[i].end);
	free(c->ts);
	free(c->nccl_name);
	free(c->names);
	free(c->wins);
	free(c->traces);
	free(c->order);
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
