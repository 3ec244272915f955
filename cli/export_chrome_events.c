/* SPDX-License-Identifier: MIT */
/* export_chrome_events.c - one writer per record kind for the Chrome exporter, with Kineto's
 * categories and arg names: kernels (launch statistics, occupancy, the NCCL collective's args),
 * copies, memsets, CUDA API calls and their ac2g flows, syncs, NCCL calls, ProfilerStep#N, markers,
 * memory counters, dropped records and the caller's extra spans. Also the CUDA facts a trace does
 * not carry (occupancy tables per compute capability). */
#include "export_chrome.h"

/* ---- CUDA facts the trace does not carry (per compute capability, CUDA occupancy tables) ---- */

static const struct arch arches[] = {
	{ 6, 0, 64, 32, 65536, 49152, 0 },       { 6, 1, 64, 32, 98304, 49152, 0 },
	{ 7, 0, 64, 32, 98304, 98304, 0 },       { 7, 2, 64, 32, 98304, 98304, 0 },
	{ 7, 5, 32, 16, 65536, 65536, 0 },       { 8, 0, 64, 32, 167936, 166912, 1024 },
	{ 8, 6, 48, 16, 102400, 101376, 1024 },  { 8, 7, 48, 16, 167936, 166912, 1024 },
	{ 8, 9, 48, 24, 102400, 101376, 1024 },  { 9, 0, 64, 32, 233472, 232448, 1024 },
	{ 10, 0, 64, 32, 233472, 232448, 1024 }, { 10, 3, 64, 32, 233472, 232448, 1024 },
	{ 12, 0, 48, 32, 102400, 101376, 1024 },
};

const struct arch *sp_chrome_arch_of(const struct sp_event *dev)
{
	for (size_t i = 0; dev && i < sizeof(arches) / sizeof(arches[0]); i++)
		if (arches[i].major == dev->u.dev.cc_major && arches[i].minor == dev->u.dev.cc_minor)
			return &arches[i];
	return NULL;
}
/* ---- names of CUDA and NCCL enums ---- */

