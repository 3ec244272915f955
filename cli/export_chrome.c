/* SPDX-License-Identifier: MIT */
/* export_chrome.c - Chrome Trace Event JSON (object form), as the Perfetto UI and
 * chrome://tracing open it and as Kineto writes it: "X" spans, "s"/"f" flow arrows (cat
 * "ac2g") from launch calls to their GPU work, "C" memory counters, "M" track names.
 * Process ids are unique per rank and device (see docs/OUTPUTS.md), so the files of several
 * ranks merge by concatenating their traceEvents, or are written as one by --merge-ranks, with
 * "nccl" flow arrows between the calls of one collective. Streams: writes each event as it goes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/version.h"
#include "export.h"
#include "config/schedule.h"
#include "nccl.h"
#include "crossrank.h"
#include "symbols.h"

#define GPU_PID_BASE 1000000000ll /* GPU pid = base + key * 100 + device */
#define NS_PER_DAY 86400000000000ull

struct win_info {               /* what otherData says about a window written */
	struct sp_window w;     /* ev/n not used */
	uint64_t steps;
	size_t trace;           /* index in traces */
};

struct trace_info {             /* a trace whose windows are written (several with --merge-ranks) */
	struct sp_trace_reader *r;
	const struct sp_trace_header *hdr;
	const struct sp_windows *g;
	const char *source;
};

struct chrome {
	int first;              /* no event written yet (no comma before the next) */
	int base_set;
	uint64_t base;          /* wall-clock ns at ts 0 */
	int64_t key;            /* rank, or the OS pid if the trace has no rank */
	struct sp_idset pids;   /* processes whose metadata is written */
	struct sp_idset tracks; /* (pid, tid) tracks whose name is written */
	struct sp_idset api_corr, gpu_corr; /* of the current window: flows only where both ends exist */
	const struct sp_event **order; /* the window's events by start, longest first on ties */
	size_t order_cap;
	struct win_info *wins;
	size_t nwins;
	struct trace_info *traces;
	size_t ntraces;
};

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

static int64_t cpu_pid(const struct chrome *c)
{
	return c->key;
}

static int64_t gpu_pid(const struct chrome *c, unsigned device)
{
	return GPU_PID_BASE + c->key * 100 + (device < 99 ? device : 99);
}

/* Starts one event object with its common fields: {"ph":..,"cat":..,"name":..,"pid":..,"tid":..,"ts":.. */
static void ev_open(struct sp_export *x, const char *ph, const char *cat, const char *name, int64_t pid,
		    uint64_t tid, int64_t ts)
{
	struct chrome *c = x->priv;

	sp_out_puts(x->out, c->first ? "\n" : ",\n");
	c->first = 0;
	x->events++;
	sp_out_printf(x->out, "{\"ph\":\"%s\",\"cat\":\"%s\",\"name\":", ph, cat);
	sp_out_json_str(x->out, name);
	sp_out_printf(x->out, ",\"pid\":%lld,\"tid\":%llu,\"ts\":", (long long)pid, (unsigned long long)tid);
	sp_out_us(x->out, ts);
}

/* A metadata record ("M"): name is process_name, thread_name, ...; the value is a string (s) or
 * an integer (s NULL). */
static void meta(struct sp_export *x, const char *name, int64_t pid, uint64_t tid, const char *key, const char *s,
		 long long v)
{
	struct chrome *c = x->priv;

	sp_out_puts(x->out, c->first ? "\n" : ",\n");
	c->first = 0;
	x->events++;
	sp_out_printf(x->out, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%lld,\"tid\":%llu,\"args\":{\"%s\":", name,
		      (long long)pid, (unsigned long long)tid, key);
	if (s)
		sp_out_json_str(x->out, s);
	else
		sp_out_printf(x->out, "%lld", v);
	sp_out_puts(x->out, "}}");
}

static int64_t ts_of(const struct sp_export *x, const struct sp_window *w, uint64_t mono)
{
	const struct chrome *c = x->priv;
	return (int64_t)(sp_window_wall(w, mono) - c->base);
}

static void dur(struct sp_export *x, const struct sp_event *e)
{
	sp_out_puts(x->out, ",\"dur\":");
	sp_out_us(x->out, e->end > e->start ? (int64_t)(e->end - e->start) : 0);
}

