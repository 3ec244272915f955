/* SPDX-License-Identifier: MIT */
/* test_writer.c - the writer thread: events from several threads reach the file, a window over
 * its byte cap keeps control events and records exact drop counts, a finished window is on disk
 * before stop, the tick runs and can emit, ring drops are written, and errors don't kill. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "scratch.h"
#include <dirent.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "collector/base/clock.h"
#include "collector/base/intern.h"
#include "collector/out/ring.h"
#include "collector/out/writer.h"
#include "config/schedule.h"

#define WAIT_S 30 /* bound of every wait on the writer: ample on a loaded machine */

static struct sp_trace_meta meta = { .pid = 1, .rank = 0, .world_size = 1, .local_rank = 0, .host = "h" };

struct file {
	struct sp_event *ev;
	int n, truncated;
	char names[8][64];       /* names of the first string ids, as the file resolves them */
};

/* Reads every event of path (a file still being written reads up to its last chunk). */
static void read_file(const char *path, struct file *f)
{
	char err[256];
	struct sp_trace_reader *r = sp_trace_open(path, err, sizeof(err));
	assert_non_null(r);
	f->ev = NULL;
	f->n = 0;
	struct sp_event ev;
	int rc;
	while ((rc = sp_trace_next(r, &ev)) == 1) {
		f->ev = realloc(f->ev, (size_t)(f->n + 1) * sizeof(ev));
		f->ev[f->n++] = ev;
	}
	if (rc)
		fail_msg("%s: %s", path, sp_trace_error(r));
	f->truncated = sp_trace_truncated(r);
	for (uint32_t i = 0; i < 8; i++)
		snprintf(f->names[i], sizeof(f->names[i]), "%s", sp_trace_string(r, i));
	sp_trace_close_reader(r);
}

/* Monotonic milliseconds. This function can't fail. */
static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Polls cond every 100 us; if it is still false after WAIT_S seconds, fails the test with
 * "gave up after N s waiting for <what>" (printf-style) instead of hanging. */
