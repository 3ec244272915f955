/* SPDX-License-Identifier: MIT */
/* output.c - the trace file of this process (a file per phase with [phase.NAME] sections: OUTPUT/
 * PHASE/): decides selection of a rank known late, names and starts the writer (trace/ header, path), writes the GPUs' descriptions, and each window's
 * context (mapped modules, live allocations). Failures warn and leave the process unprofiled. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include "config/version.h"
#include "collector/base/clock.h"
#include "collector/base/intern.h"
#include "internal.h"
#include "collector.h"
#include "collector/base/log.h"
#include "collector/mem/memory.h"
#include "collector/out/tokrec.h"
#include "collector/out/writer.h"

/* The trace file's state (sp_col.writer_started is shared: internal.h). */
static struct {
	char trace_path[SP_CFG_PATH + 256]; /* this process's .sptrace */
	int devices_written;                /* SP_EV_DEVICE records are in the trace */
	pthread_mutex_t dir_lock;           /* the fields below: the on-demand thread and the first window */
	int dir_state;                      /* 0 not made yet, 1 made, -1 failed */
	int dir_rank;                       /* the rank it was expanded for ({rank} of a rank learnt late) */
	char dir[SP_CFG_PATH];              /* the output directory, expanded */
	char why[1400];                     /* why no trace could be written ("" none), said when it came */
} trace_out = { .dir_lock = PTHREAD_MUTEX_INITIALIZER };

/* Expands and makes the output directory (under trace_out.dir_lock). Says a failure, or a placeholder's
 * value made safe, once. This function can't fail (trace_out.dir_state says how it went). */
static void make_out_dir(void)
{
	char note[600];
	trace_out.dir_rank = sp_col.ri.rank;
	trace_out.dir_state = -1;
	if (sp_cfg_expand_note(sp_col.cfg.output, &sp_col.ri, trace_out.dir, sizeof trace_out.dir, note,
			       sizeof note) < 0)
		snprintf(trace_out.why, sizeof trace_out.why, "cannot expand output directory '%s' (too long)",
			 sp_col.cfg.output);
	else if (sp_writer_make_dir(trace_out.dir, sp_col.cfg.allow_foreign_dir, trace_out.why,
				    sizeof trace_out.why) == 0)
		trace_out.dir_state = 1;
	if (note[0])
		sp_warn_once("%s", note);
	if (trace_out.dir_state < 0)
		sp_warn("%s; not profiling", trace_out.why);
}

/* Writes one SP_EV_DEVICE record per GPU, once: at the writer's start and again at each window's start until
 * the driver answers. Calls the driver: only from an API entry callback or outside callbacks. */
void sp_out_write_devices(uint64_t t)
{
	typedef int (*cu_int_fn)(int *);
	static cu_int_fn count;
	static void *cuda = RTLD_DEFAULT; /* libcuda loaded RTLD_LOCAL (cudart does) is not in the global scope */
	int n = 0;
	if (!trace_out.devices_written && !count && !(count = (cu_int_fn)dlsym(cuda, "cuDeviceGetCount"))) {
		void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (h && (count = (cu_int_fn)dlsym(h, "cuDeviceGetCount")))
			cuda = h;
	}
	if (!trace_out.devices_written && count && !count(&n)) {
		int (*get_name)(char *, int, int) = (int (*)(char *, int, int))dlsym(cuda, "cuDeviceGetName");
		int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(cuda, "cuDeviceGetAttribute");
		int (*mem)(size_t *, int) = (int (*)(size_t *, int))dlsym(cuda, "cuDeviceTotalMem_v2");
		for (int i = 0; i < n && i < SP_MAX_DEVICES; i++) {
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
			sp_coll_push(&ev);
		}
		trace_out.devices_written = 1;
	}
}

/* This process is not profiled after all (its rank, known only now, is not selected): stops
 * watching and tracking. Runs under sp_col.lock. This function can't fail. */
static void disable_unselected(void)
{
	sp_info("rank %d (%s) is not selected: not profiling", sp_col.ri.rank, sp_col.ri.source);
	sp_host_min_bytes = SIZE_MAX;
	sp_col.done = 1;
	sp_cbset_apply();
	sp_col.disabled = 1;
}

int sp_out_dir(char *dir, size_t len)
{
	pthread_mutex_lock(&trace_out.dir_lock);
	if (!trace_out.dir_state || (trace_out.dir_state > 0 && trace_out.dir_rank != sp_col.ri.rank))
		make_out_dir();
	int state = trace_out.dir_state;
	snprintf(dir, len, "%s", trace_out.dir);
	pthread_mutex_unlock(&trace_out.dir_lock);
	return state > 0 ? 0 : -1;
}

const char *sp_out_failure(void)
{
	return trace_out.why;
}

const char *sp_out_trace_path(void)
{
	int started = __atomic_load_n(&sp_col.writer_started, __ATOMIC_ACQUIRE) > 0;
	return started && !sp_col.mk[0].name ? trace_out.trace_path : NULL;
}

