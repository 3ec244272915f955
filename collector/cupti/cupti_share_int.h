/* SPDX-License-Identifier: MIT */
/* cupti_share_int.h - inside the CUPTI sharing module only (cupti_share.c: what each side wants
 * and the callbacks; cupti_share_prog.c: the program's calls and the hand-over;
 * cupti_share_records.c: the program's activity records and its clock). The module's globals and
 * the helpers one file gives the others; nothing else includes this. */
#ifndef SP_CUPTI_SHARE_INT_H
#define SP_CUPTI_SHARE_INT_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cupti_api.h"
#include "collector/internal.h"

#define NDOM CUPTI_CB_DOMAIN_SIZE
#define NKIND CUPTI_ACTIVITY_KIND_COUNT

/* Who wants a callback or a kind. */
enum { SIDE_SP = 1, SIDE_PROG = 2 };

/* The real entry points for stepprof's own calls (sp_cupti's table before sp_share_install). */
struct real_fns {
	__typeof__(cuptiEnableCallback) *enable_cb;
	__typeof__(cuptiEnableDomain) *enable_domain;
	__typeof__(cuptiActivityEnable) *act_enable;
	__typeof__(cuptiActivityDisable) *act_disable;
	__typeof__(cuptiUnsubscribe) *unsubscribe;
	__typeof__(cuptiFinalize) *finalize;
};

struct share_globals {
	pthread_mutex_t lock;             /* wants and the real enable calls that follow them */
	struct real_fns real;             /* set once by sp_share_install */
	_Atomic bool installed;           /* sp_share_install ran */
	uint8_t all[NDOM];                /* SIDE_* bits: whole domain enabled */
	uint8_t cb[NDOM][SP_CBID_MAX];    /* SIDE_* bits: one callback id enabled */
	uint8_t kind[NKIND];              /* SIDE_* bits: activity kind enabled */
	bool sp_kind_ever[NKIND];         /* stepprof enabled this kind at some point */
	/* what the program asked for, attached or not (the bits above: what CUPTI holds for it now) */
	uint8_t prog_all[NDOM];           /* whole domain */
	uint8_t prog_cb[NDOM][SP_CBID_MAX]; /* one callback id */
	uint8_t prog_kind[NKIND];         /* activity kind */
	_Atomic bool prog_api;            /* ... a callback outside the resource domain: it needs CUPTI now */
	/* after stepprof let go of CUPTI for good: the program's own subscription (cupti_share_prog.c) */
	bool handed;                      /* handed over (under lock) */
	CUpti_SubscriberHandle real_sub;  /* its real handle, the program's calls with FAKE go there */
	uint64_t on_at[NKIND], off_at[NKIND]; /* program's last enable / disable of a kind (trace clock; off 0 = on) */
	/* the program's profiler */
	_Atomic(CUpti_CallbackFunc) cb_fn; /* its subscriber callback, NULL if not subscribed */
	void *ud; /* its userdata */
	CUpti_BuffersCallbackRequestFunc req; /* its buffer callbacks (under buf_lock) */
	CUpti_BuffersCallbackCompleteFunc comp;
	_Atomic(CUpti_TimestampCallbackFunc) ts; /* its clock, NULL: CUPTI's default (CLOCK_REALTIME) */
	_Atomic int nkinds; /* kinds the program has on */
	_Atomic bool ever_on; /* the program enabled an activity kind at some point */
	/* its clock against the trace clock: p = p1 + (m - m1) * rate (under buf_lock) */
	uint64_t m0, p0, m1, p1;
	double rate;
	bool have0;
	/* the program's buffer being filled (under buf_lock) */
	pthread_mutex_t buf_lock;
	uint8_t *pbuf;
	size_t psize, pused;
	CUcontext pctx;
	uint32_t pstream;
	/* counts (for the messages) */
	_Atomic uint64_t passed, withheld, callbacks;
	_Atomic bool said; /* the "program subscribed" line was printed */
};

/* The module's globals (defined in cupti_share.c). */
extern struct share_globals sp_share;

/* Where the timestamps of the record kinds the program may get sit (first = the one compared
 * with the program's enabled stretch); n 0: a kind that is not passed on (unknown layout). */
struct stamps {
	uint8_t n;
	uint16_t off[5];
};

/* The handle the program gets from cuptiSubscribe while stepprof serves it (compared only). */
extern char sp_share_fake_handle;
#define FAKE ((CUpti_SubscriberHandle) & sp_share_fake_handle)

/* ---- cupti_share.c: what each side wants ---- */
/* One side's change to one callback id (cbid) or a whole domain (all), made real; caller holds
 * sp_share.lock and is inside the hold. Returns the real call's result. */
CUptiResult sp_share_set_cb(int side, uint32_t on, CUpti_SubscriberHandle sub, unsigned d, unsigned cbid, bool all);
/* One side's change to an activity kind, made real; caller holds sp_share.lock, inside the hold. */
CUptiResult sp_share_set_kind(int side, CUpti_ActivityKind k, int on);
/* Notes a change of the program's callback wants (prog_all, prog_cb): prog_api. Caller holds
 * sp_share.lock. This function can't fail. */
void sp_share_note_wants(void);

/* ---- cupti_share_records.c ---- */
/* The timestamp layout of record kind k (n 0: unknown). This function can't fail. */
struct stamps sp_share_stamps_of(unsigned k);
/* The program's clock now: its timestamp callback, or CLOCK_REALTIME as CUPTI's default. */
uint64_t sp_share_program_now(void);
/* One pair (trace clock, program clock) read close together. This function can't fail. */
void sp_share_sample(uint64_t *m, uint64_t *p);
/* Hands the program's buffer being filled to its bufferCompleted; caller holds buf_lock.
 * This function can't fail. */
void sp_share_complete_pending(void);
/* While the program has an activity kind on, keeps one of its buffers out, as Kineto flushes only then
 * (docs/OUTPUTS.md). Caller holds buf_lock. This function can't fail (a program that gives none gets none). */
void sp_share_hold_buffer(void);

#endif
