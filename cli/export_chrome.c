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
 * even after the reader's float arithmetic. Streams: writes each event as it goes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/version.h"
#include "export.h"
#include "config/schedule.h"
#include "nccl.h"
#include "crossrank.h"
#include "symbols.h"

#define GPU_PID_BASE 1000000000ll  /* merged view: GPU pid = base + key * 100 + device */
#define NO_DEV_PID 65535           /* per-rank view: GPU work whose device is unknown */
#define CPU_PID_SHIFT 0x10000000ll /* per-rank view: an OS pid that would collide with a device ordinal */
#define SYNC_TID_BASE 1000000000ull /* sync track of stream s, lane l: base + s * 16 + l */
#define SPAN_TID_BASE 2000000000ull /* extra span track t, lane l: base + t * 16 + l */
#define OVER_TID_BASE 3000000000ull /* slices that would partly overlap one on track tid: base + tid * 16 + l */
#define LANES 16
#define NS_PER_DAY 86400000000000ull
#define PROGRESS_EVERY 65536

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

struct lane {                   /* the last end of a lane of a track that gets lanes */
	int64_t pid;
	uint64_t tid;           /* the lane's tid */
	uint64_t end;
};

struct tstack {                 /* the slices open on a track at the time being written */
	int64_t pid;
	uint64_t tid;
	int64_t *end;           /* their ends (ns), innermost last */
	size_t n, cap;
};

struct ctxdev {                 /* CUDA context -> device, from the window's GPU records */
	uint32_t context;
	uint16_t device;
};

struct call_map {               /* correlation id -> the NCCL call that launched the kernel */
	uint32_t *key;          /* 0 = empty */
	const struct sp_event **call;
	size_t cap, n;
};

enum { CORR_API = 1, CORR_GPU = 2, CORR_FLOW_S = 4, CORR_FLOW_F = 8 };

struct corrs {                  /* per correlation id of the current window: CORR_* flags (which ends
                                   exist, which flow ends are written) */
	uint32_t lo;            /* the window's smallest id: flags[id - lo] */
	size_t n, cap;          /* ids covered; 0: the window's ids are too sparse, sets are used */
	uint8_t *flags;
	struct sp_idset set[4]; /* by flag bit, when sparse */
};

struct chrome {
	int header;             /* the metadata before traceEvents is written */
	int first;              /* no event written yet (no comma before the next) */
	int base_set;
	uint64_t base;          /* wall-clock ns at ts 0 */
	int64_t key;            /* rank, or the OS pid if the trace has no rank */
	size_t trace;           /* index in traces of the trace being written */
	uint64_t next_progress; /* x->events at which progress is called next */
	struct sp_idset pids;   /* processes whose metadata is written */
	struct sp_idset tracks; /* (pid, tid) tracks whose name is written */
	struct corrs corrs;     /* flows only where both ends exist, one of each end per id */
	const struct sp_event **order; /* the window's events by start, longest first on ties */
	size_t order_cap;
	const struct sp_event **steps; /* the window's steps by start */
	size_t nsteps, steps_cap, step_at;
	const struct sp_event **ncall; /* the window's NCCL calls by (tid, start) */
	size_t nncall, ncall_cap;
	struct call_map calls;
	struct ctxdev *ctx;     /* contexts seen, few */
	size_t nctx, ctx_cap;
	int only_dev;           /* the one device of the window's GPU work, -1 none or several */
	struct lane *lanes;
	size_t nlanes, lanes_cap;
	struct tstack *ts;      /* per track, for fit() */
	size_t nts, ts_cap, ts_last;
	uint64_t overlaps;      /* slices moved off their track by fit() */
	uint64_t untimed;       /* records left out: they end before they start (CUPTI gave no times) */
	struct win_info *wins;
	size_t nwins;
	struct trace_info *traces;
	size_t ntraces;
	uint8_t *nccl_name;     /* by name id: 0 unknown, 1 not an NCCL kernel, 2 an NCCL kernel */
	size_t nccl_cap;
	struct name { const char *s; size_t n; int plain; } *names; /* by name id: display name, its
	                           length, 1 if JSON needs no escape in it (0: not looked up yet, -1: needs) */
	size_t names_cap;
};

/* ---- CUDA facts the trace does not carry (per compute capability, CUDA occupancy tables) ---- */

struct arch {
	uint8_t major, minor;
	uint8_t max_warps;      /* resident warps per SM */
	uint8_t max_blocks;     /* resident blocks per SM */
	uint32_t smem_sm;       /* shared memory per SM, bytes */
	uint32_t smem_optin;    /* the most shared memory one block may opt in to */
	uint32_t smem_reserved; /* shared memory the system reserves per block */
};

