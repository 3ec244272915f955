/* SPDX-License-Identifier: MIT */
/* markhook.h - marker calls counted by the preload's hooks instead of CUPTI, so stepprof can park between
 * windows and still number every step. Relied on only once proven against CUPTI (docs/ARCHITECTURE.md);
 * each call is counted once, where it entered. */
#ifndef SP_MARKHOOK_H
#define SP_MARKHOOK_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <stdbool.h>

#define SP_HOOK_PROOF 8

/* Which hooked functions matter for this process's marker ([marker] kind = api, no phases).
 * Init, once, after the markers are set up. */
void sp_hook_arm(void);
/* CUPTI reports the outermost call of an api marker on this thread: returns 1 if a hook counted
 * it already (the callback must not), else 0; notes whether it came through a hook (the proof),
 * except once the hooks are disarmed (sp_hook_disarm: they watch nothing then). */
int sp_hook_cupti_marker(void);
/* Automatic detection: the hooks follow the anchor call `anchor` (interned; 0 none), armed as an api marker's
 * and proven anew when it changes. Writer thread, attached. Returns the hooked function's index, or -1. */
int sp_hook_follow(uint32_t anchor);
/* CUPTI reports an automatic-detection token `name` (outermost): as sp_hook_cupti_marker if it is
 * the anchor the hooks follow (1: a hook counted it already), else 0. */
int sp_hook_cupti_anchor(uint32_t name);
struct sp_life_view;
struct sp_stepdet;
/* The writer's life tick for the single automatic marker, under sp_col.lock: fills v->det_busy, maps *step
 * to the schedule's, follows the anchor, blinds the detector before a park. Returns 0 for any other marker. */
int sp_auto_life(struct sp_life_view *v, struct sp_stepdet *det, int64_t *step);
/* After the tick (without sp_col.lock): the detector is blind exactly while parked (act: enum
 * sp_life_act). This function can't fail. */
void sp_auto_life_after(const struct sp_life_view *v, struct sp_stepdet *det, int act);
/* The end of the marker call that sp_hook_cupti_marker reported (its outermost CUPTI exit on this
 * thread): a call no hook saw is proven by exactly one nested driver call (hookfns.h
 * SP_HOOK_NESTED) seen by the hooks in between. Can't fail. */
void sp_hook_cupti_marker_end(void);
/* The hooks have seen every marker call CUPTI reported, SP_HOOK_PROOF of them at least. */
bool sp_hook_proven(void);
/* The hooks count marker calls from now on (1, before a detach) or no longer (0, after a re-attach). */
void sp_hook_count(int on);
/* A marker call waits for CUPTI: its step is the last before a window (writer thread: re-attach now). */
bool sp_hook_need_attach(void);
/* A CUDA graph was captured or created while the hooks counted (once; clears it). */
bool sp_hook_graph_made(void);
/* Nothing to count any more (the schedule is done): the hooks cost one load again. */
void sp_hook_disarm(void);
/* What the hooks do as the hold on CUPTI moves (cupti_life.h sp_cupti_life_watch). */
extern const struct sp_hold_watch sp_hook_watch;

#endif
