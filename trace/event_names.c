/* SPDX-License-Identifier: MIT */
/* event_names.c - names of the enum values of event.h, for text output. */
#include "event.h"

#define NAME_OF(table, v) ((v) < sizeof(table) / sizeof(table[0]) && table[v] ? table[v] : "?")

const char *sp_ev_kind_name(unsigned kind)
{
	static const char *const t[] = {
		[SP_EV_KERNEL] = "kernel",
		[SP_EV_MEMCPY] = "memcpy",
		[SP_EV_MEMSET] = "memset",
		[SP_EV_SYNC] = "sync",
		[SP_EV_API] = "api",
		[SP_EV_NCCL] = "nccl",
		[SP_EV_ALLOC] = "alloc",
		[SP_EV_FREE] = "free",
		[SP_EV_MARKER] = "marker",
		[SP_EV_STEP] = "step",
		[SP_EV_WINDOW_BEGIN] = "window_begin",
		[SP_EV_WINDOW_END] = "window_end",
		[SP_EV_DROPPED] = "dropped",
		[SP_EV_THREAD] = "thread",
		[SP_EV_DEVICE] = "device",
		[SP_EV_CLOCK] = "clock",
		[SP_EV_COMM] = "comm",
		[SP_EV_MODULE] = "module",
	};
	return NAME_OF(t, kind);
}

const char *sp_nccl_op_name(unsigned op)
{
	static const char *const t[] = {
		[SP_NCCL_ALLREDUCE] = "AllReduce",
		[SP_NCCL_ALLGATHER] = "AllGather",
		[SP_NCCL_REDUCESCATTER] = "ReduceScatter",
		[SP_NCCL_BROADCAST] = "Broadcast",
		[SP_NCCL_REDUCE] = "Reduce",
		[SP_NCCL_ALLTOALL] = "AllToAll",
		[SP_NCCL_SEND] = "Send",
		[SP_NCCL_RECV] = "Recv",
		[SP_NCCL_GROUP_START] = "GroupStart",
		[SP_NCCL_GROUP_END] = "GroupEnd",
	};
	return NAME_OF(t, op);
}

const char *sp_mem_kind_name(unsigned kind)
{
	static const char *const t[] = {
		[SP_MEM_DEVICE] = "device",   [SP_MEM_DEVICE_ASYNC] = "device_async", [SP_MEM_PINNED] = "pinned",
		[SP_MEM_MANAGED] = "managed", [SP_MEM_PITCHED] = "pitched",           [SP_MEM_VMM] = "vmm",
		[SP_MEM_HOST] = "host",
	};
	return NAME_OF(t, kind);
}

const char *sp_drop_source_name(unsigned src)
{
	static const char *const t[] = {
		[SP_DROP_RING] = "ring_full", [SP_DROP_CUPTI] = "cupti",     [SP_DROP_CAP] = "window_cap",
		[SP_DROP_LATE] = "late",      [SP_DROP_MISSING] = "missing",
	};
	return NAME_OF(t, src);
}

const char *sp_win_origin_name(unsigned sub)
{
	static const char *const names[] = { "schedule", "trigger", "timed" };
	unsigned o = sub & SP_WIN_ORIGIN_MASK;
	return o < sizeof names / sizeof *names ? names[o] : "?";
}