static const struct arch arches[] = {
	{ 6, 0, 64, 32, 65536, 49152, 0 },        { 6, 1, 64, 32, 98304, 49152, 0 },
	{ 7, 0, 64, 32, 98304, 98304, 0 },        { 7, 2, 64, 32, 98304, 98304, 0 },
	{ 7, 5, 32, 16, 65536, 65536, 0 },        { 8, 0, 64, 32, 167936, 166912, 1024 },
	{ 8, 6, 48, 16, 102400, 101376, 1024 },   { 8, 7, 48, 16, 167936, 166912, 1024 },
	{ 8, 9, 48, 24, 102400, 101376, 1024 },   { 9, 0, 64, 32, 233472, 232448, 1024 },
	{ 10, 0, 64, 32, 233472, 232448, 1024 },  { 10, 3, 64, 32, 233472, 232448, 1024 },
	{ 12, 0, 48, 32, 102400, 101376, 1024 },
};

static const struct arch *arch_of(const struct sp_event *dev)
{
	for (size_t i = 0; dev && i < sizeof(arches) / sizeof(arches[0]); i++)
		if (arches[i].major == dev->u.dev.cc_major && arches[i].minor == dev->u.dev.cc_minor)
			return &arches[i];
	return NULL;
}

/* ---- small helpers ---- */

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

static int64_t cpu_pid(const struct sp_export *x)
{
	const struct chrome *c = x->priv;
	int64_t pid = x->hdr->meta.pid;

	if (x->merged)
		return c->key;
	return pid >= 0 && pid < SP_WIN_MAX_DEVICES ? pid + CPU_PID_SHIFT : pid;
}

/* device: an ordinal, or -1 (unknown) */
static int64_t gpu_pid(const struct sp_export *x, int device)
{
	const struct chrome *c = x->priv;

	if (x->merged)
		return GPU_PID_BASE + c->key * 100 + (device >= 0 && device < 99 ? device : 99);
	return device >= 0 ? device : NO_DEV_PID;
}

/* Correlation ids (and the ids of launch flows) as written: unique per rank in a merged file. */
static uint64_t corr_id(const struct sp_export *x, uint32_t corr)
{
	int32_t rank = x->hdr->meta.rank;
	return x->merged ? ((uint64_t)(rank >= 0 ? rank + 1 : 0) << 32) | corr : corr;
}

/* ts + d, saturated (times of a damaged trace may be anything). Can't fail. */
static int64_t add_ns(int64_t ts, uint64_t d)
{
	return d > (uint64_t)(INT64_MAX - (ts > 0 ? ts : 0)) ? INT64_MAX : ts + (int64_t)d;
}

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
static void ev_open_id(struct sp_export *x, const char *ph, const char *cat, uint32_t name_id, const char *name,
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

static void ev_open(struct sp_export *x, const char *ph, const char *cat, const char *name, int64_t pid,
		    uint64_t tid, int64_t ts)
{
	ev_open_id(x, ph, cat, 0, name, pid, tid, ts);
}

/* A metadata record ("M"): name is process_name, thread_name, ...; the value is a string (s) or
 * an integer (s NULL). */
static void meta(struct sp_export *x, const char *name, int64_t pid, uint64_t tid, const char *key, const char *s,
		 long long v)
{
	comma(x);
	sp_out_printf(x->out, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%lld,\"tid\":%llu,\"ts\":0,\"args\":{\"%s\":", name,
		      (long long)pid, (unsigned long long)tid, key);
	if (s)
		sp_out_json_str(x->out, s);
	else
		sp_out_printf(x->out, "%lld", v);
	sp_out_puts(x->out, "}}");
}

static int64_t ts_wall(const struct sp_export *x, uint64_t wall)
{
	const struct chrome *c = x->priv;
	return (int64_t)(wall - c->base);
}

static int64_t ts_of(const struct sp_export *x, const struct sp_window *w, uint64_t mono)
{
	return ts_wall(x, sp_window_wall(w, mono));
}

static void dur_ns(struct sp_export *x, uint64_t d)
{
	char *p = sp_out_room(x->out, SP_PUT_NUM_MAX + 8);
	sp_out_done(x->out, sp_put_us(SP_PUT_LIT(p, ",\"dur\":"), (int64_t)d));
}

static void dur(struct sp_export *x, const struct sp_event *e)
{
	dur_ns(x, e->end > e->start ? e->end - e->start : 0);
}

/* A flow arrow's start ('s') or end ('f', bound to the enclosing slice); cat is its name too. */
static void flow(struct sp_export *x, char ph, uint64_t id, const char *cat, int64_t pid, uint64_t tid, int64_t ts)
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

static const char *str(const struct sp_export *x, uint32_t id, const char *fallback)
{
	return id ? sp_display_name(sp_trace_string(x->r, id)) : fallback;
}

/* 1 if kernel name id is an NCCL kernel (cached by id). Exits if memory runs out. */
static int is_nccl_kernel(struct sp_export *x, uint32_t id)
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
static uint64_t lane(struct sp_export *x, int64_t pid, uint64_t base, uint64_t start, uint64_t end)
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

static void name_track_as(struct sp_export *x, int64_t pid, uint64_t tid, const char *name, long long sort);

/* The track a slice [ts, ts + d) (ns) of track (pid, tid) is written on: its own, unless it would
 * partly overlap a slice open there (viewers nest the slices of a track; Perfetto drops what does
 * not nest), then a lane of "<kind> <tid> (overlapping)". Slices come in start order. Exits if
 * memory runs out. */
static uint64_t fit(struct sp_export *x, int64_t pid, uint64_t tid, int64_t ts, uint64_t d, int gpu)
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
		uint64_t base = OVER_TID_BASE + tid * LANES, l = lane(x, pid, base, (uint64_t)ts, (uint64_t)end);
		char name[80];
		snprintf(name, sizeof(name), "%s %llu (overlapping)%s", gpu ? "stream" : "thread",
			 (unsigned long long)tid, l == base ? "" : " +");
		name_track_as(x, pid, l, name, (long long)l);
		c->overlaps++;
		return l;
	}
	t->end = sp_xgrow(t->end, &t->cap, sizeof(*t->end), t->n);
	t->end[t->n++] = end;
	return tid;
}

