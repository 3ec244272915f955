/* SPDX-License-Identifier: MIT */
/* ring.c - per-thread SPSC rings behind ring.h, mmap'ed (a push in a malloc hook cannot recurse) and linked
 * lock-free; a push takes no lock and no syscall. A ring emptied by a pass is rewound so its busy part stays
 * small and warm (docs/BENCHMARKS.md, ring rewind). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include "ring.h"

#define DEFAULT_SLOTS 65536u
#define MIN_SLOTS 64u
#define MAX_SLOTS (1u << 24)
#define GONE ((struct ring *)1) /* tls value after the thread's ring was handed to the consumer */

struct ring {
	/* producer side */
	_Atomic uint64_t head;          /* slots written or jumped over; release-stored after the slot */
	_Atomic uint64_t dropped;       /* pushes lost to a full ring; only the producer stores */
	_Atomic uint64_t jumped_from;   /* head at the last rewind (UINT64_MAX: none yet) */
	_Atomic uint64_t skipped;       /* slots jumped over, all rewinds; only the producer stores */
	uint64_t tail_seen;             /* producer's last view of where unconsumed slots begin */
	/* consumer side, own cache line */
	_Alignas(64) _Atomic uint64_t tail; /* slots consumed or skipped */
	_Atomic uint64_t rewind;        /* the producer may rewind if head is still here (UINT64_MAX: no) */
	_Atomic int dead;               /* set by the thread-exit destructor */
	struct ring *next;              /* list link; changed only by the consumer once linked */
	size_t map_bytes;
	uint32_t mask;
	_Alignas(64) struct sp_event slot[];
};

static struct {
	_Atomic(struct ring *) list;    /* every live ring, newest first */
	_Atomic uint32_t slots;         /* slot count for rings created from now on */
	_Atomic uint32_t nrings;        /* rings in list */
	_Atomic int disabled;           /* fork child: drop everything, touch no ring */
	_Atomic uint64_t lost_pushed;   /* pushes with no ring (no memory, or after thread exit) */
	pthread_mutex_t retire_lock;    /* consumer freeing a ring vs. counters walking the list */
	uint64_t retired_pushed;        /* counters of freed rings (retire_lock) */
	uint64_t retired_dropped;
	pthread_once_t key_once;
	pthread_key_t key;              /* destructor marks the thread's ring dead */
} g = { .slots = DEFAULT_SLOTS, .retire_lock = PTHREAD_MUTEX_INITIALIZER, .key_once = PTHREAD_ONCE_INIT };

/* Asks for a slot's lines in the state a write needs, so that the next push finds them in cache
 * however far off it is (after a rewind they were last read by the writer, on another core).
 * PREFETCHW is a no-op on x86 CPUs without it. */
static inline void prefetch_for_write(const struct sp_event *s)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("prefetchw %0\n\tprefetchw %1"
			 :
			 : "m"(*(const char *)s), "m"(((const char *)s)[sizeof *s - 1]));
#else
	__builtin_prefetch(s, 1);
	__builtin_prefetch((const char *)s + sizeof *s - 1, 1);
#endif
}

static __thread struct ring *tls_ring;
static __thread bool tls_creating;

/* runs at thread exit (pthread key destructor) */
static void thread_exit(void *p)
{
	struct ring *r = p;
	tls_ring = GONE;
	atomic_store_explicit(&r->dead, 1, memory_order_release);
}

/* pthread_once: the key whose destructor marks a thread's ring dead (failure: no destructor,
 * so an exited thread's ring is only freed at process exit). */
static void make_key(void)
{
	pthread_key_create(&g.key, thread_exit);
}

/* Maps and registers the calling thread's ring. Returns it, or NULL if memory ran out or this
 * is a nested call (the caller then counts the push as lost). */
static struct ring *ring_create(void)
{
	if (tls_creating)
		return NULL;
	tls_creating = true;
	uint32_t slots = atomic_load_explicit(&g.slots, memory_order_relaxed);
	size_t bytes = sizeof(struct ring) + (size_t)slots * sizeof(struct sp_event);
	struct ring *r = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED) {
		tls_creating = false;
		return NULL;
	}
	r->map_bytes = bytes;
	r->mask = slots - 1;
	atomic_init(&r->jumped_from, UINT64_MAX);
	atomic_init(&r->rewind, UINT64_MAX);
	pthread_once(&g.key_once, make_key);
	pthread_setspecific(g.key, r);
	r->next = atomic_load_explicit(&g.list, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&g.list, &r->next, r, memory_order_release, memory_order_relaxed))
		;
	atomic_fetch_add_explicit(&g.nrings, 1, memory_order_relaxed);
	tls_ring = r;
	tls_creating = false;
	return r;
}

/* Events a ring has taken (head less the slots rewinds jumped over). This function can't fail. */
static uint64_t pushed_of(struct ring *r)
{
	uint64_t skipped = atomic_load_explicit(&r->skipped, memory_order_relaxed);
	return atomic_load_explicit(&r->head, memory_order_relaxed) - skipped;
}

/* The first slot of the lap after index i. */
static uint64_t next_lap(const struct ring *r, uint64_t i)
{
	return (i | r->mask) + 1;
}

