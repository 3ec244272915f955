/* SPDX-License-Identifier: MIT */
/* event.h - the one in-memory event record that flows from hooks and CUPTI through the
 * per-thread rings to the trace writer, and back out of the trace reader to the CLI.
 * Fixed size (SP_EVENT_SIZE bytes) so rings hold plain slots. Strings are never stored
 * here: names are ids from collector/base/intern.h (in the process) or from the reader's
 * string table (offline). Times are nanoseconds on the trace clock (CLOCK_MONOTONIC). */
#ifndef SP_EVENT_H
#define SP_EVENT_H

#include <stdint.h>

enum sp_ev_kind {
	SP_EV_NONE = 0,
	SP_EV_KERNEL = 1,       /* GPU kernel (CUPTI concurrent-kernel activity) */
	SP_EV_MEMCPY = 2,       /* GPU copy; sub = CUpti_ActivityMemcpyKind */
	SP_EV_MEMSET = 3,       /* GPU memset */
	SP_EV_SYNC = 4,         /* CPU waits on GPU; sub = CUpti_ActivitySynchronizationType */
	SP_EV_API = 5,          /* CUDA API call on a CPU thread; sub = enum sp_api_domain */
	SP_EV_NCCL = 6,         /* NCCL call on a CPU thread; sub = enum sp_nccl_op */
	SP_EV_ALLOC = 7,        /* allocation; sub = enum sp_mem_kind */
	SP_EV_FREE = 8,         /* release; sub = enum sp_mem_kind */
	SP_EV_MARKER = 9,       /* NVTX range (start..end) or instant (start == end) */
	SP_EV_STEP =
		10, /* one step: start..end, u.step.number, sub = the schedule's action (enum sp_action, config/schedule.h) */
	SP_EV_WINDOW_BEGIN = 11, /* a recorded window opens (at the start of its RECORD phase) */
	SP_EV_WINDOW_END = 12, /* the window is closed; totals in u.window */
	SP_EV_DROPPED = 13, /* records lost; sub = enum sp_drop_source, u.dropped.count */
	SP_EV_THREAD = 14, /* a CPU thread's name: tid, name */
	SP_EV_DEVICE = 15, /* a GPU's description: device, name, u.device */
	SP_EV_CLOCK = 16, /* clock anchor: start = trace clock, u.clock.realtime_ns */
	SP_EV_COMM = 17, /* NCCL communicator life; sub = enum sp_comm_event */
	SP_EV_MODULE = 18, /* a mapped module (for offline symbolisation): name = path */
	SP_EV__COUNT
};

enum sp_api_domain { SP_API_RUNTIME = 1, SP_API_DRIVER = 2, SP_API_NVTX = 3 };
/* Or'ed into an SP_EV_API record's sub: the call went into a CUDA stream capture (recorded into a
 * graph, it ran nothing and has no GPU record; the graph's replays do). The domain is the rest. */
#define SP_API_CAPTURED 0x10
#define SP_API_DOMAIN(sub) ((sub) & 0x0f)

enum sp_nccl_op {
	SP_NCCL_ALLREDUCE = 1,
	SP_NCCL_ALLGATHER,
	SP_NCCL_REDUCESCATTER,
	SP_NCCL_BROADCAST,
	SP_NCCL_REDUCE,
	SP_NCCL_ALLTOALL,
	SP_NCCL_SEND,
	SP_NCCL_RECV,
	SP_NCCL_GROUP_START,
	SP_NCCL_GROUP_END,
	SP_NCCL__COUNT
};

enum sp_comm_event { SP_COMM_INIT = 1, SP_COMM_SPLIT = 2, SP_COMM_DESTROY = 3, SP_COMM_ABORT = 4 };

enum sp_mem_kind {
	SP_MEM_DEVICE = 1, /* cudaMalloc, cuMemAlloc */
	SP_MEM_DEVICE_ASYNC, /* cudaMallocAsync (stream-ordered) */
	SP_MEM_PINNED, /* cudaMallocHost / cudaHostAlloc */
	SP_MEM_MANAGED, /* cudaMallocManaged */
	SP_MEM_PITCHED, /* cudaMallocPitch, cuMemAllocPitch */
	SP_MEM_VMM, /* cuMemCreate / cuMemMap (expandable segments) */
	SP_MEM_HOST, /* malloc family */
};

enum sp_drop_source {
	SP_DROP_RING = 1, /* a per-thread ring was full */
	SP_DROP_CUPTI = 2, /* CUPTI reported dropped activity records */
	SP_DROP_CAP = 3, /* the window byte cap was reached */
	SP_DROP_LATE = 4, /* a GPU record of one of a window's own calls, arrived after it was written */
	SP_DROP_MISSING = 5, /* kernels launched in the window whose records had not arrived when it was
			      * written (one that comes later is not counted late again) */
};

#define SP_NO_DEVICE 0xffffu
#define SP_EVENT_SIZE 96

