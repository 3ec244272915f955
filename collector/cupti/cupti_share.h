/* SPDX-License-Identifier: MIT */
/* cupti_share.h - sharing CUPTI with a profiler inside the program (torch.profiler/Kineto, another
 * tool). CUPTI 13.0 allows one subscriber: stepprof stays it, and serves the program's profiler
 * as CUPTI would: the program's callback gets the callbacks it enabled, its buffer callbacks get
 * copies of the activity records of the kinds it enabled, stamped with its own clock. The hooks
 * (preload/cupti.c) forward here; the collector installs the dispatching callbacks. Never decides
 * what stepprof records and never fails the program's calls for stepprof's sake. */
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
/* After a detach for good (the writer's tick, or an application thread's before the first
 * window): a program that holds a subscription or an activity kind through stepprof gets CUPTI
 * itself (its own subscription, callbacks and kinds, its buffer and clock callbacks); one that
 * only registered callbacks gets them at its next CUPTI call. No locks of stepprof's held. Can't
 * fail (warned). */
void sp_share_detached(void);

#endif
