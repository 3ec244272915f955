/* SPDX-License-Identifier: MIT */
/* stepdet_say.c - what the step detector (stepdet.h) says in words: why it is undecided, with the
 * explicit marker to set instead, and the warning for a schedule whose first window comes before
 * automatic detection can lock. Pure: no locks, no I/O. */
#include <stdio.h>
#include <string.h>
#include "stepdet.h"
#include "collector/base/intern.h"
#include "config/config.h"

/* The explicit marker to suggest from the learner's ring: the rarest host synchronisation that
 * repeats, else the rarest repeating NVTX range, else the rarest repeating kernel. */
static void suggest(struct sp_stepdet *d, char *buf, size_t n)
{
	struct sp_autostep *a = &d->a;
	uint32_t best[3] = { 0 }, bestc[3] = { UINT32_MAX, UINT32_MAX, UINT32_MAX };
	uint64_t first = a->n > a->cap ? a->n - a->cap : 0;
	sp_autostep_count(a, 0, 1);
	for (uint64_t i = first; i < a->n; i++) {
		uint32_t tok = a->tok[i & (a->cap - 1)], c = sp_autostep_count(a, tok, 0);
		const char *nm = sp_intern_lookup(tok & ~SP_AUTOSTEP_FLAGS);
		int k = tok & SP_AUTOSTEP_SYNC                                     ? 0
			: nm && !strncmp(nm, "nvtx:", 5) && strcmp(nm, "nvtx:pop") ? 1
			: tok & SP_AUTOSTEP_KERNEL                                 ? 2
										   : -1;
		if (k >= 0 && c >= 4 && c < bestc[k]) {
			bestc[k] = c;
			best[k] = tok;
		}
	}
	static const char *const kinds[3] = { "api", "nvtx", "kernel" };
	for (int k = 0; k < 3; k++)
		if (best[k]) {
			const char *nm = sp_intern_lookup(best[k] & ~SP_AUTOSTEP_FLAGS);
			snprintf(buf, n, "[marker] kind = %s, pattern = %s", kinds[k], k == 1 ? nm + 5 : nm);
			return;
		}
	snprintf(buf, n, "an explicit [marker] (docs/STEPS.md)");
}

int sp_stepdet_undecided(struct sp_stepdet *d, char *buf, size_t n)
{
	char sug[300];
	if (d->kind != SP_MARK_AUTO || !d->learning)
		return 0;
	suggest(d, sug, sizeof sug);
	if (d->a.cand_period)
		snprintf(buf, n,
			 "automatic step detection is undecided after %llu tokens: the best candidate, a period "
			 "of %u tokens, repeated %llu times (not proven: it must repeat exactly, with a host "
			 "synchronisation or a clear CPU gap where it wraps); set %s",
			 (unsigned long long)d->tokens, d->a.cand_period,
			 (unsigned long long)(d->a.cand_run / d->a.cand_period + 1), sug);
	else
		snprintf(buf, n, "automatic step detection is undecided after %llu tokens: nothing repeats; set %s",
			 (unsigned long long)d->tokens, sug);
	return 1;
}

int sp_stepdet_schedule_warning(const struct sp_schedule *s, char *buf, size_t n)
{
	int64_t first = -1;
	for (int64_t k = 0; k < 100000 && first < 0; k++)
		if (sp_schedule_action(s, k) != SP_ACT_NONE)
			first = k;
	if (first < 0 || first >= SP_STEPDET_LOCK_NOSYNC)
		return 0;
	if (first < SP_STEPDET_LOCK_SYNC) {
		snprintf(buf, n,
			 "the schedule collects from step %lld, but automatic step detection (kind = auto) "
			 "locks during the program's iteration %d at the earliest (%d or later for a loop without a "
			 "host synchronisation per iteration): the steps before are not recorded and the window is "
			 "lost; raise skip_first or wait by %lld, or set an explicit [marker] (docs/STEPS.md)",
			 (long long)first, SP_STEPDET_LOCK_SYNC - 1, SP_STEPDET_LOCK_NOSYNC - 1,
			 (long long)(SP_STEPDET_LOCK_SYNC - first));
		return 1;
	}
	snprintf(buf, n,
		 "the schedule collects from step %lld: a loop without a host synchronisation per iteration "
		 "(CUDA graphs, JAX) locks automatic step detection at iteration %d or later, and would lose that "
		 "window; raise skip_first or wait by %lld for such programs, or set an explicit [marker]",
		 (long long)first, SP_STEPDET_LOCK_NOSYNC - 1, (long long)(SP_STEPDET_LOCK_NOSYNC - first));
	return 2;
}
