/* SPDX-License-Identifier: MIT */
/* evheap.h - a binary min-heap of events in an array, ordered by the caller's less(): what the
 * readers' passes by start (windows_pass.c, memtl.c) use to put a file's events in time order. */
#ifndef SP_EVHEAP_H
#define SP_EVHEAP_H
#include <stddef.h>
#include <stdint.h>
#include "trace/event.h"

/* A heap entry: the event and its place in file order (the tie-break). */
struct sp_hent {
	struct sp_event e;
	uint64_t seq;
};

typedef int (*sp_hless_fn)(const struct sp_hent *a, const struct sp_hent *b);

/* Moves h[i], just placed at the end, up to its place among h[0..i]. This function can't fail. */
void sp_evheap_up(struct sp_hent *h, size_t i, sp_hless_fn less);

/* Takes the first of h[0..*n) off the heap (*n > 0) and returns it. This function can't fail. */
struct sp_hent sp_evheap_pop(struct sp_hent *h, size_t *n, sp_hless_fn less);

#endif
