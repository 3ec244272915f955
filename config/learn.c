/* SPDX-License-Identifier: MIT */
/* learn.c - [marker] learn: the configurations in which automatic detection learns from the
 * preload's hooks rather than CUPTI (collector/hold/hooklearn.h applies it; `stepprof check` says it).
 * Pure: reads the configuration only. */
#include <stddef.h>
#include "config.h"

const char *sp_cfg_learn_cupti_why(const struct sp_config *c)
{
	if (c->marker_learn == SP_LEARN_CUPTI)
		return "learn = cupti";
	if (c->phases.n)
		return "phases are set";
	if (c->marker_kind != SP_MARK_AUTO)
		return "the marker is explicit: nothing is learned";
	if (c->detach_between == SP_DETACH_NEVER)
		return "[cupti] detach_between = never";
	if (c->ondemand_delay_ms || c->ondemand_duration_ms)
		return "an [ondemand] time range is set";
	return NULL;
}