/* ---- names of CUDA and NCCL enums ---- */

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
	static const char *const t[] = { "Unknown", "Event Sync", "Stream Wait Event", "Stream Sync",
					 "Context Sync" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "Unknown";
}

static const char *nccl_dtype(unsigned k)
{
	static const char *const t[] = { "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
					 "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "unknown";
}

/* The dtype as torch.distributed names it in Kineto's collective args ("Float", "BFloat16"). */
static const char *torch_dtype(unsigned k)
{
	static const char *const t[] = { "Char", "Byte", "Int", "UInt32", "Long", "UInt64", "Half",
					 "Float", "Double", "BFloat16", "Float8_e4m3fn", "Float8_e5m2" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "Unknown";
}

/* The collective as Kineto's "Collective name" gives it (torch.distributed's c10d names). */
static const char *collective_name(unsigned op)
{
	switch (op) {
	case SP_NCCL_ALLREDUCE: return "allreduce";
	case SP_NCCL_ALLGATHER: return "allgather";
	case SP_NCCL_REDUCESCATTER: return "reduce_scatter";
	case SP_NCCL_BROADCAST: return "broadcast";
	case SP_NCCL_REDUCE: return "reduce";
	case SP_NCCL_ALLTOALL: return "all_to_all";
	case SP_NCCL_SEND: return "send";
	case SP_NCCL_RECV: return "recv";
	default: return "unknown";
	}
}

static const char *nccl_redop(unsigned k)
{
	static const char *const t[] = { "sum", "prod", "max", "min", "avg" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "custom";
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
static int corrs_has(const struct corrs *k, uint32_t id, unsigned bit)
{
	if (!k->n)
		return sp_idset_has(&k->set[__builtin_ctz(bit)], id);
	return id >= k->lo && id - k->lo < k->n && (k->flags[id - k->lo] & bit);
}

/* Sets flag bit of id (an id of the window, not 0). Returns 1 if it was not set. Exits if memory
 * runs out. */
static int corrs_add(struct corrs *k, uint32_t id, unsigned bit)
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
static int device_of(const struct chrome *c, const struct sp_event *e)
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

static const struct sp_event *call_map_get(const struct call_map *m, uint32_t corr)
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
			corrs_add(&c->corrs, e->corr, CORR_API);
		else if (sp_ev_is_gpu(e)) {
			if (e->corr)
				corrs_add(&c->corrs, e->corr, CORR_GPU);
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
		if (e->kind == SP_EV_API && e->corr && !call_map_get(&c->calls, e->corr) && (call = enclosing_call(c, e)))
			call_map_put(&c->calls, e->corr, call);
	}
}

/* ---- tracks ---- */

static void name_process(struct sp_export *x, int64_t pid, int device)
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
	     x->merged ? c->key * 100 + (device >= 0 ? 1 + device : device == -2 ? 99 : 0)
		       : device == -1 ? 0 : 0x1000000 + (device >= 0 ? device : 0xffff));
}

static void name_track_as(struct sp_export *x, int64_t pid, uint64_t tid, const char *name, long long sort)
{
	struct chrome *c = x->priv;

	if (!sp_idset_add(&c->tracks, ((uint64_t)pid << 40) ^ tid))
		return;
	meta(x, "thread_name", pid, tid, "name", name, 0);
	meta(x, "thread_sort_index", pid, tid, "sort_index", NULL, sort);
}

static void name_track(struct sp_export *x, int64_t pid, uint32_t tid, int gpu)
{
	char name[48];
	const char *s;

	if (gpu)
		snprintf(name, sizeof(name), "stream %u", tid);
	else
		snprintf(name, sizeof(name), "thread %u", tid);
	s = gpu ? NULL : sp_windows_thread_name(x->g, tid);
	name_track_as(x, pid, tid, s && *s ? s : name, tid);
}

/* The GPU process of device (-1: unknown), named on first use. */
static int64_t gpu_process(struct sp_export *x, int device)
{
	int64_t pid = gpu_pid(x, device);
	name_process(x, pid, device >= 0 ? device : -2);
	return pid;
}

/* Names every process and track the window's events land on, first time each is seen (the
 * tracks with lanes are named as they are used). */
static void name_tracks(struct sp_export *x)
{
	struct chrome *c = x->priv;
	const struct sp_window *w = &c->wins[c->nwins - 1].w;

	name_process(x, cpu_pid(x), -1);
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = c->order[i];
		if (sp_ev_is_gpu(e))
			name_track(x, gpu_process(x, device_of(c, e)), e->stream, 1);
		else if (e->kind == SP_EV_ALLOC || e->kind == SP_EV_FREE) {
			if (e->device != SP_NO_DEVICE)
				gpu_process(x, e->device);
		} else if (e->kind != SP_EV_DROPPED && e->kind != SP_EV_SYNC) {
			name_track(x, cpu_pid(x), e->tid, 0);
		}
	}
}

