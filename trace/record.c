/* SPDX-License-Identifier: MIT */
/* record.c - the layout of one event record: the field tables (which fields each kind stores,
 * in which order, how, and which of them a version-5 template holds) and the decoding of a
 * version 1-4 record and the coding of a version-5 record's fields with them (see layout.h; the
 * version-5 chunk around them is columns.c). Pure: no file, no allocation, no message. A change
 * here changes the format: SP_TRACE_VERSION and docs/FORMAT.md go with it. */
#include <stddef.h>
#include <string.h>
#include "bytes.h"
#include "layout.h"
#include "trace.h"

/* How a field is stored: plain varint, zigzag varint, device ordinal plus one (mod 2^16) so
 * SP_NO_DEVICE costs one byte, or correlation id: in versions 1-4 0 for none, else 1 +
 * zigzag(corr - the previous nonzero corr of the chunk) - neighbouring records have neighbouring
 * ids, so this is one repetitive byte where the plain id was three unpredictable ones; version 5
 * codes it in a column of its own (columns.c). */
enum { FL_U = 0, FL_S = 1, FL_DEV = 2, FL_CORR = 3 };
/* Or'ed into how: a value field, stored with every version-5 record; the others are template
 * fields, stored once per chunk in the template that records repeat (columns.c). */
#define FL_V 0x10
#define HOW(f) ((f)->how & 0x0f)

struct field {
	uint8_t off;            /* byte offset in struct sp_event */
	uint8_t size;           /* 1, 2, 4 or 8 */
	uint8_t how;            /* FL_* */
};

#define F(member, how) { offsetof(struct sp_event, member), sizeof(((struct sp_event *)0)->member), how }

/* After the kind byte, start (zigzag delta) and end - start (zigzag): these, for every kind. */
static const struct field common_fields[] = {
	F(corr, FL_CORR), F(name, FL_U),   F(sub, FL_U),     F(device, FL_DEV),
	F(tid, FL_U),     F(stream, FL_U), F(context, FL_U),
};
/* Then the union fields of the kind, in this order. */
static const struct field kernel_fields[] = {
	F(u.kernel.grid[0], FL_U),     F(u.kernel.grid[1], FL_U),      F(u.kernel.grid[2], FL_U),
	F(u.kernel.block[0], FL_U),    F(u.kernel.block[1], FL_U),     F(u.kernel.block[2], FL_U),
	F(u.kernel.static_smem, FL_U), F(u.kernel.dynamic_smem, FL_U), F(u.kernel.regs, FL_U),
	F(u.kernel.launch, FL_U),      F(u.kernel.graph_id, FL_U),     F(u.kernel.graph_node, FL_U),
};
static const struct field copy_fields[] = {
	F(u.copy.bytes, FL_U), F(u.copy.value, FL_U),    F(u.copy.src_kind, FL_U),   F(u.copy.dst_kind, FL_U),
	F(u.copy.async, FL_U), F(u.copy.graph_id, FL_U), F(u.copy.graph_node, FL_U),
};
static const struct field sync_fields[] = { F(u.sync.event, FL_U) };
static const struct field api_fields[] = { F(u.api.cbid, FL_U), F(u.api.status, FL_S), F(u.api.stack, FL_U) };
static const struct field nccl_fields[] = {
	F(u.nccl.count, FL_U), F(u.nccl.bytes, FL_U),       F(u.nccl.comm, FL_U),      F(u.nccl.seq, FL_U | FL_V),
	F(u.nccl.peer, FL_S),  F(u.nccl.comm_rank, FL_S),   F(u.nccl.comm_size, FL_S), F(u.nccl.dtype, FL_U),
	F(u.nccl.redop, FL_U), F(u.nccl.group_depth, FL_U), F(u.nccl.stack, FL_U),
};
static const struct field mem_fields[] = {
	F(u.mem.addr, FL_U | FL_V), F(u.mem.size, FL_U | FL_V), F(u.mem.live, FL_U | FL_V),
	F(u.mem.stack, FL_U),       F(u.mem.flags, FL_U),
};
static const struct field marker_fields[] = {
	F(u.marker.domain, FL_U), F(u.marker.depth, FL_S), F(u.marker.flags, FL_U),
	F(u.marker.shapes, FL_U), F(u.marker.seq, FL_S | FL_V),
};
#define MARKER_FIELDS_V1 2 /* a marker record before version 6: domain and depth only */
static const struct field step_fields[] = {
	F(u.step.number, FL_S | FL_V), F(u.step.how, FL_U),        F(u.step.flags, FL_U),
	F(u.step.regime, FL_U),        F(u.step.period, FL_U),     F(u.step.launches, FL_U),
	F(u.step.every, FL_U),         F(u.step.confidence, FL_U), F(u.step.relocks, FL_U),
};
/* a version-1 file's step record: the number only */
static const struct field step_fields_v1[] = { F(u.step.number, FL_S) };
static const struct field window_fields[] = {
	F(u.window.id, FL_U | FL_V),        F(u.window.capped, FL_U | FL_V), F(u.window.first_step, FL_S | FL_V),
	F(u.window.last_step, FL_S | FL_V), F(u.window.bytes, FL_U | FL_V),  F(u.window.dropped, FL_U | FL_V),
};
static const struct field dropped_fields[] = { F(u.dropped.count, FL_U | FL_V) };
static const struct field device_fields[] = {
	F(u.dev.sm_count, FL_U),
	F(u.dev.cc_major, FL_U),
	F(u.dev.cc_minor, FL_U),
	F(u.dev.memory, FL_U),
};
static const struct field clock_fields[] = { F(u.clock.realtime_ns, FL_U | FL_V) };
static const struct field module_fields[] = {
	F(u.module.start, FL_U | FL_V),
	F(u.module.end, FL_U | FL_V),
	F(u.module.offset, FL_U | FL_V),
};

