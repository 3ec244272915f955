/* SPDX-License-Identifier: MIT */
/* ring.h - per-thread lock-free rings: each producing thread owns one single-producer
 * single-consumer ring of sp_event slots; the writer thread is the one consumer. A full ring
 * drops the event and counts it; producers never block, lock or allocate after their first push. */
#ifndef SP_RING_H
#define SP_RING_H

#include <stdint.h>
#include "trace/event.h"

/* Sets the slot count of rings created from now on (rounded up to a power of two, min 64).
 * Call before the first push. This function can't fail. */
void sp_ring_configure(uint32_t slots);
/* Pushes ev into the calling thread's ring (created on first use). Returns 0, or -1 if the
 * event was dropped (ring full or no memory): the loss is counted. Async-signal-unsafe. */
int sp_ring_push(const struct sp_event *ev);
/* Consumer side (one thread only): hands every queued event of every ring to fn in per-ring
 * FIFO order, and frees rings whose threads have exited once they are empty.
 * Returns the number of events handed over. */
typedef void (*sp_ring_fn)(void *ctx, const struct sp_event *ev);
uint64_t sp_ring_drain(sp_ring_fn fn, void *ctx);
/* Events dropped so far because a ring was full (all threads). This function can't fail. */
uint64_t sp_ring_dropped(void);
/* Events pushed so far (all threads), dropped ones included. This function can't fail. */
uint64_t sp_ring_pushed(void);
/* Rings currently registered (live threads plus exited ones not yet drained and freed). */
uint32_t sp_ring_count(void);
/* For a fork child: later pushes are dropped silently (not counted) and no ring inherited from
 * the parent is touched again. Permanent. This function can't fail. */
void sp_ring_disable_all(void);

#endif
