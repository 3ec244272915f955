/* SPDX-License-Identifier: MIT */
/* internal.h - state the collector's CUPTI-side files share (collector.c, callbacks.c, cbsets.c,
 * windows.c, activity.c, output.c, comms.c, allocs.c, tokglue.c) and their internal calls. Only
 * those files include it; front ends see collector.h. Every field says who writes it. Nothing
 * here may be used by the host core library (the CLI and unit tests link no CUPTI). */
#ifndef SP_COLLECTOR_INTERNAL_H
#define SP_COLLECTOR_INTERNAL_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "config/config.h"
#include "config/run.h"
#include "collector/base/clock.h"
#include "collector/cupti/cupti_api.h"
#include "decide/stepdet.h"
#include "trace/event.h"

#define SP_MAX_WINDOWS 8     /* windows tracked at once (open + closing) */
#define SP_NAME_CACHE 1024   /* per-thread pointer -> name id cache (power of two) */
#define SP_CORR_PENDING UINT32_MAX /* a window edge the next CUDA call's correlation id fills */
#define SP_CBID_MAX 1024     /* callback ids tracked per domain (CUPTI 13: < 800 runtime, < 900 driver) */
#define SP_MAX_CLOSED 4      /* written windows whose own ids are kept to count late records */
#define SP_MAX_DEVICES 64    /* GPUs described by SP_EV_DEVICE records */
/* A closing window is written once its kernels, last copy or set and last launch arrived and it is
 * SETTLE old; or at QUIET_AGE with no record for QUIET_NS (graph kernels are not counted); or at GIVE_UP. */
#define SP_WINDOW_SETTLE_NS 4000000ull       /* 4 ms */
#define SP_WINDOW_QUIET_AGE_NS 50000000ull   /* 50 ms */
#define SP_WINDOW_QUIET_NS 100000000ull      /* 100 ms */
#define SP_WINDOW_GIVE_UP_NS 10000000000ull  /* 10 s */
#define SP_FLUSH_EVERY_NS 2000000ull         /* CUPTI buffers flushed every 2 ms while a window closes */
#define SP_INCOMPLETE_SLACK_NS 10000000ull   /* a GPU record starting 10 ms before its window's begin is incomplete */
#define SP_DETACHED_PASS_NS 100000000ull     /* writer pass once CUPTI is let go: 100 ms */
#define SP_EXIT_WAIT_POLLS 200               /* at exit, wait up to 200 x 10 ms = 2 s for windows */
#define SP_EXIT_POLL_US 10000

/* Classes of a callback id, from its name (sp_cbset_arm). CLS_COPY: a window waits for its last one's record;
 * CLS_NEST: watched only to see a driver call inside a runtime call (callbacks.c nest_only); CLS_CAPTURE: a
 * stream capture's begin or end (capture.h). */
enum { CLS_RECORDED = 1, CLS_AUTO = 2, CLS_GRAPH = 4, CLS_TRUTH = 8, CLS_NEST = 16, CLS_COPY = 32, CLS_CAPTURE = 64 };

/* How an allocation call's parameters look (every params struct starts with these fields). */
enum { MEM_NONE, MEM_PTR_SIZE, MEM_PITCH, MEM_CREATE, MEM_FREE };
struct memop {
	uint8_t kind, shape;
}; /* SP_MEM_* kind and MEM_* shape of an allocation call */

/* One recorded window, from its first RECORD step to its GPU records' arrival (windows.c opens
 * and closes it, activity.c counts its records and writes its end). */
struct window {
	int used;                /* slot in use */
	int mk;    /* the marker (phase) whose steps it records */
	int closing;             /* RECORD_AND_SAVE ended; waiting for GPU records */
	uint8_t origin;          /* what opened it: SP_WIN_* of trace/event.h (its WINDOW records' sub) */
	uint32_t id;
	uint32_t corr_lo, corr_hi; /* GPU records with corr in [lo, hi) belong here; SP_CORR_PENDING = next call */
	int64_t first_step, last_step;
	uint64_t t_begin, t_end, close_ts, last_record_ts;
	uint64_t launched;       /* kernel launch calls seen in the window, counted as the writer thread
				  * drains their events (activity.c); under lock */
	atomic_uint_fast64_t arrived;  /* non-graph kernel records received */
	uint32_t last_launch;    /* highest correlation id of a counted launch (0: none); under lock */
	uint32_t last_copy;      /* ... of a copy or set call that succeeded (0: none); under lock */
	uint32_t last_call;      /* ... of any call it recorded: its own ids end there (late records) */
	int graphs;              /* it launched a CUDA graph (graph kernels are not counted); under lock */
	uint32_t last_copy_arrived; /* highest correlation id of a copy or set record received; under lock */
	_Atomic uint32_t last_arrived; /* highest correlation id of a kernel record received */
	uint64_t incomplete;     /* GPU records CUPTI handed over incomplete (not written); under lock */
	uint64_t incomplete_graph; /* ... of them graph kernels (not counted as launches) */
};

