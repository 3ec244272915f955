/* SPDX-License-Identifier: MIT */
/* collector.h - the collector core's entry points. Front ends (preload/ hooks, the CUDA
 * injection entry) include this header and no other of collector/ (the build checks it:
 * scripts/check-includes.py); the core does not know who called. */
#ifndef SP_COLLECTOR_H
#define SP_COLLECTOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
/* Re-exported for the front ends: */
#include "collector/base/log.h" /* warnings said once, with the stepprof: prefix (never exit) */
#include "collector/hookfns.h"  /* the CUDA functions the marker hooks interpose: enum sp_hook_fn */
#include "collector/mem/memory.h" /* the malloc hooks' inline guards (sp_mem_self, sp_mem_host_mark) */

/* Called once from the CUDA driver's injection entry (inside cuInit, before any kernel or graph
 * exists). Loads the configuration; if this process is selected, loads CUPTI, subscribes and
 * arms step detection. Any failure warns once and leaves the process unprofiled.
 * This function can't fail (it returns nothing). */
void sp_collector_inject(void);
/* One NCCL call as the hook saw it. */
struct sp_nccl_call {
	const char *fn;         /* "ncclAllReduce"... (static string) */
	int op;   /* enum sp_nccl_op */
	uint64_t count;         /* elements */
	int dtype;              /* ncclDataType_t */
	int redop;              /* ncclRedOp_t, -1 none */
	int peer;               /* root or peer, -1 none */
	void *comm;             /* ncclComm_t, NULL for group calls */
	void *stream;           /* cudaStream_t */
};

/* 1 if this process is profiled (NCCL hooks then report their calls). This function can't fail. */
int sp_collector_nccl_active(void);
/* Before the real call: marker detection and group depth. Returns the start time to pass to
 * sp_collector_nccl_end. May run on any thread. This function can't fail. */
uint64_t sp_collector_nccl_begin(const struct sp_nccl_call *c);
/* After the real call (ret = its ncclResult_t): records it if a window is open. */
void sp_collector_nccl_end(const struct sp_nccl_call *c, uint64_t t0, int ret);
/* Communicator life (what = enum sp_comm_event). For INIT, id/idlen is the unique id (equal on all
 * ranks); for SPLIT, parent is the parent communicator and id the color. rank/nranks -1 if
 * unknown. This function can't fail. */
void sp_collector_comm(int what, void *comm, const void *id, size_t idlen, int rank, int nranks, void *parent);
/* The smallest allocation the hooks report: host_malloc_min while this process tracks host
 * memory ([activities] host_malloc, not a fork child, selected), else SIZE_MAX (tracking off).
 * A plain load and one comparison: the hooks' only cost for a small allocation or when off. */
extern volatile size_t sp_host_min_bytes;
/* preload/malloc.c announces its hooks (from a constructor, before CUDA initialises): without
 * the call (libstepprof-nomalloc.so) host_malloc cannot work, and sp_collector_inject says so.
 * This function can't fail. */
void sp_collector_malloc_hooks(void);
/* A successful host allocation of size bytes at p (p not NULL) / a release of p (not NULL, before
 * the real free). Called inside malloc: they never allocate. The hooks call them only for
 * allocations of at least sp_host_min_bytes and for releases that sp_mem_host_maybe() cannot rule
 * out; they check neither again. */
void sp_collector_host_alloc(void *p, size_t size);
void sp_collector_host_free(void *p);
/* 1 if stepprof holds CUPTI in this process now (subscribed, not let go for good, not a fork
 * child): a profiler inside the program is then served through it (cupti_share.h). Can't fail. */
int sp_collector_owns_cupti(void);
/* 1 if stepprof held CUPTI in this process and let go of it for good (after the schedule's last
 * window, or a failed re-attach): a profiler it served then gets CUPTI itself. Can't fail. */
int sp_collector_let_go_cupti(void);
/* A call of a CUDA function of collector/hookfns.h begins / ends (h: what enter returned), seen by the
 * preload's hooks; counts marker calls while detached. One load when not a marker's. Never fails; may block
 * while CUPTI re-attaches for a window that begins with this call. */
