#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rankenv.sh CMD... - under torchrun --no-python: gives each rank its own token file
# (STEPPROF_RECORD_TOKENS=X.tokens becomes X.rank<R>.tokens), then runs CMD.
[ -n "${STEPPROF_RECORD_TOKENS:-}" ] && export STEPPROF_RECORD_TOKENS="${STEPPROF_RECORD_TOKENS%.tokens}.rank${RANK:-0}.tokens"
exec "$@"