#define wait_until(cond, what, ...)                                                                      \
	do {                                                                                             \
		uint64_t give_up_ = now_ms() + WAIT_S * 1000;                                            \
		while (!(cond)) {                                                                        \
			if (now_ms() > give_up_)                                                         \
				fail_msg("gave up after %d s waiting for " what, WAIT_S, ##__VA_ARGS__); \
			usleep(100);                                                                     \
		}                                                                                        \
	} while (0)

struct producer {
	uint32_t tid, name;
	uint64_t first, n;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	for (uint64_t i = 0; i < p->n; i++) {
		struct sp_event ev = { .kind = SP_EV_KERNEL,
				       .tid = p->tid,
				       .start = p->first + 1000 * i,
				       .corr = (uint32_t)i,
				       .name = p->name,
				       .stream = 7 };
		ev.end = ev.start + 500;
		if (sp_ring_push(&ev) < 0)
			return (void *)1;
	}
	return NULL;
}

/* Runs T producers pushing n kernels each from first on, and waits until they have exited and
 * the writer has drained them (their rings are freed): the rings of different threads are
 * drained one after another, so only this orders their events before what the caller pushes.
 * The wait counts rings, so no other thread may create one meanwhile: the caller's and the
 * writer's own rings (a tick's emit) must exist before. */
static void run_producers(int T, uint64_t first, uint64_t n, uint32_t name)
{
	uint32_t rings = sp_ring_count();
	pthread_t th[16];
	struct producer p[16];
	void *dropped[16];
	int made = 0;
	for (; made < T; made++) {
		p[made] = (struct producer){ .tid = 100 + (uint32_t)made,
					     .name = name,
					     .first = first + (uint64_t)made,
					     .n = n };
		if (pthread_create(&th[made], NULL, produce, &p[made]))
			break;
	}
	for (int t = 0; t < made; t++)
		pthread_join(th[t], &dropped[t]);
	assert_int_equal(made, T); /* else pthread_create failed */
	for (int t = 0; t < T; t++)
		assert_null(dropped[t]); /* rings are big enough here */
	wait_until(sp_ring_count() <= rings, "the writer to free %d exited producers' rings (%u rings, %u before)", T,
		   sp_ring_count(), rings);
}

static void push(struct sp_event ev)
{
	assert_int_equal(sp_ring_push(&ev), 0);
}

/* 1 if a thread of this process is named name and blocks SIGINT, SIGTERM and SIGUSR1. */
static int named_thread_blocks_signals(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int found = 0;
	while (d && (e = readdir(d))) {
		char path[300], buf[4096];
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		int match = fgets(buf, sizeof(buf), f) && !strncmp(buf, name, strlen(name));
		fclose(f);
		if (!match)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		f = fopen(path, "r");
		while (f && fgets(buf, sizeof(buf), f)) {
			unsigned long long mask;
			if (sscanf(buf, "SigBlk: %llx", &mask) == 1)
				found = (mask >> (SIGINT - 1) & 1) && (mask >> (SIGTERM - 1) & 1) &&
					(mask >> (SIGUSR1 - 1) & 1);
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

static void test_capped_window(void **state)
{
	enum { T = 4, N = 1000, CAP = 2000 };
	char path[256];
	snprintf(path, sizeof(path), "%s/capped.sptrace", dir);
	uint32_t name = sp_intern("capped_kernel");
	uint32_t step_name = sp_intern("train_step");
	assert_int_equal(sp_writer_start(path, &meta, CAP), 0);
	assert_int_equal(sp_writer_running(), 1);
	int named = 0; /* the thread names itself once running */
	for (uint64_t give_up = now_ms() + WAIT_S * 1000; !named && now_ms() < give_up; usleep(1000))
		named = named_thread_blocks_signals("stepprof-writer");
	assert_true(named);

	run_producers(T, 1000000000, N, name); /* before the window: never capped */
	push((struct sp_event){ .kind = SP_EV_WINDOW_BEGIN,
				.device = SP_NO_DEVICE,
				.start = 3000000000,
				.end = 3000000000,
				.u.window = { .id = 0, .first_step = 5, .last_step = 6 } });
	run_producers(T, 3000000001, N, name); /* inside: over the cap */
	for (int s = 5; s <= 6; s++) /* control events inside the window: always written */
		push((struct sp_event){ .kind = SP_EV_STEP,
					.sub = SP_ACT_RECORD,
					.device = SP_NO_DEVICE,
					.start = 3000000000ull + 400000ull * (uint64_t)(s - 5) + 10,
					.end = 3000000000ull + 400000ull * (uint64_t)(s - 4),
					.name = step_name,
					.u.step.number = s });
	push((struct sp_event){ .kind = SP_EV_WINDOW_END,
				.device = SP_NO_DEVICE,
				.start = 5000000000,
				.end = 5000000000,
				.u.window = { .id = 0, .first_step = 5, .last_step = 6 } });

	/* the finished window reaches the disk without a stop */
	struct file f = { 0 };
	int seen_end = 0;
	for (uint64_t give_up = now_ms() + WAIT_S * 1000; !seen_end && now_ms() < give_up;) {
		usleep(1000);
		read_file(path, &f);
		for (int i = 0; i < f.n; i++)
			seen_end |= f.ev[i].kind == SP_EV_WINDOW_END;
		free(f.ev);
	}
	assert_true(seen_end);

	run_producers(1, 6000000000, 10, name); /* after the window: no cap */
	assert_int_equal(sp_writer_stop(), 0);
	assert_int_equal(sp_writer_stop(), 0); /* idempotent */
	assert_int_equal(sp_writer_running(), 0);

	read_file(path, &f);
	assert_int_equal(f.truncated, 0);
	assert_string_equal(f.names[name], "capped_kernel");
	int phase = 0, before = 0, inside = 0, after = 0, steps = 0, clocks = 0, cap_records = 0;
	uint64_t cap_drops = 0;
	const struct sp_event *end = NULL;
	for (int i = 0; i < f.n; i++) {
		const struct sp_event *e = &f.ev[i];
		switch (e->kind) {
		case SP_EV_WINDOW_BEGIN:
			phase = 1;
			break;
		case SP_EV_WINDOW_END:
			phase = 2, end = e;
			break;
		case SP_EV_KERNEL:
			++*(phase == 0 ? &before : phase == 1 ? &inside : &after);
			break;
		case SP_EV_STEP:
			assert_int_equal(phase, 1), steps++;
			break;
		case SP_EV_CLOCK:
			assert_int_equal(phase, 1), clocks++;
			break;
		case SP_EV_DROPPED:
			assert_int_equal(phase, 1);
			assert_int_equal(e->sub, SP_DROP_CAP); /* no ring drops here */
			cap_records++;
			cap_drops += e->u.dropped.count;
			break;
		default:
			fail_msg("unexpected %s record", sp_ev_kind_name(e->kind));
		}
	}
	print_message("window: %d kernels written, %llu dropped by the cap, %llu bytes\n", inside,
		      (unsigned long long)cap_drops, (unsigned long long)end->u.window.bytes);
	assert_int_equal(before, T * N);
	assert_int_equal(after, 10);
	assert_true(inside > 0 && inside < T * N);
	assert_int_equal(steps, 2);
	assert_int_equal(clocks, 1);
	assert_int_equal(cap_records, 1);
	assert_int_equal(cap_drops, T * N - inside);
	assert_non_null(end);
	assert_int_equal(end->u.window.capped, 1);
	assert_int_equal(end->u.window.dropped, T * N - inside);
	assert_true(end->u.window.bytes >= CAP && end->u.window.bytes < CAP + 200);
	assert_int_equal(end->u.window.first_step, 5);
	assert_int_equal(end->u.window.last_step, 6);
	free(f.ev);
}

static atomic_int ticks, emit_failed;

/* runs on the writer thread */
static void tick(void *ctx)
{
	if (atomic_fetch_add(&ticks, 1) == 0) {
		struct sp_event ev = { .kind = SP_EV_STEP,
				       .device = SP_NO_DEVICE,
				       .start = 7,
				       .end = 8,
				       .name = *(uint32_t *)ctx,
				       .u.step.number = 42 };
		atomic_store(&emit_failed, sp_writer_emit(&ev) != 0);
	}
}

static void test_tick_emits(void **state)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/tick.sptrace", dir);
	static uint32_t name;
	name = sp_intern("from_tick");
	atomic_store(&ticks, 0);
	sp_writer_set_tick(tick, &name);
	assert_int_equal(sp_writer_start(path, &meta, 0), 0);
	/* the first tick's emit made the writer's ring: not a producer's */
	wait_until(atomic_load(&ticks) >= 2, "the writer's second tick (%d ticks)", atomic_load(&ticks));
	run_producers(3, 100, 500, sp_intern("k"));
	sp_writer_kick();
	wait_until(atomic_load(&ticks) >= 3, "a tick after the kick (%d ticks)", atomic_load(&ticks));
	assert_int_equal(sp_writer_stop(), 0);
	assert_int_equal(atomic_load(&emit_failed), 0);
	sp_writer_set_tick(NULL, NULL);
	int after_stop = atomic_load(&ticks);
	usleep(10000);
	assert_int_equal(atomic_load(&ticks), after_stop);

	struct file f;
	read_file(path, &f);
	int kernels = 0, emitted = 0;
	for (int i = 0; i < f.n; i++) {
		kernels += f.ev[i].kind == SP_EV_KERNEL;
		if (f.ev[i].kind == SP_EV_STEP) {
			emitted++;
			assert_int_equal(f.ev[i].u.step.number, 42);
			assert_int_equal(f.ev[i].name, name);
		}
	}
	assert_int_equal(kernels, 1500);
	assert_int_equal(emitted, 1);
	free(f.ev);
}

static void *burst(void *arg)
{
	for (int i = 0; i < 20000; i++) {
		struct sp_event ev = { .kind = SP_EV_API, .start = (uint64_t)i, .end = (uint64_t)i };
		sp_ring_push(&ev);
	}
	return NULL;
}

static void test_ring_drops_written_at_stop(void **state)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/drops.sptrace", dir);
	assert_int_equal(sp_writer_start(path, &meta, 0), 0);
	uint64_t dropped0 = sp_ring_dropped();
	sp_ring_configure(64);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, burst, NULL), 0);
	pthread_join(th, NULL);
	sp_ring_configure(65536);
	uint64_t dropped = sp_ring_dropped() - dropped0;
	assert_int_equal(sp_writer_stop(), 0);

	struct file f;
	read_file(path, &f);
	uint64_t apis = 0, in_file = 0;
	for (int i = 0; i < f.n; i++) {
		apis += f.ev[i].kind == SP_EV_API;
		if (f.ev[i].kind == SP_EV_DROPPED) {
			assert_int_equal(f.ev[i].sub, SP_DROP_RING);
			in_file += f.ev[i].u.dropped.count;
		}
	}
	print_message("ring of 64: %llu written, %llu dropped\n", (unsigned long long)apis,
		      (unsigned long long)in_file);
	assert_true(dropped > 0);
	assert_int_equal(in_file, dropped);
	assert_int_equal(apis + dropped, 20000);
	free(f.ev);
}

