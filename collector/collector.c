/* SPDX-License-Identifier: MIT */
/* collector.c - the CUPTI side of the collector: subscribes at CUDA initialisation, turns
 * callbacks into markers and API events, activity records into GPU events, and applies the
 * schedule: activity kinds are on only from WARMUP to the end of RECORD_AND_SAVE, warmup
 * records are dropped by correlation id, and a finished window is closed by the writer thread
 * once its GPU records have arrived. Outside windows only the callbacks that marker detection
 * needs are enabled. Never exits or aborts: every failure warns once and disables collection. */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <dlfcn.h>
#include <generated_nvtx_meta.h>
#include <nccl.h>
#include "autostep.h"
#include "clock.h"
#include "collector.h"
#include "cupti_api.h"
#include "intern.h"
#include "log.h"
#include "memory.h"
#include "stacks.h"
#include "ring.h"
#include "writer.h"
#include "config/config.h"

#define MAX_WINDOWS 8          /* windows tracked at once (open + closing) */
#define NAME_CACHE 1024        /* per-thread pointer -> name id cache (power of two) */
#define MATCH_CACHE 65536      /* name id -> marker match verdict */
#define CORR_PENDING UINT32_MAX

/* One recorded window, from its first RECORD step to its GPU records' arrival. */
struct window {
	int used;                /* slot in use */
	int closing;             /* RECORD_AND_SAVE ended; waiting for GPU records */
	uint32_t id;
	uint32_t corr_lo, corr_hi; /* GPU records with corr in [lo, hi) belong here; CORR_PENDING = next call */
	int64_t first_step, last_step;
	uint64_t t_begin, t_end, close_ts, last_record_ts;
	atomic_uint_fast64_t launched; /* kernel launch calls seen in the window */
	atomic_uint_fast64_t arrived;  /* non-graph kernel records received */
};

static struct {
	struct sp_config cfg;         /* effective configuration */
	struct sp_rank_info ri;       /* who we are */
	int active;                   /* subscribed and collecting (0 after any fatal problem) */
	int disabled;                 /* fork child or failure: callbacks return at once */
	CUpti_SubscriberHandle sub;
	pthread_mutex_t lock;         /* step boundaries and window table */
	int64_t step;                 /* current step, -1 before the first marker */
	enum sp_action action;        /* action of the current step */
	uint64_t step_start;          /* trace-clock start of the current step */
	int collecting;               /* activity kinds and recording callbacks on */
	int activities_on;            /* activity kinds enabled (may outlast collecting: set_collecting) */
	int done;                     /* schedule exhausted: nothing more will be recorded */
	uint32_t next_window_id;
	struct window win[MAX_WINDOWS];
	struct window *open;          /* the window of the current RECORD steps, or NULL */
	atomic_int split_pending;     /* a boundary happened outside a CUDA call: the next call's corr splits */
	uint32_t *split_lo, *split_hi;/* fields the pending split fills */
	int writer_started;
	char trace_path[SP_CFG_PATH + 256];
	/* marker */
	uint64_t marker_count;        /* occurrences so far */
	uint8_t match[MATCH_CACHE];   /* 0 unknown, 1 no, 2 yes */
	int in_range;                 /* profiler_range: inside cudaProfilerStart..Stop */
	struct sp_autostep autodet;   /* auto marker, before it locks */
	uint32_t auto_anchor;         /* auto marker token once locked (0 = learning) */
	int auto_after;               /* the auto boundary is at the anchor call's end */
	uint32_t api_name[2][1024];   /* (domain, cbid) -> interned name, 0 = not yet */
	uint8_t api_marker[2][1024];  /* (domain, cbid) is an api marker / profiler range call */
	uint8_t cb_on[2][1024];       /* callbacks currently enabled */
	uint8_t cls[2][1024];         /* CLS_* of each callback id, from its name (arm_markers) */
	uint8_t api_sync[2][1024];    /* (domain, cbid) blocks the host (auto detection's iteration ends) */
	atomic_int had_context;       /* a CUDA context was created (a launcher only counts devices) */
	struct memop { uint8_t kind, shape; } memop[2][1024]; /* allocation calls, by (domain, cbid) */
	int devices_written;          /* SP_EV_DEVICE records are in the trace */
	int step_open;                /* a step is in progress (profiler ranges leave gaps) */
	uint64_t range_starts, range_stops; /* profiler_range occurrences */
	struct { uint32_t lo, hi; } closed[4]; /* corr ranges of windows already written (late records) */
	unsigned nclosed;
	char *(*demangle)(const char *, char *, size_t *, int *);
	uint64_t last_flush;
	size_t buffer_bytes;
} G = { .lock = PTHREAD_MUTEX_INITIALIZER, .step = -1 };

static __thread struct {
	int in_rt;                    /* a runtime API call is in progress (they never nest) */
	int in_rt_launch;             /* ... and it is a kernel launch (its nested driver launch is not counted again) */
	uint64_t rt_t0;               /* its start */
	uint32_t rt_corr;             /* its correlation id */
	int in_nccl;                  /* inside an NCCL call */
	uint32_t nccl_corr;           /* correlation id of its first kernel launch */
	int nccl_group;               /* ncclGroupStart nesting */
	int mk_depth;                 /* marker API calls in progress on this thread */
	int after_pending;            /* an ending marker's entry set up a boundary for its exit */
	uint32_t cur_cb[2];           /* (runtime, driver) callback ids in progress on this thread, 0 none */
	int defer_off;                /* apply_callbacks left a call in progress enabled: redo at its exit */
	int named;                    /* SP_EV_THREAD pushed */
	const void *np[NAME_CACHE];   /* name pointer cache */
	uint32_t nid[NAME_CACHE];
} T;

/* ---- small helpers ---- */

static uint32_t tid(void)
{
	static __thread uint32_t t;
	if (!t)
		t = (uint32_t)syscall(SYS_gettid);
	return t;
}

/* Interned id of a name pointer, cached per thread by address (names CUPTI hands out are stable). */
static uint32_t name_id(const char *s)
{
	if (!s)
		return 0;
	size_t h = ((uintptr_t)s >> 3) & (NAME_CACHE - 1);
	if (T.np[h] == s)
		return T.nid[h];
	uint32_t id = sp_intern(s);
	T.np[h] = s;
	T.nid[h] = id;
	return id;
}

static int glob_match(const char *pat, const char *s)
{
	return s && fnmatch(pat, s, 0) == 0;
}

/* Whether the kernel or call named by id matches the marker pattern: against the raw name,
 * the demangled name and the demangled name without return type and arguments. Cached. */
static int name_matches(uint32_t id)
{
	if (id < MATCH_CACHE && G.match[id])
		return G.match[id] == 2;
	const char *raw = sp_intern_lookup(id), *pat = G.cfg.marker_pattern;
	int ok = glob_match(pat, raw);
	if (!ok && raw && G.demangle) {
		int st = 0;
		char *d = G.demangle(raw, NULL, NULL, &st);
		if (d && st == 0) {
			ok = glob_match(pat, d);
			if (!ok) {
				char *p = strchr(d, '('), *sp;
				if (p)
					*p = 0;
				sp = strrchr(d, ' ');
				ok = glob_match(pat, sp ? sp + 1 : d);
			}
		}
		free(d);
	}
	if (id < MATCH_CACHE)
		G.match[id] = ok ? 2 : 1;
	return ok;
}

static void push(struct sp_event *ev)
{
	if (!T.named) {
		char nm[32] = "";
		struct sp_event t = { .kind = SP_EV_THREAD, .device = SP_NO_DEVICE, .tid = tid() };
		T.named = 1;
		pthread_getname_np(pthread_self(), nm, sizeof nm);
		t.name = sp_intern(nm[0] ? nm : "thread");
		t.start = t.end = sp_now_ns();
		sp_ring_push(&t);
	}
	sp_ring_push(ev);
}

/* Name of a callback id without CUPTI's version suffix ("cudaLaunchKernel_v7000" -> "cudaLaunchKernel"). */
static uint32_t api_name(CUpti_CallbackDomain dom, CUpti_CallbackId cbid)
{
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	if (cbid >= 1024)
		return 0;
	if (!G.api_name[d][cbid]) {
		const char *n = NULL;
		char buf[128];
		if (sp_cupti.cuptiGetCallbackName(dom, cbid, &n) != CUPTI_SUCCESS || !n)
			n = "?";
		snprintf(buf, sizeof buf, "%s", n);
		char *v = strstr(buf, "_v");
		if (v && v[2] >= '0' && v[2] <= '9' && strspn(v + 2, "0123456789") == strlen(v + 2))
			*v = 0;
		G.api_name[d][cbid] = sp_intern(buf);
	}
	return G.api_name[d][cbid];
}