/* ---- events ---- */

/* "External id", "device", "context", "stream", "correlation" as Kineto's GPU records carry them. */
static void gpu_ids(struct sp_export *x, const struct sp_event *e, int device)
{
	uint64_t id = corr_id(x, e->corr);
	char *p = sp_out_room(x->out, 5 * SP_PUT_NUM_MAX + 80);

	p = SP_PUT_LIT(p, ",\"args\":{\"External id\":");
	p = sp_put_u64(p, id);
	p = SP_PUT_LIT(p, ",\"device\":");
	p = sp_put_i64(p, device);
	p = SP_PUT_LIT(p, ",\"context\":");
	p = sp_put_u64(p, e->context);
	p = SP_PUT_LIT(p, ",\"stream\":");
	p = sp_put_u64(p, e->stream);
	p = SP_PUT_LIT(p, ",\"correlation\":");
	sp_out_done(x->out, sp_put_u64(p, id));
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

/* Kineto's launch statistics of a kernel: blocks and warps per SM and the estimated achieved
 * occupancy (resident blocks by the CUDA occupancy rules of the device's compute capability,
 * capped by the blocks there are per SM), or -1 where the device's record is missing. */
static void occupancy(struct sp_export *x, const struct sp_event *e, int device)
{
	const struct sp_ev_kernel *k = &e->u.kernel;
	const struct sp_event *dev = device >= 0 ? sp_windows_device(x->g, (unsigned)device) : NULL;
	const struct arch *a = arch_of(dev);
	double blocks = (double)k->grid[0] * k->grid[1] * k->grid[2];
	uint64_t threads = (uint64_t)k->block[0] * k->block[1] * k->block[2], warps = (threads + 31) / 32;
	double bps = -1, wps = -1, occ = -1;

	if (dev && dev->u.dev.sm_count) {
		bps = blocks / dev->u.dev.sm_count;
		wps = bps * (double)warps;
	}
	if (a && bps >= 0 && warps) {
		uint64_t active = a->max_blocks, regs_warp = ((uint64_t)k->regs * 32 + 255) / 256 * 256;
		uint64_t smem = (uint64_t)k->static_smem + k->dynamic_smem;
		if (warps <= a->max_warps && active > a->max_warps / warps)
			active = a->max_warps / warps;
		if (warps > a->max_warps)
			active = 0;
		if (regs_warp && active > 65536 / regs_warp / warps)
			active = 65536 / regs_warp / warps;
		if (smem) {
			smem = (smem + a->smem_reserved + 127) / 128 * 128;
			if (smem > a->smem_optin + a->smem_reserved)
				active = 0;
			else if (active > a->smem_sm / smem)
				active = a->smem_sm / smem;
		}
		occ = ((double)active < bps ? (double)active : bps) * (double)warps / a->max_warps * 100.0;
	}
	char *p = sp_out_room(x->out, 2 * SP_PUT_FIXED_MAX + SP_PUT_NUM_MAX + 80);
	p = SP_PUT_LIT(p, ",\"blocks per SM\":");
	p = sp_put_fixed(p, bps, bps < 0 ? 0 : 6);
	p = SP_PUT_LIT(p, ",\"warps per SM\":");
	p = sp_put_fixed(p, wps, wps < 0 ? 0 : 6);
	p = SP_PUT_LIT(p, ",\"est. achieved occupancy %\":");
	sp_out_done(x->out, sp_put_i64(p, occ < 0 ? -1 : (int64_t)(occ + 0.5)));
}

/* The collective's args on an NCCL kernel, as Kineto's NCCL profiler writes them. */
static void collective_args(struct sp_export *x, const struct sp_event *call)
{
	const struct sp_ev_nccl *n = &call->u.nccl;
	const struct sp_trace_meta *m = &x->hdr->meta;
	uint64_t in = n->count, out = n->count, size = n->comm_size > 0 ? (uint64_t)n->comm_size : 1;

	if (call->sub == SP_NCCL_ALLGATHER)
		out = n->count * size;
	else if (call->sub == SP_NCCL_REDUCESCATTER)
		in = n->count * size;
	else if (call->sub == SP_NCCL_ALLTOALL)
		in = out = n->count * size;
	sp_out_printf(x->out,
		      ",\"Collective name\":\"%s\",\"In msg nelems\":%llu,\"Out msg nelems\":%llu,\"Group size\":%d,"
		      "\"dtype\":\"%s\",\"In split size\":\"[]\",\"Out split size\":\"[]\","
		      "\"Process Group Name\":\"0x%016llx\",\"Process Group Description\":\"NCCL communicator\"",
		      collective_name(call->sub), (unsigned long long)in, (unsigned long long)out, n->comm_size,
		      torch_dtype(n->dtype), (unsigned long long)n->comm);
	if (n->comm_size > 0 && n->comm_size == m->world_size && n->comm_rank == m->rank) {
		/* stepprof does not see the global ranks of a communicator's members; one as large as the
		 * world, where this rank has its own number, is taken for the world's (said so) */
		sp_out_puts(x->out, ",\"Process Group Ranks\":\"[");
		for (int i = 0; i < n->comm_size; i++)
			sp_out_printf(x->out, "%s%d", i ? ", " : "", i);
		sp_out_puts(x->out, "]\",\"Process Group Ranks source\":\"inferred: the communicator spans the world\"");
	}
}

/* An unsigned integer written as "key":v. */
static void arg_u(struct sp_export *x, const char *key, uint64_t v)
{
	sp_out_puts(x->out, key);
	sp_out_u64(x->out, v);
}

/* "key":[a,b,c] at p (room for 3 * SP_PUT_NUM_MAX + 4 bytes and the key). Returns the new end. */
#define PUT_DIM(p, key, d) put_dim(SP_PUT_LIT(p, key), d)
static char *put_dim(char *p, const uint32_t d[3])
{
	*p++ = '[';
	p = sp_put_u64(p, d[0]);
	*p++ = ',';
	p = sp_put_u64(p, d[1]);
	*p++ = ',';
	p = sp_put_u64(p, d[2]);
	*p++ = ']';
	return p;
}

static void kernel_args(struct sp_export *x, const struct sp_ev_kernel *k)
{
	char *p = sp_out_room(x->out, 10 * SP_PUT_NUM_MAX + 160);

	p = sp_put_u64(SP_PUT_LIT(p, ",\"registers per thread\":"), k->regs);
	p = sp_put_u64(SP_PUT_LIT(p, ",\"shared memory\":"), (uint64_t)k->static_smem + k->dynamic_smem);
	p = sp_put_u64(SP_PUT_LIT(p, ",\"static shared memory\":"), k->static_smem);
	p = sp_put_u64(SP_PUT_LIT(p, ",\"dynamic shared memory\":"), k->dynamic_smem);
	p = PUT_DIM(p, ",\"grid\":", k->grid);
	sp_out_done(x->out, PUT_DIM(p, ",\"block\":", k->block));
}

static void gpu_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	int device = device_of(c, e);
	int64_t pid = gpu_pid(x, device), ts = ts_of(x, w, e->start);
	uint64_t tid = fit(x, pid, e->stream, ts, e->end > e->start ? e->end - e->start : 0, 1);
	char name[96];

	if (e->kind == SP_EV_KERNEL) {
		const struct sp_ev_kernel *k = &e->u.kernel;
		const struct sp_event *call;
		ev_open_id(x, "X", "kernel", e->name, "kernel", pid, tid, ts);
		dur(x, e);
		gpu_ids(x, e, device);
		kernel_args(x, k);
		occupancy(x, e, device);
		if (k->launch == SP_LAUNCH_COOPERATIVE || k->launch == SP_LAUNCH_CLUSTER)
			sp_out_printf(x->out, ",\"launch type\":\"%s\"",
				      k->launch == SP_LAUNCH_COOPERATIVE ? "cooperative" : "cluster");
		graph(x, k->graph_id, k->graph_node);
		if (c->nncall && (call = call_map_get(&c->calls, e->corr)) && is_nccl_kernel(x, e->name))
			collective_args(x, call);
	} else if (e->kind == SP_EV_MEMCPY) {
		const struct sp_ev_copy *m = &e->u.copy;
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", memcpy_kind(e->sub), memory_kind(m->src_kind),
			 memory_kind(m->dst_kind));
		ev_open(x, "X", "gpu_memcpy", name, pid, tid, ts);
		dur(x, e);
		gpu_ids(x, e, device);
		arg_u(x, ",\"bytes\":", m->bytes);
		sp_out_puts(x->out, ",\"memory bandwidth (GB/s)\":");
		sp_out_fixed(x->out, gbps(e), 3);
		sp_out_puts(x->out, ",\"kind\":\"");
		sp_out_puts(x->out, memcpy_kind(e->sub));
		sp_out_puts(x->out, m->async ? "\",\"async\":true" : "\",\"async\":false");
		graph(x, m->graph_id, m->graph_node);
	} else {
		const struct sp_ev_copy *m = &e->u.copy;
		snprintf(name, sizeof(name), "Memset (%s)", memory_kind(m->dst_kind));
		ev_open(x, "X", "gpu_memset", name, pid, tid, ts);
		dur(x, e);
		gpu_ids(x, e, device);
		arg_u(x, ",\"bytes\":", m->bytes);
		sp_out_puts(x->out, ",\"memory bandwidth (GB/s)\":");
		sp_out_fixed(x->out, gbps(e), 3);
		arg_u(x, ",\"value\":", m->value);
		graph(x, m->graph_id, m->graph_node);
	}
	sp_out_puts(x->out, "}}");
	if (e->kind == SP_EV_KERNEL && x->arrivals) /* waiting and transfer nested in an NCCL kernel, on its track */
		x->events += (uint64_t)sp_xrank_wait_slices(x->arrivals, x->out, c->key, e, pid, tid, ts);
	if (e->corr && corrs_has(&c->corrs, e->corr, CORR_API) && corrs_add(&c->corrs, e->corr, CORR_FLOW_F))
		flow(x, 'f', corr_id(x, e->corr), "ac2g", pid, tid, ts);
}