static uint64_t flow_id(const struct sp_export *x, uint32_t corr)
{
	int32_t rank = x->hdr->meta.rank;
	return ((uint64_t)(rank >= 0 ? rank + 1 : 0) << 32) | corr;
}

/* A flow arrow's start ('s') or end ('f', bound to the enclosing slice); cat is its name too. */
static void flow(struct sp_export *x, char ph, uint64_t id, const char *cat, int64_t pid, uint64_t tid, int64_t ts)
{
	struct chrome *c = x->priv;

	sp_out_puts(x->out, ",\n");
	c->first = 0;
	x->events++;
	sp_out_printf(x->out, "{\"ph\":\"%c\",\"id\":%llu,\"pid\":%lld,\"tid\":%llu,\"ts\":", ph,
		      (unsigned long long)id, (long long)pid, (unsigned long long)tid);
	sp_out_us(x->out, ts);
	sp_out_printf(x->out, ",\"cat\":\"%s\",\"name\":\"%s\"%s}", cat, cat, ph == 'f' ? ",\"bp\":\"e\"" : "");
}

static const char *str(const struct sp_export *x, uint32_t id, const char *fallback)
{
	return id ? sp_display_name(sp_trace_string(x->r, id)) : fallback;
}

/* ---- names of CUDA enums (CUPTI numbering) ---- */