/* The counter-based clock the writer anchors every pass agrees with the trace clock: read between
 * two sp_now_ns, it lies between them within 5 us (a pass's rate error is ns; the slack is for a
 * preempted reader), once the writer has run past the 10 ms baseline. Where the kernel's
 * clocksource is not the TSC it is sp_now_ns itself, and the same bounds hold. */
static void test_fast_clock_follows_trace_clock(void **state)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/clock.sptrace", dir);
	assert_int_equal(sp_writer_start(path, &meta, 0), 0);
	uint64_t until = sp_now_ns() + 30000000; /* fifteen passes, past the baseline */
	while (sp_now_ns() < until)
		usleep(1000);
	int worst = 0, anchored = atomic_load(&sp_tsc.seq) != 0;
	for (int i = 0; i < 200000; i++) {
		uint64_t a = sp_now_ns(), f = sp_fast_ns(), b = sp_now_ns();
		int64_t off = f < a ? (int64_t)(a - f) : f > b ? (int64_t)(f - b) : 0;
		worst = off > worst ? (int)off : worst;
	}
	assert_int_equal(sp_writer_stop(), 0);
	print_message("fast clock %s, worst distance %d ns\n", anchored ? "anchored to the TSC" : "= sp_now_ns", worst);
	assert_true(worst < 5000);
}