static void api_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	const char *cat = e->sub == SP_API_DRIVER ? "cuda_driver" : e->sub == SP_API_NVTX ? "nvtx" : "cuda_runtime";
	int64_t ts = ts_of(x, w, e->start);
	uint64_t id = corr_id(x, e->corr), tid = fit(x, cpu_pid(x), e->tid, ts, e->end > e->start ? e->end - e->start : 0, 0);

	ev_open_id(x, "X", cat, e->name, "cuda api", cpu_pid(x), tid, ts);
	dur(x, e);
	char *p = sp_out_room(x->out, 5 * SP_PUT_NUM_MAX + 80);
	p = sp_put_u64(SP_PUT_LIT(p, ",\"args\":{\"External id\":"), id);
	p = sp_put_u64(SP_PUT_LIT(p, ",\"cbid\":"), e->u.api.cbid);
	p = sp_put_u64(SP_PUT_LIT(p, ",\"correlation\":"), id);
	if (e->u.api.status)
		p = sp_put_i64(SP_PUT_LIT(p, ",\"status\":"), e->u.api.status);
	if (e->device != SP_NO_DEVICE)
		p = sp_put_u64(SP_PUT_LIT(p, ",\"device\":"), e->device);
	sp_out_done(x->out, SP_PUT_LIT(p, "}}"));
	if (e->corr && corrs_has(&c->corrs, e->corr, CORR_GPU) && corrs_add(&c->corrs, e->corr, CORR_FLOW_S))
		flow(x, 's', corr_id(x, e->corr), "ac2g", cpu_pid(x), tid, ts);
}