#define KIND(k, t) [k] = { t, sizeof(t) / sizeof(t[0]) }
static const struct {
	const struct field *f;
	uint8_t n;
} kind_fields[SP_EV__COUNT] = {
	KIND(SP_EV_KERNEL, kernel_fields),
	KIND(SP_EV_MEMCPY, copy_fields),
	KIND(SP_EV_MEMSET, copy_fields),
	KIND(SP_EV_SYNC, sync_fields),
	KIND(SP_EV_API, api_fields),
	KIND(SP_EV_NCCL, nccl_fields),
	KIND(SP_EV_ALLOC, mem_fields),
	KIND(SP_EV_FREE, mem_fields),
	KIND(SP_EV_MARKER, marker_fields),
	KIND(SP_EV_STEP, step_fields),
	KIND(SP_EV_WINDOW_BEGIN, window_fields),
	KIND(SP_EV_WINDOW_END, window_fields),
	KIND(SP_EV_DROPPED, dropped_fields),
	[SP_EV_THREAD] = { NULL, 0 },
	KIND(SP_EV_DEVICE, device_fields),
	KIND(SP_EV_CLOCK, clock_fields),
	KIND(SP_EV_COMM, nccl_fields),
	KIND(SP_EV_MODULE, module_fields),
};

/* The stored form of one field of ev. This function can't fail. */
static uint64_t field_get(const struct sp_event *ev, const struct field *f)
{
	uint64_t v = get_le((const uint8_t *)ev + f->off, f->size);
	if (HOW(f) == FL_S) {
		int shift = 64 - 8 * f->size;
		return zigzag((int64_t)(v << shift) >> shift);
	}
	return HOW(f) == FL_DEV ? (v + 1) & 0xffff : v;
}