/* A thread's calls keep their order whatever the two clocks say: with the counter clock 50 ms
 * ahead of the trace clock (its anchor set by hand), a precise time taken after a counter time
 * still comes later, as a marker call's boundary must after the launches made before it. */
static void test_ordered_clock(void **state)
{
	(void)state;
#if defined(__x86_64__)
	struct sp_tsc_anchor saved;
	saved.seq = atomic_load(&sp_tsc.seq);
	saved.tsc0 = atomic_load(&sp_tsc.tsc0);
	saved.ns0 = atomic_load(&sp_tsc.ns0);
	saved.mult = atomic_load(&sp_tsc.mult);
	atomic_store(&sp_tsc.tsc0, __rdtsc());
	atomic_store(&sp_tsc.ns0, sp_now_ns() + 50000000);
	atomic_store(&sp_tsc.mult, 0); /* the counter clock stands 50 ms ahead */
	atomic_store(&sp_tsc.seq, 2);
	assert_true(sp_now_ns() < sp_fast_ns()); /* unordered, a marker would come before its launches */
#endif
	uint64_t last = 0, prev = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t t = sp_ordered_ns(&last, i % 3 == 2); /* two launches, then a marker */
		assert_true(t > prev);
		assert_int_equal(t, last);
		prev = t;
	}
#if defined(__x86_64__)
	atomic_store(&sp_tsc.tsc0, saved.tsc0);
	atomic_store(&sp_tsc.ns0, saved.ns0);
	atomic_store(&sp_tsc.mult, saved.mult);
	atomic_store(&sp_tsc.seq, saved.seq);
#endif
}

static void test_start_failure_warns(void **state)
{
	assert_int_equal(sp_writer_start("/nonexistent-dir/x.sptrace", &meta, 0), -1);
	assert_int_equal(sp_writer_running(), 0);
	struct sp_event ev = { .kind = SP_EV_API };
	sp_ring_push(&ev); /* still harmless */
	sp_writer_kick();
}