static int is_launch(CUpti_CallbackDomain dom, CUpti_CallbackId cbid)
{
	if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
		switch (cbid) {
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
			return 1;
		}
		return 0;
	}
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
		return 1;
	}
	return 0;
}

/* ---- callback sets ---- */

enum { CLS_RECORDED = 1, CLS_AUTO = 2 }; /* in the recorded set; an auto-detection token */

/* API calls recorded inside windows: everything that launches, copies, sets, synchronises,
 * orders streams or allocates. Selected by name so new CUDA versions' variants are included. */
static const char *const recorded_api[2][14] = {
	{ "cudaLaunch*", "cudaGraphLaunch*", "cudaMemcpy*", "cudaMemset*", "cuda*Synchronize*",
	  "cudaStreamWaitEvent*", "cudaEventRecord*", "cudaMalloc*", "cudaFree*", "cudaProfilerSt*" },
	{ "cuLaunch*", "cuGraphLaunch*", "cuMemcpy*", "cuMemset*", "cu*Synchronize*", "cuStreamWaitEvent*",
	  "cuEventRecord*", "cuMemAlloc*", "cuMemFree*", "cuMemCreate*", "cuMemMap*", "cuMemUnmap*",
	  "cuMemRelease*", "cuProfilerSt*" },
};
/* Tokens the auto detector learns from besides kernel launches: once-per-iteration calls, each
 * counted at the outermost call (a runtime call, or a driver call made outside one), so that the
 * driver calls a runtime call makes inside (its implementation) are not tokens of their own. */
static const char *const auto_api[2][3] = { { "cuda*Synchronize*", "cudaMemcpy*", "cudaMemset*" },
					    { "cu*Synchronize*", "cuMemcpy*", "cuMemset*" } };

static int name_in(const char *n, const char *const *globs, size_t k)
{
	for (size_t i = 0; i < k && globs[i]; i++)
		if (glob_match(globs[i], n))
			return 1;
	return 0;
}

/* Enables exactly the callbacks the current phase needs: marker detection always (until the
 * schedule is done), plus the recorded API set while collecting. Runs under G.lock. */
static void apply_callbacks(void)
{
	static const CUpti_CallbackDomain doms[2] = { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API };
	static const uint32_t sizes[2] = { CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE };
	enum sp_marker_kind mk = G.cfg.marker_kind;
	int rec_rt = G.collecting && G.cfg.runtime_api, rec_drv = G.collecting && G.cfg.driver_api;
	for (int d = 0; d < 2; d++) {
		for (uint32_t cb = 1; cb < sizes[d] && cb < 1024; cb++) {
			int want = 0;
			if (!G.done) {
				if ((mk == SP_MARK_KERNEL || (mk == SP_MARK_AUTO && !G.auto_anchor)) &&
				    is_launch(doms[d], cb))
					want = 1;
				if (mk == SP_MARK_AUTO && !G.auto_anchor && (G.cls[d][cb] & CLS_AUTO))
					want = 1;
				if (mk == SP_MARK_AUTO && G.auto_anchor &&
				    (G.api_marker[d][cb] || (is_launch(doms[d], cb) && G.api_marker[0][0])))
					want = 1;
				if ((mk == SP_MARK_API || mk == SP_MARK_PROFILER_RANGE) && G.api_marker[d][cb])
					want = 1;
			}
			if (!G.done && G.cfg.device_memory && G.memop[d][cb].shape)
				want = 1; /* levels are tracked from process start */
			/* driver recording also needs the runtime set: its depth counter hides nested driver calls */
			if ((d == 0 ? rec_rt || rec_drv : rec_drv) && (G.cls[d][cb] & CLS_RECORDED))
				want = 1;
			if (!want && G.cb_on[d][cb] && T.cur_cb[d] == cb) {
				/* the call in progress: disabling it now loses its exit, and CUPTI then never
				 * moves on to a new correlation id; its exit callback finishes the job */
				T.defer_off = 1;
				continue;
			}
			if (want != G.cb_on[d][cb]) {
				CUptiResult r = sp_cupti.cuptiEnableCallback(want, G.sub, doms[d], cb);
				if (r == CUPTI_SUCCESS)
					G.cb_on[d][cb] = (uint8_t)want;
				else
					sp_warn_once("cuptiEnableCallback(%d, %s) failed: %d", want,
						     sp_intern_lookup(api_name(doms[d], cb)), (int)r);
			}
		}
	}
}

static void set_activities(int on)
{
	struct { int want; CUpti_ActivityKind k; } kinds[] = {
		{ G.cfg.kernels, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL },
		{ G.cfg.memcpy, CUPTI_ACTIVITY_KIND_MEMCPY },
		{ G.cfg.memset, CUPTI_ACTIVITY_KIND_MEMSET },
		{ G.cfg.sync, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION },
	};
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
		if (kinds[i].want)
			on ? SP_CUPTI(cuptiActivityEnable(kinds[i].k)) : SP_CUPTI(cuptiActivityDisable(kinds[i].k));
}

/* ---- windows and steps (under G.lock) ---- */

#define MAX_COMMS 256
#define COMM_GONE ((void *)(uintptr_t)1) /* tombstone of a destroyed communicator's slot */
/* A communicator: identity shared by all its ranks, and the call sequence number. */
struct comm {
	void *comm;             /* ncclComm_t, NULL = free slot */
	uint64_t hash;          /* FNV-1a of the unique id (INIT) or of parent hash, color and split index */
	int rank, size, device;
	uint32_t splits;        /* children split from it so far */
	atomic_uint_fast64_t seq;
};

static struct comm comms[MAX_COMMS];
static void push_comm(int what, const struct comm *c, uint64_t t);

/* Writes one SP_EV_DEVICE record per GPU (name, SMs, compute capability, memory), once: tried when
 * the writer starts and again at each window's start until the driver answers (a program that
 * loads libcuda privately, or has not initialised it yet, is not ready at the first try). Calls the
 * driver: only from an API entry callback or outside callbacks (see after_enter). */
static void write_devices(uint64_t t)
{
	typedef int (*cu_int_fn)(int *);
	static cu_int_fn count;
	static void *cuda = RTLD_DEFAULT; /* libcuda loaded RTLD_LOCAL (cudart does) is not in the global scope */
	int n = 0;
	if (!G.devices_written && !count && !(count = (cu_int_fn)dlsym(cuda, "cuDeviceGetCount"))) {
		void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (h && (count = (cu_int_fn)dlsym(h, "cuDeviceGetCount")))
			cuda = h;
	}
	if (!G.devices_written && count && !count(&n)) {
		int (*get_name)(char *, int, int) = (int (*)(char *, int, int))dlsym(cuda, "cuDeviceGetName");
		int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(cuda, "cuDeviceGetAttribute");
		int (*mem)(size_t *, int) = (int (*)(size_t *, int))dlsym(cuda, "cuDeviceTotalMem_v2");
		for (int i = 0; i < n && i < 64; i++) {
			char name[256] = "GPU";
			int sms = 0, maj = 0, min = 0;
			size_t bytes = 0;
			struct sp_event ev = { .kind = SP_EV_DEVICE, .device = (uint16_t)i, .start = t, .end = t };
			if (get_name)
				get_name(name, sizeof name, i);
			if (attr) {
				attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, i);
				attr(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, i);
				attr(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, i);
			}
			if (mem)
				mem(&bytes, i);
			ev.name = sp_intern(name);
			ev.u.dev.sm_count = (uint32_t)sms;
			ev.u.dev.cc_major = (uint16_t)maj;
			ev.u.dev.cc_minor = (uint16_t)min;
			ev.u.dev.memory = bytes;
			push(&ev);
		}
		G.devices_written = 1;
	}
}

/* This process is not profiled after all (its rank, known only now, is not selected): stops
 * watching and tracking. Runs under G.lock. This function can't fail. */
static void disable_unselected(void)
{
	sp_info("rank %d (%s) is not selected: not profiling", G.ri.rank, G.ri.source);
	sp_host_min_bytes = SIZE_MAX;
	G.done = 1;
	apply_callbacks();
	G.disabled = 1;
}

