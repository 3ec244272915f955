#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# late_records.sh - `dropped` counts only records of recorded steps missing from the trace, and
# activity recording stops once a window's records are in, without a GPU (cupti_life_driver, the
# stand-in libcupti and libcudart, 20 kernel launches a step):
#  - the automatic marker (its boundary after its sync call, launch callbacks off between counted
#    steps) in 20 ms steps: a window is written before the next call that would end its
#    correlation range comes, and the records of the next window's warmup step fell in that open
#    range ("late: 100" for 5 windows that held every kernel). Now: 0 dropped, every window step
#    with its 20 kernels, and the records of no window said (STEPPROF_VERBOSE) as discarded;
#  - an api marker (boundary at its call's entry) with launches spread over the step: activity
#    kinds go off as soon as the window's records are in, not after its settle time and its write
#    (at most the two writer passes that flush and count them, where it took four or more).
# (A record that comes after its window was written without it: counted missing once, not late as
# well, in missing_kernel.sh.)
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
T=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "kept $T" || rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }

# run NAME MARKER-LINES WARMUP STEPS STEP_US [ENV...]
run() {
	local name=$1 mk=$2 warmup=$3 steps=$4 us=$5
	shift 5
	mkdir -p "$T/$name"
	printf "[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 3\nwarmup = %s\nactive = 3\nrepeat = 0\n[marker]\n$mk\n[cupti]\nlibrary = %s\ndetach_between = never\n" \
		"$T/$name/out" "$warmup" "$B/tests/e2e/libfakecupti.so" >"$T/$name/sp.ini"
	env "$@" LAUNCHES=20 FAKE_CUPTI_ONE_CORR=1 VIA_CUDART="$B/tests/e2e/libfakecudart.so" FAKE_CUPTI_LOG="$T/$name/log" \
		STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" LD_PRELOAD="$PRE" timeout 60 \
		"$B/tests/e2e/cupti_life_driver" "$steps" "$us" >"$T/$name/stdout" 2>"$T/$name/stderr" ||
		bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
	"$B/stepprof" report "$T/$name"/out/*.sptrace >"$T/$name/report" 2>&1 || bad "$name: report failed"
	"$B/stepprof" report --json "$T/$name"/out/*.sptrace >"$T/$name/json" 2>&1 || bad "$name: report --json failed"
	"$B/stepprof" steps "$T/$name"/out/*.sptrace | awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}' >"$T/$name/kernels"
}

# 40 steps: the schedule counts from the lock, so the fifth window (35-37) ends before the program does
run pending 'kind = auto\nlearn = cupti' 1 40 20000
k=$(cat "$T/pending/kernels")
if grep -qx 'Dropped records: 0 (cupti: 0, ring_full: 0, window_cap: 0, late: 0)' "$T/pending/report" &&
	grep -q '"dropped":{"cupti":0,"ring_full":0,"window_cap":0,"late":0,"missing":0}' "$T/pending/json" &&
	[ "$(echo "$k" | wc -w)" -ge 12 ] && ! echo "$k" | tr ' ' '\n' | grep -v '^$' | grep -qv ':20$' &&
	grep -q "GPU records of no window were discarded (not a loss" "$T/pending/stderr"; then
	echo "ok   a window written while its top was open: the next steps' records are no window's (discarded and said), 0 dropped, every window step holds its 20 kernels"
else
	bad "pending: $(grep Dropped "$T/pending/report"); window steps:kernels $k"
fi

# 2 ms between launches, warmup 0: a window's enable of CONCURRENT_KERNEL (10), the flushes of its
# close, then the disable
run spread 'kind = api\npattern = cudaDeviceSynchronize' 0 27 40000 LAUNCH_US=2000
if /usr/bin/python3 - "$T/spread/log" <<'PY'; then
import sys
lines = [l.split() for l in open(sys.argv[1])]
runs, on, n = [], False, 0
for w in lines:
    if w[:2] == ["activity_enable", "10"]:
        on, n = True, 0
    elif w[:1] == ["flush"] and on:
        n += 1
    elif w[:2] == ["activity_disable", "10"] and on:
        runs.append(n)
        on = False
print("    flushes between each window's kernel-activity enable and disable:", runs)
sys.exit(0 if len(runs) >= 3 and max(runs) <= 2 else 1)
PY
	echo "ok   activity kinds go off once a window's records are in (two writer passes), not after its settle and its write"
else
	bad "spread: kernel activity stayed on after the window's records were in"
fi
exit $fail