/* One step marker: the configuration's [marker] and [schedule], or one [phase.NAME] (phases.c sets
 * them up at inject; read without the lock: they never change afterwards). */
struct sp_mk {
	int kind;       /* enum sp_marker_kind */
	const char *pattern;          /* glob, "" for auto and profiler_range */
	int every;
	const struct sp_schedule *schedule;
	struct sp_stepdet *det;       /* its detector (the caller of sp_win_detect serialises feeding) */
	uint32_t name; /* interned phase name (its windows' WINDOW records carry it), 0 without phases */
};

/* The step state of a phase other than the current one (phases.c swaps it with sp_col's fields). */
struct sp_phase_rt {
	int64_t step;
	enum sp_action action;
	uint64_t step_start;
	int step_open;
	struct sp_det_how step_how;
	int step_refuted;
	int want; /* its steps want collection on (the last sp_win_set_collecting) */
	int done; /* its schedule is exhausted and its detector settled */
	uint32_t windows; /* windows it opened */
};

/* The collector's process-wide state (defined in collector.c). */
struct sp_col_state {
	struct sp_config cfg; /* effective configuration (collector.c, at inject) */
	struct sp_rank_info ri; /* who we are (collector.c; comms.c may learn the rank from NCCL) */
	int active; /* subscribed and collecting (0 after any fatal problem) */
	int disabled; /* fork child or failure: callbacks return at once */
	CUpti_SubscriberHandle sub; /* the CUPTI subscriber (cupti_life.c attaches it) */
	pthread_mutex_t lock; /* step boundaries, window table, communicator table */
	/* windows and steps (windows.c, under lock) */
	int64_t step; /* current step, -1 before the first marker */
	enum sp_action action; /* action of the current step */
	uint64_t step_start; /* trace-clock start of the current step */
	int step_open; /* a step is in progress (profiler ranges leave gaps) */
	int collecting; /* activity kinds and recording callbacks on */
	int activities_on; /* activity kinds enabled (may outlast collecting: sp_win_set_collecting) */
	int done; /* schedule exhausted: nothing more will be recorded */
	uint32_t next_window_id; /* id of the next window (0: none opened yet) */
	/* markers (phases.c; one without [phase.NAME] sections) */
	int nmk; /* markers in mk, >= 1 once injected */
	int mk_auto, mk_kernel; /* one of them is automatic, a kernel marker (the callbacks' shortcuts) */
	struct sp_mk mk[SP_MAX_PHASES];
	int cur; /* the marker whose steps step..step_refuted hold (under lock) */
	struct sp_phase_rt rt[SP_MAX_PHASES]; /* the others' step state, by marker (under lock) */
	struct window win[SP_MAX_WINDOWS]; /* open and closing windows */
	struct window *open; /* the window of the current RECORD steps, or NULL (atomic loads) */
	atomic_int split_pending; /* a boundary happened outside a CUDA call: the next call's corr splits */
	uint32_t *split_lo, *split_hi; /* fields the pending split fills */
	/* output (output.c; comms.c and collector.c read it) */
	int writer_started; /* 0 not yet, 1 writing, -1 failed or not selected */
	uint64_t unwritten; /* steps the schedule records that no trace could take (windows.c, under lock) */
	int64_t unwritten_first, unwritten_last; /* ... the first and the last of them */
	/* step detection (windows.c feeds it) */
	struct sp_stepdet det; /* the step detector (stepdet.h): every marker kind */
	uint64_t credit; /* ns the detector spent learning, taken out of token times */
	struct sp_det_how step_how; /* how the current step was found (its STEP record says it) */
	int step_refuted; /* the detector found the current step to differ from the period: 1 refuted
			   * (its regime ended), 2 irregular (a few launches more, the lock kept) */
	int at_exit; /* the process is exiting: the step ended now ends at exit (SP_STEP_AT_EXIT) */
	/* callback sets (cbsets.c sets them; callbacks.c and tokglue.c read them) */
	uint32_t api_name[2][SP_CBID_MAX]; /* (domain, cbid) -> interned name, 0 = not yet */
	uint8_t api_marker[2][SP_CBID_MAX]; /* (domain, cbid) is an api marker / profiler range call */
	uint8_t cls[2][SP_CBID_MAX]; /* CLS_* of each callback id, from its name (sp_cbset_arm) */
	uint8_t api_sync[2][SP_CBID_MAX]; /* (domain, cbid) blocks the host (auto detection's iteration ends) */
	uint8_t cb_lazy[2][SP_CBID_MAX]; /* enabled in CUPTI, wanted no more: off at its call's next exit
					  * (cbsets.c writes under lock; callbacks read it relaxed) */
	struct memop memop[2][SP_CBID_MAX]; /* allocation calls, by (domain, cbid) (allocs.c classifies) */
	/* misc */
	atomic_int had_context; /* a CUDA context was created (a launcher only counts devices) */
	char *(*demangle)(const char *, char *, size_t *, int *); /* __cxa_demangle if loaded */
	size_t buffer_bytes; /* size of each CUPTI activity buffer */
	int malloc_hooks; /* the preload library has malloc hooks (sp_collector_malloc_hooks) */
};
extern struct sp_col_state sp_col;