static int start_writer(void)
{
	char dir[SP_CFG_PATH], host[64] = "host";
	struct sp_trace_meta m = { 0 };
	if (G.writer_started)
		return G.writer_started > 0 ? 0 : -1;
	G.writer_started = -1;
	/* a rank the environment did not give is decided now: the largest NCCL communicator
	 * initialised so far named it, else the process counts as rank 0 */
	if (!sp_rankset_has(&G.cfg.ranks, G.ri.rank)) {
		disable_unselected();
		return -1;
	}
	gethostname(host, sizeof host - 1);
	if (sp_cfg_expand(G.cfg.output, &G.ri, dir, sizeof dir) < 0) {
		sp_warn("cannot expand output directory '%s'; not profiling", G.cfg.output);
		return -1;
	}
	for (char *p = dir + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(dir, 0777);
			*p = '/';
		}
	if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
		sp_warn("cannot create output directory %s: %s; not profiling", dir, strerror(errno));
		return -1;
	}
	if (G.ri.rank >= 0)
		snprintf(G.trace_path, sizeof G.trace_path, "%s/rank%d.%s.%d.sptrace", dir, G.ri.rank, host, (int)getpid());
	else
		snprintf(G.trace_path, sizeof G.trace_path, "%s/norank.%s.%d.sptrace", dir, host, (int)getpid());
	m.features = (G.cfg.kernels ? SP_FEAT_KERNELS : 0) | (G.cfg.memcpy ? SP_FEAT_MEMCPY : 0) |
		     (G.cfg.memset ? SP_FEAT_MEMSET : 0) | (G.cfg.sync ? SP_FEAT_SYNC : 0) |
		     (G.cfg.runtime_api ? SP_FEAT_RUNTIME_API : 0) | (G.cfg.driver_api ? SP_FEAT_DRIVER_API : 0) |
		     (G.cfg.kernel_shapes ? SP_FEAT_SHAPES : 0) | (G.cfg.nvtx ? SP_FEAT_NVTX : 0);
	m.pid = getpid();
	m.rank = G.ri.rank;
	m.world_size = G.ri.world_size;
	m.local_rank = G.ri.local_rank;
	m.anchor_mono_ns = sp_now_ns();
	m.anchor_real_ns = sp_realtime_ns();
	snprintf(m.host, sizeof m.host, "%s", host);
	FILE *f = fopen("/proc/self/cmdline", "re");
	if (f) {
		size_t n = fread(m.command, 1, sizeof m.command - 1, f);
		for (size_t i = 0; i + 1 < n; i++)
			if (!m.command[i])
				m.command[i] = ' ';
		fclose(f);
	}
	if (sp_writer_start(G.trace_path, &m, G.cfg.window_max_bytes) < 0)
		return -1;
	G.writer_started = 1;
	write_devices(m.anchor_mono_ns);
	sp_info("writing %s", G.trace_path);
	return 0;
}

static struct window *new_window(void)
{
	for (int i = 0; i < MAX_WINDOWS; i++)
		if (!G.win[i].used) {
			memset(&G.win[i], 0, sizeof G.win[i]);
			G.win[i].used = 1;
			return &G.win[i];
		}
	return NULL;
}

/* Sets *field to corr, or arranges for the next CUDA call's correlation id to fill it. */
static void split_at(uint32_t *field, uint32_t corr, int lo)
{
	*field = corr ? corr : CORR_PENDING;
	if (!corr) {
		if (lo)
			G.split_lo = field;
		else
			G.split_hi = field;
		atomic_store(&G.split_pending, 1);
	}
}

static void push_ctl(enum sp_ev_kind kind, uint64_t t, struct window *w)
{
	struct sp_event ev = { .kind = kind, .device = SP_NO_DEVICE, .tid = tid(), .start = t, .end = t };
	ev.u.window.id = w->id;
	ev.u.window.first_step = w->first_step;
	ev.u.window.last_step = w->last_step;
	push(&ev);
}

static int is_record(enum sp_action a)
{
	return a == SP_ACT_RECORD || a == SP_ACT_RECORD_AND_SAVE;
}

/* Writes what a window needs to be read alone: the mapped modules (for offline symbolisation of
 * stacks) and the allocations alive at its start. Makes no CUDA call. */
static void window_context(uint64_t t)
{
	if (G.cfg.stacks) {
		FILE *f = fopen("/proc/self/maps", "re");
		char line[4352], path[4096], perm[8];
		unsigned long long lo, hi, off;
		while (f && fgets(line, sizeof line, f))
			if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &lo, &hi, perm, &off, path) == 5 &&
			    perm[2] == 'x' && path[0] == '/') {
				struct sp_event ev = { .kind = SP_EV_MODULE, .device = SP_NO_DEVICE, .start = t, .end = t };
				ev.name = sp_intern(path);
				ev.u.module.start = lo;
				ev.u.module.end = hi;
				ev.u.module.offset = off;
				push(&ev);
			}
		if (f)
			fclose(f);
	}
	if (G.cfg.device_memory || G.cfg.host_malloc)
		sp_mem_snapshot(t);
}

/* 1 if a window's correlation range is still open at its top (CORR_PENDING until the next
 * watched call): records of work launched now would fall inside it. Under G.lock. */
static int window_top_pending(void)
{
	for (int i = 0; i < MAX_WINDOWS; i++)
		if (G.win[i].used && G.win[i].corr_hi == CORR_PENDING)
			return 1;
	return 0;
}

/* Switches activity kinds and recording callbacks to what `act` needs. Activity kinds go off at
 * once only while a window's top is pending (unwatched work would fall inside it); otherwise the
 * writer's tick turns them off once every window is written (activities_idle). So a window that
 * ends inside an API exit callback (cudaProfilerStop, whose call is the window's top) does not
 * reconfigure CUPTI there, and no window loses records CUPTI has not handed over yet (seen once
 * on CUDA 13: all 10 GPU operations of a window's last step, the kinds switched off at its end). */
static void set_collecting(enum sp_action act)
{
	int want = act != SP_ACT_NONE && !G.disabled;
	if (want && !G.collecting && start_writer() < 0)
		want = 0;
	if (want != G.activities_on && (want || window_top_pending())) {
		set_activities(want);
		G.activities_on = want;
	}
	if (want != G.collecting) {
		G.collecting = want;
		apply_callbacks();
	}
}

/* Turns activity kinds off when nothing wants them any more: not collecting, and every window
 * written. Writer thread (its tick), under G.lock. This function can't fail. */
static void activities_idle(void)
{
	if (!G.activities_on || G.collecting)
		return;
	for (int i = 0; i < MAX_WINDOWS; i++)
		if (G.win[i].used)
			return;
	set_activities(0);
	G.activities_on = 0;
}

/* Ends the current step at time t; corr is the correlation id of the CUDA call that is the
 * marker (0 if the marker is not a CUDA call). Writes the step if it was recorded and hands a
 * finished window to the writer thread. */
static void end_step(uint64_t t, uint32_t corr)
{
	if (!G.step_open)
		return;
	G.step_open = 0;
	if (is_record(G.action)) {
		struct sp_event ev = { .kind = SP_EV_STEP, .sub = G.action, .device = SP_NO_DEVICE, .tid = tid(),
				       .start = G.step_start, .end = t };
		ev.u.step.number = G.step;
		push(&ev);
	}
	if (G.action == SP_ACT_RECORD_AND_SAVE && G.open) {
		struct window *w = G.open;
		w->last_step = G.step;
		w->t_end = t;
		split_at(&w->corr_hi, corr, 0);
		w->close_ts = sp_now_ns();
		w->closing = 1;
		__atomic_store_n(&G.open, NULL, __ATOMIC_RELEASE);
		if (G.cfg.device_memory || G.cfg.host_malloc)
			sp_mem_peaks(t);
		sp_writer_kick();
	}
	if (sp_schedule_action(&G.cfg.schedule, G.step + 1) == SP_ACT_NONE)
		set_collecting(SP_ACT_NONE);
}

/* Begins the next step at time t (corr as for end_step): opens a window at the first RECORD
 * step and switches collection on from WARMUP. */
