/* SPDX-License-Identifier: MIT */
/* hooklearn.h - automatic detection learning from the preload's hooks while not subscribed ([marker] learn =
 * hooks): launches, hooked calls and NCCL calls are its tokens until it locks, then CUPTI attaches on that
 * thread; afterwards every launch CUPTI reports must have come through a hook. Never touches CUPTI. */
#ifndef SP_HOOKLEARN_H
#define SP_HOOKLEARN_H
#ifdef SP_PURE
#error "a CUPTI-side collector header in pure code (a pure room, the CLI or a test): see docs/ARCHITECTURE.md"
#endif

#include <stdbool.h>

/* Whether this process starts learning from the hooks (the configuration allows it and needs
 * CUPTI for nothing else from the start; says why not when learn = hooks was asked for). Call
 * once, at injection, after the markers are set up. This function can't fail. */
bool sp_hooklearn_wanted(void);
/* Learning from the hooks begins (stepprof starts parked: cupti_life.h). Can't fail. */
void sp_hooklearn_begin(void);
/* The hooks feed the detector every token now. */
bool sp_hooklearn_on(void);
/* Learning from the hooks ends: the detector locked (its anchor counted by a hook) or CUPTI is
 * attached. attached: launch hooks keep proving themselves against CUPTI's launch callbacks.
 * This function can't fail. */
void sp_hooklearn_end(int attached);
/* The steps come from the program's Python now (kind = auto switched to its optimizer steps): no
 * learning, no launch proof, the launch hooks pass every launch straight through for the rest of
 * the run. This function can't fail. */
void sp_hooklearn_abandon(void);
/* The launch hooks' proof against CUPTI's launch callbacks once learning ended: on just before CUPTI attaches,
 * off once detached. Nothing while learning, after a failed proof, or if the hooks never learned. Can't fail. */
void sp_hooklearn_proof(int on);
/* The hooks cannot learn in this process (why, said once): the writer thread's next tick
 * attaches CUPTI, which learns from then on. This function can't fail. */
void sp_hooklearn_fail(const char *why);
bool sp_hooklearn_failed(void);
/* Something needs CUPTI now (why, in words), on an application thread holding none of stepprof's
 * locks: while learning from the hooks, attaches at once (the writer thread, which re-attaches a
 * parked stepprof, runs only from the first window on). Else nothing. This function can't fail. */
void sp_hooklearn_need_cupti(const char *why);
/* After a token from the hooks (application thread, no lock held): the detector locked, so CUPTI
 * is attached now, on this thread (the writer thread runs only from the first window on). */
void sp_hooklearn_check(void);
/* CUPTI reports a driver kernel launch of `symbol` (its symbolName) on this thread (its entry
 * callback): a launch hook must be around it and have named the kernel the same, else hook
 * learning ends for the run (said once). This function can't fail. */
void sp_hooklearn_cupti_launch(const char *symbol);

#endif
