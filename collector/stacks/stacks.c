/* SPDX-License-Identifier: MIT */
/* stacks.c - see stacks.h. Stacks live in an mmap'ed, append-only arena (no malloc: captures run
 * inside malloc hooks) and are found again through an open-addressing hash of their frames.
 * Lookups by id are lock-free (ids index an array published with release stores); inserts take a
 * mutex. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include "config/config.h"
#include "trace/trace.h"
#include "pystack.h"
#include "stacks.h"

#define MAX_STACKS (1u << 20)          /* ids; the arena and table are sized for this many */
#define ARENA_BYTES (256ull << 20)     /* frames of all stacks (reserved, touched as used) */
#define TABLE_SLOTS (1u << 21)

struct stack {
	uint32_t n;
	uint64_t pcs[];
};

static struct {
	pthread_mutex_t lock;          /* inserts */
	pthread_once_t once;
	int ready;       /* arena and tables mapped */
	uint8_t *arena;                /* append-only frames */
	size_t used;
	_Atomic(struct stack *) *byid; /* id -> stack */
	uint32_t *table;               /* hash slot -> id, 0 empty */
	atomic_uint count;             /* ids handed out */
	struct {
		uintptr_t lo, hi;
	} skip[8]; /* our own, libcupti's and libcuda's text */
	int nskip;
} stack_table = { .lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

static __thread int busy;             /* re-entrancy guard */

static int find_skip(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *n = info->dlpi_name ? info->dlpi_name : "";
	if (!(strstr(n, "libstepprof") || strstr(n, "libcupti") || strstr(n, "libcuda.so")) || stack_table.nskip >= 8)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			stack_table.skip[stack_table.nskip].lo = info->dlpi_addr + ph->p_vaddr;
			stack_table.skip[stack_table.nskip].hi = stack_table.skip[stack_table.nskip].lo + ph->p_memsz;
			stack_table.nskip++;
			break;
		}
	}
	return 0;
}

static void setup(void)
{
	void *a = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	void *b = mmap(NULL, MAX_STACKS * sizeof(*stack_table.byid), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	void *t = mmap(NULL, TABLE_SLOTS * sizeof(uint32_t), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (a == MAP_FAILED || b == MAP_FAILED || t == MAP_FAILED)
		return;
	stack_table.arena = a;
	stack_table.byid = b;
	stack_table.table = t;
	dl_iterate_phdr(find_skip, NULL);
	stack_table.ready = 1;
}

static int skipped(uintptr_t pc)
{
	for (int i = 0; i < stack_table.nskip; i++)
		if (pc >= stack_table.skip[i].lo && pc < stack_table.skip[i].hi)
			return 1;
	return 0;
}

static uint64_t hash_frames(const uint64_t *pcs, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ pcs[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

uint32_t sp_stack_capture(int depth, unsigned what)
{
	void *raw[SP_STACK_MAX + 16];
	uint64_t native[SP_STACK_MAX], merged[SP_STACK_MERGED], *pcs = native;
	uint32_t py[SP_PY_MAX];
	uint8_t entry[SP_PY_MAX], is_eval[SP_STACK_MAX];
	uint32_t n = 0, id = 0;
	int np = 0, borrowed = 0;
	if (busy)
		return 0;
	busy = 1;
	pthread_once(&stack_table.once, setup);
	if (!stack_table.ready)
		goto out;
	if (depth < 1 || depth > SP_STACK_MAX)
		depth = SP_STACK_MAX;
	if (what & SP_STACKS_PYTHON) {
		np = sp_pystack_walk(py, entry, depth < SP_PY_MAX ? depth : SP_PY_MAX);
		if (np == 0) /* an autograd thread: the frames of the thread waiting in backward() */
			borrowed = np = sp_pystack_borrow(py, depth < SP_PY_MAX ? depth : SP_PY_MAX);
	}
	int fallback = what & SP_STACK_NATIVE_FALLBACK, native_depth = depth;
	if (!(what & SP_STACKS_NATIVE) && fallback && np > 0 && depth > SP_STACK_SITE_FRAMES)
		native_depth = SP_STACK_SITE_FRAMES; /* an allocation's site: which library */
	int native_too = (what & SP_STACKS_NATIVE) || fallback;
	int got = native_too ? unw_backtrace(raw, native_depth + 16) : 0;
	for (int i = 0; i < got && n < (uint32_t)native_depth; i++) {
		if (n == 0 && skipped((uintptr_t)raw[i]))
			continue; /* our frames, CUPTI's and the driver's at the top */
		native[n++] = (uint64_t)(uintptr_t)raw[i];
	}
	if (borrowed > 0) { /* its own native frames, the mark, the borrowed Python frames */
		memcpy(merged, native, n * sizeof(*native));
		merged[n++] = SP_FRAME_BACKWARD;
		for (int i = 0; i < borrowed && n < SP_STACK_MERGED; i++)
			merged[n++] = SP_PYFRAME_TAG | py[i];
		pcs = merged;
	} else if (np > 0) {
		for (uint32_t i = 0; i < n; i++)
			is_eval[i] = (uint8_t)sp_pystack_is_eval(native[i]);
		n = sp_pystack_merge(native, is_eval, n, py, entry, (uint32_t)np, merged, SP_STACK_MERGED);
		pcs = merged;
	}
	if (!n)
		goto out;
	uint64_t h = hash_frames(pcs, n);
	pthread_mutex_lock(&stack_table.lock);
	for (uint32_t k = 0; k < TABLE_SLOTS; k++) {
		uint32_t *slot = &stack_table.table[(h + k) & (TABLE_SLOTS - 1)];
		if (*slot) {
			struct stack *s = atomic_load_explicit(&stack_table.byid[*slot], memory_order_relaxed);
			if (s->n == n && !memcmp(s->pcs, pcs, n * sizeof(*pcs))) {
				id = *slot;
				break;
			}
			continue;
		}
		size_t need = sizeof(struct stack) + n * sizeof(uint64_t);
		uint32_t next = atomic_load(&stack_table.count) + 1;
		if (next >= MAX_STACKS || stack_table.used + need > ARENA_BYTES)
			break; /* full: stacks are dropped from here on (id 0) */
		struct stack *s = (struct stack *)(stack_table.arena + stack_table.used);
		stack_table.used += (need + 7) & ~(size_t)7;
		s->n = n;
		memcpy(s->pcs, pcs, n * sizeof(*pcs));
		atomic_store_explicit(&stack_table.byid[next], s, memory_order_release);
		atomic_store(&stack_table.count, next);
		*slot = id = next;
		break;
	}
	pthread_mutex_unlock(&stack_table.lock);
out:
	busy = 0;
	return id;
}

const uint64_t *sp_stack_lookup(void *ctx, uint32_t id, uint32_t *n)
{
	if (!stack_table.ready || !id || id > atomic_load(&stack_table.count))
		return NULL;
	struct stack *s = atomic_load_explicit(&stack_table.byid[id], memory_order_acquire);
	if (!s)
		return NULL;
	*n = s->n;
	return s->pcs;
}
