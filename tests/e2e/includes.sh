#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# includes.sh - the front ends' boundary (scripts/check-includes.py, run before the libraries are
# linked and by make check-sizes): the tree's preload/ includes no collector/ header but
# collector/collector.h, and a preload/ file that includes another one, by either spelling, is
# named and fails the check. Exits non-zero on failure.
set -u
R=${SP_ROOT:?}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
failed=0
ok() { # ok DESCRIPTION TEST...
	local what=$1
	shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failed=1; fi
}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ok "the tree's preload/ includes collector/collector.h alone of collector/" $PY "$R/scripts/check-includes.py" "$R"
mkdir -p "$T/preload" "$T/collector/base"
printf '#include <stdio.h>\n#include "collector/collector.h"\n#include "trace/event.h"\n#include "resolve.h"\n' >"$T/preload/good.c"
ok "collector.h, trace/ and preload/'s own headers pass" $PY "$R/scripts/check-includes.py" "$T"
for inc in collector/base/log.h ../collector/base/log.h collector/hold/../base/log.h; do
	printf '#include "collector/collector.h"\n #  include "%s"\n' "$inc" >"$T/preload/bad.c"
	out=$($PY "$R/scripts/check-includes.py" "$T" 2>&1)
	rc=$?
	ok "preload/ including $inc fails the check, naming the file and line" \
		[ "$rc" = 1 -a "$(printf '%s' "$out" | grep -c '^preload/bad.c:2: ')" = 1 ]
done
exit $failed
