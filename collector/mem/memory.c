/* SPDX-License-Identifier: MIT */
/* memory.c - see memory.h. An open-addressing table of live allocations in mmap'ed memory under a spinlock,
 * with per-slot levels and peaks. Runs inside malloc hooks: no malloc, no stdio, few cache lines per event. */
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include "collector/base/clock.h"
#include "trace/event.h"
#include "memory.h"
#include "collector/out/ring.h"

#define INITIAL_SLOTS 1024u  /* 32 KiB: a table that stays in cache; it doubles as live blocks grow */
#define VMM_KEY (1ull << 63)  /* VMM handles live in their own key space */
#define SPINS 64              /* busy waits before yielding the CPU to a lock holder */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() ((void)0)
#endif

struct alloc {
	uint64_t key;            /* address (or handle | VMM_KEY); 0 empty */
	uint64_t size;
	uint64_t time;
	uint32_t stack;
	uint8_t kind;
	uint8_t slot;            /* 0..63 device, SP_MEM_HOST_SLOT host */
};

struct level {
	uint64_t live, peak;     /* bytes alive now, most ever alive */
};

/* What one host event touches shares one cache line: the lock, the table's place and size, and
 * the host level. Device levels are elsewhere (their calls are rare). */
static struct {
	_Alignas(64) _Atomic int lock; /* a spinlock: one atomic exchange to take, a store to release */
	uint32_t cap, used;      /* slots (a power of two, or 0 before the first), slots in use */
	struct alloc *tab;       /* mmap'ed; linear probing, deletion by backward shift: no tombstones */
	struct level host;       /* SP_MEM_HOST_SLOT */
	_Alignas(64) struct level dev[SP_MEM_HOST_SLOT];
} mem_table;

_Atomic uint64_t sp_mem_host_seen[1u << 14];
__thread volatile int sp_mem_self;

/* The critical sections are a few table probes (rarely a rebuild): spin briefly, then yield, so
 * a holder that was preempted gets the CPU back. This function can't fail. */
static void lock(void)
{
	while (atomic_exchange_explicit(&mem_table.lock, 1, memory_order_acquire))
		for (int i = 0; atomic_load_explicit(&mem_table.lock, memory_order_relaxed); i++)
			if (i < SPINS)
				cpu_relax();
			else
				sched_yield();
}

static void unlock(void)
{
	atomic_store_explicit(&mem_table.lock, 0, memory_order_release);
}

static struct level *level(unsigned slot)
{
	return slot == SP_MEM_HOST_SLOT ? &mem_table.host : &mem_table.dev[slot];
}

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

/* The slot of key in t (cap slots): its own, or the empty one where it would go. */
static struct alloc *probe(struct alloc *t, uint32_t cap, uint64_t key)
{
	for (uint32_t h = hash(key);; h++) {
		struct alloc *a = &t[h & (cap - 1)];
		if (!a->key || a->key == key)
			return a;
	}
}

/* Makes the table twice as big (or makes the first). Returns 0 or -1 (no memory: table
 * unchanged). Call with the lock held. */
