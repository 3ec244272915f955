/* SPDX-License-Identifier: MIT */
/* learn.h - inside the learner (autostep.h): reading its ring of tokens, and what the period
 * search (period.c) and the wrap search (wrap.c) ask of each other. Internal to decide/. */
#ifndef SP_LEARN_H
#define SP_LEARN_H

#include <stdint.h>
#include "autostep.h"

/* The token at ring position i (one of the newest cap). */
static inline uint32_t sp_learn_at(const struct sp_autostep *a, uint64_t i)
{
	return a->tok[i & (a->cap - 1)];
}

/* Its stored time. */
static inline uint64_t sp_learn_ts(const struct sp_autostep *a, uint64_t i)
{
	return a->ts[i & (a->cap - 1)];
}

/* The median of three. */
static inline uint64_t sp_learn_median3(uint64_t x, uint64_t y, uint64_t z)
{
	uint64_t lo = x < y ? x : y, hi = x < y ? y : x;
	return z < lo ? lo : z > hi ? hi : z;
}

/* The oldest position still in the ring. */
static inline uint64_t sp_learn_first(const struct sp_autostep *a)
{
	return a->n > a->cap ? a->n - a->cap : 0;
}

/* period.c: length of the periodic run with distance d that ends at the newest token (bounded by
 * the ring from `first`). */
uint64_t sp_learn_run_length(const struct sp_autostep *a, uint64_t first, uint64_t d);

/* wrap.c: 1 if the newest period of length p holds a synchronisation that the next token does not
 * continue (cyclic within the period), else 0. */
int sp_learn_has_sync_end(const struct sp_autostep *a, uint32_t p);
/* wrap.c: where period p wraps by its CPU gaps: 1 if the largest gap (median of three copies)
 * stands out (gap_ratio, min_wrap_ns), with the position after it in [n - p, n) in *pos; else 0
 * (*pos is then the largest gap's position anyway). */
int sp_learn_wrap_position(struct sp_autostep *a, uint32_t p, uint64_t *pos);
/* wrap.c: 1 with the newest graph launch of the newest period p in *pos, else 0. */
int sp_learn_graph_position(const struct sp_autostep *a, uint32_t p, uint64_t *pos);
/* wrap.c: locks the learner on proven period p (the boundary, its anchor and count, a block lock
 * when the period is several iterations read once). This function can't fail. */
void sp_learn_lock(struct sp_autostep *a, uint32_t p);

#endif
