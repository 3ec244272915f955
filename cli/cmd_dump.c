/* SPDX-License-Identifier: MIT */
/* cmd_dump.c - `stepprof dump [--relative] TRACE`: the header as "key: value" lines, then one
 * line per record with every field that matters for its kind and names resolved; a call stack
 * is printed as a `stack` line just before the first record that names it. The output is
 * stable and diff-friendly (golden tests depend on it): change it only on purpose. */
#include <inttypes.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "opts.h"
#include "config/config.h"
#include "config/schedule.h"
#include "trace/trace.h"
#include "windows.h"

#define NAME_OF(table, v) ((v) < sizeof(table) / sizeof(table[0]) && table[v] ? table[v] : "?")

static const char *const feature_names[] = {
	"kernels",     "memcpy", "memset", "sync", "runtime_api", "driver_api", "nccl",    "device_memory",
	"host_malloc", "stacks", "shapes", "nvtx", "pystacks",    "ops",        "modules",
};
static const char *const api_domains[] = {
	[SP_API_RUNTIME] = "runtime", [SP_API_DRIVER] = "driver", [SP_API_NVTX] = "nvtx"
};
static const char *const comm_events[] = {
	[SP_COMM_INIT] = "init", [SP_COMM_SPLIT] = "split", [SP_COMM_DESTROY] = "destroy", [SP_COMM_ABORT] = "abort"
};
static const char *const launch_types[] = { [SP_LAUNCH_NORMAL] = "normal",
					    [SP_LAUNCH_COOPERATIVE] = "cooperative",
					    [SP_LAUNCH_CLUSTER] = "cluster",
					    [SP_LAUNCH_GRAPH] = "graph" };

struct dump {
	FILE *out;
	struct sp_trace_reader *r;
	int relative;            /* print times relative to the header anchors */
	uint64_t mono0, real0;   /* the anchors, or 0 */
	struct sp_idset stacks;  /* stack ids printed so far */
	struct sp_idset pyframes; /* Python frame ids printed so far */
};

/* Prints s with backslash escapes for quotes, backslashes and bytes outside printable ASCII. */
static void put_escaped(FILE *o, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(o, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(o, "\\x%02x", *p);
		else
			fputc(*p, o);
	}
}

/* " key=\"string\"" for a string id, " key=-" for id 0. */
static void put_name(struct dump *d, const char *key, uint32_t id)
{
	if (!id) {
		fprintf(d->out, " %s=-", key);
		return;
	}
	fprintf(d->out, " %s=\"", key);
	put_escaped(d->out, sp_trace_string(d->r, id));
	fputc('"', d->out);
}

/* " dev=N", or " dev=-" for SP_NO_DEVICE. */
static void put_dev(struct dump *d, uint16_t dev)
{
	if (dev == SP_NO_DEVICE)
		fprintf(d->out, " dev=-");
	else
		fprintf(d->out, " dev=%u", dev);
}

/* " start=T", plus " dur=D" for kinds with a duration. */
static void put_time(struct dump *d, const struct sp_event *ev, int with_dur)
{
	fprintf(d->out, " start=%" PRId64, (int64_t)(ev->start - d->mono0));
	if (with_dur)
		fprintf(d->out, " dur=%" PRId64, (int64_t)(ev->end - ev->start));
}

/* The CPU-side prefix shared by api, nccl, alloc/free, marker, step and comm. */
static void put_cpu(struct dump *d, const struct sp_event *ev)
{
	fprintf(d->out, " tid=%u", ev->tid);
	put_dev(d, ev->device);
	put_time(d, ev, 1);
}

/* The GPU-side prefix shared by kernel, memcpy, memset and sync. */
static void put_gpu(struct dump *d, const struct sp_event *ev)
{
	put_dev(d, ev->device);
	fprintf(d->out, " stream=%u ctx=%u", ev->stream, ev->context);
	put_time(d, ev, 1);
	fprintf(d->out, " corr=%u", ev->corr);
}

/* " flags=snapshot,peak" for an allocation's SP_MEMF_* bits, " flags=-" for none. */
static void put_mem_flags(FILE *o, uint32_t flags)
{
	static const char *const names[] = { "snapshot", "peak" };
	const char *sep = "=";
	fputs(" flags", o);
	for (unsigned i = 0; i < 32; i++)
		if (flags >> i & 1) {
			if (i < sizeof(names) / sizeof(names[0]))
				fprintf(o, "%s%s", sep, names[i]);
			else
				fprintf(o, "%s0x%x", sep, 1u << i);
			sep = ",";
		}
	if (!flags)
		fputs("=-", o);
}

