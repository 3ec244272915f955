/* SPDX-License-Identifier: MIT */
/* hold_int.h - what the files of collector/hold/ share and nothing outside them includes:
 * cupti_life.c (subscribing, the tick, cycles), drain.c (callbacks, calls and launches in flight,
 * the detach itself) and park.c (detached until the next window, the hooks counting). */
#ifndef SP_HOLD_INT_H
#define SP_HOLD_INT_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "cupti_life.h"

#define CORR_MARGIN 65536u /* ids a racing thread may have taken beyond the last one seen */

/* The hold's own state (sp_hold holds what the inline guards read). */
#define SP_GRAPH_HOLD_NS 10000000ull /* kinds left on after a window for a graph detach: 10 ms */
#define SP_GRAPH_HOLD_WAIT_NS 1000000000ull /* ... while the tick's STAY may pass (a detach is to come): 1 s */
#define SP_GRAPH_HOLD_TRY_NS 10000000000ull /* ... while that detach is called off and tried again: 10 s */

struct sp_lifecycle {
	struct sp_cupti_hooks hooks; /* of the first attach, reused by re-attaches */
	bool dirty;                  /* an activity kind was on in this CUPTI instance */
	_Atomic bool graphs;         /* the program created a CUDA graph */
	_Atomic unsigned glaunch_hooked, glaunch_unhooked; /* graph launches CUPTI saw inside / outside a hook */
	_Atomic bool graph_tainted;  /* activity kinds went off while attached with graphs alive */
	_Atomic bool kinds_went_off; /* ... with or without graphs, in this CUPTI instance */
	uint64_t kinds_held;         /* since when the writer leaves the kinds on for a graph detach (0 not) */
	_Atomic bool stopped;        /* no more cycles: one failed or may have missed a boundary */
	_Atomic bool frozen;         /* the process exits: no detach at all any more */
	unsigned cycles;             /* detach + re-attach done */
	int64_t park_step;           /* the step it parked in */
	uint64_t park_ns;            /* when */
	_Atomic bool registered;     /* timestamp and buffer callbacks registered in this instance */
	_Atomic bool claim;          /* a thread is registering them, or did, in this instance */
	_Atomic int reg_state;       /* 0 not yet, 1 registered, -1 failed (this instance) */
	bool reg_tried;              /* the writer thread tried to register them (once an instance) */
	const char *held;            /* the last reason said for not detaching between windows */
	int64_t held_step;           /* the step it was first seen in */
	bool keep_guard;             /* a cycle: launches stay counted from its detach to its attach */
	bool said_closing;           /* sp_life_closing was said (once a run) */
	bool said_graphs;            /* sp_life_graphs was said (once a run: it holds for the run) */
	int64_t off_step;            /* the step a called-off detach was last said in */
	_Atomic uint64_t retry_ns;   /* a detach called off for a blocked launch: none before this */
	_Atomic uint64_t wanted;     /* since when a detach is to come: a STAY that may pass, or called off (0 none) */
	_Atomic bool tried;          /* ... and one was tried and called off (it is tried again) */
	const char *_Atomic off_why; /* why the last detach was called off (drain.c), NULL once not wanted */
	pthread_mutex_t park_lock;   /* parked: the writer's tick and an application thread's attach */
};
extern struct sp_lifecycle sp_lifecycle;


/* What the preload's hooks do as the hold moves (sp_cupti_life_watch; no-ops until then). */
extern const struct sp_hold_watch *sp_hold_watching;

/* Subscribes (from: the state it leaves); lazy: the activity callbacks wait for the first activity
 * kind. Returns CUPTI_SUCCESS (ATTACHED), or the failing call's result with nothing held (the
 * state unchanged). Not from inside a callback (cupti_life.c). */
CUptiResult sp_hold_attach(const struct sp_cupti_hooks *hooks, CUpti_SubscriberHandle *sub, bool lazy,
			   enum sp_hold from);
/* Detaches, for good or not: drains, flushes, unsubscribes, finalises. Returns 0 (NONE or GONE),
 * 1 if called off (ATTACHED, nothing lost), -1 if callbacks did not drain (ATTACHED, warned).
 * Writer thread (drain.c). */
int sp_hold_detach(CUpti_SubscriberHandle sub, bool for_good, uint64_t *fin_ns);
/* The tick's PARK (detach until the next window) and its tick while parked; park.c. */
enum sp_life_act sp_hold_park(int64_t step, CUpti_SubscriberHandle *sub);
enum sp_life_act sp_hold_parked_tick(struct sp_life_view *v, int64_t step, CUpti_SubscriberHandle *sub);

#endif