/* What the launch hooks (preload/procaddr.c) do now: SP_LAUNCH_OFF pass through (one relaxed
 * load), SP_LAUNCH_MARK note on this thread that a hook saw the launch (the proof against CUPTI's
 * callbacks, hooklearn.h), SP_LAUNCH_LEARN also feed it to automatic step detection as a token. */
enum { SP_LAUNCH_OFF = 0, SP_LAUNCH_MARK, SP_LAUNCH_LEARN };
extern _Atomic int sp_launch_want;
/* A kernel launch begins (name: the kernel's name from the driver as sp_collector_kernel_name
 * interned it, 0 if the driver cannot name it) / ends (h: what enter returned). Called only while
 * sp_launch_want is not SP_LAUNCH_OFF. Never fails, never blocks. */
int sp_collector_launch_enter(uint32_t name);
void sp_collector_launch_exit(int h);
/* Nonzero while stepprof is subscribed to CUPTI: the launch trampolines then count their launches in
 * flight, so CUPTI is never finalised under a launch. One relaxed load beside sp_launch_want. */
extern _Atomic int sp_launch_guard;
/* A launch through a trampoline begins / ends (g: what the guard returned), while sp_launch_guard
 * is set: counted in flight, after waiting out a detach under way (its drains and cuptiFinalize;
 * after 10 s it goes ahead, warned once). Returns 1 if counted. Never fails. */
int sp_collector_launch_guard(void);
void sp_collector_launch_unguard(int g);
/* The id of a kernel's mangled name, as CUPTI's symbolName is interned; 0 for NULL. May take a
 * lock (interning), never allocates inside malloc. This function can't fail. */
uint32_t sp_collector_kernel_name(const char *mangled);
/* 1 if id (from sp_collector_kernel_name) is mangled's id: a lock-free compare of the names. */
int sp_collector_kernel_named(uint32_t id, const char *mangled);
/* A driver lookup of a trampolined function stays unhooked (lookup, why in words, what: SP_UNHOOKED_*),
 * said once per name with STEPPROF_VERBOSE, or warned when it matters (hooklearn.h, device memory).
 * Any thread, inside dlsym. This function can't fail. */
enum { SP_UNHOOKED_OTHER = 0, SP_UNHOOKED_LAUNCH, SP_UNHOOKED_ALLOC };
void sp_collector_lookup_unhooked(const char *lookup, const char *why, int what);
/* Device memory seen by the allocation hooks (preload/procaddr.c), while [memory] device_memory tracks it:
 * seen = enter() before the driver call; after a success, take(seen, from) says whether the collector
 * accounts for it, then sp_collector_devmem() records it. Any thread; only memory.c's short lock. */
extern _Atomic int sp_devmem_want;
unsigned sp_collector_devmem_enter(void);
int sp_collector_devmem_take(unsigned seen, const void *from);
void sp_collector_devmem(int kind, int free, uint64_t addr, uint64_t size, int dev);
/* The Python bridge (collector/pybridge/): a PyTorch program's own steps. SP_PY_OPTIM: an
 * optimizer's step() returned (torch's global post hook); SP_PY_SCALER: a GradScaler's update()
 * began; SP_PY_CALL: a python marker's function began; SP_PY_MADE: Optimizer.__init__ began (or one
 * was made before the bridge watched it). */
enum { SP_PY_OPTIM = 1, SP_PY_SCALER, SP_PY_CALL, SP_PY_MADE };
/* The bridge installed the watch `what` (SP_PY_CALL: of python marker `index`, in the order of
 * sp_pybridge_ask.calls). With the GIL held. This function can't fail. */
void sp_collector_py_installed(int what, int index);
/* One event, on the program's thread with the GIL held: obj and cls the optimizer or scaler
 * object (identity only) and its class name (NULL for SP_PY_CALL), index the python marker.
 * Never calls Python; attaches to CUPTI if the step that begins collects. This function can't
 * fail. */
void sp_collector_py_event(int what, const void *obj, const char *cls, int index);
/* SP_PY_OPTIM's index: 1 if the step ran inside a CUDA stream capture. Whether to look (before
 * the first window: a captured step changes how kind = auto finds steps). Can't fail. */