/* A CUPTI synchronisation record: Kineto's cuda_sync on the GPU process of its device, stream -1
 * when it names none; on a track of its own per stream (a wait overlaps the work it waits for,
 * so on the stream's track it would cut the kernels' slices), with lanes for waits that overlap. */
static void sync_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	int device = device_of(c, e);
	int64_t pid = gpu_process(x, device), ts = ts_of(x, w, e->start);
	uint64_t tid = lane(x, pid, SYNC_TID_BASE + (uint64_t)e->stream * LANES, e->start, e->end);
	char track[64];
	int n;

	n = e->stream ? snprintf(track, sizeof(track), "stream %u sync", e->stream)
		      : snprintf(track, sizeof(track), "sync (no stream)");
	if ((tid - SYNC_TID_BASE) % LANES)
		snprintf(track + n, sizeof(track) - (size_t)n, " (%u)", (unsigned)((tid - SYNC_TID_BASE) % LANES) + 1);
	name_track_as(x, pid, tid, track, (long long)(tid - SYNC_TID_BASE));
	ev_open(x, "X", "cuda_sync", sync_name(e->sub), pid, tid, ts);
	dur(x, e);
	sp_out_printf(x->out, ",\"args\":{\"cuda_sync_kind\":\"%s\",\"stream\":%lld,\"correlation\":%llu,"
			      "\"External id\":%llu,\"device\":%d,\"context\":%u",
		      sync_name(e->sub), e->stream ? (long long)e->stream : -1ll,
		      (unsigned long long)corr_id(x, e->corr), (unsigned long long)corr_id(x, e->corr), device,
		      e->context);
	if (e->u.sync.event && e->u.sync.event != UINT32_MAX) /* CUPTI's "invalid" */
		sp_out_printf(x->out, ",\"event\":%u", e->u.sync.event);
	sp_out_puts(x->out, "}}");
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