/* Unlinks a dead, drained ring and frees it, keeping its counters. Consumer only. */
static void retire(struct ring *r)
{
	pthread_mutex_lock(&g.retire_lock);
	struct ring *head = r;
	if (!atomic_compare_exchange_strong_explicit(&g.list, &head, r->next, memory_order_acq_rel,
						     memory_order_acquire)) {
		struct ring *p = head; /* r is not first: only the consumer edits links after the head */
		while (p->next != r)
			p = p->next;
		p->next = r->next;
	}
	uint64_t dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed);
	g.retired_pushed += pushed_of(r) + dropped;
	g.retired_dropped += dropped;
	atomic_fetch_sub_explicit(&g.nrings, 1, memory_order_relaxed);
	pthread_mutex_unlock(&g.retire_lock);
	munmap(r, r->map_bytes);
}

/* Sums the counters of all rings, freed ones included. This function can't fail. */
static void totals(uint64_t *pushed, uint64_t *dropped)
{
	pthread_mutex_lock(&g.retire_lock);
	uint64_t lost = atomic_load_explicit(&g.lost_pushed, memory_order_relaxed);
	*pushed = g.retired_pushed + lost;
	*dropped = g.retired_dropped + lost;
	for (struct ring *r = atomic_load_explicit(&g.list, memory_order_acquire); r; r = r->next) {
		uint64_t d = atomic_load_explicit(&r->dropped, memory_order_relaxed);
		*pushed += pushed_of(r) + d;
		*dropped += d;
	}
	pthread_mutex_unlock(&g.retire_lock);
}

/* This function can't fail. */
void sp_ring_configure(uint32_t slots)
{
	uint32_t n = MIN_SLOTS;
	while (n < slots && n < MAX_SLOTS)
		n *= 2;
	atomic_store_explicit(&g.slots, n, memory_order_relaxed);
}

/* Returns 0, or -1 if the event was dropped (counted, except after sp_ring_disable_all).
 * Lock-free and syscall-free once the thread has its ring. */
int sp_ring_push(const struct sp_event *ev)
{
	if (atomic_load_explicit(&g.disabled, memory_order_relaxed))
		return -1;
	struct ring *r = tls_ring;
	if (__builtin_expect(!r, 0))
		r = ring_create();
	if (__builtin_expect(!r || r == GONE, 0)) {
		atomic_fetch_add_explicit(&g.lost_pushed, 1, memory_order_relaxed);
		return -1;
	}
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	if (head == atomic_load_explicit(&r->rewind, memory_order_acquire)) {
		/* the consumer emptied the ring at head and has not seen a push since: rewind */
		uint64_t to = next_lap(r, head);
		atomic_store_explicit(&r->jumped_from, head, memory_order_relaxed);
		atomic_store_explicit(&r->skipped,
				      atomic_load_explicit(&r->skipped, memory_order_relaxed) + (to - head),
				      memory_order_relaxed);
		r->tail_seen = to; /* what lies before it is consumed or jumped over */
		head = to; /* published by the release store of head below */
	}
	if (head - r->tail_seen > r->mask) {
		/* a tail still at the jump (the consumer has not seen it) only understates the room */
		r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (head - r->tail_seen > r->mask) {
			uint64_t d = atomic_load_explicit(&r->dropped, memory_order_relaxed);
			atomic_store_explicit(&r->dropped, d + 1, memory_order_relaxed);
			return -1;
		}
	}
	r->slot[head & r->mask] = *ev;
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
	prefetch_for_write(&r->slot[(head + 1) & r->mask]);
	return 0;
}

/* Returns the number of events handed to fn. Consumer thread only; can't fail. */
uint64_t sp_ring_drain(sp_ring_fn fn, void *ctx)
{
	uint64_t n = 0;
	struct ring *r = atomic_load_explicit(&g.list, memory_order_acquire), *next;
	for (; r; r = next) {
		next = r->next;
		int dead = atomic_load_explicit(&r->dead, memory_order_acquire);
		uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
		uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
		if (tail != head && tail == atomic_load_explicit(&r->jumped_from, memory_order_relaxed))
			tail = next_lap(r, tail); /* the producer rewound here: skip to where it went */
		n += head - tail;
		for (; tail != head; tail++) {
			fn(ctx, &r->slot[tail & r->mask]);
			if ((tail & 255) == 255) /* free space early for a busy producer */
				atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
		}
		atomic_store_explicit(&r->tail, tail, memory_order_release);
		if (tail & r->mask) /* empty, away from the ring's start: offer a rewind */
			atomic_store_explicit(&r->rewind, tail, memory_order_release);
		if (dead)
			retire(r);
	}
	return n;
}

/* This function can't fail. */
uint64_t sp_ring_dropped(void)
{
	uint64_t pushed, dropped;
	totals(&pushed, &dropped);
	return dropped;
}

/* This function can't fail. */
uint64_t sp_ring_pushed(void)
{
	uint64_t pushed, dropped;
	totals(&pushed, &dropped);
	return pushed;
}

/* This function can't fail. */
uint32_t sp_ring_count(void)
{
	return atomic_load_explicit(&g.nrings, memory_order_relaxed);
}

/* For a fork child: every later push is dropped without being counted, and no inherited ring
 * is read or written again. This function can't fail. */
void sp_ring_disable_all(void)
{
	atomic_store_explicit(&g.disabled, 1, memory_order_relaxed);
}
