/* SPDX-License-Identifier: MIT */
/* memory.h - live memory accounting from process start: every device allocation and, when asked, host ones
 * above a size, with absolute levels; events pushed only inside windows. Never mallocs (runs in malloc hooks). */
#ifndef SP_MEMORY_H
#define SP_MEMORY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SP_MEM_HOST_SLOT 64 /* accounting slot of host memory (device slots are 0..63) */

/* Nonzero while the calling thread allocates for stepprof itself: the malloc hooks leave such calls out.
 * Set and restore around the allocation. volatile, or the compiler drops the store before malloc as dead. */
extern __thread volatile int sp_mem_self;

/* Records an allocation of size bytes at addr (kind = enum sp_mem_kind; device ordinal, or -1
 * for host kinds). record: also push an SP_EV_ALLOC event. This function can't fail (an
 * allocation the table cannot hold is counted in the level but not remembered). */
void sp_mem_alloc(int kind, int device, uint64_t addr, uint64_t size, uint32_t stack, uint64_t t, int record);
/* Records the release of addr (kind as at allocation; VMM handles and pointers are kept apart).
 * Unknown addresses change nothing. record: also push an SP_EV_FREE event. */
void sp_mem_free(int kind, uint64_t addr, uint64_t t, int record);
/* The free filter for allocators other than glibc (whose chunk size before each block serves
 * instead, preload/malloc.c): host blocks ever recorded, one bit per address hash, set by the
 * malloc hooks through sp_mem_host_mark and never cleared (a stale bit only costs a table
 * lookup). Read through sp_mem_host_maybe. */
extern _Atomic uint64_t sp_mem_host_seen[1u << 14];

static inline uint32_t sp_mem_seen_bit(uint64_t addr)
{
	return (uint32_t)((addr >> 4) ^ (addr >> 24)) & ((1u << 20) - 1);
}

/* 0 if addr was certainly never recorded as a host allocation (a lock-free bitmap test, inlined
 * into the free() hook, that lets releases of small blocks skip everything else), 1 if it may
 * have been. This function can't fail. */
static inline int sp_mem_host_maybe(uint64_t addr)
{
	uint32_t b = sp_mem_seen_bit(addr);
	return (atomic_load_explicit(&sp_mem_host_seen[b >> 6], memory_order_relaxed) >> (b & 63)) & 1;
}

/* Sets addr's bit, if it is not set already (as a rule it is: a program's blocks reuse
 * addresses, and the line then stays shared between cores). This function can't fail. */
static inline void sp_mem_host_mark(uint64_t addr)
{
	uint32_t b = sp_mem_seen_bit(addr);
	if (!sp_mem_host_maybe(addr))
		atomic_fetch_or_explicit(&sp_mem_host_seen[b >> 6], 1ull << (b & 63), memory_order_relaxed);
}
/* Whether the allocator behind malloc_fn, free_fn and usable_fn is glibc's (a chunk size before each block),
 * judged by what the functions are (_object: defined with gnu_get_libc_version) and do (_behaviour: the
 * chunk layout), never by name. Each returns 1 or 0; may allocate through malloc_fn. */
int sp_mem_glibc_object(void *(*malloc_fn)(size_t), void (*free_fn)(void *), size_t (*usable_fn)(void *));
int sp_mem_glibc_behaviour(void *(*malloc_fn)(size_t), void (*free_fn)(void *), size_t (*usable_fn)(void *));
/* At a window's start: pushes one SNAPSHOT ALLOC per live allocation. */
void sp_mem_snapshot(uint64_t t);
/* At a window's end: pushes one PEAK ALLOC per device (and host) with the highest level so far. */
void sp_mem_peaks(uint64_t t);
/* Slots in the table of live allocations (it grows with live blocks, not with churn). This
 * function can't fail. */
uint32_t sp_mem_table_slots(void);
/* Current live bytes of a slot (device 0..63, SP_MEM_HOST_SLOT). */
uint64_t sp_mem_live(int slot);

#endif