struct sp_ev_kernel {
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t static_smem; /* bytes */
	uint32_t dynamic_smem; /* bytes */
	uint16_t regs; /* registers per thread */
	uint8_t launch; /* enum sp_launch_type */
	uint8_t pad;
	uint32_t graph_id; /* 0 unless replayed from a CUDA graph */
	uint64_t graph_node; /* graph node id, 0 unless from a graph */
};

enum sp_launch_type { SP_LAUNCH_NORMAL = 0, SP_LAUNCH_COOPERATIVE = 1, SP_LAUNCH_CLUSTER = 2, SP_LAUNCH_GRAPH = 3 };

struct sp_ev_copy { /* memcpy and memset */
	uint64_t bytes;
	uint32_t value; /* memset: value */
	uint8_t src_kind; /* CUpti_ActivityMemoryKind */
	uint8_t dst_kind;
	uint8_t async;
	uint8_t pad;
	uint32_t graph_id;
	uint32_t pad2;
	uint64_t graph_node;
};

struct sp_ev_sync {
	uint32_t event; /* CUDA event id for event syncs, else 0 */
};

struct sp_ev_api {
	uint32_t cbid; /* CUPTI callback id in its domain */
	int32_t status; /* return code (0 success) */
	uint32_t stack; /* call-stack id (launch site), 0 none */
	/* collector only, never encoded (0 when read from a trace): a call of the window with this
	 * id, in slot win_slot - 1 of the collector's table (0: none), and what it is (enum
	 * sp_win_call). The writer thread counts it as it drains the event, so that the launch path
	 * takes no lock. */
	uint32_t win_id;
	uint16_t win_slot;
	uint8_t win_call;
};

/* What a window's call is to the writer (sp_ev_api.win_call): a kernel launch (counted, its record
 * waited for), a copy or set (its record waited for, not counted), a graph launch (its kernels
 * are not counted), any other call (only its correlation id: the window's own ids end there). */
enum sp_win_call { SP_WCALL_LAUNCH = 0, SP_WCALL_COPY = 1, SP_WCALL_GRAPH = 2, SP_WCALL_OTHER = 3 };

struct sp_ev_nccl {
	uint64_t count; /* elements */
	uint64_t bytes; /* count * sizeof(datatype) */
	uint64_t comm; /* communicator id hash (equal on every rank of the communicator) */
	uint64_t seq; /* per-communicator sequence number of collective/p2p calls */
	int32_t peer; /* root (rooted collectives) or peer (send/recv); -1 none */
	int32_t comm_rank;
	int32_t comm_size;
	uint8_t dtype; /* ncclDataType_t */
	uint8_t redop; /* ncclRedOp_t, 0xff none */
	uint8_t group_depth; /* ncclGroupStart nesting at the call */
	uint8_t pad;
	uint32_t stack; /* call-stack id, 0 none */
};

struct sp_ev_mem {
	uint64_t addr;
	uint64_t size; /* bytes; for FREE the size freed if known */
	uint64_t live; /* after the call: live device bytes of this device (all device kinds
	                           together), or live host bytes for SP_MEM_HOST; tracked from process
	                           start, so absolute */
	uint32_t stack; /* call-stack id, 0 none */
	uint32_t flags; /* SP_MEMF_* */
};

/* sp_ev_mem.flags */
#define SP_MEMF_SNAPSHOT \
	1u /* ALLOC written at a window's start for an allocation alive then;
                                   start = when it was made */
#define SP_MEMF_PEAK \
	2u /* ALLOC written at a window's end: live = the highest level since
                                   process start (addr = size = 0) */

struct sp_ev_marker {
	uint32_t domain; /* string id of the NVTX domain, 0 default */
	int32_t depth; /* nesting depth on its thread (among ranges of its kind: ops, modules) */
	/* format version 6 (0 when read from older files) */
	uint32_t flags; /* SP_MARKF_* */
	uint32_t shapes; /* string id: an op's input sizes ("[[8, 64], []]"), a Conv module's
			  * parameters ("stride=1,1 padding=0,0 dilation=1,1 groups=1"); 0 none */
	int64_t seq; /* an op's autograd sequence number (SP_MARKF_SEQ), else 0 */
};
#define SP_MARKF_OP 0x01u /* a torch operator or record_function range (torch's NVTX emission, "name, op_id = N") */
#define SP_MARKF_MODULE 0x02u /* an nn.Module's forward (torch's global module hooks); name = its path */
#define SP_MARKF_SEQ 0x04u /* seq holds the op's sequence number ("seq = N") */

struct sp_ev_step {
	int64_t number; /* torch numbering, from 0 */
	/* how the step was found (format version 2; 0 in version-1 traces); the event's name is
	 * the marker's pattern, or automatic detection's anchor */
	uint8_t how; /* enum sp_marker_kind + 1 (config/config.h), 0 unknown */
	uint8_t flags; /* SP_STEP_* */
	uint32_t regime; /* auto: the periodic regime it belongs to (1, 2, ...) */
	uint32_t period; /* auto: tokens per iteration */
	uint32_t launches; /* auto: kernel and graph launches per iteration */
	uint32_t every; /* marker occurrences per step */
	uint32_t confidence; /* auto: copies of the period that proved the lock */
	uint32_t relocks; /* auto: locks after the first, so far */
};
#define SP_STEP_AFTER 0x01u /* the boundary is at the end of the anchor call */
#define SP_STEP_REFUTED 0x02u /* its launches differed from the period: the detector's loop ended in it */
#define SP_STEP_IRREGULAR \
	0x10u /* auto: a few launches more than the period (an extra kernel), its boundaries in place:
			       * the detector kept its lock through it (and counted the next step) */
