/* SPDX-License-Identifier: MIT */
/* memtl_impl.h - inside the memory timeline only (memtl.c reads and settles the windows' stretches
 * and passes over their allocations; memtl_build.c builds a window's timeline from the passes): the
 * reader's state and what both use. Never include it elsewhere. */
#ifndef SP_MEMTL_IMPL_H
#define SP_MEMTL_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include "memtl.h"
#include "util.h"

#define MAX_DEVICES 64
#define CP_EVERY 1024 /* allocations and frees per checkpoint of their running maximum start */

/* Key of a live allocation: device and address; VMM handles are kept apart from pointers. */
struct key {
	uint64_t addr;
	uint32_t dev;           /* device | 0x10000 for VMM handles */
};

/* An allocation alive at the point a pass is at (or a snapshot key seen): open addressing by key,
 * linear probing, deletion by moving back the entries after it. */
struct live {
	struct key k;
	int used;
	int at_peak;            /* alive at its series' peak */
	int owner;              /* SP_OWNER_* (with a sym) */
	size_t index;           /* its place among the window's allocations (sp_memtl_alloc order) */
	struct sp_memtl_alloc a;
};
struct lmap {
	struct live *slot;
	size_t cap, n;
};

/* An allocation kept for the output, with its place. */
struct kept {
	size_t index;
	struct sp_memtl_alloc a;
};

/* A series' points being thinned as they come (the rule of the page: past SP_MEMTL_MAX_POINTS,
 * each of SP_MEMTL_MAX_POINTS / 2 time buckets keeps its highest point and its last). */
struct thin {
	int on;                 /* more than SP_MEMTL_MAX_POINTS points: thinning */
	struct sp_memtl_point pend; /* the point whose successor says if it ends its bucket */
	size_t pend_i;          /* its place (0: none) */
	struct sp_memtl_point hi; /* the highest point of the bucket so far */
	size_t hi_i;            /* its place (0: none) */
	size_t cap;             /* of the series' pt */
	struct kept *peak;      /* the allocations alive at its peak, as they end */
	size_t npeak, peak_cap;
	uint64_t owner_level[SP_OWNER__N]; /* bytes alive per owner where the live pass is */
};

struct sp_memtl_reader {
	struct sp_trace_reader *r;
	struct sp_sym *sym;
	uint32_t devname[MAX_DEVICES]; /* string ids of SP_EV_DEVICE names, 0 none */
	struct sp_event *held;  /* SNAPSHOT, PEAK and STEP records read since the open window began */
	size_t nheld, heldcap;
	size_t end_at;          /* held index at which the open window's END was read, or SIZE_MAX */
	int have_cur;           /* a window is open (its BEGIN was read) */
	struct sp_memtl cur;    /* its header fields only */
	/* its allocations and frees: those kept from the stretch before, then the stretch's in the file */
	struct sp_event *carried;
	size_t ncarried, carried_cap;
	struct sp_event *next_carried; /* what the stretch read last keeps for the next window */
	size_t nnext_carried;
	struct sp_trace_pos pos; /* the stretch: records from pos */
	uint64_t nrec;          /* records in it */
	uint64_t nplain;        /* allocations and frees (carried and in the stretch) */
	uint64_t runmax;        /* their running maximum start ... */
	uint64_t *cp;           /* ... at the end of each CP_EVERY of them */
	size_t ncp, cp_cap;
	uint64_t reorder;       /* the most of them one comes after that start after it */
	struct sp_event *snap, *peak, *steps; /* the settled window's held records */
	size_t nsnap, npeak, nsteps, snapcap, peakcap, stepscap;
	struct lmap keys;       /* snapshot keys while settling, then the live set of a pass */
	struct thin *thin;      /* per series of out (same order) */
	size_t thin_cap;
	struct kept *top;       /* the largest allocations ended so far (a min-heap by size, place) */
	size_t ntop, top_cap;
	size_t nalloc;          /* allocations numbered so far in the pass */
	uint8_t *owner_of;      /* by stack index: its owner + 1, 0 not known yet */
	size_t owner_cap;
	struct sp_memtl out;    /* the window handed out */
	int done, rc;
	uint64_t anchor_mono, anchor_real; /* the latest clock pair read (the header's at first) */
};

typedef void (*plain_fn)(struct sp_memtl_reader *m, void *ctx, const struct sp_event *e);

/* ---- memtl.c ---- */
struct key sp_memtl_key_of(const struct sp_event *e);
/* The live map: the entry of k or NULL / the entry of k, added (zeroed but its key) if absent
 * (exits if memory runs out) / removes entry x / empties it. */
struct live *sp_memtl_lmap_get(const struct lmap *m, struct key k);
struct live *sp_memtl_lmap_put(struct lmap *m, struct key k);
void sp_memtl_lmap_del(struct lmap *m, struct live *x);
void sp_memtl_lmap_clear(struct lmap *m);
/* A pass over the open window's allocations and frees (start in [t0, t1], the span settled) by
 * start, then file order: fn(m, ctx, e) for each. With next, the records kept for the next window
 * (not this one's, starting at or after next's start) go to next_carried. Exits if memory runs
 * out. */
void sp_memtl_pass(struct sp_memtl_reader *m, uint64_t t0, uint64_t t1, const struct sp_memtl *next, plain_fn fn,
		   void *ctx);

/* ---- memtl_build.c ---- */
/* Builds m->out from the settled window (its held records settled; t1 the span its records were
 * settled by; next the window after, NULL at the end). Exits if memory runs out. */
void sp_memtl_build(struct sp_memtl_reader *m, uint64_t t1, const struct sp_memtl *next);
/* Frees the window handed out before. Can't fail. */
void sp_memtl_out_free(struct sp_memtl_reader *m);

/* ---- memtl_owner.c ---- */
/* Per owner of series k, as the live pass goes (with m->sym): allocation x born (its owner set),
 * freed, alive at the series' peak. Each exits the CLI if memory runs out. */
void sp_memtl_owner_born(struct sp_memtl_reader *m, struct live *x, size_t k);
void sp_memtl_owner_freed(struct sp_memtl_reader *m, const struct live *x, size_t k);
void sp_memtl_owner_at_peak(struct sp_memtl_reader *m, const struct live *x, size_t k);

#endif