static void begin_step(uint64_t t, uint32_t corr)
{
	G.step++;
	G.step_open = 1;
	G.step_start = t;
	G.action = sp_schedule_action(&G.cfg.schedule, G.step);
	sp_info("step %lld begins (%s) on thread %u", (long long)G.step, sp_action_name(G.action), tid());
	if (is_record(G.action) && !G.open) {
		struct window *w = new_window();
		if (!w) {
			sp_warn_once("too many windows waiting for GPU records; skipping a window");
		} else if (start_writer() < 0) {
			w->used = 0; /* not profiled after all, or no trace file: no window */
		} else {
			w->id = G.next_window_id++;
			w->first_step = w->last_step = G.step;
			w->t_begin = t;
			w->corr_hi = CORR_PENDING;
			split_at(&w->corr_lo, corr, 1);
			push_ctl(SP_EV_WINDOW_BEGIN, t, w);
			write_devices(t); /* if the writer's start could not */
			window_context(t);
			for (int i = 0; i < MAX_COMMS; i++) /* each window names its communicators */
				if (comms[i].comm && comms[i].comm != COMM_GONE)
					push_comm(SP_COMM_INIT, &comms[i], t);
			__atomic_store_n(&G.open, w, __ATOMIC_RELEASE);
		}
	}
	set_collecting(G.action);
	if (!G.done && G.action == SP_ACT_NONE && sp_schedule_done(&G.cfg.schedule, G.step)) {
		G.done = 1;
		apply_callbacks();
	}
}

/* One marker occurrence at time t (corr as for end_step), counted against `every`. For
 * profiler ranges, a Start begins a step and the matching Stop (stop = 1) ends it. */
static void marker_hit(uint64_t t, uint32_t corr, int stop)
{
	uint64_t every = (uint64_t)G.cfg.marker_every;
	pthread_mutex_lock(&G.lock);
	if (G.cfg.marker_kind == SP_MARK_PROFILER_RANGE) {
		if (stop && ++G.range_stops % every == 0)
			end_step(t, corr);
		else if (!stop && G.range_starts++ % every == 0 && !G.done)
			begin_step(t, corr);
	} else if (!G.done && G.marker_count++ % every == 0) {
		end_step(t, corr);
		begin_step(t, corr);
	}
	pthread_mutex_unlock(&G.lock);
}

/* A marker that ends its step (the auto detector's synchronisation anchor) is handled in two
 * halves. CUPTI must not be reconfigured inside an API exit callback (seen on CUDA 13: enabling
 * activity kinds there froze every later correlation id), so at the call's entry the collection
 * state of the coming step is set, and at its exit only the step bookkeeping happens. */
static void after_enter(void)
{
	pthread_mutex_lock(&G.lock);
	if (!G.done && G.marker_count++ % (uint64_t)G.cfg.marker_every == 0) {
		set_collecting(sp_schedule_action(&G.cfg.schedule, G.step + 1));
		T.after_pending = 1;
	}
	pthread_mutex_unlock(&G.lock);
}

static void after_exit(uint64_t t)
{
	T.after_pending = 0;
	pthread_mutex_lock(&G.lock);
	end_step(t, 0); /* the next CUDA call's correlation id splits the steps */
	begin_step(t, 0);
	pthread_mutex_unlock(&G.lock);
}

/* The auto detector's token stream (before it locks) and anchor hits (after). */
static void auto_token(uint32_t tok, uint64_t t, uint32_t corr)
{
	if (G.auto_anchor) {
		if (tok == G.auto_anchor)
			G.auto_after ? after_enter() : marker_hit(t, corr, 0);
		return;
	}
	pthread_mutex_lock(&G.lock);
	int locked = !G.auto_anchor && sp_autostep_feed(&G.autodet, tok, t);
	uint64_t spent = sp_now_ns() - t;
	if (spent > 2000) /* a detection attempt ran: not the program's time */
		sp_autostep_credit(&G.autodet, spent);
	if (locked) {
		struct sp_autostep *a = &G.autodet;
		G.auto_after = a->after;
		G.cfg.marker_every = (int)a->every;
		G.marker_count = a->count;
		G.auto_anchor = a->anchor;
		/* number steps from the program's first periodic iteration; the one in progress was
		 * not watched from its start, so it records nothing */
		G.step = (int64_t)a->iterations - 1;
		G.step_open = 1;
		G.action = SP_ACT_NONE;
		G.step_start = t;
		for (int64_t k = 0; k <= G.step; k++)
			if (sp_schedule_action(&G.cfg.schedule, k) != SP_ACT_NONE) {
				sp_warn("automatic step detection needed %lld iterations; the schedule's steps before "
					"%lld are not recorded (raise skip_first or wait)", (long long)G.step + 1,
					(long long)G.step + 1);
				break;
			}
		G.api_marker[0][0] = 1; /* anchor may be a kernel: keep launch callbacks */
		for (int d = 0; d < 2; d++)
			for (uint32_t cb = 1; cb < 1024; cb++)
				if (G.api_name[d][cb] == (a->anchor & ~SP_AUTOSTEP_FLAGS)) {
					G.api_marker[d][cb] = 1;
					G.api_marker[0][0] = 0; /* it is an API call: launches are not needed */
				}
		sp_info("automatic steps: period %u calls, boundary %s '%s' (every %u), at step %lld", a->period,
			a->after ? "after" : "before", sp_intern_lookup(a->anchor & ~SP_AUTOSTEP_FLAGS), a->every,
			(long long)G.step);
		sp_autostep_free(a);
		apply_callbacks();
	}
	pthread_mutex_unlock(&G.lock);
}

/* ---- allocations seen through CUPTI callbacks ---- */

/* How an allocation call's parameters look (every params struct starts with these fields). */
enum { MEM_NONE, MEM_PTR_SIZE, MEM_PITCH, MEM_CREATE, MEM_FREE };
struct p_ptr_size { void **ptr; size_t size; };
struct p_pitch { void **ptr; size_t *pitch; size_t width; size_t height; };
struct p_create { CUmemGenericAllocationHandle *handle; size_t size; const CUmemAllocationProp *prop; };
struct p_free { void *ptr; };

static const struct { const char *glob; uint8_t kind, shape; } memops[] = {
	{ "cudaMalloc", SP_MEM_DEVICE, MEM_PTR_SIZE }, { "cudaMallocAsync*", SP_MEM_DEVICE_ASYNC, MEM_PTR_SIZE },
	{ "cudaMallocFromPoolAsync*", SP_MEM_DEVICE_ASYNC, MEM_PTR_SIZE },
	{ "cudaMallocManaged", SP_MEM_MANAGED, MEM_PTR_SIZE }, { "cudaMallocPitch", SP_MEM_PITCHED, MEM_PITCH },
	{ "cudaMallocHost", SP_MEM_PINNED, MEM_PTR_SIZE }, { "cudaHostAlloc", SP_MEM_PINNED, MEM_PTR_SIZE },
	{ "cudaFree", SP_MEM_DEVICE, MEM_FREE }, { "cudaFreeAsync*", SP_MEM_DEVICE, MEM_FREE },
	{ "cudaFreeHost", SP_MEM_PINNED, MEM_FREE },
	{ "cuMemAlloc", SP_MEM_DEVICE, MEM_PTR_SIZE }, { "cuMemAllocAsync*", SP_MEM_DEVICE_ASYNC, MEM_PTR_SIZE },
	{ "cuMemAllocFromPoolAsync*", SP_MEM_DEVICE_ASYNC, MEM_PTR_SIZE },
	{ "cuMemAllocManaged", SP_MEM_MANAGED, MEM_PTR_SIZE }, { "cuMemAllocPitch", SP_MEM_PITCHED, MEM_PITCH },
	{ "cuMemAllocHost", SP_MEM_PINNED, MEM_PTR_SIZE }, { "cuMemHostAlloc", SP_MEM_PINNED, MEM_PTR_SIZE },
	{ "cuMemFree", SP_MEM_DEVICE, MEM_FREE }, { "cuMemFreeAsync*", SP_MEM_DEVICE, MEM_FREE },
	{ "cuMemFreeHost", SP_MEM_PINNED, MEM_FREE },
	{ "cuMemCreate", SP_MEM_VMM, MEM_CREATE }, { "cuMemRelease", SP_MEM_VMM, MEM_FREE },
};