#define SP_STEP_AT_EXIT \
	0x08u /* the process exited in it: it ends at exit, not at a step boundary, and holds whatever
			       * the program did after its last iteration (a final evaluation, a save) */
#define SP_STEP_FROM_AUTO \
	0x20u /* optimizer steps found by kind = auto: the program's optimizer hook fired before any window */
#define SP_STEP_LATE \
	0x80u /* auto: the schedule started from a late lock (found after its first window would have
			       * begun): the schedule's step numbers are the program's minus a constant */
#define SP_STEP_TRAIN \
	0x04u /* auto: its regime launches backward or optimizer kernels (training);
			       * without it, a regime taken for the loop after defer_steps steps (decide/tunables.h) */

/* What opened a window: the sub code of its WINDOW_BEGIN and WINDOW_END records (0 in files
 * written before on-demand windows existed: the schedule). */
enum sp_win_origin {
	SP_WIN_SCHEDULE = 0, /* the schedule ([schedule]) */
	SP_WIN_TRIGGER = 1, /* `stepprof trigger`: the next N steps, on demand */
	SP_WIN_TIMED = 2, /* a time range: [ondemand] delay_ms/duration_ms, or `stepprof trigger --ms` */
};
#define SP_WIN_ORIGIN_MASK 0x0fu
#define SP_WIN_UNCOUNTED \
	0x80u /* steps ran while stepprof was detached from CUPTI before this window,
				 * uncounted: its step numbers continue the count from before the detach */

struct sp_ev_window {
	uint32_t id; /* 0, 1, ... per process */
	uint32_t capped; /* 1 if the byte cap cut the window */
	int64_t first_step;
	int64_t last_step;
	uint64_t bytes; /* encoded bytes written for the window (WINDOW_END) */
	uint64_t dropped; /* records lost in the window, all sources (WINDOW_END) */
};

struct sp_ev_dropped {
	uint64_t count;
};

struct sp_ev_device {
	uint32_t sm_count;
	uint16_t cc_major, cc_minor;
	uint64_t memory; /* bytes of global memory */
};

struct sp_ev_clock {
	uint64_t realtime_ns; /* CLOCK_REALTIME taken with start (CLOCK_MONOTONIC) */
};

struct sp_ev_module {
	uint64_t start, end; /* mapped address range */
	uint64_t offset; /* file offset of start */
};

struct sp_event {
	uint8_t kind; /* enum sp_ev_kind */
	uint8_t sub; /* kind-specific code, see enum sp_ev_kind */
	uint16_t device; /* CUDA device ordinal, SP_NO_DEVICE if none */
	uint32_t tid; /* OS thread id for CPU-side events, 0 for GPU records */
	uint64_t start; /* ns, trace clock */
	uint64_t end; /* ns, trace clock; == start for instants */
	uint32_t corr; /* CUPTI correlation id linking a CPU call to its GPU work, 0 none */
	uint32_t name; /* interned string id, 0 none */
	uint32_t stream; /* CUDA stream id (CUPTI's), 0 none */
	uint32_t context; /* CUDA context id (CUPTI's), 0 none */
	union {
		struct sp_ev_kernel kernel;
		struct sp_ev_copy copy;
		struct sp_ev_sync sync;
		struct sp_ev_api api;
		struct sp_ev_nccl nccl;
		struct sp_ev_mem mem;
		struct sp_ev_marker marker;
		struct sp_ev_step step;
		struct sp_ev_window window;
		struct sp_ev_dropped dropped;
		struct sp_ev_device dev;
		struct sp_ev_clock clock;
		struct sp_ev_module module;
		uint8_t raw[56];
	} u;
};

_Static_assert(sizeof(struct sp_event) == SP_EVENT_SIZE, "sp_event must stay 96 bytes");

/* Names of enum values for text output; never NULL ("?" for unknown values). */
const char *sp_ev_kind_name(unsigned kind);
const char *sp_nccl_op_name(unsigned op);
const char *sp_mem_kind_name(unsigned kind);
const char *sp_drop_source_name(unsigned src);
/* "schedule", "trigger", "timed" for a WINDOW record's sub (flags ignored); "?" for another. */
const char *sp_win_origin_name(unsigned sub);

/* Facts about events (event_facts.c); these functions can't fail. */
/* 1 for records of GPU work (kernel, memcpy, memset): these join a window by correlation id. */
int sp_ev_is_gpu(const struct sp_event *ev);
/* The call-stack id an API call, NCCL call or communicator, or allocation or free carries; 0 for
 * the kinds that carry none (and for a record without a stack). */
uint32_t sp_ev_stack(const struct sp_event *ev);

#endif