static const char *memcpy_kind(unsigned k)
{
	static const char *const t[] = { "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					 "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "Unknown";
}

static const char *memory_kind(unsigned k)
{
	static const char *const t[] = { "Unknown", "Pageable", "Pinned", "Device",
					 "Array", "Managed", "Device Static", "Managed Static" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "Unknown";
}

static const char *sync_name(unsigned k)
{
	static const char *const t[] = { "Unknown Sync", "Event Sync", "Stream Wait Event", "Stream Sync",
					 "Context Sync" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "Unknown Sync";
}

static const char *nccl_dtype(unsigned k)
{
	static const char *const t[] = { "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
					 "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "unknown";
}

static const char *nccl_redop(unsigned k)
{
	static const char *const t[] = { "sum", "prod", "max", "min", "avg" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "custom";
}

/* ---- tracks ---- */

static void name_process(struct sp_export *x, int64_t pid, int device)
{
	struct chrome *c = x->priv;
	const struct sp_trace_meta *m = &x->hdr->meta;
	char name[160];
	int n;

	if (!sp_idset_add(&c->pids, (uint64_t)pid))
		return;
	n = m->rank >= 0 ? snprintf(name, sizeof(name), "%s rank %d", m->host, m->rank)
			 : snprintf(name, sizeof(name), "%s pid %d", m->host, m->pid);
	if (device >= 0)
		snprintf(name + n, sizeof(name) - (size_t)n, " GPU %d", device);
	meta(x, "process_name", pid, 0, "name", name, 0);
	meta(x, "process_sort_index", pid, 0, "sort_index", NULL, c->key * 100 + (device >= 0 ? 1 + device : 0));
	if (device >= 0 && sp_windows_device(x->g, (unsigned)device))
		meta(x, "process_labels", pid, 0, "labels", str(x, sp_windows_device(x->g, (unsigned)device)->name, ""), 0);
}

static void name_track(struct sp_export *x, int64_t pid, uint32_t tid, int gpu)
{
	struct chrome *c = x->priv;
	char name[48];
	const char *s;

	if (!sp_idset_add(&c->tracks, ((uint64_t)pid << 32) | tid))
		return;
	if (gpu)
		snprintf(name, sizeof(name), "stream %u", tid);
	else
		snprintf(name, sizeof(name), "thread %u", tid);
	s = gpu ? NULL : sp_windows_thread_name(x->g, tid);
	meta(x, "thread_name", pid, tid, "name", s && *s ? s : name, 0);
	if (gpu)
		meta(x, "thread_sort_index", pid, tid, "sort_index", NULL, tid);
}

/* Names every process and track the window's events land on, first time each is seen. */
static void name_tracks(struct sp_export *x, const struct sp_window *w)
{
	struct chrome *c = x->priv;

	name_process(x, cpu_pid(c), -1);
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = &w->ev[i];
		unsigned dev = e->device == SP_NO_DEVICE ? 99 : e->device;
		if (sp_ev_is_gpu(e) || (e->kind == SP_EV_SYNC && !e->tid)) {
			name_process(x, gpu_pid(c, dev), (int)(dev < 99 ? dev : 99));
			name_track(x, gpu_pid(c, dev), e->stream, 1);
		} else if (e->kind == SP_EV_ALLOC || e->kind == SP_EV_FREE) {
			if (e->device != SP_NO_DEVICE)
				name_process(x, gpu_pid(c, dev), (int)(dev < 99 ? dev : 99));
		} else if (e->kind != SP_EV_DROPPED) {
			name_track(x, cpu_pid(c), e->tid, 0);
		}
	}
}

/* ---- events ---- */

static void ids(struct sp_export *x, const struct sp_event *e)
{
	sp_out_printf(x->out, "\"correlation\":%u,\"device\":%u,\"stream\":%u,\"context\":%u", e->corr, e->device,
		      e->stream, e->context);
}

static void graph(struct sp_export *x, uint32_t id, uint64_t node)
{
	if (id || node)
		sp_out_printf(x->out, ",\"graph id\":%u,\"graph node id\":%llu", id, (unsigned long long)node);
}

static double gbps(const struct sp_event *e)
{
	return e->end > e->start ? (double)e->u.copy.bytes / (double)(e->end - e->start) : 0.0;
}

static void gpu_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	int64_t pid = gpu_pid(c, e->device == SP_NO_DEVICE ? 99 : e->device), ts = ts_of(x, w, e->start);
	char name[96];

	if (e->kind == SP_EV_KERNEL) {
		const struct sp_ev_kernel *k = &e->u.kernel;
		ev_open(x, "X", "kernel", str(x, e->name, "kernel"), pid, e->stream, ts);
		dur(x, e);
		sp_out_puts(x->out, ",\"args\":{");
		ids(x, e);
		sp_out_printf(x->out,
			      ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"registers per thread\":%u,"
			      "\"static shared memory\":%u,\"dynamic shared memory\":%u",
			      k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->regs,
			      k->static_smem, k->dynamic_smem);
		if (k->launch == SP_LAUNCH_COOPERATIVE || k->launch == SP_LAUNCH_CLUSTER)
			sp_out_printf(x->out, ",\"launch type\":\"%s\"",
				      k->launch == SP_LAUNCH_COOPERATIVE ? "cooperative" : "cluster");
		graph(x, k->graph_id, k->graph_node);
	} else if (e->kind == SP_EV_MEMCPY) {
		const struct sp_ev_copy *m = &e->u.copy;
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", memcpy_kind(e->sub), memory_kind(m->src_kind),
			 memory_kind(m->dst_kind));
		ev_open(x, "X", "gpu_memcpy", name, pid, e->stream, ts);
		dur(x, e);
		sp_out_puts(x->out, ",\"args\":{");
		ids(x, e);
		sp_out_printf(x->out, ",\"kind\":\"%s\",\"bytes\":%llu,\"memory bandwidth (GB/s)\":%.3f,\"async\":%s",
			      memcpy_kind(e->sub), (unsigned long long)m->bytes, gbps(e), m->async ? "true" : "false");
		graph(x, m->graph_id, m->graph_node);
	} else {
		const struct sp_ev_copy *m = &e->u.copy;
		snprintf(name, sizeof(name), "Memset (%s)", memory_kind(m->dst_kind));
		ev_open(x, "X", "gpu_memset", name, pid, e->stream, ts);
		dur(x, e);
		sp_out_puts(x->out, ",\"args\":{");
		ids(x, e);
		sp_out_printf(x->out, ",\"bytes\":%llu,\"value\":%u,\"memory bandwidth (GB/s)\":%.3f",
			      (unsigned long long)m->bytes, m->value, gbps(e));
		graph(x, m->graph_id, m->graph_node);
	}
	sp_out_puts(x->out, "}}");
	if (e->kind == SP_EV_KERNEL && x->arrivals) /* waiting and transfer nested in an NCCL kernel */
		x->events += (uint64_t)sp_xrank_wait_slices(x->arrivals, x->out, c->key, e, pid, ts);
	if (e->corr && sp_idset_has(&c->api_corr, e->corr))
		flow(x, 'f', flow_id(x, e->corr), "ac2g", pid, e->stream, ts);
}

static void api_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	const char *cat = e->sub == SP_API_DRIVER ? "cuda_driver" : e->sub == SP_API_NVTX ? "nvtx" : "cuda_runtime";
	int64_t ts = ts_of(x, w, e->start);

	ev_open(x, "X", cat, str(x, e->name, "cuda api"), cpu_pid(c), e->tid, ts);
	dur(x, e);
	sp_out_printf(x->out, ",\"args\":{\"correlation\":%u,\"cbid\":%u", e->corr, e->u.api.cbid);
	if (e->u.api.status)
		sp_out_printf(x->out, ",\"status\":%d", e->u.api.status);
	if (e->device != SP_NO_DEVICE)
		sp_out_printf(x->out, ",\"device\":%u", e->device);
	sp_out_puts(x->out, "}}");
	if (e->corr && sp_idset_has(&c->gpu_corr, e->corr))
		flow(x, 's', flow_id(x, e->corr), "ac2g", cpu_pid(c), e->tid, ts);
}

/* With --merge-ranks, an NCCL call found in the round's match: its collective's key, and if other
 * ranks' calls were found, the arrival skew, this call's wait for the last arrival and who that was. */
static void nccl_match_args(struct sp_export *x, const struct sp_event *e, const struct sp_nccl_peer *p)
{
	sp_out_printf(x->out, ",\"nccl_match\":\"0x%016llx:%llu\",\"nccl calls matched\":%u",
		      (unsigned long long)e->u.nccl.comm, (unsigned long long)e->u.nccl.seq, p->n);
	if (p->n < 2)
		return;
	sp_out_puts(x->out, ",\"arrival skew (us)\":");
	sp_out_us(x->out, (int64_t)(p->last_wall - p->first_wall));
	sp_out_puts(x->out, ",\"wait for last arrival (us)\":");
	sp_out_us(x->out, (int64_t)(p->last_wall - p->wall));
	sp_out_printf(x->out, ",\"last to arrive\":%lld", (long long)p->last_key);
}

static void nccl_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	const struct sp_ev_nccl *n = &e->u.nccl;
	struct sp_nccl_peer p;
	int matched = x->match && sp_nccl_match_find(x->match, c->key, e, &p);
	int64_t ts = ts_of(x, w, e->start);
	char name[48];

	snprintf(name, sizeof(name), "nccl%s", sp_nccl_op_name(e->sub));
	ev_open(x, "X", "nccl", str(x, e->name, name), cpu_pid(c), e->tid, ts);
	dur(x, e);
	sp_out_printf(x->out,
		      ",\"args\":{\"op\":\"%s\",\"count\":%llu,\"bytes\":%llu,\"dtype\":\"%s\",\"comm\":\"0x%016llx\","
		      "\"seq\":%llu,\"comm rank\":%d,\"comm size\":%d,\"group depth\":%u",
		      sp_nccl_op_name(e->sub), (unsigned long long)n->count, (unsigned long long)n->bytes,
		      nccl_dtype(n->dtype), (unsigned long long)n->comm, (unsigned long long)n->seq, n->comm_rank,
		      n->comm_size, n->group_depth);
	if (n->peer >= 0)
		sp_out_printf(x->out, ",\"peer\":%d", n->peer);
	if (n->redop != 0xff)
		sp_out_printf(x->out, ",\"redop\":\"%s\"", nccl_redop(n->redop));
	if (e->device != SP_NO_DEVICE)
		sp_out_printf(x->out, ",\"device\":%u,\"stream\":%u", e->device, e->stream);
	if (matched)
		nccl_match_args(x, e, &p);
	sp_out_puts(x->out, "}}");
	if (!matched || !p.flow || p.n < 2) /* arrows from the lowest rank's call to each other one */
		return;
	for (uint32_t i = p.pos ? p.pos : 1; i < (p.pos ? p.pos + 1 : p.n); i++)
		flow(x, p.pos ? 'f' : 's', p.flow + i, "nccl", cpu_pid(c), e->tid, ts);
}