/* An allocation call returned successfully: account for it (and record it in a window). */
static void memory_call(const CUpti_CallbackData *cd, struct memop op, uint64_t t, uint32_t stack, int record)
{
	const void *p = cd->functionParams;
	uint32_t dev = UINT32_MAX;
	uint64_t addr = 0, size = 0;
	if (op.shape == MEM_FREE) {
		/* the pointer is the first parameter; frees of the four kinds share the key space but VMM */
		const struct p_free *f = p;
		int kind = op.kind == SP_MEM_VMM ? SP_MEM_VMM : SP_MEM_DEVICE;
		sp_mem_free(kind, (uint64_t)(uintptr_t)f->ptr, t, record);
		return;
	}
	if (op.shape == MEM_PTR_SIZE) {
		const struct p_ptr_size *a = p;
		addr = a->ptr ? (uint64_t)(uintptr_t)*a->ptr : 0;
		size = a->size;
	} else if (op.shape == MEM_PITCH) {
		const struct p_pitch *a = p;
		addr = a->ptr ? (uint64_t)(uintptr_t)*a->ptr : 0;
		size = (a->pitch ? *a->pitch : a->width) * a->height;
	} else if (op.shape == MEM_CREATE) {
		const struct p_create *a = p;
		addr = a->handle ? (uint64_t)*a->handle : 0;
		size = a->size;
		if (a->prop && a->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
			dev = (uint32_t)a->prop->location.id;
	}
	if (dev == UINT32_MAX && cd->context && sp_cupti.cuptiGetDeviceId(cd->context, &dev) != CUPTI_SUCCESS)
		dev = UINT32_MAX;
	if (addr)
		sp_mem_alloc(op.kind, dev == UINT32_MAX ? -1 : (int)dev, addr, size, stack, t, record);
}

/* ---- CUPTI callbacks (application threads) ---- */

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	if (G.disabled)
		return;
	if (dom == CUPTI_CB_DOMAIN_NVTX) {
		const CUpti_NvtxData *nd = data;
		const char *msg = NULL;
		if (cbid == CUPTI_CBID_NVTX_nvtxRangePushA || cbid == CUPTI_CBID_NVTX_nvtxRangeStartA)
			msg = ((const nvtxRangePushA_params *)nd->functionParams)->message;
		else if (cbid == CUPTI_CBID_NVTX_nvtxRangePushEx || cbid == CUPTI_CBID_NVTX_nvtxRangeStartEx) {
			const nvtxEventAttributes_t *a = ((const nvtxRangePushEx_params *)nd->functionParams)->eventAttrib;
			msg = a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : NULL;
		} else if (cbid == CUPTI_CBID_NVTX_nvtxDomainRangePushEx || cbid == CUPTI_CBID_NVTX_nvtxDomainRangeStartEx) {
			const nvtxEventAttributes_t *a =
				((const nvtxDomainRangePushEx_params *)nd->functionParams)->core.eventAttrib;
			msg = a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : NULL;
		}
		if (msg && glob_match(G.cfg.marker_pattern, msg))
			marker_hit(sp_now_ns(), 0, 0);
		return;
	}
	if (dom == CUPTI_CB_DOMAIN_RESOURCE) { /* CONTEXT_CREATED only: this process does GPU work */
		atomic_store_explicit(&G.had_context, 1, memory_order_relaxed);
		return;
	}
	if (dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API)
		return;
	const CUpti_CallbackData *cd = data;
	int d = dom == CUPTI_CB_DOMAIN_DRIVER_API;
	/* a kernel launch counts once: at the runtime call, or at a driver call made outside one */
	int launch = is_launch(dom, cbid);
	if (launch && d && T.in_rt_launch)
		return; /* the driver launch inside a runtime launch: that one is counted and recorded */
	int api_mk = cbid < 1024 && G.api_marker[d][cbid] &&
		     (G.cfg.marker_kind == SP_MARK_API || G.cfg.marker_kind == SP_MARK_PROFILER_RANGE);
	uint64_t t = sp_now_ns();
	if (cd->callbackSite == CUPTI_API_ENTER) {
		T.cur_cb[d] = cbid;
		if (!d) {
			T.in_rt = 1;
			T.in_rt_launch = launch;
			T.rt_t0 = t;
			T.rt_corr = cd->correlationId;
		}
		if (launch && T.in_nccl && !T.nccl_corr)
			T.nccl_corr = cd->correlationId; /* links the NCCL call to its kernel */
		/* a marker inside a runtime call begins its step where that call began */
		uint64_t mt = d && T.in_rt ? T.rt_t0 : t;
		uint32_t mc = d && T.in_rt ? T.rt_corr : cd->correlationId;
		if (atomic_load_explicit(&G.split_pending, memory_order_relaxed) && atomic_exchange(&G.split_pending, 0)) {
			pthread_mutex_lock(&G.lock);
			if (G.split_lo && *G.split_lo == CORR_PENDING)
				*G.split_lo = cd->correlationId;
			if (G.split_hi && *G.split_hi == CORR_PENDING)
				*G.split_hi = cd->correlationId;
			G.split_lo = G.split_hi = NULL;
			pthread_mutex_unlock(&G.lock);
		}
		/* Marker detection. Driver launches see every kernel (runtime launches nest in them);
		 * an API marker counts only the outermost matching call on its thread. */
		if (!G.done) {
			if (G.cfg.marker_kind == SP_MARK_KERNEL) {
				if (launch && name_matches(name_id(cd->symbolName)))
					marker_hit(mt, mc, 0);
			} else if (G.cfg.marker_kind == SP_MARK_AUTO) {
				if (launch)
					auto_token(name_id(cd->symbolName) | SP_AUTOSTEP_KERNEL, mt, mc);
				else if (cbid < 1024 && (G.cls[d][cbid] & CLS_AUTO) && !(d && T.in_rt))
					auto_token(api_name(dom, cbid) | (G.api_sync[d][cbid] ? SP_AUTOSTEP_SYNC : 0), mt, mc);
			} else if (api_mk && T.mk_depth++ == 0) {
				const char *n = sp_intern_lookup(api_name(dom, cbid));
				if (G.cfg.marker_kind == SP_MARK_API || strstr(n, "Start"))
					marker_hit(mt, mc, 0);
			}
		}
		if (cd->correlationData)
			*cd->correlationData = t;
		return;
	}
	/* API exit */
	if (!d)
		T.in_rt = T.in_rt_launch = 0;
	T.cur_cb[d] = 0;
	if (T.defer_off) {
		T.defer_off = 0;
		pthread_mutex_lock(&G.lock);
		apply_callbacks();
		pthread_mutex_unlock(&G.lock);
	}
	if (T.after_pending && cbid < 1024 && G.api_marker[d][cbid])
		after_exit(t); /* the iteration ended with this call */
	if (api_mk && T.mk_depth > 0 && --T.mk_depth == 0 && G.cfg.marker_kind == SP_MARK_PROFILER_RANGE &&
	    strstr(sp_intern_lookup(api_name(dom, cbid)), "Stop"))
		marker_hit(t, cd->correlationId, 1);
	struct window *w = __atomic_load_n(&G.open, __ATOMIC_ACQUIRE);
	struct memop mop = cbid < 1024 ? G.memop[d][cbid] : (struct memop){ 0, 0 };
	int ok = cd->functionReturnValue && *(const int *)cd->functionReturnValue == 0;
	uint32_t stack = 0;
	if (w && G.cfg.stacks && (launch || mop.shape) && !(d && T.in_rt))
		stack = sp_stack_capture(G.cfg.stack_depth);
	if (mop.shape && ok && !(d && T.in_rt) && G.cfg.device_memory)
		memory_call(cd, mop, t, stack, w != NULL);
	if (!w || (d && T.in_rt) || (d ? !G.cfg.driver_api : !G.cfg.runtime_api))
		return; /* warmup, nested in a runtime call, or not wanted */
	if (launch)
		atomic_fetch_add_explicit(&w->launched, 1, memory_order_relaxed);
	struct sp_event ev = { .kind = SP_EV_API, .sub = d ? SP_API_DRIVER : SP_API_RUNTIME,
			       .device = SP_NO_DEVICE, .tid = tid(), .end = t, .corr = cd->correlationId,
			       .name = api_name(dom, cbid) };
	ev.start = cd->correlationData && *cd->correlationData ? *cd->correlationData : t;
	ev.u.api.cbid = cbid;
	ev.u.api.status = cd->functionReturnValue ? *(const int *)cd->functionReturnValue : 0;
	ev.u.api.stack = stack;
	push(&ev);
}

