/* SPDX-License-Identifier: MIT */
/* marker.c - what a marker's pattern must be for its kind, for [marker] (config.c) and each
 * [phase.NAME] (phase.c) alike: a glob with kernel, api, nccl and nvtx; module:qualname with
 * python (resolved in the program by collector/pybridge/); empty with auto, profiler_range and
 * optimizer. Pure: reads its arguments only. */
#include <stdio.h>
#include <string.h>
#include "config.h"

/* 1 if s[0..n) is a dotted name of ASCII identifiers ("a.b_c.D1"). */
static int dotted(const char *s, size_t n)
{
	int start = 1;
	if (!n || s[n - 1] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
		if (c == '.' && !start) {
			start = 1;
			continue;
		}
		if (!alpha && !(c >= '0' && c <= '9' && !start))
			return 0;
		start = 0;
	}
	return 1;
}

int sp_marker_python_pattern(const char *pattern)
{
	const char *colon = strchr(pattern, ':');
	return colon && !strchr(colon + 1, ':') && dotted(pattern, (size_t)(colon - pattern)) &&
	       dotted(colon + 1, strlen(colon + 1));
}

int sp_marker_check(int kind, const char *pattern, const char *keypre, const char **key, char *buf, size_t n)
{
	int glob = kind >= SP_MARK_KERNEL && kind <= SP_MARK_NVTX, py = kind == SP_MARK_PYTHON;
	const char *name = sp_marker_kind_name((enum sp_marker_kind)kind);
	*key = "kind";
	if (glob && !pattern[0])
		snprintf(buf, n,
			 "%s needs a pattern (allowed: %spattern = a glob such as ncclAllReduce* with kernel, api, "
			 "nccl, nvtx)",
			 name, keypre);
	else if (py && !pattern[0])
		snprintf(buf, n,
			 "python needs a pattern (allowed: %spattern = module:qualname, such as __main__:train_step "
			 "or transformers.trainer:Trainer.training_step)",
			 keypre);
	else if (!glob && !py && pattern[0]) {
		*key = "pattern";
		snprintf(buf, n,
			 "must be empty with kind = %s (allowed: empty with auto, profiler_range and optimizer)", name);
	} else if (py && !sp_marker_python_pattern(pattern)) {
		*key = "pattern";
		snprintf(buf, n,
			 "'%.100s' is not module:qualname (allowed: a module's dotted name, ':', the function's "
			 "dotted qualified name, such as __main__:train_step or "
			 "transformers.trainer:Trainer.training_step; "
			 "no glob)",
			 pattern);
	} else
		return 0;
	return 1;
}

const char *sp_marker_explain(int kind, const char *pattern, char *buf, size_t n)
{
	if (kind == SP_MARK_OPTIMIZER)
		snprintf(buf, n,
			 "kind = optimizer: a step ends when a torch optimizer's step() returns (torch's global "
			 "optimizer post hook, which stepprof installs in the program's CPython 3.10-3.13 once "
			 "torch.optim.optimizer is imported; several optimizers stepped in one iteration make one "
			 "step, and with a GradScaler its update() ends the step); step 0 runs from the install to "
			 "the first optimizer step (docs/STEPS.md)");
	else if (kind == SP_MARK_PYTHON)
		snprintf(buf, n,
			 "kind = python: a step begins at each call of %.200s (sys.monitoring's PY_START on "
			 "CPython 3.12+, a wrapper replacing the attribute on 3.10 and 3.11), the first call "
			 "beginning step 0 (docs/STEPS.md)",
			 pattern);
	else
		return NULL;
	return buf;
}