static void cpu_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	int64_t ts = ts_of(x, w, e->start);
	char name[64];

	switch (e->kind) {
	case SP_EV_SYNC: {
		int on_cpu = e->tid != 0;
		ev_open(x, "X", "cuda_sync", sync_name(e->sub),
			on_cpu ? cpu_pid(c) : gpu_pid(c, e->device == SP_NO_DEVICE ? 99 : e->device),
			on_cpu ? e->tid : e->stream, ts);
		dur(x, e);
		sp_out_puts(x->out, ",\"args\":{");
		ids(x, e);
		if (e->u.sync.event)
			sp_out_printf(x->out, ",\"event\":%u", e->u.sync.event);
		sp_out_puts(x->out, "}}");
		break;
	}
	case SP_EV_MARKER:
		ev_open(x, e->end > e->start ? "X" : "i", "user_annotation", str(x, e->name, "marker"), cpu_pid(c),
			e->tid, ts);
		if (e->end > e->start)
			dur(x, e);
		else
			sp_out_puts(x->out, ",\"s\":\"t\"");
		sp_out_printf(x->out, ",\"args\":{\"depth\":%d", e->u.marker.depth);
		if (e->u.marker.domain) {
			sp_out_puts(x->out, ",\"domain\":");
			sp_out_json_str(x->out, sp_trace_string(x->r, e->u.marker.domain));
		}
		sp_out_puts(x->out, "}}");
		break;
	case SP_EV_STEP:
		snprintf(name, sizeof(name), "ProfilerStep#%lld", (long long)e->u.step.number);
		ev_open(x, "X", "user_annotation", name, cpu_pid(c), e->tid, ts);
		dur(x, e);
		sp_out_printf(x->out, ",\"args\":{\"step\":%lld,\"action\":\"%s\"}}", (long long)e->u.step.number,
			      sp_action_name(e->sub));
		break;
	case SP_EV_ALLOC:
	case SP_EV_FREE: {
		if (e->u.mem.flags & SP_MEMF_PEAK)
			break; /* the level since process start, not a point of this window's timeline */
		int dev = e->device != SP_NO_DEVICE;
		if (dev)
			snprintf(name, sizeof(name), "memory GPU %u", e->device);
		ev_open(x, "C", "memory", dev ? name : "memory host",
			dev ? gpu_pid(c, e->device < 99 ? e->device : 99) : cpu_pid(c), 0, ts);
		sp_out_printf(x->out, ",\"args\":{\"%s\":%llu}}", sp_mem_kind_name(e->sub),
			      (unsigned long long)e->u.mem.live);
		break;
	}
	case SP_EV_DROPPED:
		snprintf(name, sizeof(name), "dropped records (%s)", sp_drop_source_name(e->sub));
		ev_open(x, "i", "stepprof", name, cpu_pid(c), 0, ts);
		sp_out_printf(x->out, ",\"s\":\"p\",\"args\":{\"count\":%llu,\"source\":\"%s\"}}",
			      (unsigned long long)e->u.dropped.count, sp_drop_source_name(e->sub));
		break;
	}
}