/* An NCCL call on its CPU thread. Its CUDA stream is written as "cuda stream", never "stream":
 * readers of Kineto traces (HTA) take any event with a stream for GPU work. */
static void nccl_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	const struct sp_ev_nccl *n = &e->u.nccl;
	struct sp_nccl_peer p;
	int matched = x->match && sp_nccl_match_find(x->match, c->key, e, &p);
	int64_t ts = ts_of(x, w, e->start);
	uint64_t tid = fit(x, cpu_pid(x), e->tid, ts, e->end > e->start ? e->end - e->start : 0, 0);
	char name[48];

	snprintf(name, sizeof(name), "nccl%s", sp_nccl_op_name(e->sub));
	ev_open(x, "X", "nccl", str(x, e->name, name), cpu_pid(x), tid, ts);
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
		sp_out_printf(x->out, ",\"device\":%u,\"cuda stream\":%u", e->device, e->stream);
	if (matched)
		nccl_match_args(x, e, &p);
	sp_out_puts(x->out, "}}");
	if (!matched || !p.flow || p.n < 2) /* arrows from the lowest rank's call to each other one */
		return;
	for (uint32_t i = p.pos ? p.pos : 1; i < (p.pos ? p.pos + 1 : p.n); i++)
		flow(x, p.pos ? 'f' : 's', p.flow + i, "nccl", cpu_pid(x), tid, ts);
}

/* A step as Kineto's ProfilerStep#N: its duration is cut where the next step on its thread
 * starts, and by the nanoseconds it takes for ts + dur, as a reader adds them in doubles, to
 * stay at or before the next step's ts (readers nest touching steps otherwise). */
static void step_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	int64_t ts = ts_of(x, w, e->start);
	uint64_t d = e->end > e->start ? e->end - e->start : 0;
	char name[64];

	while (c->step_at < c->nsteps && c->steps[c->step_at] != e)
		c->step_at++;
	for (size_t i = c->step_at + 1; i < c->nsteps; i++) {
		const struct sp_event *next = c->steps[i];
		if (next->tid != e->tid)
			continue;
		int64_t nts = ts_of(x, w, next->start);
		if (nts < add_ns(ts, d))
			d = nts > ts ? (uint64_t)(nts - ts) : 0;
		while (d && (double)ts / 1000.0 + (double)d / 1000.0 > (double)nts / 1000.0)
			d--;
		break;
	}
	snprintf(name, sizeof(name), "ProfilerStep#%lld", (long long)e->u.step.number);
	ev_open(x, "X", "user_annotation", name, cpu_pid(x), fit(x, cpu_pid(x), e->tid, ts, d, 0), ts);
	dur_ns(x, d);
	sp_out_printf(x->out, ",\"args\":{\"External id\":0,\"step\":%lld,\"action\":\"%s\"}}",
		      (long long)e->u.step.number, sp_action_name(e->sub));
}

static void cpu_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	int64_t ts = ts_of(x, w, e->start);
	char name[64];

	switch (e->kind) {
	case SP_EV_SYNC:
		sync_event(x, w, e);
		break;
	case SP_EV_MARKER:
		ev_open(x, e->end > e->start ? "X" : "i", "user_annotation", str(x, e->name, "marker"), cpu_pid(x),
			e->end > e->start ? fit(x, cpu_pid(x), e->tid, ts, e->end - e->start, 0) : e->tid, ts);
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
		step_event(x, w, e);
		break;
	case SP_EV_ALLOC:
	case SP_EV_FREE: {
		if (e->u.mem.flags & (SP_MEMF_PEAK | SP_MEMF_SNAPSHOT))
			break; /* the level since process start, or at the allocation's time before the window:
			          not a point of this window's timeline */
		int dev = e->device != SP_NO_DEVICE;
		if (dev)
			snprintf(name, sizeof(name), "memory GPU %u", e->device);
		ev_open(x, "C", "memory", dev ? name : "memory host", dev ? gpu_pid(x, e->device) : cpu_pid(x), 0, ts);
		sp_out_printf(x->out, ",\"args\":{\"%s\":%llu}}", sp_mem_kind_name(e->sub),
			      (unsigned long long)e->u.mem.live);
		break;
	}
	case SP_EV_DROPPED:
		snprintf(name, sizeof(name), "dropped records (%s)", sp_drop_source_name(e->sub));
		ev_open(x, "i", "stepprof", name, cpu_pid(x), 0, ts);
		sp_out_printf(x->out, ",\"s\":\"p\",\"args\":{\"count\":%llu,\"source\":\"%s\"}}",
			      (unsigned long long)e->u.dropped.count, sp_drop_source_name(e->sub));
		break;
	}
}

