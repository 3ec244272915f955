#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# advice_check.sh BUILD_DIR - issue 33 item 6 on the GPU machine: a program automatic detection
# cannot lock on (data-dependent launches: tests/gpu/corpus/datadep.py) says it is undecided and
# names only a checked marker, with the launches per step it would give (docs/STEPS.md, item 8);
# the program then runs again with that marker and the default schedule. PASS when the advice
# names a marker, its 3 recorded steps each hold launches within the range it said, and the run
# exits 0. About 1 minute on one H200. Needs python3 with torch.
set -u
B=$(cd "${1:?usage: advice_check.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd); cd "$ROOT" || exit 2
W=${WORK:-/tmp/advice_check}; rm -rf "$W"; mkdir -p "$W/auto" "$W/marker" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
cmd="python3 tests/gpu/corpus/datadep.py 200"
STEPPROF_PROFILE_OUTPUT=$W/auto LD_PRELOAD=$B/libstepprof.so timeout 300 $cmd >"$W/auto/log" 2>&1 </dev/null
advice=$(grep -m1 -o 'set \[marker\] kind = [a-z]*, pattern = .* launches each' "$W/auto/log")
kind=$(sed -n 's/^set \[marker\] kind = \([a-z]*\), .*/\1/p' <<<"$advice")
pat=$(sed -n 's/^set \[marker\] kind = [a-z]*, pattern = \(.*\): it occurs once .*/\1/p' <<<"$advice")
range=$(sed -n 's/.*would hold \([0-9]*\)\( to \([0-9]*\)\)\? launches each$/\1 \3/p' <<<"$advice")
echo "advice: ${advice:-none} ($(grep -m1 -o 'undecided after [0-9]* tokens' "$W/auto/log"))"
if [ -z "$kind" ] || [ -z "$pat" ]; then
	echo "FAIL advice-datadep: no checked marker named: $(grep -m1 'undecided' "$W/auto/log" | cut -c1-400)"
	exit 1
fi
STEPPROF_PROFILE_OUTPUT=$W/marker STEPPROF_MARKER_KIND=$kind STEPPROF_MARKER_PATTERN=$pat \
	LD_PRELOAD=$B/libstepprof.so timeout 300 $cmd >"$W/marker/log" 2>&1 </dev/null
rc=$?
"$B/stepprof" report --json "$W"/marker/*.sptrace >"$W/marker/report.json" 2>>"$W/marker/log"
python3 - "$W/marker/report.json" $range "$rc" <<'PY'
import json, sys
path, lo = sys.argv[1], int(sys.argv[2])
hi = int(sys.argv[3]) if len(sys.argv) > 4 else lo
rc = int(sys.argv[-1])
try:
    steps = [s for s in json.load(open(path)).get("steps", []) if not s.get("at_exit")]
except (OSError, ValueError):
    steps = []
k = [s["kernels"] for s in steps]
ok = rc == 0 and len(k) == 3 and all(lo <= x <= hi and x > 0 for x in k)
print(f"{'PASS' if ok else 'FAIL'} advice-datadep: the advised marker's steps hold {k} kernels "
      f"(said {lo} to {hi}), exit {rc}")
sys.exit(0 if ok else 1)
PY
