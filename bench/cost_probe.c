/* SPDX-License-Identifier: MIT */
/* cost_probe.c - what the primitives of a host-tracking event cost on this machine, one thread,
 * nothing else running: the two trace clocks (clock.h), the time-stamp counter that sp_fast_ns
 * reads (x86-64), a pthread mutex against a spinlock, an
 * atomic OR, a 96-byte ring push into rings of 8K, 64K and 256K slots (the last two being the
 * default ring and malloc_bench's ring_events; no consumer and no rewind, so each push writes
 * lines as cold as the ring is big), and a small malloc/free pair. Prints the kernel's
 * clocksource and "name ns_per_op" lines, each the median of 9 timings. No GPU needed.
 *   gcc -O2 -pthread bench/cost_probe.c -o /tmp/cost_probe && /tmp/cost_probe
 * Under LD_PRELOAD=libstepprof.so (no CUDA: the collector stays inert, host tracking off) the
 * malloc_free line moves by what stepprof's malloc hooks cost when off. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define REPS 9
#define N 2000000

struct ev {
	uint64_t w[12]; /* sizeof(struct sp_event) */
};

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static volatile uint64_t sink;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int spin;
static _Atomic uint64_t word;
static struct ev *ring;
static uint64_t ring_mask, head;

static void op_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	sink += (uint64_t)ts.tv_nsec;
}

static void op_coarse(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	sink += (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
static void op_rdtsc(void)
{
	sink += __rdtsc();
}
#endif

static void op_mutex(void)
{
	pthread_mutex_lock(&mu);
	sink++;
	pthread_mutex_unlock(&mu);
}

static void op_spin(void)
{
	while (atomic_exchange_explicit(&spin, 1, memory_order_acquire))
		;
	sink++;
	atomic_store_explicit(&spin, 0, memory_order_release);
}

static void op_or(void)
{
	atomic_fetch_or_explicit(&word, 1ull << (sink++ & 63), memory_order_relaxed);
}

static void op_push(void)
{
	struct ev e = { { head, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 } };
	ring[head & ring_mask] = e;
	atomic_thread_fence(memory_order_release);
	head++;
}

static void op_malloc_free(void)
{
	void *p = malloc(32 + (sink++ & 63));
	__asm__ volatile("" : : "r"(p) : "memory"); /* the pair is not optimised away */
	free(p);
}

static void measure(const char *name, void (*op)(void))
{
	double t[REPS];
	for (int r = 0; r < REPS; r++) {
		double t0 = now_ns();
		for (int i = 0; i < N; i++)
			op();
		t[r] = (now_ns() - t0) / N;
	}
	qsort(t, REPS, sizeof *t, cmp_double);
	printf("%-24s %.2f\n", name, t[REPS / 2]);
}

int main(void)
{
	char cs[64] = "?";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
	if (f) {
		if (fgets(cs, sizeof cs, f))
			cs[strcspn(cs, "\n")] = 0;
		fclose(f);
	}
	printf("clocksource %s\n", cs);
	measure("clock_monotonic", op_clock);
	measure("clock_monotonic_coarse", op_coarse);
#if defined(__x86_64__)
	measure("rdtsc", op_rdtsc);
#endif
	measure("mutex_lock_unlock", op_mutex);
	measure("spin_lock_unlock", op_spin);
	measure("atomic_or", op_or);
	measure("malloc_free", op_malloc_free);
	static const unsigned slots[] = { 8192, 65536, 262144 };
	for (int i = 0; i < 3; i++) {
		ring = aligned_alloc(64, slots[i] * sizeof *ring);
		if (!ring)
			return 1;
		memset(ring, 0, slots[i] * sizeof *ring);
		ring_mask = slots[i] - 1;
		char name[32];
		snprintf(name, sizeof name, "ring_push_%uk", slots[i] / 1024);
		measure(name, op_push);
		free(ring);
	}
	return 0;
}
