/* SPDX-License-Identifier: MIT */
/* intern.h - process-wide string interning: kernel, API and marker names become small ids that
 * events carry. Append-only and thread-safe; ids start at 1 and are never reused. */
#ifndef SP_INTERN_H
#define SP_INTERN_H

#include <stdint.h>

/* Returns the id of s (copied on first sight), or 0 if s is NULL or memory ran out.
 * Safe on any thread, including CUPTI's; takes a lock only on a miss of the table. */
uint32_t sp_intern(const char *s);
/* The string behind id, or NULL if id is unknown. Lock-free; the pointer stays valid. */
const char *sp_intern_lookup(uint32_t id);
/* Number of ids handed out so far. */
uint32_t sp_intern_count(void);

#endif