/* ---- activity buffers (CUPTI's threads, or the writer thread when it flushes) ---- */

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	int self = sp_mem_self;
	sp_mem_self = 1; /* stepprof's buffer, not the program's host memory */
	*buf = aligned_alloc(8, G.buffer_bytes);
	sp_mem_self = self;
	*size = *buf ? G.buffer_bytes : 0;
	*max_records = 0;
}

/* The window a GPU record with this correlation id belongs to, or NULL (warmup or outside).
 * *late is set if it belongs to a window already written. Caller holds G.lock. */
static struct window *window_of(uint32_t corr, int *late)
{
	*late = 0;
	for (int i = 0; i < MAX_WINDOWS; i++) {
		struct window *w = &G.win[i];
		if (w->used && w->corr_lo != CORR_PENDING && corr >= w->corr_lo &&
		    (w->corr_hi == CORR_PENDING || corr < w->corr_hi))
			return w;
	}
	for (unsigned i = 0; i < G.nclosed && i < 4; i++)
		*late |= corr >= G.closed[i].lo && corr < G.closed[i].hi;
	return NULL;
}

/* The fields every GPU activity record kind shares. */
#define GPU_COMMON(ev, r)                                                                           \
	((ev).device = (uint16_t)(r)->deviceId, (ev).start = (r)->start, (ev).end = (r)->end,       \
	 (ev).corr = (r)->correlationId, (ev).stream = (r)->streamId, (ev).context = (r)->contextId)

static void convert_record(const CUpti_Activity *rec, uint64_t *late)
{
	struct sp_event ev = { .device = SP_NO_DEVICE };
	int is_late;
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)rec;
		ev.kind = SP_EV_KERNEL;
		GPU_COMMON(ev, k);
		ev.name = name_id(k->name);
		if (G.cfg.kernel_shapes) {
			ev.u.kernel.grid[0] = k->gridX, ev.u.kernel.grid[1] = k->gridY, ev.u.kernel.grid[2] = k->gridZ;
			ev.u.kernel.block[0] = k->blockX, ev.u.kernel.block[1] = k->blockY, ev.u.kernel.block[2] = k->blockZ;
			ev.u.kernel.static_smem = k->staticSharedMemory;
			ev.u.kernel.dynamic_smem = k->dynamicSharedMemory;
			ev.u.kernel.regs = k->registersPerThread;
		}
		ev.u.kernel.graph_id = k->graphId;
		ev.u.kernel.graph_node = k->graphNodeId;
		ev.u.kernel.launch = k->graphId ? SP_LAUNCH_GRAPH
				     : k->launchType ? SP_LAUNCH_COOPERATIVE
				     : (k->clusterX * k->clusterY * k->clusterZ > 1) ? SP_LAUNCH_CLUSTER
									     : SP_LAUNCH_NORMAL;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)rec;
		ev.kind = SP_EV_MEMCPY;
		ev.sub = m->copyKind;
		GPU_COMMON(ev, m);
		ev.u.copy.bytes = m->bytes;
		ev.u.copy.src_kind = m->srcKind;
		ev.u.copy.dst_kind = m->dstKind;
		ev.u.copy.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
		ev.u.copy.graph_id = m->graphId;
		ev.u.copy.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)rec;
		ev.kind = SP_EV_MEMSET;
		GPU_COMMON(ev, m);
		ev.u.copy.bytes = m->bytes;
		ev.u.copy.value = m->value;
		ev.u.copy.dst_kind = (uint8_t)m->memoryKind;
		ev.u.copy.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0;
		ev.u.copy.graph_id = m->graphId;
		ev.u.copy.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const void *)rec;
		ev.kind = SP_EV_SYNC;
		ev.sub = (uint8_t)s->type;
		ev.start = s->start;
		ev.end = s->end;
		ev.corr = s->correlationId;
		ev.stream = s->streamId == (uint32_t)-1 ? 0 : s->streamId;
		ev.context = s->contextId;
		ev.tid = 0;
		ev.u.sync.event = s->cudaEventId;
		break;
	}
	default:
		return;
	}
	pthread_mutex_lock(&G.lock);
	struct window *w = window_of(ev.corr, &is_late);
	if (w) {
		if (ev.kind == SP_EV_KERNEL && !ev.u.kernel.graph_id)
			atomic_fetch_add_explicit(&w->arrived, 1, memory_order_relaxed);
		w->last_record_ts = sp_now_ns();
	}
	pthread_mutex_unlock(&G.lock);
	if (w)
		push(&ev);
	else
		*late += is_late;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	uint64_t late = 0;
	while (valid && sp_cupti.cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
		convert_record(rec, &late);
	if (late) {
		struct sp_event ev = { .kind = SP_EV_DROPPED, .sub = SP_DROP_LATE, .device = SP_NO_DEVICE };
		ev.start = ev.end = sp_now_ns();
		ev.u.dropped.count = late;
		push(&ev);
	}
	size_t dropped = 0;
	if (sp_cupti.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
		struct sp_event ev = { .kind = SP_EV_DROPPED, .sub = SP_DROP_CUPTI, .device = SP_NO_DEVICE };
		ev.start = ev.end = sp_now_ns();
		ev.u.dropped.count = dropped;
		push(&ev);
	}
	free(buf);
}

static uint64_t CUPTIAPI timestamp_cb(void)
{
	return sp_now_ns();
}

/* ---- the writer thread's tick: finish closing windows ---- */

static void writer_tick(void *ctx)
{
	uint64_t now = sp_now_ns();
	int closing = 0;
	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < MAX_WINDOWS; i++)
		closing |= G.win[i].used && G.win[i].closing;
	if (!closing)
		activities_idle();
	pthread_mutex_unlock(&G.lock);
	if (!closing)
		return;
	if (now - G.last_flush >= 2000000ull) {
		sp_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		G.last_flush = sp_now_ns();
	}
	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < MAX_WINDOWS; i++) {
		struct window *w = &G.win[i];
		if (!w->used || !w->closing)
			continue;
		uint64_t age = now - w->close_ts, quiet = now - (w->last_record_ts > w->close_ts ? w->last_record_ts : w->close_ts);
		int complete = atomic_load(&w->arrived) >= atomic_load(&w->launched) && age > 4000000ull;
		if (complete || (age > 50000000ull && quiet > 100000000ull) || age > 10000000000ull) {
			struct sp_event ev = { .kind = SP_EV_WINDOW_END, .device = SP_NO_DEVICE,
					       .start = w->t_end, .end = w->t_end };
			ev.u.window.id = w->id;
			ev.u.window.first_step = w->first_step;
			ev.u.window.last_step = w->last_step;
			sp_writer_emit(&ev);
			sp_info("window %u (steps %lld-%lld) closed after %.1f ms", w->id, (long long)w->first_step,
				(long long)w->last_step, age / 1e6);
			G.closed[G.nclosed++ % 4].lo = w->corr_lo;
			G.closed[(G.nclosed - 1) % 4].hi = w->corr_hi;
			w->used = 0;
		}
	}
	pthread_mutex_unlock(&G.lock);
}

/* ---- life cycle ---- */

static void on_fork_child(void)
{
	sp_host_min_bytes = SIZE_MAX;
	G.disabled = 1;
	G.active = 0;
	sp_ring_disable_all();
}

/* At exit, if the schedule wanted steps and no window was ever opened, says why on stderr (an
 * empty trace must not pass in silence). Caller holds G.lock. This function can't fail. */
