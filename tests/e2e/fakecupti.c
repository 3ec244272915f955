/* SPDX-License-Identifier: MIT */
/* fakecupti.c - a stand-in libcupti for host tests of stepprof's CUPTI life cycle (no GPU): every
 * entry point stepprof binds, each logged as one line to $FAKE_CUPTI_LOG ("subscribe", "finalize",
 * "enable_cb D CBID 0|1", "activity_enable K"...). Calls other than cuptiSubscribe after
 * cuptiFinalize are logged as "AFTER_FINALIZE name" (real CUPTI would silently initialise again).
 * The test program fires callbacks through fake_cupti_fire(), which calls stepprof's callback only
 * if stepprof enabled that (domain, cbid), as CUPTI does. FAKE_FINALIZE_US makes cuptiFinalize
 * take that long (the program goes on meanwhile, unseen). Activity: fake_cupti_kernel() makes one
 * CONCURRENT_KERNEL record (stamped by the registered timestamp callback, else CLOCK_REALTIME) if
 * that kind is enabled; records reach the registered buffer callbacks at cuptiActivityFlushAll
 * (or every 256 records), and cuptiActivityGetNextRecord walks them, as CUPTI's do. As CUPTI does,
 * it asks the registered bufferRequested for a buffer when it makes the first record after handing
 * one back (not at the flush): a client that looks at the buffers it handed out (Kineto flushes
 * only when one is out) sees one out while records wait.
 * FAKE_SUBSCRIBE_US: cuptiSubscribe takes that long (a re-attach that comes late).
 * FAKE_CUPTI_LOSE_CORR=N: the kernel of the launch with correlation id N is never recorded (a
 * record CUPTI never hands over, as one on-demand window after a re-attach seemed to lose).
 * FAKE_CUPTI_LATE_CORR=N and FAKE_CUPTI_LATE_MS=M: that kernel's record is handed over only by the
 * first flush M ms (default 20) after it was made (a kernel still running, or a record late), and
 * FAKE_CUPTI_INCOMPLETE=start|end: a forced flush before then hands it over incomplete, as CUPTI
 * does (start 1 us after the clock's zero, or end 0), and the whole record never comes.
 * A cuptiFinalize while a stand-in runtime call is in progress (fake_cupti_wrapped) is logged as
 * "FINALIZE_UNDER_CALL N"; so is one during a kernel launch made while subscribed (real CUPTI
 * dispatches it: finalised under it, it crashed or corrupted the heap), which FAKE_LAUNCH_US makes
 * last that long. FAKE_CUPTI_ONE_CORR=1: correlation ids come from one counter for the process, as
 * CUPTI's do (the test programs number each thread's or library's calls apart): a call's entry
 * takes the next one, its exit and what it launches meanwhile on its thread keep it.
 * A graph replay (fake_cupti_graph_launch) made while subscribed with every activity kind off after
 * one was on in this instance, then a cuptiFinalize: "GRAPH_FINALIZE_HAZARD" (torch's graphs failed
 * at their next replay after that sequence, H200: docs/GPU-TESTS.md, graph detach matrix). A graph
 * replay while cuptiFinalize runs (FAKE_FINALIZE_US makes it last): "GRAPH_DURING_FINALIZE".
 * FAKE_CUPTI_NAME_KERNELS=1: a kernel made by fake_cupti_launch is named by the launch's symbol
 * (else "fake_kernel").
 * FAKE_CUPTI_COUNT=1: prints "fakecupti: kernel records N" at exit (the records made while
 * CONCURRENT_KERNEL was on: what recording cost). FAKE_CALL_US=N: each cuptiEnableCallback,
 * cuptiEnableDomain, cuptiActivityEnable and cuptiActivityDisable keeps its caller N microseconds
 * (spinning: a model of what reconfiguring CUPTI costs, for bench/window_end.sh).
 * FAKE_CUPTI_NAMES=FILE: callback names as CUPTI gives them (load_names), not "cuda_other_N".
 * Built by the Makefile; used by tests/e2e/cupti_life.sh, share.sh and pybridge.sh. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cupti.h>

#define NCB 2048

static struct {
	pthread_mutex_t lock;
	FILE *log;
	CUpti_CallbackFunc cb;          /* the subscriber's callback, NULL when none */
	void *ud;         /* its userdata */
	int finalized;                  /* cuptiFinalize ran and nothing subscribed since */
	unsigned char on[5][NCB];       /* enabled (domain, cbid) */
	char names[2][NCB][48];
	CUpti_TimestampCallbackFunc ts; /* registered clock, NULL: CLOCK_REALTIME */
	CUpti_BuffersCallbackRequestFunc req;
	CUpti_BuffersCallbackCompleteFunc comp;
	unsigned char kind[CUPTI_ACTIVITY_KIND_COUNT]; /* enabled activity kinds */
	CUpti_ActivityKernel10 pend[256]; /* records not yet delivered */
	unsigned npend;
	uint8_t *buf;                   /* the buffer asked for when the first of them was made, or NULL */
	size_t bufsize;
	CUpti_ActivityKernel10 late;    /* FAKE_CUPTI_LATE_CORR's record, held back until late_due */
	int kinds_were_on;              /* an activity kind was enabled in this CUPTI instance */
	int graph_hazard;               /* ... and a graph was replayed with every kind off since */
	struct timespec late_due;       /* CLOCK_MONOTONIC; tv_sec 0: nothing held */
} F = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void note(const char *fn, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&F.lock);
	if (!F.log) {
		const char *p = getenv("FAKE_CUPTI_LOG");
		F.log = fopen(p ? p : "/dev/null", "a");
	}
	if (F.finalized && strcmp(fn, "subscribe") && strncmp(fn, "nvtx_", 5) && F.log) /* NVTX's handlers stay */
		fprintf(F.log, "AFTER_FINALIZE %s\n", fn);
	if (F.log) {
		fputs(fn, F.log);
		va_start(ap, fmt);
		vfprintf(F.log, fmt, ap);
		va_end(ap);
		fputc('\n', F.log);
		fflush(F.log);
	}
	pthread_mutex_unlock(&F.lock);
}

