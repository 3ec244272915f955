/* SPDX-License-Identifier: MIT */
/* export_chrome_ops.c - torch operators and modules in the Chrome (Kineto) JSON: an op range is a
 * cpu_op with "External id" (unique in the file), "Sequence number" and "Input Dims"; the CUDA
 * calls and GPU records it launched carry its External id, as Kineto's do (HTA ties a kernel to
 * its op that way and by nesting); a backward node gets a "fwdbwd" flow from the forward op of its
 * sequence number; a module range is a python_function "nn.Module: PATH". */
#include <string.h>
#include "export_chrome.h"

#define OP_ID_BASE (1ull << 40)   /* ops' External ids: above every correlation id of a rank */
#define FLOW_ID_BASE (1ull << 44) /* fwdbwd flow ids: apart from ac2g's and nccl's */

void sp_chrome_ops_window(struct sp_export *x, const struct sp_window *w)
{
	struct chrome *c = x->priv;
	c->op_next += c->ops.nop; /* the previous window's */
	sp_opattr_build(&c->ops, x->r, x->g);
	if (!c->ops.nop)
		return;
	c->op_flow = sp_xgrow(c->op_flow, &c->op_flow_cap, sizeof *c->op_flow, c->ops.nop);
	memset(c->op_flow, 0, c->ops.nop * sizeof *c->op_flow);
	for (size_t i = 0; i < c->ops.nop; i++) {
		int f = sp_opattr_fwd_of(&c->ops, (int)i);
		if (f >= 0 && !c->op_flow[f]) /* one flow from a forward op */
			c->op_flow[f] = c->op_flow[i] = FLOW_ID_BASE + c->op_next + i;
	}
}

static uint64_t ext_of(const struct sp_export *x, int op)
{
	const struct chrome *c = x->priv;
	return OP_ID_BASE + c->op_next + (uint64_t)op;
}

uint64_t sp_chrome_ext_of_call(const struct sp_export *x, uint32_t tid, uint64_t t, uint32_t corr)
{
	const struct chrome *c = x->priv;
	int op = c->ops.nop ? sp_opattr_op_at(&c->ops, tid, t) : -1;
	return op >= 0 ? ext_of(x, op) : corr_id(x, corr);
}

uint64_t sp_chrome_ext_of_gpu(const struct sp_export *x, uint32_t corr)
{
	const struct chrome *c = x->priv;
	int op = c->ops.nop ? sp_opattr_op_of(&c->ops, corr) : -1;
	return op >= 0 ? ext_of(x, op) : corr_id(x, corr);
}

/* 1 if s is a plain list of integer lists ("[[8, 64], []]"): written as JSON as it is. */
static int plain_dims(const char *s)
{
	if (!s || s[0] != '[')
		return 0;
	int depth = 0;
	for (const char *p = s; *p; p++) {
		if (*p == '[')
			depth++;
		else if (*p == ']')
			depth--;
		else if (!strchr("0123456789-, ", *p))
			return 0;
		if (depth < 0 || depth > 2)
			return 0;
	}
	return depth == 0;
}

int sp_chrome_op_event(struct sp_export *x, const struct sp_window *w, const struct sp_event *e)
{
	struct chrome *c = x->priv;
	int module = (e->u.marker.flags & SP_MARKF_MODULE) != 0;
	int i = module ? -1 : sp_opattr_index(&c->ops, e);
	if (!module && i < 0)
		return 0;
	int64_t ts = ts_of(x, w, e->start);
	uint64_t tid = sp_chrome_fit(x, cpu_pid(x), e->tid, ts, e->end - e->start, 0);
	char name[600];
	if (module)
		snprintf(name, sizeof name, "nn.Module: %s", sp_chrome_str(x, e->name, "?"));
	sp_chrome_ev_open(x, "X", module ? "python_function" : "cpu_op", module ? name : sp_chrome_str(x, e->name, "?"),
			  cpu_pid(x), tid, ts);
	sp_chrome_dur(x, e);
	if (module) {
		sp_out_puts(x->out, ",\"args\":{\"depth\":");
		sp_out_i64(x->out, e->u.marker.depth);
		if (e->u.marker.shapes) {
			sp_out_puts(x->out, ",\"parameters\":");
			sp_out_json_str(x->out, sp_trace_string(x->r, e->u.marker.shapes));
		}
		sp_out_puts(x->out, "}}");
		return 1;
	}
	sp_out_puts(x->out, ",\"args\":{\"External id\":");
	sp_out_u64(x->out, ext_of(x, i));
	sp_out_puts(x->out, ",\"Sequence number\":");
	sp_out_i64(x->out, e->u.marker.flags & SP_MARKF_SEQ ? e->u.marker.seq : -1);
	sp_out_puts(x->out, ",\"Fwd thread id\":0");
	const char *dims = e->u.marker.shapes ? sp_trace_string(x->r, e->u.marker.shapes) : NULL;
	if (dims) {
		sp_out_puts(x->out, ",\"Input Dims\":");
		plain_dims(dims) ? sp_out_puts(x->out, dims) : sp_out_json_str(x->out, dims);
	}
	sp_out_puts(x->out, "}}");
	if (c->op_flow[i]) /* the forward op starts its flow, the backward node ends it */
		sp_chrome_flow(x, c->ops.op[i].node == i ? 'f' : 's', c->op_flow[i], "fwdbwd", cpu_pid(x), tid, ts);
	return 1;
}

void sp_chrome_ops_free(struct sp_export *x)
{
	struct chrome *c = x->priv;
	sp_opattr_free(&c->ops);
	free(c->op_flow);
	c->op_flow = NULL;
}
