/* SPDX-License-Identifier: MIT */
/* memory.c - see memory.h. One open-addressing table of live allocations (address -> size, kind,
 * device, stack, time) in mmap'ed memory, guarded by a mutex; per-slot levels and peaks. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include "clock.h"
#include "event.h"
#include "memory.h"
#include "ring.h"

#define INITIAL_SLOTS (1u << 14)
#define VMM_KEY (1ull << 63)  /* VMM handles live in their own key space */
#define TOMB UINT64_MAX

struct alloc {
	uint64_t key;            /* address (or handle | VMM_KEY); 0 empty, TOMB deleted */
	uint64_t size;
	uint64_t time;
	uint32_t stack;
	uint8_t kind;
	uint8_t slot;            /* 0..63 device, SP_MEM_HOST_SLOT host */
};

static struct {
	pthread_mutex_t lock;
	struct alloc *tab;       /* mmap'ed */
	uint32_t cap, used;      /* slots, slots not empty (live + tombstones) */
	uint32_t tombs;          /* deleted slots among used */
	uint64_t live[SP_MEM_HOST_SLOT + 1], peak[SP_MEM_HOST_SLOT + 1];
} M = { .lock = PTHREAD_MUTEX_INITIALIZER };

_Atomic uint64_t sp_mem_host_seen[1u << 14];

static int is_host(int kind)
{
	return kind == SP_MEM_HOST || kind == SP_MEM_PINNED;
}

static uint64_t key_of(int kind, uint64_t addr)
{
	return kind == SP_MEM_VMM ? addr | VMM_KEY : addr;
}

static uint32_t hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	return (uint32_t)(k ^ (k >> 33));
}

/* Makes room: rebuilds the table without its tombstones, at the same size if at most a quarter
 * of it is live (allocation churn leaves tombstones, not more live blocks), else doubled (or
 * makes the first). Returns 0 or -1 (no memory: table unchanged). */
static int grow(void)
{
	uint32_t live = M.used - M.tombs;
	uint32_t cap = !M.cap ? INITIAL_SLOTS : live * 4 <= M.cap ? M.cap : M.cap * 2;
	struct alloc *t = mmap(NULL, (size_t)cap * sizeof(*t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		return -1;
	uint32_t used = 0;
	for (uint32_t i = 0; i < M.cap; i++) {
		struct alloc *a = &M.tab[i];
		if (!a->key || a->key == TOMB)
			continue;
		for (uint32_t h = hash(a->key);; h++)
			if (!t[h & (cap - 1)].key) {
				t[h & (cap - 1)] = *a;
				used++;
				break;
			}
	}
	if (M.tab)
		munmap(M.tab, (size_t)M.cap * sizeof(*M.tab));
	M.tab = t;
	M.cap = cap;
	M.used = used;
	M.tombs = 0;
	return 0;
}

static struct alloc *find(uint64_t key)
{
	if (!M.cap)
		return NULL;
	for (uint32_t h = hash(key), i = 0; i < M.cap; h++, i++) {
		struct alloc *a = &M.tab[h & (M.cap - 1)];
		if (a->key == key)
			return a;
		if (!a->key)
			return NULL;
	}
	return NULL;
}

static void push_mem(int kind, int evkind, const struct alloc *a, uint64_t addr, uint64_t t, uint32_t flags)
{
	struct sp_event ev = { .kind = (uint8_t)evkind, .sub = (uint8_t)kind, .start = t, .end = t };
	ev.device = a->slot == SP_MEM_HOST_SLOT ? SP_NO_DEVICE : a->slot;
	ev.u.mem.addr = addr;
	ev.u.mem.size = a->size;
	ev.u.mem.live = M.live[a->slot];
	ev.u.mem.stack = a->stack;
	ev.u.mem.flags = flags;
	sp_ring_push(&ev);
}

void sp_mem_alloc(int kind, int device, uint64_t addr, uint64_t size, uint32_t stack, uint64_t t, int record)
{
	struct alloc a = { key_of(kind, addr), size, t, stack, (uint8_t)kind, 0 };
	a.slot = is_host(kind) || device < 0 || device >= SP_MEM_HOST_SLOT ? SP_MEM_HOST_SLOT : (uint8_t)device;
	if (kind == SP_MEM_HOST) {
		uint32_t b = sp_mem_seen_bit(addr);
		atomic_fetch_or_explicit(&sp_mem_host_seen[b >> 6], 1ull << (b & 63), memory_order_relaxed);
	}
	pthread_mutex_lock(&M.lock);
	M.live[a.slot] += size;
	if (M.live[a.slot] > M.peak[a.slot])
		M.peak[a.slot] = M.live[a.slot];
	if ((M.used + 1) * 2 <= M.cap || grow() == 0)
		for (uint32_t h = hash(a.key);; h++) {
			struct alloc *s = &M.tab[h & (M.cap - 1)];
			if (!s->key || s->key == TOMB || s->key == a.key) {
				M.used += !s->key;
				M.tombs -= s->key == TOMB;
				*s = a;
				break;
			}
		}
	if (record)
		push_mem(kind, SP_EV_ALLOC, &a, addr, t, 0);
	pthread_mutex_unlock(&M.lock);
}

void sp_mem_free(int kind, uint64_t addr, uint64_t t, int record)
{
	pthread_mutex_lock(&M.lock);
	struct alloc *a = find(key_of(kind, addr));
	if (a) {
		struct alloc old = *a;
		a->key = TOMB;
		M.tombs++;
		M.live[old.slot] -= old.size;
		if (record)
			push_mem(old.kind, SP_EV_FREE, &old, addr, t, 0);
	}
	pthread_mutex_unlock(&M.lock);
}

void sp_mem_snapshot(uint64_t t)
{
	pthread_mutex_lock(&M.lock);
	for (uint32_t i = 0; i < M.cap; i++) {
		struct alloc *a = &M.tab[i];
		if (a->key && a->key != TOMB)
			push_mem(a->kind, SP_EV_ALLOC, a, a->key & ~VMM_KEY, a->time, SP_MEMF_SNAPSHOT);
	}
	pthread_mutex_unlock(&M.lock);
	(void)t;
}

void sp_mem_peaks(uint64_t t)
{
	pthread_mutex_lock(&M.lock);
	for (int s = 0; s <= SP_MEM_HOST_SLOT; s++) {
		if (!M.peak[s])
			continue;
		struct alloc a = { 0, 0, t, 0, s == SP_MEM_HOST_SLOT ? SP_MEM_HOST : SP_MEM_DEVICE, (uint8_t)s };
		struct sp_event ev = { .kind = SP_EV_ALLOC, .sub = a.kind, .start = t, .end = t };
		ev.device = s == SP_MEM_HOST_SLOT ? SP_NO_DEVICE : (uint16_t)s;
		ev.u.mem.live = M.peak[s];
		ev.u.mem.flags = SP_MEMF_PEAK;
		sp_ring_push(&ev);
	}
	pthread_mutex_unlock(&M.lock);
}

uint32_t sp_mem_table_slots(void)
{
	pthread_mutex_lock(&M.lock);
	uint32_t cap = M.cap;
	pthread_mutex_unlock(&M.lock);
	return cap;
}

uint64_t sp_mem_live(int slot)
{
	return slot >= 0 && slot <= SP_MEM_HOST_SLOT ? M.live[slot] : 0;
}
