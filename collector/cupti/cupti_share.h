/* SPDX-License-Identifier: MIT */
/* cupti_share.h - sharing CUPTI's one subscriber slot with a profiler inside the program (Kineto...): stepprof
 * stays subscribed and serves the program's callbacks and activity records as CUPTI would (preload/cupti.c
 * forwards here). Never decides what stepprof records; never fails the program's calls. */
#ifndef SP_CUPTI_SHARE_H
#define SP_CUPTI_SHARE_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <stdint.h>
#include <cupti.h>
#include "collector/collector.h"

/* The program's side (sp_share_subscribe...) is in collector/collector.h: preload/cupti.c calls it. */

/* ---- the collector's side ---- */
/* After sp_cupti_load: routes stepprof's own enable/disable/unsubscribe/finalize calls through
 * this module (sp_cupti's table), so that CUPTI always holds the union of both sides' wishes.
 * This function can't fail. */
void sp_share_install(void);
/* The subscriber callback and buffer-completed callback stepprof registers: they call stepprof's
 * (callbacks.c, activity.c) and the program's. armed wraps the hook that runs after each
 * (re)subscription: stepprof's, then what the program had enabled. */
void CUPTIAPI sp_share_on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data);
void CUPTIAPI sp_share_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid);
void sp_share_armed(void);
/* 1 while the program's profiler needs CUPTI now through stepprof (an activity kind, records not
 * yet handed over, callbacks outside the resource domain): stepprof must not detach. A
 * subscription with resource callbacks alone does not hold it. Can't fail. */
int sp_share_busy(void);
/* After a detach for good, with no stepprof lock held: a program holding a subscription or kind gets CUPTI
 * itself; one that only registered callbacks gets them at its next CUPTI call. Can't fail (warned). */
void sp_share_detached(void);

#endif