/* "stack id=N pcs=A,B,..." (innermost first; "pcs=-" if empty or unknown) the first time an
 * event names stack id. Exits if memory runs out; stdio errors are left to the caller. */
static void put_stack(struct dump *d, uint32_t id)
{
	uint32_t n;
	if (!id || !sp_idset_add(&d->stacks, id))
		return;
	const uint64_t *pcs = sp_trace_stack(d->r, id, &n);
	for (uint32_t i = 0; i < n; i++) { /* version 2: the Python frames it names, first */
		const char *file, *func;
		uint32_t line, py = SP_PYFRAME_ID(pcs[i]);
		if (!SP_IS_PYFRAME(pcs[i]) || sp_trace_pyframe(d->r, py, &file, &func, &line) ||
		    !sp_idset_add(&d->pyframes, py))
			continue;
		fprintf(d->out, "pyframe id=%u file=\"", py);
		put_escaped(d->out, file);
		fputs("\" func=\"", d->out);
		put_escaped(d->out, func);
		fprintf(d->out, "\" line=%u\n", line);
	}
	fprintf(d->out, "stack id=%u pcs=%s", id, n ? "" : "-");
	for (uint32_t i = 0; i < n; i++)
		fprintf(d->out, "%s0x%" PRIx64, i ? "," : "", pcs[i]);
	fputc('\n', d->out);
}

/* The fields of a kernel, copy, memset or sync event. stdio errors are left to the caller. */
static void put_gpu_event(struct dump *d, const struct sp_event *ev)
{
	FILE *o = d->out;
	switch (ev->kind) {
	case SP_EV_KERNEL: {
		const struct sp_ev_kernel *k = &ev->u.kernel;
		put_gpu(d, ev);
		put_name(d, "name", ev->name);
		fprintf(o, " grid=%u,%u,%u block=%u,%u,%u regs=%u smem=%u+%u launch=%s graph=%u/%" PRIu64, k->grid[0],
			k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->regs, k->static_smem,
			k->dynamic_smem, NAME_OF(launch_types, k->launch), k->graph_id, k->graph_node);
		break;
	}
	case SP_EV_MEMCPY:
	case SP_EV_MEMSET: {
		const struct sp_ev_copy *c = &ev->u.copy;
		put_gpu(d, ev);
		if (ev->kind == SP_EV_MEMCPY)
			fprintf(o, " kind=%u bytes=%" PRIu64 " src=%u dst=%u", ev->sub, c->bytes, c->src_kind,
				c->dst_kind);
		else
			fprintf(o, " bytes=%" PRIu64 " value=0x%x mem=%u", c->bytes, c->value, c->dst_kind);
		fprintf(o, " async=%u graph=%u/%" PRIu64, c->async, c->graph_id, c->graph_node);
		break;
	}
	case SP_EV_SYNC:
		put_gpu(d, ev);
		fprintf(o, " tid=%u type=%u event=%u", ev->tid, ev->sub, ev->u.sync.event);
		break;
	default:
		break;
	}
}

/* The fields of an event a host call made: API, NCCL, allocation, marker, communicator.
 * stdio errors are left to the caller. */
static void put_call_event(struct dump *d, const struct sp_event *ev)
{
	FILE *o = d->out;
	switch (ev->kind) {
	case SP_EV_API:
		put_cpu(d, ev);
		fprintf(o, " corr=%u domain=%s", ev->corr, NAME_OF(api_domains, SP_API_DOMAIN(ev->sub)));
		put_name(d, "name", ev->name);
		fprintf(o, " cbid=%u status=%d stream=%u stack=%u", ev->u.api.cbid, ev->u.api.status, ev->stream,
			ev->u.api.stack);
		if (ev->sub & SP_API_CAPTURED) /* into a CUDA graph: it ran nothing */
			fputs(" captured=1", o);
		break;
	case SP_EV_NCCL: {
		const struct sp_ev_nccl *n = &ev->u.nccl;
		put_cpu(d, ev);
		fprintf(o, " stream=%u corr=%u op=%s", ev->stream, ev->corr, sp_nccl_op_name(ev->sub));
		put_name(d, "name", ev->name);
		fprintf(o,
			" count=%" PRIu64 " bytes=%" PRIu64 " comm=0x%016" PRIx64 " seq=%" PRIu64
			" peer=%d rank=%d/%d dtype=%u redop=%u group=%u stack=%u",
			n->count, n->bytes, n->comm, n->seq, n->peer, n->comm_rank, n->comm_size, n->dtype, n->redop,
			n->group_depth, n->stack);
		break;
	}
	case SP_EV_ALLOC:
	case SP_EV_FREE: {
		const struct sp_ev_mem *m = &ev->u.mem;
		put_cpu(d, ev);
		fprintf(o, " stream=%u corr=%u mem=%s", ev->stream, ev->corr, sp_mem_kind_name(ev->sub));
		put_name(d, "name", ev->name);
		fprintf(o, " addr=0x%" PRIx64 " size=%" PRIu64 " live=%" PRIu64 " stack=%u", m->addr, m->size, m->live,
			m->stack);
		put_mem_flags(o, m->flags);
		break;
	}
	case SP_EV_MARKER:
		put_cpu(d, ev);
		put_name(d, "name", ev->name);
		put_name(d, "domain", ev->u.marker.domain);
		fprintf(o, " depth=%d", ev->u.marker.depth);
		if (ev->u.marker.flags) /* format version 5: an op or a module */
			fprintf(o, " flags=%u seq=%" PRId64, ev->u.marker.flags, ev->u.marker.seq);
		if (ev->u.marker.shapes)
			put_name(d, "shapes", ev->u.marker.shapes);
		break;
	case SP_EV_COMM:
		put_cpu(d, ev);
		fprintf(o, " event=%s", NAME_OF(comm_events, ev->sub));
		put_name(d, "name", ev->name);
		fprintf(o, " comm=0x%016" PRIx64 " rank=%d/%d stack=%u", ev->u.nccl.comm, ev->u.nccl.comm_rank,
			ev->u.nccl.comm_size, ev->u.nccl.stack);
		break;
	default:
		break;
	}
}