/* Reads the first bytes of path into buf (NUL-terminated). */
static void read_head(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	buf[fread(buf, 1, len - 1, f)] = 0;
	fclose(f);
}

/* A file or a link already at the trace's name is never truncated or followed: the next free
 * name is written instead. */
static void test_existing_names_kept(void **state)
{
	char path[256], link[256], victim[256], want[300], head[16];
	snprintf(path, sizeof(path), "%s/rank0.h.1.sptrace", dir);
	snprintf(link, sizeof(link), "%s/rank1.h.1.sptrace", dir);
	snprintf(victim, sizeof(victim), "%s/victim.txt", dir);
	FILE *f = fopen(path, "w");
	fputs("earlier run", f);
	fclose(f);
	f = fopen(victim, "w");
	fputs("precious", f);
	fclose(f);
	assert_int_equal(symlink(victim, link), 0);

	assert_int_equal(sp_writer_start(path, &meta, 0), 0);
	snprintf(want, sizeof(want), "%s/rank0.h.1.1.sptrace", dir);
	assert_string_equal(sp_writer_path(), want);
	assert_int_equal(sp_writer_stop(), 0);
	read_head(path, head, sizeof(head));
	assert_string_equal(head, "earlier run");
	read_head(want, head, sizeof(head));
	assert_memory_equal(head, "STEPPROF", 8);

	assert_int_equal(sp_writer_start(link, &meta, 0), 0);
	snprintf(want, sizeof(want), "%s/rank1.h.1.1.sptrace", dir);
	assert_string_equal(sp_writer_path(), want);
	assert_int_equal(sp_writer_stop(), 0);
	read_head(victim, head, sizeof(head));
	assert_string_equal(head, "precious");

	/* the trace format itself refuses both */
	errno = 0;
	assert_null(sp_trace_create(link, &meta, NULL, NULL, 0));
	assert_int_equal(errno, EEXIST);
	assert_null(sp_trace_create(path, &meta, NULL, NULL, 0));
	assert_int_equal(errno, EEXIST);
}