/* FAKE_CALL_US: the caller spins that long in a reconfiguring call. */
static void call_cost(void)
{
	static long us = -1;
	if (us < 0)
		us = getenv("FAKE_CALL_US") ? atol(getenv("FAKE_CALL_US")) : 0;
	if (us <= 0)
		return;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud)
{
	const char *us = getenv("FAKE_SUBSCRIBE_US"); /* a slow subscription (a re-attach that comes late) */
	note("subscribe", "");
	if (F.cb)
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	if (us && atoi(us) > 0) {
		struct timespec ts = { atoi(us) / 1000000, atoi(us) % 1000000 * 1000L };
		nanosleep(&ts, NULL);
	}
	F.finalized = 0;
	F.cb = cb;
	F.ud = ud;
	*s = (CUpti_SubscriberHandle)&F;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
	note("unsubscribe", "");
	F.cb = NULL;
	memset(F.on, 0, sizeof F.on);
	return CUPTI_SUCCESS;
}

static atomic_int wrapped_calls; /* threads inside a call CUPTI wraps (fake_cupti_wrapped) */
static atomic_int finalizing;    /* inside cuptiFinalize */
static atomic_long kernel_records; /* kernel records made (FAKE_CUPTI_COUNT) */

__attribute__((destructor)) static void count_at_exit(void)
{
	if (getenv("FAKE_CUPTI_COUNT"))
		printf("fakecupti: kernel records %ld\n", atomic_load(&kernel_records));
}

/* A stand-in runtime's call that CUPTI would wrap begins (+1) or ends (-1). */
__attribute__((visibility("default"))) void fake_cupti_wrapped(int delta)
{
	atomic_fetch_add(&wrapped_calls, delta);
}