static int cmp_span(const void *pa, const void *pb)
{
	const struct sp_export_span *a = *(const struct sp_export_span *const *)pa;
	const struct sp_export_span *b = *(const struct sp_export_span *const *)pb;
	return a->start != b->start ? (a->start < b->start ? -1 : 1) : (a->end > b->end) - (a->end < b->end);
}

/* The caller's extra spans of the trace being written (sp_export_span), each on its track's lane. */
static void extra_spans(struct sp_export *x)
{
	struct chrome *c = x->priv;
	const struct sp_export_span **v = NULL;
	size_t n = 0;
	int64_t pid = cpu_pid(x);

	for (size_t i = 0; i < x->nspans; i++)
		if (x->spans[i].key == c->key && x->spans[i].track) {
			v = sp_xrealloc(v, (n + 1) * sizeof(*v));
			v[n++] = &x->spans[i];
		}
	sp_sort(v, n, sizeof(*v), cmp_span);
	for (size_t i = 0; i < n; i++) {
		const struct sp_export_span *s = v[i];
		size_t t = 0; /* the track's number: the first span of that name */
		while (t < x->nspans && (x->spans[t].key != c->key || !x->spans[t].track ||
					 strcmp(x->spans[t].track, s->track)))
			t++;
		uint64_t base = SPAN_TID_BASE + t * LANES, tid = lane(x, pid, base, s->start, s->end);
		char track[160];
		if (tid == base)
			snprintf(track, sizeof(track), "%s", s->track);
		else
			snprintf(track, sizeof(track), "%s (%u)", s->track, (unsigned)(tid - base) + 1);
		name_track_as(x, pid, tid, track, (long long)tid);
		ev_open(x, "X", s->cat ? s->cat : "stepprof", s->name ? s->name : "", pid, tid, ts_wall(x, s->start));
		dur_ns(x, s->end > s->start ? s->end - s->start : 0);
		sp_out_puts(x->out, ",\"args\":{");
		if (s->args_json)
			sp_out_puts(x->out, s->args_json);
		sp_out_puts(x->out, "}}");
	}
	free(v);
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
			const struct arch *a = arch_of(e);
			if (!e && !(t == c->trace && (used >> d & 1)))
				continue;
			sp_out_printf(x->out, "%s\n  {\"id\": %u, \"name\": ", n++ ? "," : "", d);
			if (!e) {
				sp_out_puts(x->out, "\"\", \"stepprof note\": \"the trace has no record of this device\"}");
				continue;
			}
			sp_out_json_str(x->out, e->name ? sp_trace_string(c->traces[t].r, e->name) : "");
			sp_out_printf(x->out, ", \"totalGlobalMem\": %llu, \"computeMajor\": %u, \"computeMinor\": %u, "
					      "\"numSms\": %u",
				      (unsigned long long)e->u.dev.memory, e->u.dev.cc_major, e->u.dev.cc_minor,
				      e->u.dev.sm_count);
			if (a)
				sp_out_printf(x->out,
					      ", \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": %u, "
					      "\"regsPerBlock\": 65536, \"warpSize\": 32, \"sharedMemPerBlock\": 49152, "
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
	name_tracks(x);
	for (size_t i = 0; i < w->n; i++) {
		const struct sp_event *e = c->order[i];
		if (e->end < e->start) { /* CUPTI gives a record no times when it could not take them */
			c->untimed++;
			continue;
		}
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
	extra_spans(x);
	if (!w->complete) {
		char name[80];
		snprintf(name, sizeof(name), "window %u (incomplete): trace cut short", w->id);
		ev_open(x, "i", "stepprof", name, cpu_pid(x), 0, ts_of(x, w, w->t1));
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
	sp_out_printf(x->out, ",\"clock\":\"%s\",\"slices moved to overlap tracks\":%llu,"
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
		fprintf(stderr, "stepprof convert: note: %llu records end before they start (CUPTI took no times for "
				"them): left out of %s\n", (unsigned long long)c->untimed, x->dest ? x->dest : "the file");
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