/* ---- the exporter ---- */

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

static int chrome_begin(struct sp_export *x)
{
	struct chrome *c = calloc(1, sizeof(*c));

	if (!c) {
		fprintf(stderr, "stepprof: out of memory\n");
		return -1;
	}
	c->first = 1;
	x->priv = c;
	sp_out_puts(x->out, "{\"traceEvents\":[");
	return 0;
}

static int chrome_window(struct sp_export *x, const struct sp_window *w)
{
	struct chrome *c = x->priv;
	const struct sp_trace_meta *m = &x->hdr->meta;
	struct win_info *wi;
	size_t trace = trace_index(x);

	c->key = m->rank >= 0 ? m->rank : m->pid;
	if (!x->wall || !c->base_set) {
		c->base = sp_window_wall(w, w->t0);
		if (x->wall)
			c->base -= c->base % NS_PER_DAY;
		c->base_set = 1;
	}
	sp_idset_clear(&c->api_corr);
	sp_idset_clear(&c->gpu_corr);
	for (size_t i = 0; i < w->n; i++)
		if (w->ev[i].corr)
			sp_idset_add(w->ev[i].kind == SP_EV_API ? &c->api_corr : &c->gpu_corr, w->ev[i].corr);

	c->wins = sp_xrealloc(c->wins, (c->nwins + 1) * sizeof(*c->wins));
	wi = &c->wins[c->nwins++];
	wi->w = *w;
	wi->steps = 0;
	wi->trace = trace;

	if (w->n > c->order_cap) {
		c->order_cap = w->n;
		c->order = sp_xrealloc(c->order, c->order_cap * sizeof(*c->order));
	}
	for (size_t i = 0; i < w->n; i++)
		c->order[i] = &w->ev[i];
	if (w->n)
		sp_sort(c->order, w->n, sizeof(*c->order), cmp_order);

	name_tracks(x, w);
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = c->order[i];
		if (sp_ev_is_gpu(e))
			gpu_event(x, w, e);
		else if (e->kind == SP_EV_API)
			api_event(x, w, e);
		else if (e->kind == SP_EV_NCCL)
			nccl_event(x, w, e);
		else
			cpu_event(x, w, e);
		wi->steps += e->kind == SP_EV_STEP;
	}
	if (!w->complete) {
		char name[80];
		snprintf(name, sizeof(name), "window %u (incomplete): trace cut short", w->id);
		ev_open(x, "i", "stepprof", name, cpu_pid(c), 0, ts_of(x, w, w->t1));
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
	sp_out_printf(x->out, ",\"clock\":\"%s\",\"windows\":[", x->wall ? "wall" : "window");
	for (size_t i = 0; i < c->nwins; i++) {
		const struct sp_window *w = &c->wins[i].w;
		const struct sp_trace_meta *m = &c->traces[c->wins[i].trace].hdr->meta;
		sp_out_puts(x->out, i ? ",\n{" : "\n{");
		if (merged)
			sp_out_printf(x->out, "\"rank\":%d,\"pid\":%d,", m->rank, m->pid);
		sp_out_printf(x->out,
			      "\"id\":%u,\"first_step\":%lld,\"last_step\":%lld,\"steps\":%llu,\"complete\":%s,"
			      "\"capped\":%s,\"start_ns\":%llu,\"end_ns\":%llu,\"bytes\":%llu,\"dropped\":{\"total\":%llu",
			      w->id, (long long)w->first_step, (long long)w->last_step,
			      (unsigned long long)c->wins[i].steps, w->complete ? "true" : "false",
			      w->capped ? "true" : "false", (unsigned long long)sp_window_wall(w, w->t0),
			      (unsigned long long)sp_window_wall(w, w->t1), (unsigned long long)w->bytes,
			      (unsigned long long)w->dropped_total);
		for (unsigned s = 1; s < SP_DROP__COUNT; s++)
			sp_out_printf(x->out, ",\"%s\":%llu", sp_drop_source_name(s), (unsigned long long)w->dropped[s]);
		sp_out_puts(x->out, "}}");
	}
	sp_out_puts(x->out, "]}");
}