/* Per-thread call state (defined in collector.c). */
struct sp_col_thread {
	int in_rt; /* a runtime API call is in progress (they never nest) */
	int in_rt_launch; /* ... and it is a kernel launch (its nested driver launch is not counted again) */
	uint64_t rt_t0; /* its start */
	uint32_t rt_corr; /* its correlation id */
	int in_nccl; /* inside an NCCL call (comms.c) */
	uint32_t nccl_corr; /* correlation id of its first kernel launch */
	int nccl_group; /* ncclGroupStart nesting */
	int mk_depth; /* marker API calls in progress on this thread */
	int after_pending; /* an ending marker's entry set up a boundary for its exit */
	int64_t after_step; /* ... the step that begins then */
	int after_mk; /* ... of this marker (sp_col.mk) */
	uint32_t after_cb[2]; /* ... its callback id (runtime, driver), 0 none */
	uint32_t cur_cb[2]; /* (runtime, driver) callback ids in progress on this thread, 0 none */
	int named; /* SP_EV_THREAD pushed */
	unsigned gen; /* CUPTI instance the call state above belongs to (cupti_life.h) */
	int marking; /* marker calls in progress on this thread (cupti_life.h timing) */
	int in_nest; /* inside a runtime call watched only for nesting (CLS_NEST) */
	int hook_depth; /* hooked marker calls in progress on this thread (markhook.c) */
	int graph_hooked; /* hooked graph launches in progress on this thread (markhook.c) */
	int hook_counted; /* ... and the outermost one was counted by the hook, not by CUPTI */
	int hook_pending; /* a marker call CUPTI saw outside the hooks: nested driver calls (markhook.c) */
	int nested_counted; /* the hooks counted this thread's marker call at its nested driver call (a
			     * static runtime's): CUPTI's exit of it, attached since, is no missed call */
	unsigned mem_seen; /* allocation calls CUPTI's driver callbacks accounted on this thread (allocs.c) */
	int mem_hooked; /* an allocation hook accounted inside the runtime call in progress (allocs.c) */
	uint8_t cap_node; /* a graph node was made inside the outermost call in progress: it went into a
			   * stream capture (capture.h) */
	uint64_t last_t; /* the latest time sp_thr_ns gave this thread */
	uint8_t end_now;   /* this thread's boundary handling ended a window (windows.c note_end) ... */
	uint8_t end_soon;  /* ... or set up one that ends at its call's exit */
	uint8_t bound_now; /* ... or made another step boundary ... */
	uint8_t began;     /* ... that began collecting (a window's warmup or first step) */
	uint64_t end_carry; /* the time the entry of such a call took */
	int own_split;     /* this thread made a boundary outside a CUDA call (windows.c split_at) ... */
	int own_slot[2];   /* ... of these windows (slot + 1; 0 none), their upper [0] and lower [1] bound */
	unsigned own_id[2]; /* ... those windows' ids */
	const void *np[SP_NAME_CACHE]; /* name pointer cache */
	uint32_t nid[SP_NAME_CACHE];
};
extern __thread struct sp_col_thread sp_thr;

/* This thread's time for a CUDA call, NCCL call or step boundary (sp_ordered_ns on this thread's
 * latest: a marker's precise, any other call's from the counter clock). This function can't fail. */
static inline uint64_t sp_thr_ns(int precise)
{
	return sp_ordered_ns(&sp_thr.last_t, precise);
}

