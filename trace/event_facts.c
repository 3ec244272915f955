/* SPDX-License-Identifier: MIT */
/* event_facts.c - facts about the kinds of event.h that readers must not re-derive: which
 * records are GPU work and which field holds a record's call stack. Pure; can't fail. */
#include "event.h"

int sp_ev_is_gpu(const struct sp_event *ev)
{
	return ev->kind == SP_EV_KERNEL || ev->kind == SP_EV_MEMCPY || ev->kind == SP_EV_MEMSET;
}

uint32_t sp_ev_stack(const struct sp_event *ev)
{
	switch (ev->kind) {
	case SP_EV_API:
		return ev->u.api.stack;
	case SP_EV_NCCL:
	case SP_EV_COMM:
		return ev->u.nccl.stack;
	case SP_EV_ALLOC:
	case SP_EV_FREE:
		return ev->u.mem.stack;
	default:
		return 0;
	}
}