static void explain_no_window(void)
{
	int64_t first = -1;
	if (G.next_window_id || G.disabled)
		return;
	if (!atomic_load_explicit(&G.had_context, memory_order_relaxed))
		return; /* no CUDA context: a launcher (torchrun counts devices) had nothing to profile */
	for (int64_t k = 0; k < 1000000 && first < 0; k++)
		if (is_record(sp_schedule_action(&G.cfg.schedule, k)))
			first = k;
	if (first < 0)
		return; /* the schedule records nothing */
	const char *anchor = sp_intern_lookup(G.auto_anchor & ~SP_AUTOSTEP_FLAGS);
	if (G.cfg.marker_kind == SP_MARK_AUTO && !G.auto_anchor)
		sp_warn("no step recorded: automatic step detection did not find the iteration (it must "
			"repeat exactly, four times); set an explicit [marker] (docs/STEPS.md)");
	else if (G.cfg.marker_kind == SP_MARK_AUTO)
		sp_warn("no step recorded: the program ended in step %lld and the schedule records from step "
			"%lld; automatic boundaries come %s each '%s' (every %d): if the program ran longer, "
			"that call stopped recurring - set an explicit [marker] (docs/STEPS.md)",
			(long long)G.step, (long long)first, G.auto_after ? "after" : "before", anchor ? anchor : "?",
			G.cfg.marker_every);
	else if (G.step < 0)
		sp_warn("no step recorded: the %s marker '%s' never occurred", sp_marker_kind_name(G.cfg.marker_kind),
			G.cfg.marker_pattern);
	else
		sp_warn("no step recorded: the program ended in step %lld and the schedule records from step "
			"%lld (%s marker '%s', every %d)", (long long)G.step, (long long)first,
			sp_marker_kind_name(G.cfg.marker_kind), G.cfg.marker_pattern, G.cfg.marker_every);
}

static void on_exit_process(void)
{
	if (!G.active)
		return;
	pthread_mutex_lock(&G.lock);
	if (G.open) /* the program ended inside a window: close it at the current step */
		G.action = SP_ACT_RECORD_AND_SAVE;
	end_step(sp_now_ns(), 0);
	explain_no_window();
	G.done = 1;
	pthread_mutex_unlock(&G.lock);
	if (G.writer_started > 0) {
		sp_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		for (int i = 0; i < 200; i++) { /* up to 2 s for windows to close */
			int closing = 0;
			pthread_mutex_lock(&G.lock);
			for (int k = 0; k < MAX_WINDOWS; k++)
				closing |= G.win[k].used && G.win[k].closing;
			pthread_mutex_unlock(&G.lock);
			if (!closing)
				break;
			sp_writer_kick();
			usleep(10000);
		}
		sp_writer_stop();
	}
	G.active = 0;
}

static int arm_markers(void)
{
	static const CUpti_CallbackDomain doms[2] = { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API };
	static const uint32_t sizes[2] = { CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE };
	int n = 0;
	for (int d = 0; d < 2; d++)
		for (uint32_t cb = 1; cb < sizes[d] && cb < 1024; cb++) {
			const char *nm = sp_intern_lookup(api_name(doms[d], cb));
			int hit = 0;
			if (G.cfg.marker_kind == SP_MARK_API)
				hit = glob_match(G.cfg.marker_pattern, nm);
			else if (G.cfg.marker_kind == SP_MARK_PROFILER_RANGE)
				hit = !strcmp(nm, "cudaProfilerStart") || !strcmp(nm, "cudaProfilerStop") ||
				      !strcmp(nm, "cuProfilerStart") || !strcmp(nm, "cuProfilerStop");
			G.api_marker[d][cb] = hit;
			n += hit;
			G.cls[d][cb] = (name_in(nm, recorded_api[d], 14) ? CLS_RECORDED : 0) |
				       (!is_launch(doms[d], cb) && name_in(nm, auto_api[d], 3) ? CLS_AUTO : 0);
			for (size_t k = 0; k < sizeof memops / sizeof *memops; k++)
				if (!strncmp(memops[k].glob, "cuda", 4) == (d == 0) && glob_match(memops[k].glob, nm))
					G.memop[d][cb] = (struct memop){ memops[k].kind, memops[k].shape };
			G.api_sync[d][cb] = d ? glob_match("cu*Synchronize*", nm) ||
						(glob_match("cuMemcpyDtoH*", nm) && !strstr(nm, "Async"))
					      : glob_match("cuda*Synchronize*", nm) || !strcmp(nm, "cudaMemcpy");
		}
	if (G.cfg.marker_kind == SP_MARK_API && !n) {
		sp_warn("[marker] pattern '%s' names no CUDA runtime or driver API function; not profiling",
			G.cfg.marker_pattern);
		return -1;
	}
	if (G.cfg.marker_kind == SP_MARK_NVTX) {
		/* NVTX reaches CUPTI only through its injection hook, read at the program's first NVTX
		 * call: ranges opened before CUDA initialises are not seen */
		const char *cur = getenv("NVTX_INJECTION64_PATH");
		if (!cur || !*cur)
			setenv("NVTX_INJECTION64_PATH", sp_cupti.path, 1);
		else if (strcmp(cur, sp_cupti.path))
			sp_warn("NVTX_INJECTION64_PATH is %s: NVTX markers reach stepprof only if it is libcupti", cur);
		SP_CUPTI(cuptiEnableCallback(1, G.sub, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushA));
		SP_CUPTI(cuptiEnableCallback(1, G.sub, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushEx));
		SP_CUPTI(cuptiEnableCallback(1, G.sub, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangeStartA));
		SP_CUPTI(cuptiEnableCallback(1, G.sub, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangeStartEx));
		SP_CUPTI(cuptiEnableCallback(1, G.sub, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxDomainRangePushEx));
		SP_CUPTI(cuptiEnableCallback(1, G.sub, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxDomainRangeStartEx));
	}
	if (G.cfg.marker_kind == SP_MARK_NCCL)
		sp_info("NCCL marker '%s': steps come from the NCCL hooks", G.cfg.marker_pattern);
	return 0;
}

static int owner_pid;