/* collector.c: shared helpers. None can fail. */
uint32_t sp_coll_tid(void); /* this thread's kernel id, cached */
/* This process has a CUDA context: CUPTI reported its creation, or a CUDA call, launch or device
 * allocation came (stepprof attached after the context was made: learning from the hooks, a
 * hand-over). Stored once: launching threads do not share the line's writes. Any thread. */
void sp_coll_saw_context(void);
uint32_t sp_coll_name_id(const char *s); /* interned id of a stable name pointer, 0 for NULL */
int sp_coll_glob(const char *pat, const char *s); /* 1 if s (not NULL) matches the fnmatch pattern */
void sp_coll_push(struct sp_event *ev); /* to this thread's ring, naming the thread first */

/* cbsets.c: which callbacks and activity kinds are on. Under sp_col.lock where noted there. */
uint32_t sp_cbset_api_name(CUpti_CallbackDomain dom, CUpti_CallbackId cbid);
int sp_cbset_is_launch(CUpti_CallbackDomain dom, CUpti_CallbackId cbid);
/* The detector token a call of the CUDA function `name` (driver API if drv) is at the outermost
 * level, as the callbacks classify it (CLS_AUTO: SP_TOK_API, CLS_GRAPH: SP_TOK_GRAPH), else 0.
 * For the hooks' learning (markhook.c). This function can't fail. */
int sp_cbset_token_kind(const char *name, int drv);
void sp_cbset_apply(void);
/* The exit of a call whose callback nothing wants any more (sp_col.cb_lazy): turns it off in
 * CUPTI. A callback, inside the hold; takes sp_col.lock. This function can't fail (warned once). */
void sp_cbset_lazy_off(int d, CUpti_CallbackId cbid);
void sp_cbset_activities(int on);
/* The activity kinds on or off with no hold taken: the detaching thread, CUPTI alive. Can't fail. */
void sp_cbset_kinds(int on);
int sp_cbset_arm(void);
int sp_cbset_marks(const struct sp_mk *m, const char *nm);
void sp_cbset_armed(void);

/* windows.c: steps and windows. */
int sp_win_is_record(enum sp_action a);
void sp_win_set_collecting(enum sp_action act);
void sp_win_activities_idle(void);
/* Writer thread, under sp_col.lock: activity kinds are to go off (activities_on cleared now); the
 * CUPTI calls come in sp_win_activities_off, after the lock. Can't fail. */
void sp_win_activities_due_off(void);
/* Writer thread, without sp_col.lock: turns the kinds off if still due. Can't fail. */
void sp_win_activities_off(void);
/* Whether kinds are due off (left on for now). Can't fail. */
bool sp_win_activities_due(void);
/* The detaching thread, callbacks and launches drained: the kinds due off go off. Can't fail. */
void sp_win_activities_off_detaching(void);
/* A new CUPTI instance (sp_cbset_armed, under sp_col.lock): nothing is due off. Can't fail. */
void sp_win_activities_armed(void);
void sp_win_end_step(uint64_t t, uint32_t corr);
void sp_win_begin_step(uint64_t t, uint32_t corr, int64_t number);
void sp_win_detect(int mk, uint8_t kind, uint8_t flags, uint32_t name, uint64_t t, uint32_t corr, CUpti_CallbackId cbid,
		   int d);
void sp_win_after_exit(uint64_t t);
/* This thread made a window boundary outside a CUDA call; its first CUDA call since (id corr) bounds the
 * split there. Takes sp_col.lock. This function can't fail. */
void sp_win_own_split(uint32_t corr);
int sp_win_open_now(uint64_t t);
void sp_win_close_now(uint64_t t);
/* At exit (STEPPROF_VERBOSE): how long the program's threads spent in stepprof at window ends.
 * Takes sp_col.lock. This function can't fail. */
void sp_win_say_end_waits(void);

/* phases.c: the markers (one per phase) and switching sp_col's step state between them. */
int sp_ph_init(void);
void sp_ph_switch(int mk);
int sp_ph_other_wants(void);
void sp_ph_done(void);
void sp_ph_end_others(uint64_t t, uint32_t corr);
uint32_t sp_ph_wants(void);
uint32_t sp_ph_anchor_is(uint32_t name);

/* crash.c: once a trace is being written, the fatal signals write what the rings hold before the
 * program's own action (its handler, or the default) takes them; a later handler wins. Once per
 * process; can't fail (a signal whose handler cannot be set is left as it was). */
void sp_crash_install(void);

