/* SPDX-License-Identifier: MIT */
/* schedule.c - torch.profiler.schedule (torch 2.11) in C: the action of each step, the checks
 * torch asserts plus ours, and profiling_frequency. Pure functions: no allocation, no I/O.
 * The arithmetic follows torch/profiler/profiler.py line by line, float division included;
 * tests/unit/test_schedule.c compares it with a table computed by real torch. */
#include <stdio.h>
#include "schedule.h"

/* The checks of sp_schedule_finish on s; writes "key: problem (allowed: ...)" to err.
 * Returns 0 or -1. */
static int check(const struct sp_schedule *s, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		size_t off;
		int64_t min;
	} keys[] = {
		{ "skip_first", offsetof(struct sp_schedule, skip_first), 0 },
		{ "wait", offsetof(struct sp_schedule, wait), 0 },
		{ "warmup", offsetof(struct sp_schedule, warmup), 0 },
		{ "active", offsetof(struct sp_schedule, active), 1 },
		{ "repeat", offsetof(struct sp_schedule, repeat), 0 },
		{ "profiling_frequency", offsetof(struct sp_schedule, frequency), 0 },
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		int64_t v = *(const int64_t *)((const char *)s + keys[i].off);
		if (v < keys[i].min || v > SP_SCHEDULE_MAX) {
			snprintf(err, errlen, "%s: out of range: %lld (allowed: integer %lld..%d)", keys[i].name,
				 (long long)v, (long long)keys[i].min, SP_SCHEDULE_MAX);
			return -1;
		}
	}
	if (s->frequency > 0 && s->repeat > 0) {
		snprintf(err, errlen,
			 "profiling_frequency: %lld is only allowed with repeat = 0, "
			 "repeat is %lld (allowed: 0 when repeat > 0)",
			 (long long)s->frequency, (long long)s->repeat);
		return -1;
	}
	if (s->frequency > 0 && s->frequency < s->warmup + s->active) {
		snprintf(err, errlen,
			 "profiling_frequency: %lld is less than warmup + active = %lld "
			 "(allowed: 0, or at least warmup + active)",
			 (long long)s->frequency, (long long)(s->warmup + s->active));
		return -1;
	}
	return 0;
}

/* Returns 0, or -1 with a message in err; s is unchanged on error. */
int sp_schedule_finish(struct sp_schedule *s, char *err, size_t errlen)
{
	if (check(s, err, errlen) < 0)
		return -1;
	if (s->frequency > 0) /* the seed's rule: the cycle is exactly frequency steps long */
		s->wait = s->frequency - s->warmup - s->active;
	return 0;
}

/* torch's schedule_fn(step). A negative step (torch asserts) or a schedule that torch would
 * refuse (cycle length <= 0) gets SP_ACT_NONE. Exact for every step below 2^53, where a
 * double holds the step exactly as Python's true division sees it. This function can't fail. */
enum sp_action sp_schedule_action(const struct sp_schedule *s, int64_t step)
{
	int64_t num_steps = s->wait + s->warmup + s->active;

	if (step < 0 || num_steps <= 0 || step < s->skip_first)
		return SP_ACT_NONE;
	uint64_t st = (uint64_t)(step - s->skip_first);
	if (s->skip_first_wait != 0)
		st += (uint64_t)s->wait;
	if (s->repeat > 0 && (double)st / (double)num_steps >= (double)s->repeat)
		return SP_ACT_NONE;
	uint64_t mod_step = st % (uint64_t)num_steps;
	if (mod_step < (uint64_t)s->wait)
		return SP_ACT_NONE;
	if (mod_step < (uint64_t)(s->wait + s->warmup))
		return SP_ACT_WARMUP;
	return mod_step < (uint64_t)num_steps - 1 ? SP_ACT_RECORD : SP_ACT_RECORD_AND_SAVE;
}

/* 1 if every step after `step` gets SP_ACT_NONE: repeat > 0 and the last cycle's
 * RECORD_AND_SAVE step is at or before `step`. A schedule with no valid cycle is done at once.
 * This function can't fail. */
int sp_schedule_done(const struct sp_schedule *s, int64_t step)
{
	int64_t num_steps = s->wait + s->warmup + s->active, span, last;

	if (num_steps <= 0)
		return 1;
	if (s->repeat <= 0 || __builtin_mul_overflow(s->repeat, num_steps, &span) ||
	    __builtin_add_overflow(s->skip_first, span, &last))
		return 0;
	last -= 1 + (s->skip_first_wait != 0 ? s->wait : 0);
	return step >= last;
}

const char *sp_action_name(unsigned action)
{
	static const char *const t[] = { "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE" };
	return action < sizeof(t) / sizeof(t[0]) ? t[action] : "?";
}