/* The fields of the trace's own records: steps, windows, drops, threads, devices, clocks,
 * modules. stdio errors are left to the caller. */
static void put_record_event(struct dump *d, const struct sp_event *ev)
{
	FILE *o = d->out;
	switch (ev->kind) {
	case SP_EV_STEP:
		put_cpu(d, ev);
		fprintf(o, " number=%" PRId64 " action=%s", ev->u.step.number, sp_action_name(ev->sub));
		put_name(d, "name", ev->name);
		if (ev->u.step.how) /* format version 2: how the step was found */
			fprintf(o, " how=%s flags=%u regime=%u period=%u launches=%u every=%u confidence=%u relocks=%u",
				sp_marker_kind_name((enum sp_marker_kind)(ev->u.step.how - 1)), ev->u.step.flags,
				ev->u.step.regime, ev->u.step.period, ev->u.step.launches, ev->u.step.every,
				ev->u.step.confidence, ev->u.step.relocks);
		break;
	case SP_EV_WINDOW_BEGIN:
	case SP_EV_WINDOW_END: {
		const struct sp_ev_window *w = &ev->u.window;
		put_time(d, ev, 0);
		fprintf(o, " id=%u steps=%" PRId64 "..%" PRId64, w->id, w->first_step, w->last_step);
		if (ev->sub) /* files before on-demand windows: 0, the schedule */
			fprintf(o, " origin=%s%s", sp_win_origin_name(ev->sub),
				ev->sub & SP_WIN_UNCOUNTED ? " uncounted" : "");
		if (ev->kind == SP_EV_WINDOW_END)
			fprintf(o, " bytes=%" PRIu64 " dropped=%" PRIu64 " capped=%u", w->bytes, w->dropped, w->capped);
		if (ev->name) /* its phase ([phase.NAME]) */
			put_name(d, "phase", ev->name);
		break;
	}
	case SP_EV_DROPPED:
		put_dev(d, ev->device);
		put_time(d, ev, 0);
		fprintf(o, " source=%s count=%" PRIu64, sp_drop_source_name(ev->sub), ev->u.dropped.count);
		break;
	case SP_EV_THREAD:
		fprintf(o, " tid=%u", ev->tid);
		put_time(d, ev, 0);
		put_name(d, "name", ev->name);
		break;
	case SP_EV_DEVICE:
		put_dev(d, ev->device);
		put_time(d, ev, 0);
		put_name(d, "name", ev->name);
		fprintf(o, " sm=%u cc=%u.%u memory=%" PRIu64, ev->u.dev.sm_count, ev->u.dev.cc_major,
			ev->u.dev.cc_minor, ev->u.dev.memory);
		break;
	case SP_EV_CLOCK:
		put_time(d, ev, 0);
		fprintf(o, " realtime=%" PRId64, (int64_t)(ev->u.clock.realtime_ns - d->real0));
		break;
	case SP_EV_MODULE:
		put_time(d, ev, 0);
		put_name(d, "name", ev->name);
		fprintf(o, " range=0x%" PRIx64 "-0x%" PRIx64 " offset=0x%" PRIx64, ev->u.module.start, ev->u.module.end,
			ev->u.module.offset);
		break;
	default:
		break;
	}
}