/* output.c: the trace file and what each window carries for reading alone. */
int sp_out_start_writer(void);
/* The trace's path once the writer started (one trace, no phases), else NULL. Can't fail. */
const char *sp_out_trace_path(void);
/* The output directory into dir (len bytes): expanded and made once for the process (the trace
 * and the on-demand control files share it; again only for a rank learnt late), a placeholder's
 * value made safe and said once. Returns 0, or -1 (the failure said once, on the first call). */
int sp_out_dir(char *dir, size_t len);
/* Why no trace could be written (the output directory or the file, with path and error), "" if
 * nothing failed so far. This function can't fail. */
const char *sp_out_failure(void);
/* SP_EV_DEVICE records, once the driver answers (output.c). Can't fail. */
void sp_out_write_devices(uint64_t t);
void sp_out_window_context(uint64_t t);

/* activity.c: CUPTI's activity buffers and the writer thread's tick. */
void CUPTIAPI sp_act_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records);
void CUPTIAPI sp_act_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid);
uint64_t CUPTIAPI sp_act_timestamp(void);
void sp_act_flush(bool forced);
void sp_act_writer_tick(void *ctx);
/* At exit (STEPPROF_VERBOSE): how many GPU records belonged to no window and were discarded. Takes
 * sp_col.lock. This function can't fail. */
void sp_act_say_outside(void);
/* Before the writer thread exists: its hold tick on the calling thread (no stepprof lock, no CUDA call), so
 * stepprof parks or re-attaches in time. Returns false if it did not tick (writer exists, or a tick runs). */
bool sp_act_early_tick(void);
/* The writer thread's life-cycle tick after a pass with no window closing (collector/hold/lifetick.c);
 * skipped while an application thread's early tick runs. Can't fail. */
void sp_life_tick(uint64_t now);
/* The writer thread drained ev (sp_writer_set_seen): a launch marked for a window is counted
 * there at the next tick. This function can't fail. */
void sp_act_writer_seen(const struct sp_event *ev);

/* callbacks.c: the subscriber's callback. */
void CUPTIAPI sp_cb_on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data);

/* comms.c: NCCL communicators. */
void sp_comms_announce(uint64_t t);

/* allocs.c: allocation calls seen through CUPTI callbacks. */
struct memop sp_alloc_classify(int d, const char *name);
void sp_alloc_call(const CUpti_CallbackData *cd, struct memop op, uint64_t t, uint32_t stack, int record);

/* ops.c: ranges (NVTX, torch operators, modules) inside windows. sp_ops_start: at inject, after
 * the configuration (follows them if [activities] ops, modules or nvtx asks); sp_ops_nvtx_library:
 * the library NVTX's injection should load (this one), NULL when not following. Can't fail. */
void sp_ops_start(void);
const char *sp_ops_nvtx_library(void);

/* pyglue.c: the Python bridge's events (collector.h sp_collector_py_*) into the step logic. */
/* At injection, once profiling: starts the bridge if a marker takes its events (optimizer,
 * python, or the single automatic marker). Can't fail (the bridge warns). */
void sp_pyglue_start(void);
/* At exit: the bridge polls no more. Can't fail. */
void sp_pyglue_stop(void);
/* 1 if this configuration starts detached from CUPTI, parked until the first window: its single
 * marker is an optimizer or python marker and nothing needs CUPTI from the start. Can't fail. */
int sp_pyglue_parks(void);
/* 1 if the single marker's steps come from the bridge now (an optimizer or python marker, or
 * kind = auto switched to optimizer steps): they need no hook proven to park. Any thread. */
int sp_pyglue_counts(void);
/* kind = auto switched to optimizer steps at step (SP_DET_SWITCH): no launch or anchor hook is
 * wanted any more; said with STEPPROF_VERBOSE. Under sp_col.lock. Can't fail. */
void sp_pyglue_switched(int64_t step);
/* ... and gave them up (SP_DET_UNSWITCH): the next token ticks the life cycle again. Can't fail. */
void sp_pyglue_unswitched(void);
/* Why the current optimizer or python marker recorded no step, into buf ("the optimizer marker:
 * torch.optim.optimizer was never imported"). Returns 0 for other markers. Under sp_col.lock. */
int sp_pyglue_explain(char *buf, size_t n);

/* tokglue.c: detector tokens of API calls, and their recording (STEPPROF_RECORD_TOKENS). */
int sp_tokglue_token_of(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, int launch,
			uint8_t *kind, uint8_t *flags, uint32_t *name);
void sp_tokglue_api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd, int launch,
		    uint64_t t);

#endif