int sp_out_start_writer(void)
{
	char dir[SP_CFG_PATH], host[64] = "host", base[160];
	uint32_t phases[SP_MAX_PHASES];
	struct sp_trace_meta m = { 0 };
	if (sp_col.writer_started)
		return sp_col.writer_started > 0 ? 0 : -1;
	sp_col.writer_started = -1;
	/* a rank the environment did not give is decided now: the largest NCCL communicator
	 * initialised so far named it, else the process counts as rank 0 */
	if (!sp_rankset_has(&sp_col.cfg.ranks, sp_col.ri.rank)) {
		disable_unselected();
		return -1;
	}
	gethostname(host, sizeof host - 1);
	if (sp_out_dir(dir, sizeof dir) < 0)
		return -1; /* said */
	char tag[16];
	int pid = sp_name_pid(tag, sizeof tag); /* a tag in a pid namespace: pid and host may repeat there */
	if (sp_col.ri.rank >= 0)
		snprintf(base, sizeof base, "rank%d.%s.%d%s.sptrace", sp_col.ri.rank, host, pid, tag);
	else
		snprintf(base, sizeof base, "norank.%s.%d%s.sptrace", host, pid, tag);
	snprintf(trace_out.trace_path, sizeof trace_out.trace_path, "%s/%s", dir, base);
	m.features = (sp_col.cfg.kernels ? SP_FEAT_KERNELS : 0) | (sp_col.cfg.memcpy ? SP_FEAT_MEMCPY : 0) |
		     (sp_col.cfg.memset ? SP_FEAT_MEMSET : 0) | (sp_col.cfg.sync ? SP_FEAT_SYNC : 0) |
		     (sp_col.cfg.runtime_api ? SP_FEAT_RUNTIME_API : 0) |
		     (sp_col.cfg.driver_api ? SP_FEAT_DRIVER_API : 0) |
		     (sp_col.cfg.kernel_shapes ? SP_FEAT_SHAPES : 0) | (sp_col.cfg.nvtx ? SP_FEAT_NVTX : 0) |
		     (sp_col.cfg.nccl ? SP_FEAT_NCCL : 0) | (sp_col.cfg.device_memory ? SP_FEAT_DEVICE_MEM : 0) |
		     (sp_col.cfg.host_malloc ? SP_FEAT_HOST_MALLOC : 0) | (sp_col.cfg.stacks ? SP_FEAT_STACKS : 0) |
		     (sp_col.cfg.stacks & SP_STACKS_PYTHON ? SP_FEAT_PYSTACKS : 0) |
		     (sp_col.cfg.ops ? SP_FEAT_OPS : 0) | (sp_col.cfg.modules ? SP_FEAT_MODULES : 0);
	m.pid = getpid();
	m.rank = sp_col.ri.rank;
	m.world_size = sp_col.ri.world_size;
	m.local_rank = sp_col.ri.local_rank;
	m.anchor_mono_ns = sp_now_ns();
	m.anchor_real_ns = sp_realtime_ns();
	snprintf(m.host, sizeof m.host, "%s", host);
	sp_run_id(m.run_id, sizeof m.run_id, NULL);
	snprintf(m.producer, sizeof m.producer, "stepprof %s", SP_VERSION);
	sp_tokrec_cmdline(m.command, sizeof m.command);
	for (int i = 0; i < sp_col.nmk; i++)
		phases[i] = sp_col.mk[i].name;
	if (sp_col.mk[0].name ? sp_writer_start_phases(dir, base, sp_col.nmk, phases, &m, sp_col.cfg.window_max_bytes,
						       sp_col.cfg.allow_foreign_dir) < 0
			      : sp_writer_start(trace_out.trace_path, &m, sp_col.cfg.window_max_bytes) < 0) {
		snprintf(trace_out.why, sizeof trace_out.why, "%s",
			 sp_writer_failure()[0] ? sp_writer_failure() : "no trace writer");
		return -1;
	}
	/* another name if that one existed */
	snprintf(trace_out.trace_path, sizeof trace_out.trace_path, "%s", sp_writer_path());
	__atomic_store_n(&sp_col.writer_started, 1, __ATOMIC_RELEASE);
	sp_crash_install(); /* a crash from now on keeps the open window */
	sp_out_write_devices(m.anchor_mono_ns);
	if (sp_col.mk[0].name)
		sp_info("writing a trace per phase: %s/PHASE/%s, each made at its phase's first window", dir, base);
	else
		sp_info("writing %s", trace_out.trace_path);
	return 0;
}

/* Writes what a window needs to be read alone: the mapped modules (for offline symbolisation of
 * stacks) and the allocations alive at its start. Makes no CUDA call. */
void sp_out_window_context(uint64_t t)
{
	if (sp_col.cfg.stacks) {
		FILE *f = fopen("/proc/self/maps", "re");
		char line[4352], path[4096], perm[8];
		unsigned long long lo, hi, off;
		while (f && fgets(line, sizeof line, f))
			if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &lo, &hi, perm, &off, path) == 5 &&
			    perm[2] == 'x' && path[0] == '/') {
				struct sp_event ev = { .kind = SP_EV_MODULE,
						       .device = SP_NO_DEVICE,
						       .start = t,
						       .end = t };
				ev.name = sp_intern(path);
				ev.u.module.start = lo;
				ev.u.module.end = hi;
				ev.u.module.offset = off;
				sp_coll_push(&ev);
			}
		if (f)
			fclose(f);
	}
	if (sp_col.cfg.device_memory || sp_col.cfg.host_malloc)
		sp_mem_snapshot(t);
}