static int grow(void)
{
	uint32_t cap = mem_table.cap ? mem_table.cap * 2 : INITIAL_SLOTS;
	struct alloc *t =
		mmap(NULL, (size_t)cap * sizeof(*t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		return -1;
	for (uint32_t i = 0; i < mem_table.cap; i++)
		if (mem_table.tab[i].key)
			*probe(t, cap, mem_table.tab[i].key) = mem_table.tab[i];
	if (mem_table.tab)
		munmap(mem_table.tab, (size_t)mem_table.cap * sizeof(*mem_table.tab));
	mem_table.tab = t;
	mem_table.cap = cap;
	return 0;
}

/* Empties slot i and moves later entries of its probe run back into the hole, so that lookups
 * never need tombstones (linear probing's backward-shift deletion). Lock held. */
static void erase(uint32_t i)
{
	uint32_t mask = mem_table.cap - 1;
	for (uint32_t j = (i + 1) & mask; mem_table.tab[j].key; j = (j + 1) & mask) {
		uint32_t home = hash(mem_table.tab[j].key) & mask;
		if (((j - home) & mask) >= ((j - i) & mask)) { /* the hole lies on j's probe path */
			mem_table.tab[i] = mem_table.tab[j];
			i = j;
		}
	}
	mem_table.tab[i].key = 0;
	mem_table.used--;
}

static void push_mem(int kind, int evkind, const struct alloc *a, uint64_t addr, uint64_t t, uint32_t flags)
{
	struct sp_event ev = { .kind = (uint8_t)evkind, .sub = (uint8_t)kind, .start = t, .end = t };
	ev.device = a->slot == SP_MEM_HOST_SLOT ? SP_NO_DEVICE : a->slot;
	ev.u.mem.addr = addr;
	ev.u.mem.size = a->size;
	ev.u.mem.live = level(a->slot)->live;
	ev.u.mem.stack = a->stack;
	ev.u.mem.flags = flags;
	sp_ring_push(&ev);
}

void sp_mem_alloc(int kind, int device, uint64_t addr, uint64_t size, uint32_t stack, uint64_t t, int record)
{
	struct alloc a = { key_of(kind, addr), size, t, stack, (uint8_t)kind, 0 };
	a.slot = is_host(kind) || device < 0 || device >= SP_MEM_HOST_SLOT ? SP_MEM_HOST_SLOT : (uint8_t)device;
	lock();
	struct level *l = level(a.slot);
	if ((mem_table.used + 1) * 2 <= mem_table.cap || grow() == 0) {
		struct alloc *s = probe(mem_table.tab, mem_table.cap, a.key);
		if (s->key) /* alive already: its free went unseen, or two sources told this block */
			level(s->slot)->live -= s->size;
		mem_table.used += !s->key;
		*s = a;
	}
	l->live += size;
	if (l->live > l->peak)
		l->peak = l->live;
	if (record)
		push_mem(kind, SP_EV_ALLOC, &a, addr, t, 0);
	unlock();
}

void sp_mem_free(int kind, uint64_t addr, uint64_t t, int record)
{
	lock();
	struct alloc *a = mem_table.cap ? probe(mem_table.tab, mem_table.cap, key_of(kind, addr)) : NULL;
	if (a && a->key) {
		struct alloc old = *a;
		erase((uint32_t)(a - mem_table.tab));
		level(old.slot)->live -= old.size;
		if (record)
			push_mem(old.kind, SP_EV_FREE, &old, addr, t, 0);
	}
	unlock();
}

void sp_mem_snapshot(uint64_t t)
{
	lock();
	for (uint32_t i = 0; i < mem_table.cap; i++) {
		struct alloc *a = &mem_table.tab[i];
		if (a->key)
			push_mem(a->kind, SP_EV_ALLOC, a, a->key & ~VMM_KEY, a->time, SP_MEMF_SNAPSHOT);
	}
	unlock();
	(void)t;
}

void sp_mem_peaks(uint64_t t)
{
	lock();
	for (unsigned s = 0; s <= SP_MEM_HOST_SLOT; s++) {
		if (!level(s)->peak)
			continue;
		struct sp_event ev = { .kind = SP_EV_ALLOC, .start = t, .end = t };
		ev.sub = s == SP_MEM_HOST_SLOT ? SP_MEM_HOST : SP_MEM_DEVICE;
		ev.device = s == SP_MEM_HOST_SLOT ? SP_NO_DEVICE : (uint16_t)s;
		ev.u.mem.live = level(s)->peak;
		ev.u.mem.flags = SP_MEMF_PEAK;
		sp_ring_push(&ev);
	}
	unlock();
}

uint32_t sp_mem_table_slots(void)
{
	lock();
	uint32_t cap = mem_table.cap;
	unlock();
	return cap;
}

uint64_t sp_mem_live(int slot)
{
	return slot >= 0 && slot <= SP_MEM_HOST_SLOT ? level((unsigned)slot)->live : 0;
}

/* The load address of the object that defines fn, or NULL. This function can't fail. */
static void *object_of(const void *fn)
{
	Dl_info info;
	return fn && dladdr(fn, &info) ? info.dli_fbase : NULL;
}

int sp_mem_glibc_object(void *(*malloc_fn)(size_t), void (*free_fn)(void *), size_t (*usable_fn)(void *))
{
	void *libc = object_of(dlsym(RTLD_DEFAULT, "gnu_get_libc_version"));
	return libc && object_of((const void *)malloc_fn) == libc && object_of((const void *)free_fn) == libc &&
	       object_of((const void *)usable_fn) == libc;
}

int sp_mem_glibc_behaviour(void *(*malloc_fn)(size_t), void (*free_fn)(void *), size_t (*usable_fn)(void *))
{
	static const size_t sizes[] = { 1, 24, 25, 100, 1000, 4000 };
	int ok = malloc_fn && free_fn && usable_fn;
	for (size_t i = 0; ok && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		/* glibc (64-bit): chunk = request + 8 rounded up to 16, at least 32; usable = chunk - 8;
		 * the size word before the block holds the chunk size and 3 flag bits, IS_MMAPPED (2)
		 * clear for blocks this small. Other allocators use size classes (usable(1) = 8 or 16). */
		size_t chunk = (sizes[i] + 8 + 15) & ~(size_t)15;
		chunk = chunk < 32 ? 32 : chunk;
		void *p = malloc_fn(sizes[i]);
		if (!p)
			return 0;
		ok = usable_fn(p) == chunk - 8;
		if (ok) { /* only now: the word before a block of another allocator may be unmapped */
			size_t word = ((const size_t *)p)[-1];
			ok = (word & ~(size_t)7) == chunk && !(word & 2);
		}
		free_fn(p);
	}
	return ok;
}