static int chrome_end(struct sp_export *x)
{
	struct chrome *c = x->priv;
	int n = 0;

	sp_out_printf(x->out, "\n],\n\"displayTimeUnit\":\"ns\",\n\"baseTimeNanoseconds\":%llu,\n\"deviceProperties\":[",
		      (unsigned long long)c->base);
	trace_index(x); /* a file without windows still describes its trace */
	for (size_t t = 0; t < c->ntraces; t++)
		for (unsigned d = 0; d < SP_WIN_MAX_DEVICES; d++) {
			const struct sp_event *e = sp_windows_device(c->traces[t].g, d);
			if (!e)
				continue;
			sp_out_printf(x->out, "%s{\"id\":%u,\"name\":", n++ ? "," : "", d);
			sp_out_json_str(x->out, e->name ? sp_trace_string(c->traces[t].r, e->name) : "");
			sp_out_printf(x->out,
				      ",\"totalGlobalMem\":%llu,\"computeMajor\":%u,\"computeMinor\":%u,\"numSms\":%u",
				      (unsigned long long)e->u.dev.memory, e->u.dev.cc_major, e->u.dev.cc_minor,
				      e->u.dev.sm_count);
			if (c->ntraces > 1)
				sp_out_printf(x->out, ",\"rank\":%d", c->traces[t].hdr->meta.rank);
			sp_out_puts(x->out, "}");
		}
	sp_out_puts(x->out, "]");
	other_data(x);
	sp_out_puts(x->out, "\n}\n");
	sp_idset_free(&c->pids);
	sp_idset_free(&c->tracks);
	sp_idset_free(&c->api_corr);
	sp_idset_free(&c->gpu_corr);
	free(c->wins);
	free(c->traces);
	free(c->order);
	free(c);
	x->priv = NULL;
	return 0;
}

const struct sp_export_ops sp_export_chrome = {
	.name = "chrome",
	.suffix = ".json",
	.begin = chrome_begin,
	.window = chrome_window,
	.end = chrome_end,
};