CUptiResult CUPTIAPI cuptiFinalize(void)
{
	const char *us = getenv("FAKE_FINALIZE_US"); /* how long a real cuptiFinalize may take */
	if (atomic_load(&wrapped_calls) > 0) /* the real one crashes the thread inside it (H100) */
		note("FINALIZE_UNDER_CALL", "%d", atomic_load(&wrapped_calls));
	if (F.graph_hazard)
		note("GRAPH_FINALIZE_HAZARD", "");
	F.kinds_were_on = F.graph_hazard = 0;
	note("finalize", "");
	atomic_store(&finalizing, 1);
	if (us && atoi(us) > 0) {
		struct timespec ts = { atoi(us) / 1000000, atoi(us) % 1000000 * 1000L };
		nanosleep(&ts, NULL);
	}
	atomic_store(&finalizing, 0);
	F.cb = NULL;
	memset(F.on, 0, sizeof F.on);
	memset(F.kind, 0, sizeof F.kind);
	F.ts = NULL, F.req = NULL, F.comp = NULL, F.npend = 0, F.buf = NULL;
	F.finalized = 1;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
					 CUpti_CallbackId cbid)
{
	call_cost();
	note("enable_cb", " %d %u %u", (int)d, cbid, enable);
	if (!F.cb || s != (CUpti_SubscriberHandle)&F)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if ((unsigned)d < 5 && cbid < NCB)
		F.on[d][cbid] = enable != 0;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d)
{
	call_cost();
	note("enable_domain", " %d %u", (int)d, enable);
	if (!F.cb || s != (CUpti_SubscriberHandle)&F)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if ((unsigned)d < 5)
		memset(F.on[d], enable != 0, sizeof F.on[d]);
	return CUPTI_SUCCESS;
}

/* The callbacks the test programs fire, by (driver?, cbid), with CUPTI's names; any other is
 * "cu_other_N" or "cuda_other_N". */
