#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# window_end.sh - the program's thread does not wait on CUPTI reconfiguration at a window's end,
# without a GPU (cupti_life_driver, the stand-in libcupti naming every callback as CUPTI does, each
# reconfiguring call keeping its caller 20 us: FAKE_CALL_US; 20 launches a step, a window every
# other step). A window's end used to turn off its recorded API callbacks (about 70 of the 264
# ids on at a window's end here) on the program's thread, in the marker call: each window's end
# held it about 1.4 ms in this model. Now a callback nothing wants goes off at its call's next
# exit, so a window's end turns none off, and only the few ids the program calls are turned off
# (and on again) at all:
#  - under 1 disabled callback a window on average in the stand-in's log (was about 70);
#  - stepprof's own measure of the program's thread at window ends (STEPPROF_VERBOSE) a median
#    under 0.5 ms (was about 1.4 ms);
#  - every window step still holds its 20 kernels (api and automatic markers).
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
# shellcheck source=tests/e2e/lib/cupti_names.sh
. "$(dirname "$0")/lib/cupti_names.sh"
T=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "kept $T" || rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
cupti_names "$T/names" || { echo "window_end: no CUPTI headers under CUDA_HOME: skipped"; exit 0; }

# run NAME MARKER-LINES [WAIT CALL_US STEP_US]: 60 steps, windows of one step every WAIT + 1 (1)
run() {
	local name=$1 mk=$2 wait=${3:-1} call=${4:-20} us=${5:-5000}
	mkdir -p "$T/$name"
	printf "[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = $wait\nwarmup = 0\nactive = 1\nrepeat = 0\n[marker]\n$mk\n[cupti]\nlibrary = %s\ndetach_between = never\n" \
		"$T/$name/out" "$B/tests/e2e/libfakecupti.so" >"$T/$name/sp.ini"
	env LAUNCHES=20 LAUNCH_US=100 FAKE_CUPTI_ONE_CORR=1 FAKE_CALL_US="$call" FAKE_CUPTI_NAMES="$T/names" \
		VIA_CUDART="$B/tests/e2e/libfakecudart.so" FAKE_CUPTI_LOG="$T/$name/log" STEPPROF_VERBOSE=1 \
		STEPPROF_CONFIG="$T/$name/sp.ini" LD_PRELOAD="$PRE" timeout 120 "$B/tests/e2e/cupti_life_driver" 60 "$us" \
		>"$T/$name/stdout" 2>"$T/$name/stderr" || bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
	"$B/stepprof" steps "$T/$name"/out/*.sptrace | awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}' >"$T/$name/kernels"
	/usr/bin/python3 - "$T/$name" "${BETWEEN_MS:-1000}" <<'PY' || { bad "$name"; return 1; }
import re, sys
d = sys.argv[1]
err = open(f"{d}/stderr").read()
m = re.search(r"at (\d+) window ends the program's thread spent in stepprof: median ([\d.]+) ms, p99 ([\d.]+) ms, at most ([\d.]+) ms.*at the (\d+) other step boundaries outside windows at most ([\d.]+) ms", err)
off = sum(1 for l in open(f"{d}/log") if re.match(r"enable_cb [12] \d+ 0$", l))
k = open(f"{d}/kernels").read().split()
problems = []
if not m:
    problems.append("no window-end line on stderr")
else:
    n, med = int(m.group(1)), float(m.group(2))
    between = float(m.group(6))
    print(f"    {n} window ends: {off} callbacks turned off in all, median {med} ms in stepprof, p99 {m.group(3)}, worst {m.group(4)}; other boundaries outside windows at most {between} ms")
    if off > n:
        problems.append(f"{off} callbacks turned off for {n} window ends")
    if med >= 0.5:
        problems.append(f"the program's thread spent a median {med} ms in stepprof at a window's end")
    if between >= float(sys.argv[2]):
        problems.append(f"a step boundary after a window's end spent {between} ms in stepprof")
bad = [x for x in k[:-1] if not x.endswith(":20")]
if len(k) < 10 or bad:
    problems.append(f"window steps without their 20 kernels: {bad} ({len(k)} window steps)")
for p in problems:
    print("   ", p)
sys.exit(1 if problems else 0)
PY
}

run api 'kind = api\npattern = cudaDeviceSynchronize' &&
	echo "ok   api marker: a window's end turns no callback off on the program's thread; windows complete"
run auto 'kind = auto\nlearn = cupti' &&
	echo "ok   automatic marker: the same"
# each reconfiguring call 10 ms, 5 ms steps, a window every 4th step: the writer turns the 3 kinds
# off (30 ms of calls) after sp_col.lock, so the next marker calls (5 ms apart)
# do not wait behind them (they waited up to tens of ms)
BETWEEN_MS=1 run slowoff 'kind = api\npattern = cudaDeviceSynchronize' 3 10000 5000 &&
	echo "ok   the writer's CUPTI calls that turn activity off do not keep the next marker call waiting"
exit $fail
