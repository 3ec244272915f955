/* SPDX-License-Identifier: MIT */
/* cupti_share_int.h - inside the CUPTI sharing module only (cupti_share.c: the wants and the
 * program's calls; cupti_share_records.c: the program's activity records and its clock). The
 * module's globals and the helpers one file gives the other; nothing else includes this. */
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

/* The module's globals (defined in cupti_share.c); both files call them S. */
extern struct share_globals sp_share_S;
#define S sp_share_S

/* Where the timestamps of the record kinds the program may get sit (first = the one compared
 * with the program's enabled stretch); n 0: a kind that is not passed on (unknown layout). */
struct stamps {
	uint8_t n;
	uint16_t off[5];
};

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

#endif
