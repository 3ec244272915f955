/* SPDX-License-Identifier: MIT */
/* comms.c - NCCL calls and communicator identity (called from preload/nccl.c): a table of
 * communicators with an identity equal on all their ranks and a call sequence number, NCCL
 * markers, SP_EV_NCCL and SP_EV_COMM events, and the rank an NCCL communicator gives. Owns the
 * communicator table; never calls NCCL but its query functions. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <nccl.h>
#include "collector/base/clock.h"
#include "collector.h"
#include "collector/hold/cupti_life.h"
#include "collector/base/intern.h"
#include "internal.h"
#include "collector/base/log.h"
#include "collector/stacks/stacks.h"
#include "collector/out/tokrec.h"

#define MAX_COMMS 256
#define COMM_GONE ((void *)(uintptr_t)1) /* tombstone of a destroyed communicator's slot */
/* A communicator: identity shared by all its ranks, and the call sequence number. */
struct comm {
	void *comm;             /* ncclComm_t, NULL = free slot */
	uint64_t hash;          /* FNV-1a of the unique id (INIT) or of parent hash, color and split index */
	int rank, size, device;
	uint32_t splits;        /* children split from it so far */
	atomic_uint_fast64_t seq;
};

static struct comm comms[MAX_COMMS]; /* open addressing by pointer; under sp_col.lock */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* The slot of comm (a free one if add), or NULL. Caller holds sp_col.lock. */
static struct comm *comm_slot(void *comm, int add)
{
	size_t h = ((uintptr_t)comm >> 4) % MAX_COMMS;
	for (size_t i = 0; i < MAX_COMMS; i++) {
		struct comm *c = &comms[(h + i) % MAX_COMMS];
		if (c->comm == comm)
			return c;
		if (!c->comm)
			return add ? c : NULL;
	}
	return NULL;
}

/* Fills rank, size and device from NCCL itself (split communicators learn them late). */
static void comm_query(struct comm *c)
{
	typedef ncclResult_t (*query_fn)(void *, int *);
	static query_fn user_rank, count, dev;
	if (!user_rank) {
		user_rank = (query_fn)dlsym(RTLD_DEFAULT, "ncclCommUserRank");
		count = (query_fn)dlsym(RTLD_DEFAULT, "ncclCommCount");
		dev = (query_fn)dlsym(RTLD_DEFAULT, "ncclCommCuDevice");
	}
	if (c->rank < 0 && user_rank)
		user_rank(c->comm, &c->rank);
	if (c->size < 0 && count)
		count(c->comm, &c->size);
	if (c->device < 0 && dev)
		dev(c->comm, &c->device);
}

static void push_comm(int what, const struct comm *c, uint64_t t)
{
	struct sp_event ev = { .kind = SP_EV_COMM, .sub = (uint8_t)what, .tid = sp_coll_tid(), .start = t, .end = t };
	ev.device = c->device >= 0 ? (uint16_t)c->device : SP_NO_DEVICE;
	ev.u.nccl.comm = c->hash;
	ev.u.nccl.comm_rank = c->rank;
	ev.u.nccl.comm_size = c->size;
	ev.u.nccl.peer = -1;
	sp_coll_push(&ev);
}

/* Writes an SP_EV_COMM INIT record for every live communicator (a window names them all, to be
 * read alone). Under sp_col.lock. This function can't fail. */
void sp_comms_announce(uint64_t t)
{
	for (int i = 0; i < MAX_COMMS; i++)
		if (comms[i].comm && comms[i].comm != COMM_GONE)
			push_comm(SP_COMM_INIT, &comms[i], t);
}

int sp_collector_nccl_active(void)
{
	return sp_col.active && !sp_col.disabled &&
	       atomic_load_explicit(&sp_hold.state, memory_order_relaxed) != SP_HOLD_GONE;
}

uint64_t sp_collector_nccl_begin(const struct sp_nccl_call *c)
{
	uint64_t t = sp_thr_ns(1);
	sp_thr.in_nccl = 1;
	sp_thr.nccl_corr = 0;
	if (c->op == SP_NCCL_GROUP_END && sp_thr.nccl_group > 0)
		sp_thr.nccl_group--;
	if (sp_tokrec_on)
		sp_tokrec_add(SP_TOK_NCCL, 0, sp_intern(c->fn), t - sp_col.credit, sp_coll_tid());
	for (int i = 0; i < sp_col.nmk; i++)
		if (sp_col.mk[i].kind == SP_MARK_NCCL ? sp_coll_glob(sp_col.mk[i].pattern, c->fn)
						      : (sp_stepdet_wants(sp_col.mk[i].det) & SP_WANT_NCCL) != 0)
			sp_win_detect(i, SP_TOK_NCCL, 0, sp_intern(c->fn), t, 0, 0, 0);
	return t;
}