int sp_collector_py_check_capture(void);
/* Torch operators and modules inside windows (collector/ops.c): an NVTX range of the default domain
 * begins (msg, NULL if none) / ends. Any thread; never blocks. Return the depth on this thread (push)
 * or the depth left (pop; -1 when none was open). */
int sp_collector_nvtx_push(const char *msg);
int sp_collector_nvtx_pop(void);
/* CUPTI's NVTX injection entry (InitializeInjectionNvtx2 of the libcupti stepprof loaded), which
 * stepprof's own injection initialises first so that CUPTI's NVTX callbacks keep working; NULL if
 * none. This function can't fail. */
void *sp_collector_nvtx_chain(void);
/* An nn.Module's forward begins (obj: the module, identity only; name and params interned: its
 * path, a convolution's parameters or 0) / ends, on the program's thread (the bridge's global
 * module hooks, GIL held). Written if both fall in one window. Can't fail. */
void sp_collector_module_enter(const void *obj, uint32_t name, uint32_t params);
void sp_collector_module_exit(const void *obj);
/* Modules open on this thread (0: the next one to begin is outermost), and the innermost one's
 * name (0 none). Can't fail. */
int sp_collector_module_depth(void);
uint32_t sp_collector_module_top(void);
/* Torch op ranges open on this thread (begun while torch's NVTX emission was on, not yet ended):
 * the emission may be turned off only at 0 (torch's end callback of a range begun under it needs
 * it on). Can't fail. */
int sp_collector_ops_open(void);
/* Torch op ranges that reached stepprof's NVTX handlers so far, on any thread (the bridge checks
 * that its emission reached them). Can't fail. */
unsigned long sp_collector_ops_seen(void);
/* What the bridge should have on now (SP_OPS_*: a window records, its steps come from the bridge,
 * and the configuration asks for them), 0 nothing. Any thread. This function can't fail. */
enum { SP_OPS_OPS = 1, SP_OPS_MODULES = 2 };
int sp_collector_ops_want(void);
/* [activities] torch_memory: the id + 1 of the window open now when the bridge should record
 * torch's allocator history (the configuration asks, the window's steps come from the bridge), else
 * 0. And this process's trace path (NULL before the writer started, or with a trace per phase).
 * Any thread. These functions can't fail. */
uint32_t sp_collector_torch_memory_window(void);
const char *sp_collector_trace_path(void);
int sp_collector_hook_enter(int fn);
/* The same from a trampoline that knows the place it was called from (its return address): a
 * driver call standing for a marker call counts only from places proven to be the marker's. */
int sp_collector_hook_enter_at(int fn, const void *from);
void sp_collector_hook_exit(int h);

#ifndef SP_PURE /* a unit test builds preload/malloc.c as host code, without CUPTI */
#include <cupti.h>
/* ---- the program's side (preload/cupti.c). Each returns 1 when stepprof served the call (its
 * result in *r), or 0 when the caller must pass it to the real libcupti: stepprof is not
 * subscribed in this process (not selected, not yet, a fork child, or let go for good). ---- */
int sp_share_subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud, CUptiResult *r);
int sp_share_unsubscribe(CUpti_SubscriberHandle sub, CUptiResult *r);
int sp_share_enable_callback(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d, CUpti_CallbackId cbid,
			     CUptiResult *r);
int sp_share_enable_domain(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d, CUptiResult *r);
int sp_share_enable_all(uint32_t on, CUpti_SubscriberHandle sub, CUptiResult *r);
int sp_share_callback_state(uint32_t *on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d, CUpti_CallbackId cbid,
			    CUptiResult *r);
int sp_share_register_buffers(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc comp,
			      CUptiResult *r);
int sp_share_register_timestamp(CUpti_TimestampCallbackFunc f, CUptiResult *r);
int sp_share_get_timestamp(uint64_t *t, CUptiResult *r);
int sp_share_activity(CUpti_ActivityKind k, int on, CUptiResult *r);
int sp_share_flush(uint32_t flag, CUptiResult *r);
int sp_share_finalize(CUptiResult *r);
#endif

#endif