/* One line for ev: the kind's name, then its fields. stdio errors are left to the caller. */
static void put_event(struct dump *d, const struct sp_event *ev)
{
	put_stack(d, sp_ev_stack(ev));
	fputs(sp_ev_kind_name(ev->kind), d->out);
	switch (ev->kind) {
	case SP_EV_KERNEL:
	case SP_EV_MEMCPY:
	case SP_EV_MEMSET:
	case SP_EV_SYNC:
		put_gpu_event(d, ev);
		break;
	case SP_EV_API:
	case SP_EV_NCCL:
	case SP_EV_ALLOC:
	case SP_EV_FREE:
	case SP_EV_MARKER:
	case SP_EV_COMM:
		put_call_event(d, ev);
		break;
	default:
		put_record_event(d, ev);
		break;
	}
	fputc('\n', d->out);
}

/* The header as "key: value" lines. */
static void put_header(FILE *o, const struct sp_trace_header *h)
{
	const struct sp_trace_meta *m = &h->meta;
	fprintf(o, "version: %u\nmin_version: %u\nheader_size: %u\nfeatures: 0x%" PRIx64, h->version, h->min_version,
		h->header_size, m->features);
	const char *sep = " ";
	for (unsigned i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++)
		if (m->features >> i & 1) {
			fprintf(o, "%s%s", sep, feature_names[i]);
			sep = ",";
		}
	fprintf(o, "\npid: %d\nrank: %d\nworld_size: %d\nlocal_rank: %d\n", m->pid, m->rank, m->world_size,
		m->local_rank);
	fprintf(o, "anchor_mono_ns: %" PRIu64 "\nanchor_real_ns: %" PRIu64 "\nhost: ", m->anchor_mono_ns,
		m->anchor_real_ns);
	put_escaped(o, m->host);
	fputs("\ncommand: ", o);
	put_escaped(o, m->command);
	if (h->version >= 2) {
		fputs("\nrun_id: ", o);
		put_escaped(o, m->run_id);
		fputs("\nproducer: ", o);
		put_escaped(o, m->producer);
	}
	fputc('\n', o);
}

const struct sp_cmd_spec sp_spec_dump = {
	.name = "dump",
	.fn = sp_cmd_dump,
	.operands = "TRACE",
	.complete = "TRACE",
	.summary = "every record as text (stable, for diffs)",
	.text = "  Prints the header, then every record as one line (names resolved); a file cut short ends\n"
		"  with \"# truncated\".\n",
	.opt = (const struct sp_opt[]){
		{ "relative", 'r', 0, NULL, "times relative to the header's clock anchors" },
		{ 0 } },
};

/* Prints the usage to f and returns rc. */
static int usage(FILE *f, int rc)
{
	sp_opts_usage(&sp_spec_dump, f);
	return rc;
}

/* Exit status: 0 (also for a cut file: ends with "# truncated"), 1 if the file is unreadable or
 * corrupt (records before the damage are printed) or the output can't be written, 2 on a usage
 * error. */
int sp_cmd_dump(int argc, char **argv)
{
	struct dump d = { .out = stdout };
	const char *path;
	int c;

	optind = 0;
	while ((c = sp_opts_next(&sp_spec_dump, argc, argv)) != -1) {
		switch (c) {
		case 'r':
			d.relative = 1;
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			return usage(stderr, 2);
		}
	}
	if (sp_cli_operands("dump", argc, argv, 1, 1))
		return usage(stderr, 2);
	path = argv[optind];
	char err[512];
	d.r = sp_trace_open(path, err, sizeof(err));
	if (!d.r) {
		fprintf(stderr, "stepprof dump: %s\n", err);
		return 1;
	}
	const struct sp_trace_header *h = sp_trace_header(d.r);
	if (d.relative) {
		d.mono0 = h->meta.anchor_mono_ns;
		d.real0 = h->meta.anchor_real_ns;
	}
	put_header(d.out, h);
	struct sp_event ev;
	int rc;
	while ((rc = sp_trace_next(d.r, &ev)) == 1) {
		sp_cli_progress(d.r);
		put_event(&d, &ev);
	}
	if (rc == 0 && sp_trace_truncated(d.r))
		fputs("# truncated\n", d.out);
	sp_idset_free(&d.stacks);
	sp_idset_free(&d.pyframes);
	if (fflush(d.out) || ferror(d.out)) {
		fprintf(stderr, "stepprof dump: writing the output failed\n");
		sp_trace_close_reader(d.r);
		return 1;
	}
	if (rc < 0)
		fprintf(stderr, "stepprof dump: %s: %s\n", path, sp_trace_error(d.r));
	sp_trace_close_reader(d.r);
	return rc < 0 ? 1 : 0;
}