static const struct {
	int driver;
	uint32_t cbid;
	const char *name;
} cb_names[] = {
	{ 0, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize_v3020" },
	{ 0, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, "cudaStreamSynchronize_v3020" },
	{ 0, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync_v3020" },
	{ 0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel_v7000" },
	{ 0, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc_v3020" },
	{ 0, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, "cudaStreamBeginCapture_v10000" },
	{ 0, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, "cudaStreamEndCapture_v10000" },
	{ 0, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch_v10000" },
	{ 1, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch" },
	{ 1, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel" },
	{ 1, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize" },
	{ 1, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2" },
	{ 1, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2" },
};

/* FAKE_CUPTI_NAMES=FILE: every callback's name as CUPTI gives it, from lines "0|1 CBID NAME" (0
 * runtime, 1 driver: bench/window_end.sh writes them from the CUPTI headers). Once. */
static void load_names(void)
{
	static int done;
	const char *p = getenv("FAKE_CUPTI_NAMES");
	FILE *f = !done++ && p ? fopen(p, "r") : NULL;
	unsigned k, cbid;
	char nm[48];
	while (f && fscanf(f, "%u %u %47s", &k, &cbid, nm) == 3)
		if (k < 2 && cbid < NCB)
			snprintf(F.names[k][cbid], 48, "%s", nm);
	if (f)
		fclose(f);
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cbid, const char **name)
{
	int k = d == CUPTI_CB_DOMAIN_DRIVER_API;
	if ((d != CUPTI_CB_DOMAIN_RUNTIME_API && !k) || cbid >= NCB)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (F.finalized)
		note("get_callback_name", "");
	load_names();
	if (!F.names[k][cbid][0]) {
		snprintf(F.names[k][cbid], 48, "%s_other_%u", k ? "cu" : "cuda", cbid);
		for (size_t i = 0; i < sizeof cb_names / sizeof *cb_names; i++)
			if (cb_names[i].driver == k && cb_names[i].cbid == cbid)
				snprintf(F.names[k][cbid], 48, "%s", cb_names[i].name);
	}
	*name = F.names[k][cbid];
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext c, uint32_t *dev)
{
	note("get_device_id", "");
	*dev = 0;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind k)
{
	call_cost();
	note("activity_enable", " %d", (int)k);
	if ((unsigned)k < CUPTI_ACTIVITY_KIND_COUNT)
		F.kind[k] = 1;
	F.kinds_were_on = 1;
	return F.cb || F.req ? CUPTI_SUCCESS : CUPTI_ERROR_NOT_INITIALIZED;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind k)
{
	call_cost();
	note("activity_disable", " %d", (int)k);
	if ((unsigned)k < CUPTI_ACTIVITY_KIND_COUNT)
		F.kind[k] = 0;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
						    CUpti_BuffersCallbackCompleteFunc c)
{
	note("register_buffers", "");
	F.req = r, F.comp = c;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	note("register_timestamp", "");
	F.ts = f;
	return CUPTI_SUCCESS;
}

#define REC_SIZE ((sizeof(CUpti_ActivityKernel10) + 7) & ~(size_t)7)

/* Asks the registered bufferRequested for the buffer the pending records go into, once they begin
 * (F.lock held; let go while it runs, as in deliver). This function can't fail. */
static void take_buffer(void)
{
	CUpti_BuffersCallbackRequestFunc req = F.req;
	uint8_t *b = NULL;
	size_t size = 0, maxrec = 0;
	if (F.buf || !req)
		return;
	pthread_mutex_unlock(&F.lock);
	req(&b, &size, &maxrec);
	pthread_mutex_lock(&F.lock);
	if (!F.buf) {
		F.buf = b, F.bufsize = size;
	} else if (b && F.comp) { /* another thread took one meanwhile: this one goes back empty */
		CUpti_BuffersCallbackCompleteFunc comp = F.comp;
		pthread_mutex_unlock(&F.lock);
		comp(NULL, 0, b, size, 0);
		pthread_mutex_lock(&F.lock);
	}
}

/* Hands the pending records to the registered buffer callbacks, in the buffer asked for when the
 * first of them was made. Caller holds F.lock, which is let go while the callbacks run (they may
 * call back into CUPTI). */
static void deliver(void)
{
	size_t used = 0;
	if (!F.npend || !F.comp)
		return;
	if (!F.buf)
		take_buffer();
	unsigned n = F.npend; /* (more may have come while the buffer was asked for) */
	uint8_t *buf = F.buf;
	size_t size = F.bufsize;
	CUpti_ActivityKernel10 *copy = malloc(n * sizeof *copy);
	CUpti_BuffersCallbackCompleteFunc comp = F.comp;
	if (!copy)
		return;
	memcpy(copy, F.pend, n * sizeof *copy);
	F.npend = 0;
	F.buf = NULL;
	pthread_mutex_unlock(&F.lock);
	for (unsigned i = 0; buf && i < n && used + REC_SIZE <= size; i++, used += REC_SIZE)
		memcpy(buf + used, &copy[i], sizeof copy[i]);
	if (buf)
		comp(NULL, 0, buf, size, used);
	free(copy);
	pthread_mutex_lock(&F.lock);
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
	struct timespec now;
	note("flush", "");
	const char *inc = getenv("FAKE_CUPTI_INCOMPLETE");
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&F.lock);
	int due = now.tv_sec > F.late_due.tv_sec ||
		  (now.tv_sec == F.late_due.tv_sec && now.tv_nsec >= F.late_due.tv_nsec);
	int forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) && inc && *inc;
	if (F.late_due.tv_sec && (due || forced) && F.npend < sizeof F.pend / sizeof *F.pend) {
		if (!due && !strcmp(inc, "end"))
			F.late.end = 0;
		else if (!due)
			F.late.start = 1000;
		F.pend[F.npend++] = F.late;
		F.late_due.tv_sec = 0;
	}
	deliver();
	pthread_mutex_unlock(&F.lock);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	uint8_t *at = *rec ? (uint8_t *)*rec + REC_SIZE : buf;
	if (!buf || at + REC_SIZE > buf + valid) {
		*rec = NULL;
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	}
	*rec = (CUpti_Activity *)at;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n)
{
	*n = 0;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size, void *v)
{
	note("set_attribute", "");
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult r, const char **s)
{
	*s = "fake CUPTI error";
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *v)
{
	*v = 130000;
	return CUPTI_SUCCESS;
}

static uint64_t stamp(void)
{
	struct timespec ts;
	if (F.ts)
		return F.ts();
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The newest pending record, of the call with correlation id corr, was just made (F.lock held):
 * FAKE_CUPTI_LATE_CORR holds it back for FAKE_CUPTI_LATE_MS ms (out of the pending records), and a
 * full buffer is handed over, as CUPTI does by itself. */
static void settle(unsigned corr)
{
	const char *late = getenv("FAKE_CUPTI_LATE_CORR"), *ms = getenv("FAKE_CUPTI_LATE_MS");
	if (late && strtoul(late, NULL, 10) == corr) {
		long d = ms ? atol(ms) : 20;
		F.late = F.pend[--F.npend];
		clock_gettime(CLOCK_MONOTONIC, &F.late_due);
		F.late_due.tv_sec += d / 1000;
		F.late_due.tv_nsec += (d % 1000) * 1000000;
		if (F.late_due.tv_nsec >= 1000000000) {
			F.late_due.tv_sec++;
			F.late_due.tv_nsec -= 1000000000;
		}
	}
	if (F.npend == sizeof F.pend / sizeof *F.pend)
		deliver();
}

static atomic_uint one_corr = 1;    /* FAKE_CUPTI_ONE_CORR's counter */
static __thread unsigned remap[4096]; /* ... the id given to the caller's id in a call open on this thread */
static __thread unsigned char remap_open[4096];

/* The correlation id CUPTI would give the caller's corr: itself, or with FAKE_CUPTI_ONE_CORR the
 * next id of the process's counter at an entry (site 0; site -1: an entry and its exit at once),
 * the entry's at the exit and inside the call. */
static unsigned corr_of(unsigned corr, int site)
{
	static int one = -1;
	if (one < 0)
		one = getenv("FAKE_CUPTI_ONE_CORR") != NULL;
	if (!one)
		return corr;
	unsigned k = corr % 4096;
	if (remap_open[k] && site != 0) {
		unsigned c = remap[k];
		remap_open[k] -= site == 1;
		return c;
	}
	if (site == 0 && remap_open[k]) { /* a nested call with the caller's id: the open one's */
		remap_open[k]++;
		return remap[k];
	}
	unsigned c = atomic_fetch_add(&one_corr, 1);
	if (site == 0) {
		remap[k] = c;
		remap_open[k] = 1;
	}
	return c;
}

/* FAKE_CUPTI_ONE_CORR: a call with the caller's id corr takes its id now (as CUPTI does at the
 * call's entry) but reaches the callbacks later (fake_cupti_launch with the same corr), and lets it
 * go after (fake_cupti_release_corr): another thread's call may reach them first with a later id. */
__attribute__((visibility("default"))) unsigned fake_cupti_take_corr(unsigned corr)
{
	return corr_of(corr, 0);
}

__attribute__((visibility("default"))) void fake_cupti_release_corr(unsigned corr)
{
	corr_of(corr, 1);
}

/* A lasting copy of kernel name sym (FAKE_CUPTI_NAME_KERNELS), or "fake_kernel" beyond 256 names. */
static const char *kernel_name(const char *sym)
{
	static char *names[256];
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	const char *r = "fake_kernel";
	pthread_mutex_lock(&mu);
	for (int i = 0; i < 256; i++) {
		if (!names[i])
			names[i] = strdup(sym);
		if (names[i] && !strcmp(names[i], sym)) {
			r = names[i];
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

static __thread const char *launch_name; /* this thread's launch names its kernel (FAKE_CUPTI_NAME_KERNELS) */

/* The test program's side: one kernel of the launch with correlation id corr, recorded if
 * CONCURRENT_KERNEL is enabled (runs 1 us), named "fake_kernel" (with FAKE_CUPTI_NAME_KERNELS set
 * and made by fake_cupti_launch: the launch's symbol). Returns 1 if recorded. */
__attribute__((visibility("default"))) int fake_cupti_kernel(unsigned corr)
{
	const char *kname = launch_name ? launch_name : "fake_kernel";
	int ret = 0;
	const char *lose = getenv("FAKE_CUPTI_LOSE_CORR");
	if (lose && strtoul(lose, NULL, 10) == corr)
		return 0;
	corr = corr_of(corr, 2);
	pthread_mutex_lock(&F.lock);
	if (F.kind[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) {
		take_buffer(); /* as CUPTI: a buffer for the records from the first on */
		CUpti_ActivityKernel10 *k = &F.pend[F.npend++];
		memset(k, 0, sizeof *k);
		k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		k->start = stamp();
		k->end = k->start + 1000;
		k->completed = CUPTI_TIMESTAMP_UNKNOWN;
		k->correlationId = corr;
		k->name = kname;
		k->streamId = 7;
		k->gridX = k->gridY = k->gridZ = k->blockX = k->blockY = k->blockZ = 1;
		atomic_fetch_add(&kernel_records, 1);
		ret = 1;
		settle(corr);
	}
	pthread_mutex_unlock(&F.lock);
	return ret;
}

/* The test program's side: one device-to-device copy of the call with correlation id corr,
 * recorded if MEMCPY is enabled; FAKE_CUPTI_LOSE_CORR and FAKE_CUPTI_LATE_CORR (with _LATE_MS)
 * lose or hold back its record as they do a kernel's. Returns 1 if recorded. */
__attribute__((visibility("default"))) int fake_cupti_copy(unsigned corr)
{
	const char *lose = getenv("FAKE_CUPTI_LOSE_CORR");
	int ret = 0;
	if (lose && strtoul(lose, NULL, 10) == corr)
		return 0;
	pthread_mutex_lock(&F.lock);
	if (F.kind[CUPTI_ACTIVITY_KIND_MEMCPY]) {
		take_buffer();
		CUpti_ActivityKernel10 *slot = &F.pend[F.npend++]; /* records share the slot size */
		CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)slot;
		_Static_assert(sizeof *m <= sizeof *slot, "a copy record fits a slot");
		memset(slot, 0, sizeof *slot);
		m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
		m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
		m->srcKind = m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
		m->bytes = 4096;
		m->start = stamp();
		m->end = m->start + 500;
		m->correlationId = corr;
		m->streamId = 7;
		ret = 1;
		settle(corr);
	}
	pthread_mutex_unlock(&F.lock);
	return ret;
}

/* The test program's side: one kernel launch through the driver API (cuLaunchKernel's entry and
 * exit callbacks with symbol sym, if enabled) and its kernel record (fake_cupti_kernel). Returns 1
 * if the entry callback was delivered. */
__attribute__((visibility("default"))) int fake_cupti_launch(const char *sym, unsigned corr)
{
	static __thread uint64_t slot;
	int ret = 0, seen = 0;
	unsigned caller = corr;
	corr = corr_of(caller, 0);
	CUpti_CallbackFunc cb = F.cb;
	int wrapped = cb != NULL; /* subscribed: CUPTI dispatches this launch */
	if (wrapped) {
		fake_cupti_wrapped(1);
		const char *us = getenv("FAKE_LAUNCH_US");
		if (us && atoi(us) > 0) {
			struct timespec ts = { 0, (atoi(us) % 1000000) * 1000L };
			nanosleep(&ts, NULL);
		}
	}
	CUpti_CallbackData cd = { .functionName = "cuLaunchKernel",
				  .symbolName = sym,
				  .correlationId = corr,
				  .correlationData = &slot,
				  .functionReturnValue = &ret };
	if (cb && F.on[CUPTI_CB_DOMAIN_DRIVER_API][CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel]) {
		cd.callbackSite = CUPTI_API_ENTER;
		cb(F.ud, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cd);
		seen = 1;
	}
	static int named = -1;
	if (named < 0)
		named = getenv("FAKE_CUPTI_NAME_KERNELS") != NULL;
	if (named && sym)
		launch_name = kernel_name(sym);
	fake_cupti_kernel(caller); /* the open call's id */
	launch_name = NULL;
	cb = F.cb;
	if (cb && F.on[CUPTI_CB_DOMAIN_DRIVER_API][CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel] && seen) {
		cd.callbackSite = CUPTI_API_EXIT;
		cb(F.ud, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cd);
	}
	if (wrapped)
		fake_cupti_wrapped(-1);
	corr_of(caller, 1);
	return seen;
}

/* 1 while a subscriber exists (fakecuda.c: was CUPTI there before a graph capture began?). */
__attribute__((visibility("default"))) int fake_cupti_subscribed(void)
{
	return F.cb != NULL;
}

int fake_cupti_fire_params(int domain, unsigned cbid, int site, unsigned corr, const void *params);

/* A stand-in runtime replays a CUDA graph (inside its launch callbacks): notes the hazard above. */
__attribute__((visibility("default"))) void fake_cupti_graph_launch(void)
{
	int any = 0;
	if (atomic_load(&finalizing))
		note("GRAPH_DURING_FINALIZE", "");
	pthread_mutex_lock(&F.lock);
	for (unsigned k = 0; k < CUPTI_ACTIVITY_KIND_COUNT; k++)
		any |= F.kind[k];
	if (F.cb && F.kinds_were_on && !any)
		F.graph_hazard = 1;
	pthread_mutex_unlock(&F.lock);
}

/* The test program's side: one API callback (site 0 enter, 1 exit) or a resource callback, delivered
 * only if stepprof enabled it. Returns 1 if delivered. */
__attribute__((visibility("default"))) int fake_cupti_fire(int domain, unsigned cbid, int site, unsigned corr)
{
	return fake_cupti_fire_params(domain, cbid, site, corr, NULL);
}

/* The same with the call's parameters (CUPTI's functionParams; a context is then current). */
__attribute__((visibility("default"))) int fake_cupti_fire_params(int domain, unsigned cbid, int site, unsigned corr,
								  const void *params)
{
	static const char *name = "fake";
	static __thread uint64_t slot[4096]; /* CUPTI keeps a call's correlationData from entry to exit */
	int ret = 0;
	CUpti_CallbackFunc cb = F.cb;
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API)
		corr = corr_of(corr, site ? 1 : 0); /* whether or not the callback is on, as CUPTI's ids */
	if (!cb || (unsigned)domain >= 5 || cbid >= NCB || !F.on[domain][cbid])
		return 0;
	if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
		CUpti_ResourceData rd = { 0 };
		cb(F.ud, (CUpti_CallbackDomain)domain, cbid, &rd);
		return 1;
	}
	if (!site)
		slot[corr % 4096] = 0;
	CUpti_CallbackData cd = { .callbackSite = site ? CUPTI_API_EXIT : CUPTI_API_ENTER,
				  .functionName = name,
				  .correlationId = corr,
				  .correlationData = &slot[corr % 4096],
				  .functionReturnValue = &ret,
				  .functionParams = params,
				  .context = params ? (CUcontext)(uintptr_t)1 : NULL };
	cb(F.ud, (CUpti_CallbackDomain)domain, cbid, &cd);
	return 1;
}

/* NVTX's injection entry, as libcupti has one: puts handlers for the default domain's RangePushA
 * and RangePop in the calling library's table; each logs "nvtx_push MESSAGE" / "nvtx_pop" (the
 * proof that an injection which chains CUPTI's keeps CUPTI's NVTX handlers called). */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

static int NVTX_API fake_nvtx_push_a(const char *msg)
{
	note("nvtx_push", " %s", msg ? msg : "");
	return 0;
}

static int NVTX_API fake_nvtx_pop(void)
{
	note("nvtx_pop", "");
	return 0;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *cb = get ? (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS) : NULL;
	NvtxFunctionTable t = NULL;
	unsigned n = 0;
	note("nvtx_init", "");
	if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) || !t)
		return 0;
	if (NVTX_CBID_CORE_RangePushA < n && t[NVTX_CBID_CORE_RangePushA])
		*t[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)fake_nvtx_push_a;
	if (NVTX_CBID_CORE_RangePop < n && t[NVTX_CBID_CORE_RangePop])
		*t[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)fake_nvtx_pop;
	return 1;
}