static const char *memcpy_kind(unsigned k)
{
	static const char *const t[] = { "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					 "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "Unknown";
}

static const char *memory_kind(unsigned k)
{
	static const char *const t[] = { "Unknown", "Pageable", "Pinned",        "Device",
					 "Array",   "Managed",  "Device Static", "Managed Static" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "Unknown";
}

static const char *sync_name(unsigned k)
{
	static const char *const t[] = { "Unknown", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "Unknown";
}

static const char *nccl_dtype(unsigned k)
{
	static const char *const t[] = { "int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
					 "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "unknown";
}

/* The dtype as torch.distributed names it in Kineto's collective args ("Float", "BFloat16"). */
static const char *torch_dtype(unsigned k)
{
	static const char *const t[] = { "Char", "Byte",  "Int",    "UInt32",   "Long",          "UInt64",
					 "Half", "Float", "Double", "BFloat16", "Float8_e4m3fn", "Float8_e5m2" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "Unknown";
}

/* The collective as Kineto's "Collective name" gives it (torch.distributed's c10d names). */
static const char *collective_name(unsigned op)
{
	switch (op) {
	case SP_NCCL_ALLREDUCE:
		return "allreduce";
	case SP_NCCL_ALLGATHER:
		return "allgather";
	case SP_NCCL_REDUCESCATTER:
		return "reduce_scatter";
	case SP_NCCL_BROADCAST:
		return "broadcast";
	case SP_NCCL_REDUCE:
		return "reduce";
	case SP_NCCL_ALLTOALL:
		return "all_to_all";
	case SP_NCCL_SEND:
		return "send";
	case SP_NCCL_RECV:
		return "recv";
	default:
		return "unknown";
	}
}

static const char *nccl_redop(unsigned k)
{
	static const char *const t[] = { "sum", "prod", "max", "min", "avg" };
	return k < sizeof(t) / sizeof(t[0]) ? t[k] : "custom";
}
/* ---- events ---- */

/* "External id", "device", "context", "stream", "correlation" as Kineto's GPU records carry them. */
static void gpu_ids(struct sp_export *x, const struct sp_event *e, int device)
{
	uint64_t id = corr_id(x, e->corr);
	char *p = sp_out_room(x->out, 5 * SP_PUT_NUM_MAX + 80);

	p = SP_PUT_LIT(p, ",\"args\":{\"External id\":");
	p = sp_put_u64(p, sp_chrome_ext_of_gpu(x, e->corr)); /* its op's, as Kineto's */
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
	const struct arch *a = sp_chrome_arch_of(dev);
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
		sp_out_puts(x->out,
			    "]\",\"Process Group Ranks source\":\"inferred: the communicator spans the world\"");
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

/* A copy's or memset's slice up to its own args: the opening, "dur", the ids, "bytes" and the
 * bandwidth. This function can't fail. */
static void copy_open(struct sp_export *x, const struct sp_event *e, const char *cat, const char *name, int64_t pid,
		      uint64_t tid, int64_t ts, int device)
{
	sp_chrome_ev_open(x, "X", cat, name, pid, tid, ts);
	sp_chrome_dur(x, e);
	gpu_ids(x, e, device);
	arg_u(x, ",\"bytes\":", e->u.copy.bytes);
	sp_out_puts(x->out, ",\"memory bandwidth (GB/s)\":");
	sp_out_fixed(x->out, gbps(e), 3);
}

void sp_chrome_gpu_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	int device = sp_chrome_device_of(c, e);
	int64_t pid = gpu_pid(x, device), ts = ts_of(x, w, e->start);
	uint64_t tid = sp_chrome_fit(x, pid, e->stream, ts, e->end > e->start ? e->end - e->start : 0, 1);
	char name[96];

	if (e->kind == SP_EV_KERNEL) {
		const struct sp_ev_kernel *k = &e->u.kernel;
		const struct sp_event *call;
		sp_chrome_ev_open_id(x, "X", "kernel", e->name, "kernel", pid, tid, ts);
		sp_chrome_dur(x, e);
		gpu_ids(x, e, device);
		kernel_args(x, k);
		occupancy(x, e, device);
		if (k->launch == SP_LAUNCH_COOPERATIVE || k->launch == SP_LAUNCH_CLUSTER)
			sp_out_printf(x->out, ",\"launch type\":\"%s\"",
				      k->launch == SP_LAUNCH_COOPERATIVE ? "cooperative" : "cluster");
		graph(x, k->graph_id, k->graph_node);
		if (c->nncall && (call = sp_chrome_call_map_get(&c->calls, e->corr)) &&
		    sp_chrome_is_nccl_kernel(x, e->name))
			collective_args(x, call);
	} else if (e->kind == SP_EV_MEMCPY) {
		const struct sp_ev_copy *m = &e->u.copy;
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", memcpy_kind(e->sub), memory_kind(m->src_kind),
			 memory_kind(m->dst_kind));
		copy_open(x, e, "gpu_memcpy", name, pid, tid, ts, device);
		sp_out_puts(x->out, ",\"kind\":\"");
		sp_out_puts(x->out, memcpy_kind(e->sub));
		sp_out_puts(x->out, m->async ? "\",\"async\":true" : "\",\"async\":false");
		graph(x, m->graph_id, m->graph_node);
	} else {
		const struct sp_ev_copy *m = &e->u.copy;
		snprintf(name, sizeof(name), "Memset (%s)", memory_kind(m->dst_kind));
		copy_open(x, e, "gpu_memset", name, pid, tid, ts, device);
		arg_u(x, ",\"value\":", m->value);
		graph(x, m->graph_id, m->graph_node);
	}
	sp_out_puts(x->out, "}}");
	if (e->kind == SP_EV_KERNEL && x->arrivals) /* waiting and transfer nested in an NCCL kernel, on its track */
		x->events += (uint64_t)sp_xrank_wait_slices(x->arrivals, x->out, c->key, e, pid, tid, ts);
	if (e->corr && sp_chrome_corrs_has(&c->corrs, e->corr, CORR_API) &&
	    sp_chrome_corrs_add(&c->corrs, e->corr, CORR_FLOW_F))
		sp_chrome_flow(x, 'f', corr_id(x, e->corr), "ac2g", pid, tid, ts);
}

void sp_chrome_api_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	int dom = SP_API_DOMAIN(e->sub);
	const char *cat = dom == SP_API_DRIVER ? "cuda_driver" : dom == SP_API_NVTX ? "nvtx" : "cuda_runtime";
	int64_t ts = ts_of(x, w, e->start);
	uint64_t id = corr_id(x, e->corr);
	uint64_t tid = sp_chrome_fit(x, cpu_pid(x), e->tid, ts, e->end > e->start ? e->end - e->start : 0, 0);

	sp_chrome_ev_open_id(x, "X", cat, e->name, "cuda api", cpu_pid(x), tid, ts);
	sp_chrome_dur(x, e);
	char *p = sp_out_room(x->out, 5 * SP_PUT_NUM_MAX + 120);
	p = sp_put_u64(SP_PUT_LIT(p, ",\"args\":{\"External id\":"),
		       sp_chrome_ext_of_call(x, e->tid, e->start, e->corr));
	p = sp_put_u64(SP_PUT_LIT(p, ",\"cbid\":"), e->u.api.cbid);
	p = sp_put_u64(SP_PUT_LIT(p, ",\"correlation\":"), id);
	if (e->u.api.status)
		p = sp_put_i64(SP_PUT_LIT(p, ",\"status\":"), e->u.api.status);
	if (e->sub & SP_API_CAPTURED) /* recorded into a CUDA graph: no kernel of its own, the replays have them */
		p = SP_PUT_LIT(p, ",\"captured into a graph\":1");
	if (e->device != SP_NO_DEVICE)
		p = sp_put_u64(SP_PUT_LIT(p, ",\"device\":"), e->device);
	sp_out_done(x->out, SP_PUT_LIT(p, "}}"));
	if (e->corr && sp_chrome_corrs_has(&c->corrs, e->corr, CORR_GPU) &&
	    sp_chrome_corrs_add(&c->corrs, e->corr, CORR_FLOW_S))
		sp_chrome_flow(x, 's', corr_id(x, e->corr), "ac2g", cpu_pid(x), tid, ts);
}

/* A CUPTI synchronisation record: Kineto's cuda_sync on the GPU process of its device, stream -1
 * when it names none; on a track of its own per stream (a wait overlaps the work it waits for,
 * so on the stream's track it would cut the kernels' slices), with lanes for waits that overlap. */
static void sync_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	int device = sp_chrome_device_of(c, e);
	int64_t pid = sp_chrome_gpu_process(x, device), ts = ts_of(x, w, e->start);
	uint64_t tid = sp_chrome_lane(x, pid, SYNC_TID_BASE + (uint64_t)e->stream * LANES, e->start, e->end);
	char track[64];
	int n;

	n = e->stream ? snprintf(track, sizeof(track), "stream %u sync", e->stream)
		      : snprintf(track, sizeof(track), "sync (no stream)");
	if ((tid - SYNC_TID_BASE) % LANES)
		snprintf(track + n, sizeof(track) - (size_t)n, " (%u)", (unsigned)((tid - SYNC_TID_BASE) % LANES) + 1);
	sp_chrome_name_track_as(x, pid, tid, track, (long long)(tid - SYNC_TID_BASE));
	sp_chrome_ev_open(x, "X", "cuda_sync", sync_name(e->sub), pid, tid, ts);
	sp_chrome_dur(x, e);
	sp_out_printf(x->out,
		      ",\"args\":{\"cuda_sync_kind\":\"%s\",\"stream\":%lld,\"correlation\":%llu,"
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
void sp_chrome_nccl_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	const struct sp_ev_nccl *n = &e->u.nccl;
	struct sp_nccl_peer p;
	int matched = x->match && sp_nccl_match_find(x->match, c->key, e, &p);
	int64_t ts = ts_of(x, w, e->start);
	uint64_t tid = sp_chrome_fit(x, cpu_pid(x), e->tid, ts, e->end > e->start ? e->end - e->start : 0, 0);
	char name[48];

	snprintf(name, sizeof(name), "nccl%s", sp_nccl_op_name(e->sub));
	sp_chrome_ev_open(x, "X", "nccl", sp_chrome_str(x, e->name, name), cpu_pid(x), tid, ts);
	sp_chrome_dur(x, e);
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
		sp_chrome_flow(x, p.pos ? 'f' : 's', p.flow + i, "nccl", cpu_pid(x), tid, ts);
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

	for (size_t i = c->step_at + 1; i < c->nsteps; i++) { /* c->steps[step_at] is e */
		const struct sp_event *next = &c->steps[i];
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
	sp_chrome_ev_open(x, "X", "user_annotation", name, cpu_pid(x), sp_chrome_fit(x, cpu_pid(x), e->tid, ts, d, 0),
			  ts);
	sp_chrome_dur_ns(x, d);
	sp_out_printf(x->out, ",\"args\":{\"External id\":0,\"step\":%lld,\"action\":\"%s\"}}",
		      (long long)e->u.step.number, sp_action_name(e->sub));
}

void sp_chrome_cpu_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	int64_t ts = ts_of(x, w, e->start);
	char name[64];

	switch (e->kind) {
	case SP_EV_SYNC:
		sync_event(x, w, e);
		break;
	case SP_EV_MARKER:
		if ((e->u.marker.flags & (SP_MARKF_OP | SP_MARKF_MODULE)) && e->end >= e->start &&
		    sp_chrome_op_event(x, w, e))
			break;
		sp_chrome_ev_open(x, e->end > e->start ? "X" : "i", "user_annotation",
				  sp_chrome_str(x, e->name, "marker"), cpu_pid(x),
				  e->end > e->start ? sp_chrome_fit(x, cpu_pid(x), e->tid, ts, e->end - e->start, 0)
						    : e->tid,
				  ts);
		if (e->end > e->start)
			sp_chrome_dur(x, e);
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
		sp_chrome_ev_open(x, "C", "memory", dev ? name : "memory host",
				  dev ? gpu_pid(x, e->device) : cpu_pid(x), 0, ts);
		sp_out_printf(x->out, ",\"args\":{\"%s\":%llu}}", sp_mem_kind_name(e->sub),
			      (unsigned long long)e->u.mem.live);
		break;
	}
	case SP_EV_DROPPED:
		snprintf(name, sizeof(name), "dropped records (%s)", sp_drop_source_name(e->sub));
		sp_chrome_ev_open(x, "i", "stepprof", name, cpu_pid(x), 0, ts);
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
void sp_chrome_extra_spans(struct sp_export *x)
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
		while (t < x->nspans &&
		       (x->spans[t].key != c->key || !x->spans[t].track || strcmp(x->spans[t].track, s->track)))
			t++;
		uint64_t base = SPAN_TID_BASE + t * LANES, tid = sp_chrome_lane(x, pid, base, s->start, s->end);
		char track[160];
		if (tid == base)
			snprintf(track, sizeof(track), "%s", s->track);
		else
			snprintf(track, sizeof(track), "%s (%u)", s->track, (unsigned)(tid - base) + 1);
		sp_chrome_name_track_as(x, pid, tid, track, (long long)tid);
		sp_chrome_ev_open(x, "X", s->cat ? s->cat : "stepprof", s->name ? s->name : "", pid, tid,
				  ts_wall(x, s->start));
		sp_chrome_dur_ns(x, s->end > s->start ? s->end - s->start : 0);
		sp_out_puts(x->out, ",\"args\":{");
		if (s->args_json)
			sp_out_puts(x->out, s->args_json);
		sp_out_puts(x->out, "}}");
	}
	free(v);
}
