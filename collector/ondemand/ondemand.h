/* SPDX-License-Identifier: MIT */
/* ondemand.h - windows the schedule did not ask for: `stepprof trigger` requests read from control files by a
 * polling thread, and [ondemand] delay_ms/duration_ms; re-attaches to CUPTI if needed. Never blocks the program. */
#ifndef SP_ONDEMAND_H
#define SP_ONDEMAND_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <stdint.h>
#include "config/schedule.h"

/* The action of step `step`: an on-demand request's steps record (the last one saves, unless a
 * scheduled window goes on through it), a time range records all along, else the schedule's. A request waiting for its first step takes the
 * first step asked about after the current one. Under sp_col.lock. This function can't fail. */
enum sp_action sp_od_action(int64_t step);
/* 1 while a request or a time range still wants steps or time (the collector is not done), else 0.
 * Under sp_col.lock. This function can't fail. */
int sp_od_busy(void);
/* A window opens (id, at step): returns its origin (SP_WIN_* of trace/event.h, with
 * SP_WIN_UNCOUNTED when steps went uncounted while detached). Under sp_col.lock. Can't fail. */
uint8_t sp_od_window_origin(uint32_t id, int64_t step);
/* Starts the polling thread (all signals blocked) if [ondemand] asks for triggers or a time
 * range. After a successful CUPTI attach. Returns 0, or -1 (warned once; no on-demand windows). */
int sp_od_start(void);
/* At exit, before the last window closes: stops and joins the thread and says in the status file
 * what became of a pending request. Idempotent. This function can't fail. */
void sp_od_stop(void);

#endif