void sp_collector_inject(void)
{
	struct sp_cfg_errors errs = { 0 };
	char why[512];
	static int once;
	if (once++)
		return;
	if (sp_cfg_load(&G.cfg, NULL, &errs) > 0) {
		for (int i = 0; i < errs.count && i < SP_CFG_MAX_ERRORS; i++)
			sp_warn("%s", errs.msg[i]);
		sp_warn("configuration errors: not profiling this process (check with 'stepprof check')");
		return;
	}
	if (!G.cfg.enabled)
		return;
	sp_ranks_detect(&G.ri, NULL);
	if (G.ri.rank >= 0 && !sp_rankset_has(&G.cfg.ranks, G.ri.rank))
		return; /* a rank the environment does not give is decided at the first window */
	if (sp_cupti_load(G.cfg.cupti_library, why, sizeof why) < 0) {
		sp_warn("cannot load CUPTI: %s; not profiling", why);
		return;
	}
	CUptiResult r = sp_cupti.cuptiSubscribe(&G.sub, on_callback, NULL);
	if (r != CUPTI_SUCCESS) {
		const char *msg = "?";
		sp_cupti.cuptiGetResultString(r, &msg);
		sp_warn("CUPTI is already in use in this process (another profiler such as nsys, "
			"compute-sanitizer or torch.profiler subscribed first: %s); stepprof collects nothing here",
			msg);
		return;
	}
	owner_pid = getpid();
	G.buffer_bytes = G.cfg.cupti_buffer_bytes;
	G.demangle = (char *(*)(const char *, char *, size_t *, int *))dlsym(RTLD_DEFAULT, "__cxa_demangle");
	if (SP_CUPTI(cuptiActivityRegisterTimestampCallback(timestamp_cb)) != CUPTI_SUCCESS ||
	    SP_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS) {
		sp_cupti.cuptiUnsubscribe(G.sub);
		return;
	}
	sp_ring_configure(G.cfg.ring_events);
	sp_writer_set_tick(writer_tick, NULL);
	if (G.cfg.marker_kind == SP_MARK_AUTO && sp_autostep_init(&G.autodet, 1u << 16) < 0) {
		sp_warn("no memory for automatic step detection; not profiling");
		sp_cupti.cuptiUnsubscribe(G.sub);
		return;
	}
	if (arm_markers() < 0) {
		sp_cupti.cuptiUnsubscribe(G.sub);
		return;
	}
	SP_CUPTI(cuptiEnableCallback(1, G.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
	pthread_mutex_lock(&G.lock);
	apply_callbacks();
	pthread_mutex_unlock(&G.lock);
	pthread_atfork(NULL, NULL, on_fork_child);
	atexit(on_exit_process);
	G.active = 1;
	if (G.cfg.host_malloc && !&sp_malloc_hooks)
		sp_warn("host_malloc = true, but this library has no malloc hooks (libstepprof-nomalloc.so): host "
			"memory is not tracked; preload libstepprof.so instead (stepprof run picks it by itself)");
	else
		sp_host_min_bytes = G.cfg.host_malloc ? (size_t)G.cfg.host_malloc_min : SIZE_MAX;
	sp_info("profiling rank %d (%s), marker %s '%s' every %d", G.ri.rank, G.ri.source,
		sp_marker_kind_name(G.cfg.marker_kind), G.cfg.marker_pattern, G.cfg.marker_every);
}

/* ---- NCCL (called from preload/nccl.c) ---- */


static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* The slot of comm (a free one if add), or NULL. Caller holds G.lock. */
static struct comm *comm_slot(void *comm, int add)
{
	size_t h = ((uintptr_t)comm >> 4) % MAX_COMMS;
	for (size_t i = 0; i < MAX_COMMS; i++) {
		struct comm *c = &comms[(h + i) % MAX_COMMS];
		if (c->comm == comm)
			return c;
		if (!c->comm)
			return add ? c : NULL;
	}
	return NULL;
}

/* Fills rank, size and device from NCCL itself (split communicators learn them late). */
static void comm_query(struct comm *c)
{
	typedef ncclResult_t (*query_fn)(void *, int *);
	static query_fn user_rank, count, dev;
	if (!user_rank) {
		user_rank = (query_fn)dlsym(RTLD_DEFAULT, "ncclCommUserRank");
		count = (query_fn)dlsym(RTLD_DEFAULT, "ncclCommCount");
		dev = (query_fn)dlsym(RTLD_DEFAULT, "ncclCommCuDevice");
	}
	if (c->rank < 0 && user_rank)
		user_rank(c->comm, &c->rank);
	if (c->size < 0 && count)
		count(c->comm, &c->size);
	if (c->device < 0 && dev)
		dev(c->comm, &c->device);
}

static void push_comm(int what, const struct comm *c, uint64_t t)
{
	struct sp_event ev = { .kind = SP_EV_COMM, .sub = (uint8_t)what, .tid = tid(), .start = t, .end = t };
	ev.device = c->device >= 0 ? (uint16_t)c->device : SP_NO_DEVICE;
	ev.u.nccl.comm = c->hash;
	ev.u.nccl.comm_rank = c->rank;
	ev.u.nccl.comm_size = c->size;
	ev.u.nccl.peer = -1;
	push(&ev);
}

int sp_collector_nccl_active(void)
{
	return G.active && !G.disabled;
}

uint64_t sp_collector_nccl_begin(const struct sp_nccl_call *c)
{
	uint64_t t = sp_now_ns();
	T.in_nccl = 1;
	T.nccl_corr = 0;
	if (c->op == SP_NCCL_GROUP_END && T.nccl_group > 0)
		T.nccl_group--;
	if (G.cfg.marker_kind == SP_MARK_NCCL && !G.done && glob_match(G.cfg.marker_pattern, c->fn))
		marker_hit(t, 0, 0);
	return t;
}

void sp_collector_nccl_end(const struct sp_nccl_call *c, uint64_t t0, int ret)
{
	static const uint8_t dsize[12] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
	uint64_t seq = 0;
	struct comm *cm = NULL;
	T.in_nccl = 0;
	if (c->op == SP_NCCL_GROUP_START)
		T.nccl_group++;
	if (c->comm) {
		pthread_mutex_lock(&G.lock);
		cm = comm_slot(c->comm, 1);
		if (cm && !cm->comm) { /* created outside the hooks: the identity is local only */
			cm->comm = c->comm;
			cm->hash = fnv1a(0xcbf29ce484222325ull, &c->comm, sizeof c->comm);
			cm->rank = cm->size = cm->device = -1;
		}
		if (cm) {
			if (cm->rank < 0 || cm->size < 0 || cm->device < 0)
				comm_query(cm);
			seq = atomic_fetch_add(&cm->seq, 1);
		}
		pthread_mutex_unlock(&G.lock);
	}
	if (!G.cfg.nccl || !__atomic_load_n(&G.open, __ATOMIC_ACQUIRE))
		return;
	struct sp_event ev = { .kind = SP_EV_NCCL, .sub = (uint8_t)c->op, .device = SP_NO_DEVICE, .tid = tid(),
			       .start = t0, .end = sp_now_ns(), .corr = T.nccl_corr, .name = sp_intern(c->fn) };
	ev.u.nccl.count = c->count;
	ev.u.nccl.dtype = (uint8_t)c->dtype;
	ev.u.nccl.bytes = c->count * (c->dtype >= 0 && c->dtype < 12 ? dsize[c->dtype] : 1);
	ev.u.nccl.redop = c->redop < 0 ? 0xff : (uint8_t)c->redop;
	ev.u.nccl.peer = c->peer;
	ev.u.nccl.group_depth = (uint8_t)T.nccl_group;
	ev.u.nccl.seq = seq;
	ev.u.nccl.comm_rank = ev.u.nccl.comm_size = -1;
	if (G.cfg.stacks)
		ev.u.nccl.stack = sp_stack_capture(G.cfg.stack_depth);
	if (cm) {
		ev.u.nccl.comm = cm->hash;
		ev.u.nccl.comm_rank = cm->rank;
		ev.u.nccl.comm_size = cm->size;
		ev.device = cm->device >= 0 ? (uint16_t)cm->device : SP_NO_DEVICE;
	}
	if (ret != 0 && ret != 7 /* ncclInProgress */)
		sp_info("%s returned %d", c->fn, ret);
	push(&ev);
}

void sp_collector_comm(int what, void *comm, const void *id, size_t idlen, int rank, int nranks, void *parent)
{
	if (!G.active || !comm)
		return;
	uint64_t t = sp_now_ns();
	int created = what == SP_COMM_INIT || what == SP_COMM_SPLIT;
	pthread_mutex_lock(&G.lock);
	struct comm *c = comm_slot(comm, created);
	if (c && created) {
		struct comm *p = what == SP_COMM_SPLIT ? comm_slot(parent, 0) : NULL;
		c->comm = comm;
		c->rank = rank;
		c->size = nranks;
		c->device = -1;
		c->splits = 0;
		atomic_store(&c->seq, 0);
		c->hash = fnv1a(0xcbf29ce484222325ull, id, idlen);
		if (p) { /* equal on every rank of the child: parent identity, split index, color */
			uint32_t k = p->splits++;
			c->hash = fnv1a(fnv1a(c->hash, &p->hash, sizeof p->hash), &k, sizeof k);
		}
		if (what == SP_COMM_INIT && rank >= 0 && !G.writer_started &&
		    (G.ri.rank < 0 || (!strcmp(G.ri.source, "nccl") && nranks > G.ri.world_size))) {
			/* no rank in the environment: the largest communicator initialised before the
			 * first window (the world's, as a rule) names it; start_writer decides selection */
			G.ri.rank = rank;
			G.ri.world_size = nranks;
			G.ri.source = "nccl";
			sp_info("rank %d of %d from an NCCL communicator", rank, nranks);
		}
		if (G.writer_started > 0)
			push_comm(what, c, t);
	} else if (c) {
		push_comm(what, c, t);
		c->comm = COMM_GONE;
	}
	pthread_mutex_unlock(&G.lock);
}

/* ---- host allocations (called from preload/malloc.c, inside malloc: no allocation here) ---- */

volatile size_t sp_host_min_bytes = SIZE_MAX;

void sp_collector_host_alloc(void *p, size_t size)
{
	/* the hook checked p and size; outside a window the time only dates a later snapshot's entry;
	 * inside one, the counter-based clock (clock.h) spares a serialising clock_gettime per event */
	int rec = __atomic_load_n(&G.open, __ATOMIC_ACQUIRE) != NULL;
	sp_mem_alloc(SP_MEM_HOST, -1, (uint64_t)(uintptr_t)p, size,
		     rec && G.cfg.stacks ? sp_stack_capture(G.cfg.stack_depth) : 0, rec ? sp_fast_ns() : sp_coarse_ns(), rec);
}

void sp_collector_host_free(void *p)
{
	int rec = __atomic_load_n(&G.open, __ATOMIC_ACQUIRE) != NULL;
	sp_mem_free(SP_MEM_HOST, (uint64_t)(uintptr_t)p, rec ? sp_fast_ns() : 0, rec);
}

int sp_collector_owns_cupti(void)
{
	if (!G.active || owner_pid != getpid())
		return 0;
	sp_warn_once("another profiler (e.g. torch.profiler) tried to subscribe to CUPTI, which stepprof holds in "
		     "this process: its GPU activities will be missing; stepprof's trace is complete");
	return 1;
}
