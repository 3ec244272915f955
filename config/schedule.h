/* SPDX-License-Identifier: MIT */
/* schedule.h - torch.profiler.schedule with torch 2.11's exact semantics: which action each
 * step gets. Pure functions; no allocation, no I/O. */
#ifndef SP_SCHEDULE_H
#define SP_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

/* the schedule's verdict on a step, numbered as torch.profiler.ProfilerAction (a STEP record's sub) */
enum sp_action { SP_ACT_NONE = 0, SP_ACT_WARMUP = 1, SP_ACT_RECORD = 2, SP_ACT_RECORD_AND_SAVE = 3 };

/* "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"; "?" for another value. This function can't fail. */
const char *sp_action_name(unsigned action);

struct sp_schedule {
	int64_t skip_first;
	int64_t skip_first_wait;        /* torch's int flag: nonzero skips the first cycle's wait */
	int64_t wait;
	int64_t warmup;
	int64_t active;                 /* >= 1 */
	int64_t repeat;                 /* 0 = cycle forever */
	int64_t frequency;              /* profiling_frequency; 0 = off. With repeat == 0 it sets
	                                   wait = frequency - warmup - active (sp_schedule_finish) */
};

/* Largest value of any schedule key (ours, not torch's): keeps every product of them inside
 * int64 and every step count exact in a double. */
#define SP_SCHEDULE_MAX 1000000000

/* The action torch.profiler.schedule(...)(step) returns for this step (step >= 0; a negative
 * step gets SP_ACT_NONE). This function can't fail. */
enum sp_action sp_schedule_action(const struct sp_schedule *s, int64_t step);
/* Validates (torch's asserts plus ours) and applies frequency. Returns 0, or -1 with a message
 * in err naming the key and what is allowed ("KEY: problem (allowed: ...)", KEY first: the
 * config layer reads it to name where KEY was set); s is unchanged on error. */
int sp_schedule_finish(struct sp_schedule *s, char *err, size_t errlen);
/* 1 if no step after `step` can ever be recorded again (repeat exhausted). */
int sp_schedule_done(const struct sp_schedule *s, int64_t step);

#endif