/* Output directories: made 0750 (less the umask), refused when another user owns them. */
static void test_output_dir(void **state)
{
	char d[256], why[1200];
	struct stat st;
	mode_t mask = umask(022);
	snprintf(d, sizeof(d), "%s/out/a/b", dir);
	assert_int_equal(sp_writer_make_dir(d, false, why, sizeof why), 0);
	assert_int_equal(stat(d, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0750);
	snprintf(d, sizeof(d), "%s/out", dir);
	assert_int_equal(stat(d, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0750);
	umask(mask);
	snprintf(d, sizeof(d), "%s/victim.txt", dir);
	assert_int_equal(sp_writer_make_dir(d, false, why, sizeof why), -1); /* not a directory: said with its path */
	assert_non_null(strstr(why, d));
	if (geteuid() != 0) {
		print_message("not root: the foreign owner case needs chown, skipped\n");
		return;
	}
	snprintf(d, sizeof(d), "%s/foreign", dir);
	assert_int_equal(mkdir(d, 0777), 0);
	assert_int_equal(chown(d, 65534, 65534), 0);
	assert_int_equal(sp_writer_make_dir(d, false, why, sizeof why), -1);
	assert_non_null(strstr(why, "belongs to another user"));
	assert_int_equal(sp_writer_make_dir(d, true, why, sizeof why), 0);
}

static void *random_allocs(void *arg)
{
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < 5000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* incompressible addresses */
		struct sp_event ev = { .kind = SP_EV_ALLOC, .start = (uint64_t)i, .u.mem.addr = x };
		sp_ring_push(&ev);
	}
	return NULL;
}

/* The file can't grow past 4 KiB: the writer warns once, discards the rest, the program goes on. */
static void test_write_error_warns_once(void **state)
{
	char path[256], log[256], line[512];
	snprintf(path, sizeof(path), "%s/full.sptrace", dir);
	snprintf(log, sizeof(log), "%s/stderr.txt", dir);
	struct rlimit old, small;
	getrlimit(RLIMIT_FSIZE, &old);
	small = (struct rlimit){ 4096, old.rlim_max }; /* soft limit only: raising it back needs no privilege */
	signal(SIGXFSZ, SIG_IGN);
	int saved = dup(2), fd = open(log, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	dup2(fd, 2);
	setrlimit(RLIMIT_FSIZE, &small);
	assert_int_equal(sp_writer_start(path, &meta, 0), 0);
	int rounds = 0; /* asserted once stderr is back */
	for (int round = 0; round < 3; round++) {
		pthread_t th;
		rounds += !pthread_create(&th, NULL, random_allocs, NULL) && !pthread_join(th, NULL);
		sp_writer_kick();
		usleep(20000);
	}
	int rc = sp_writer_stop();
	setrlimit(RLIMIT_FSIZE, &old);
	dup2(saved, 2);
	close(saved);
	close(fd);
	assert_int_equal(rounds, 3);
	assert_int_equal(rc, -1);
	FILE *f = fopen(log, "r");
	int warnings = 0;
	while (fgets(line, sizeof(line), f))
		warnings += !strncmp(line, "stepprof: writing trace ", 24) && strstr(line, "dropping further events");
	fclose(f);
	assert_int_equal(warnings, 1);
	struct file tr;
	read_file(path, &tr); /* what made it to disk is still a readable trace */
	free(tr.ev);
	/* and the writer starts again afterwards */
	snprintf(path, sizeof(path), "%s/after.sptrace", dir);
	assert_int_equal(sp_writer_start(path, &meta, 0), 0);
	assert_int_equal(sp_writer_stop(), 0);
}

/* Pushes one WINDOW_BEGIN or WINDOW_END of window id at t and lets the writer drain it. */
static void window_rec(uint8_t kind, uint32_t id, uint64_t t)
{
	struct sp_event ev = { .kind = kind, .device = SP_NO_DEVICE, .start = t, .end = t, .u.window.id = id };
	assert_int_equal(sp_ring_push(&ev), 0);
	sp_writer_kick();
	usleep(50000); /* a pass is 2 ms: this record is drained alone */
}

/* Back-to-back windows whose records reach the writer out of order (the next BEGIN before the
 * previous END; the next END even before that) are written as BEGIN/END pairs that never interleave. */
static void test_held_windows(void **state)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/held.sptrace", dir);
	assert_int_equal(sp_writer_start(path, &meta, 0), 0);
	window_rec(SP_EV_WINDOW_BEGIN, 0, 100);
	window_rec(SP_EV_WINDOW_BEGIN, 1, 200);
	window_rec(SP_EV_WINDOW_BEGIN, 2, 300);
	window_rec(SP_EV_WINDOW_END, 1, 250); /* window 1 completed before window 0 */
	window_rec(SP_EV_WINDOW_END, 0, 200);
	window_rec(SP_EV_WINDOW_END, 2, 400);
	assert_int_equal(sp_writer_stop(), 0);
	struct file f;
	read_file(path, &f);
	char got[64] = "";
	for (int i = 0; i < f.n; i++)
		if (f.ev[i].kind == SP_EV_WINDOW_BEGIN || f.ev[i].kind == SP_EV_WINDOW_END)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%c%u ",
				 f.ev[i].kind == SP_EV_WINDOW_BEGIN ? 'B' : 'E', f.ev[i].u.window.id);
	assert_string_equal(got, "B0 E0 B1 E1 B2 E2 ");
	free(f.ev);
}

/* "B" for the WINDOW_BEGIN, the step numbers, "E" for the WINDOW_END of path as it is on disk. */
static void window_records(const char *path, char *got, size_t len)
{
	struct file f;
	read_file(path, &f);
	got[0] = 0;
	for (int i = 0; i < f.n; i++)
		if (f.ev[i].kind == SP_EV_WINDOW_BEGIN || f.ev[i].kind == SP_EV_WINDOW_END)
			snprintf(got + strlen(got), len - strlen(got), "%s ", f.ev[i].kind == SP_EV_WINDOW_BEGIN ? "B" : "E");
		else if (f.ev[i].kind == SP_EV_STEP)
			snprintf(got + strlen(got), len - strlen(got), "%lld ", (long long)f.ev[i].u.step.number);
	free(f.ev);
}