void sp_collector_nccl_end(const struct sp_nccl_call *c, uint64_t t0, int ret)
{
	static const uint8_t dsize[12] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
	uint64_t seq = 0;
	struct comm *cm = NULL;
	sp_thr.in_nccl = 0;
	if (c->op == SP_NCCL_GROUP_START)
		sp_thr.nccl_group++;
	if (c->comm) {
		pthread_mutex_lock(&sp_col.lock);
		cm = comm_slot(c->comm, 1);
		if (cm && !cm->comm) { /* created outside the hooks: the identity is local only */
			cm->comm = c->comm;
			cm->hash = fnv1a(0xcbf29ce484222325ull, &c->comm, sizeof c->comm);
			cm->rank = cm->size = cm->device = -1;
		}
		if (cm) {
			if (cm->rank < 0 || cm->size < 0 || cm->device < 0)
				comm_query(cm);
			seq = atomic_fetch_add(&cm->seq, 1);
		}
		pthread_mutex_unlock(&sp_col.lock);
	}
	if (!sp_col.cfg.nccl || !__atomic_load_n(&sp_col.open, __ATOMIC_ACQUIRE))
		return;
	struct sp_event ev = { .kind = SP_EV_NCCL,
			       .sub = (uint8_t)c->op,
			       .device = SP_NO_DEVICE,
			       .tid = sp_coll_tid(),
			       .start = t0,
			       .end = sp_thr_ns(1), /* after t0 and its launches (a 100 ns ncclGroupEnd) */
			       .corr = sp_thr.nccl_corr,
			       .name = sp_intern(c->fn) };
	ev.u.nccl.count = c->count;
	ev.u.nccl.dtype = (uint8_t)c->dtype;
	ev.u.nccl.bytes = c->count * (c->dtype >= 0 && c->dtype < 12 ? dsize[c->dtype] : 1);
	ev.u.nccl.redop = c->redop < 0 ? 0xff : (uint8_t)c->redop;
	ev.u.nccl.peer = c->peer;
	ev.u.nccl.group_depth = (uint8_t)sp_thr.nccl_group;
	ev.u.nccl.seq = seq;
	ev.u.nccl.comm_rank = ev.u.nccl.comm_size = -1;
	if (sp_col.cfg.stacks)
		ev.u.nccl.stack = sp_stack_capture(sp_col.cfg.stack_depth, (unsigned)sp_col.cfg.stacks);
	if (cm) {
		ev.u.nccl.comm = cm->hash;
		ev.u.nccl.comm_rank = cm->rank;
		ev.u.nccl.comm_size = cm->size;
		ev.device = cm->device >= 0 ? (uint16_t)cm->device : SP_NO_DEVICE;
	}
	if (ret != 0 && ret != 7 /* ncclInProgress */)
		sp_info("%s returned %d", c->fn, ret);
	sp_coll_push(&ev);
}

void sp_collector_comm(int what, void *comm, const void *id, size_t idlen, int rank, int nranks, void *parent)
{
	if (!sp_col.active || !comm)
		return;
	uint64_t t = sp_now_ns();
	int created = what == SP_COMM_INIT || what == SP_COMM_SPLIT;
	pthread_mutex_lock(&sp_col.lock);
	struct comm *c = comm_slot(comm, created);
	if (c && created) {
		struct comm *p = what == SP_COMM_SPLIT ? comm_slot(parent, 0) : NULL;
		c->comm = comm;
		c->rank = rank;
		c->size = nranks;
		c->device = -1;
		c->splits = 0;
		atomic_store(&c->seq, 0);
		c->hash = fnv1a(0xcbf29ce484222325ull, id, idlen);
		if (p) { /* equal on every rank of the child: parent identity, split index, color */
			uint32_t k = p->splits++;
			c->hash = fnv1a(fnv1a(c->hash, &p->hash, sizeof p->hash), &k, sizeof k);
		}
		if (what == SP_COMM_INIT && rank >= 0 && !sp_col.writer_started &&
		    (sp_col.ri.rank < 0 || (!strcmp(sp_col.ri.source, "nccl") && nranks > sp_col.ri.world_size))) {
			/* no rank in the environment: the largest communicator initialised before the
			 * first window (the world's, as a rule) names it; sp_out_start_writer decides selection */
			sp_col.ri.rank = rank;
			sp_col.ri.world_size = nranks;
			sp_col.ri.source = "nccl";
			sp_info("rank %d of %d from an NCCL communicator", rank, nranks);
		}
		if (sp_col.writer_started > 0)
			push_comm(what, c, t);
	} else if (c) {
		push_comm(what, c, t);
		c->comm = COMM_GONE;
	}
	pthread_mutex_unlock(&sp_col.lock);
}