/* Stores the decoded form of one field into ev. Returns 0, or -1 if v does not fit the field. */
static int field_set(struct sp_event *ev, const struct field *f, uint64_t v)
{
	int bits = 8 * f->size;
	if (HOW(f) == FL_S) {
		int64_t s = unzigzag(v);
		if (bits < 64 && (s < -((int64_t)1 << (bits - 1)) || s >= ((int64_t)1 << (bits - 1))))
			return -1;
		v = (uint64_t)s;
	} else if (bits < 64 && v >> bits) {
		return -1;
	} else if (HOW(f) == FL_DEV) {
		v = (v - 1) & 0xffff;
	}
	put_le((uint8_t *)ev + f->off, v, f->size);
	return 0;
}

int sp_rec_decode(const uint8_t **p, const uint8_t *end, uint8_t kind, unsigned version, struct sp_rec_prev *prev,
		  struct sp_event *ev)
{
	uint64_t dstart, dur, v;
	memset(ev, 0, sizeof(*ev));
	ev->kind = kind;
	if (get_varint(p, end, &dstart) < 0 || get_varint(p, end, &dur) < 0)
		return -1;
	ev->start = prev->start + (uint64_t)unzigzag(dstart);
	ev->end = ev->start + (uint64_t)unzigzag(dur);
	prev->start = ev->start;
	for (size_t i = 0; i < sizeof(common_fields) / sizeof(common_fields[0]); i++) {
		if (get_varint(p, end, &v) < 0)
			return -1;
		if (HOW(&common_fields[i]) == FL_CORR && v) /* modulo 2^64, as the writer's difference */
			prev->corr = v = prev->corr + (uint64_t)unzigzag(v - 1);
		if (field_set(ev, &common_fields[i], v) < 0)
			return -1;
	}
	const struct field *kf = kind_fields[kind].f;
	unsigned nk = kind_fields[kind].n;
	if (kind == SP_EV_STEP && version < 4) { /* step records before version 4: number only */
		kf = step_fields_v1;
		nk = 1;
	}
	if (kind == SP_EV_MARKER) /* marker records before version 6: domain, depth */
		nk = MARKER_FIELDS_V1;
	for (unsigned i = 0; i < nk; i++)
		if (get_varint(p, end, &v) < 0 || field_set(ev, &kf[i], v) < 0)
			return -1;
	return 0;
}

/* The next field of kind (common fields first, from position *i on, which it advances) that a
 * record of version (5 or later) stores in its template (values 0) or with every record (values
 * FL_V); NULL after the last. The correlation id is neither: it has a column of its own. This
 * function can't fail. */
static const struct field *field_next(uint8_t kind, unsigned version, unsigned values, unsigned *i)
{
	const unsigned nc = sizeof(common_fields) / sizeof(common_fields[0]);
	unsigned nk = kind == SP_EV_MARKER && version < 6 ? MARKER_FIELDS_V1 : kind_fields[kind].n;
	while (*i < nc + nk) {
		const struct field *f = *i < nc ? &common_fields[*i] : &kind_fields[kind].f[*i - nc];
		(*i)++;
		if (HOW(f) != FL_CORR && (f->how & FL_V) == values)
			return f;
	}
	return NULL;
}

void sp_rec_key(struct sp_event *key, const struct sp_event *ev)
{
	const struct field *f;
	memset(key, 0, sizeof(*key));
	key->kind = ev->kind;
	for (unsigned i = 0; (f = field_next(ev->kind, SP_TRACE_VERSION, 0, &i));)
		memcpy((uint8_t *)key + f->off, (const uint8_t *)ev + f->off, f->size);
}

uint8_t *sp_rec_put(uint8_t *p, const struct sp_event *ev, int values)
{
	const struct field *f;
	for (unsigned i = 0; (f = field_next(ev->kind, SP_TRACE_VERSION, values ? FL_V : 0, &i));)
		p = put_varint(p, field_get(ev, f));
	return p;
}

int sp_rec_get(const uint8_t **p, const uint8_t *end, unsigned version, struct sp_event *ev, int values)
{
	const struct field *f;
	uint64_t v;
	for (unsigned i = 0; (f = field_next(ev->kind, version, values ? FL_V : 0, &i));)
		if (get_varint(p, end, &v) < 0 || field_set(ev, f, v) < 0)
			return -1;
	return 0;
}