/* Pushes a window's begin and steps first..last (no kick: the writer keeps them in its chunk). */
static void window_steps(int64_t first, int64_t last)
{
	struct sp_event b = { .kind = SP_EV_WINDOW_BEGIN, .device = SP_NO_DEVICE, .start = 1000, .end = 1000 };
	if (first == 3)
		push(b);
	for (int64_t k = first; k <= last; k++) {
		struct sp_event st = { .kind = SP_EV_STEP, .device = SP_NO_DEVICE, .start = 1000 + 10 * (uint64_t)k };
		st.end = st.start + 10;
		st.u.step.number = k;
		push(st);
	}
}

/* A long window's records reach the file every 250 ms though nothing kicks the writer and its chunk is
 * far from full: a process killed outright (SIGKILL) keeps them. */
static void test_open_window_flushed(void **state)
{
	char path[256], got[256];
	snprintf(path, sizeof(path), "%s/open.sptrace", dir);
	assert_int_equal(sp_writer_start(path, &meta, 0), 0);
	window_steps(3, 7);
	uint64_t give_up = now_ms() + WAIT_S * 1000;
	do {
		usleep(50000);
		window_records(path, got, sizeof got);
	} while (strcmp(got, "B 3 4 5 6 7 ") && now_ms() < give_up);
	assert_string_equal(got, "B 3 4 5 6 7 ");
	assert_int_equal(sp_writer_stop(), 0);
}

/* What a signal handler asks (sp_writer_rescue): the rings written at once, the thread going on (a
 * program that survives), or the files closed and the thread ended (one that dies); once per run. */
static void test_rescue(void **state)
{
	char path[256], got[256];
	assert_int_equal(sp_writer_rescue(SP_RESCUE_FINAL, 100), 0); /* no writer: nothing to wait for */
	snprintf(path, sizeof(path), "%s/rescue.sptrace", dir);
	assert_int_equal(sp_writer_start(path, &meta, 0), 0);
	window_steps(3, 5);
	assert_int_equal(sp_writer_rescue(0, 5000), 1);
	window_records(path, got, sizeof got);
	assert_string_equal(got, "B 3 4 5 ");
	window_steps(6, 7);
	assert_int_equal(sp_writer_rescue(SP_RESCUE_FINAL, 5000), 1); /* the first one's: already answered */
	assert_int_equal(sp_writer_stop(), 0);
	window_records(path, got, sizeof got);
	assert_string_equal(got, "B 3 4 5 6 7 ");

	snprintf(path, sizeof(path), "%s/rescue2.sptrace", dir);
	assert_int_equal(sp_writer_start(path, &meta, 0), 0); /* a new run may be rescued again */
	window_steps(3, 6);
	assert_int_equal(sp_writer_rescue(SP_RESCUE_FINAL, 5000), 1);
	window_records(path, got, sizeof got);
	assert_string_equal(got, "B 3 4 5 6 "); /* no end: the reader marks it cut */
	struct file f;
	read_file(path, &f);
	assert_false(f.truncated); /* the file was closed at a chunk's end */
	free(f.ev);
	assert_int_equal(sp_writer_stop(), 0); /* the thread ended by itself: joined at once */
}

int main(void)
{
	if (make_scratch("writer") < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capped_window),
		cmocka_unit_test(test_tick_emits),
		cmocka_unit_test(test_fast_clock_follows_trace_clock),
		cmocka_unit_test(test_ordered_clock),
		cmocka_unit_test(test_ring_drops_written_at_stop),
		cmocka_unit_test(test_start_failure_warns),
		cmocka_unit_test(test_existing_names_kept),
		cmocka_unit_test(test_output_dir),
		cmocka_unit_test(test_write_error_warns_once),
		cmocka_unit_test(test_held_windows),
		cmocka_unit_test(test_open_window_flushed),
		cmocka_unit_test(test_rescue),
	};
	return cmocka_run_group_tests(tests, NULL, remove_scratch);
}
