#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# window_end.sh [BUILD] - how long the program's thread waits on stepprof at a window's end, on
# the host, with the stand-in libcupti (no GPU): tests/e2e/cupti_life_driver runs 220 steps of
# 20 launches (3 ms a step, launches spread over it), a window every other step (110 windows),
# under an api marker (the boundary at its call's entry) and the automatic marker (the boundary
# after its anchor call), detach_between = never (no park: the window ends alone), and with
# FAKE_CALL_US=0 and 10 (each reconfiguring CUPTI call keeps its caller 10 us: a model of a real
# CUPTI's cost, not a measurement of one). Prints, per configuration, stepprof's own line
# (STEPPROF_VERBOSE: median, p99 and worst time the program's thread spent in stepprof from a
# window-ending boundary to the end of its handling) and the steps that held a window's end against
# the others (median and worst excess of their duration over the median step). BUILD defaults
# to ./build (make test-build). The figures are in docs/BENCHMARKS.md.
set -u
B=$(cd "${1:-build}" && pwd) || exit 2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PRE=$B/libstepprof-nomalloc.so
# every callback's name, as CUPTI gives it (the stand-in names only the few its tests use): the
# recorded API set then holds its real 264 ids
# shellcheck source=tests/e2e/lib/cupti_names.sh
. "$(dirname "$0")/../tests/e2e/lib/cupti_names.sh"
cupti_names "$T/names" || { echo "no CUPTI headers (CUDA_HOME)"; exit 2; }

one() { # NAME MARKER-LINES CALL_US
	local name=$1 mk=$2 us=$3
	mkdir -p "$T/$name"
	printf "[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 1\nwarmup = 0\nactive = 1\nrepeat = 0\n[marker]\n$mk\n[cupti]\nlibrary = %s\ndetach_between = never\n" \
		"$T/$name/out" "$B/tests/e2e/libfakecupti.so" >"$T/$name/sp.ini"
	env LAUNCHES=20 LAUNCH_US=100 FAKE_CUPTI_ONE_CORR=1 FAKE_CALL_US="$us" FAKE_CUPTI_NAMES="$T/names" PRINT_STEPS=1 \
		VIA_CUDART="$B/tests/e2e/libfakecudart.so" STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" \
		LD_PRELOAD="$PRE" timeout 120 "$B/tests/e2e/cupti_life_driver" 220 3000 >"$T/$name/out.txt" 2>"$T/$name/err.txt"
	/usr/bin/python3 - "$T/$name" "$name" <<'PY'
import re, statistics, sys
d, name = sys.argv[1], sys.argv[2]
err = open(f"{d}/err.txt", errors="replace").read()
m = re.search(r"at (\d+) window ends the program's thread spent in stepprof: median ([\d.]+) ms, p99 ([\d.]+) ms, at most ([\d.]+) ms", err)
steps = [float(l.split()[2]) for l in open(f"{d}/out.txt") if l.startswith("STEP ")]
# windows of one step every other step from step 1: the boundary ending window k comes at the end of
# iteration 2k+1 (api marker) or 2k+2 (the automatic marker counts from its lock): take each step's
# excess over the median, odd and even iterations apart, and report the side with the windows' ends
med = statistics.median(steps[20:]) if len(steps) > 40 else 0
ex = [[s - med for i, s in enumerate(steps) if i >= 20 and i % 2 == p] for p in (0, 1)]
side = max(ex, key=lambda e: statistics.median(e)) if ex[0] and ex[1] else []
print(f"{name:22s} in stepprof: " + (f"{m.group(1)} windows, median {m.group(2)} ms, p99 {m.group(3)} ms, worst {m.group(4)} ms" if m else "no line") +
      (f"; steps with a window's end: median excess {statistics.median(side):.3f} ms, worst {max(side):.3f} ms (median step {med:.3f} ms)" if side else ""))
PY
}

for us in 0 10; do
	one "api, call ${us} us" 'kind = api\npattern = cudaDeviceSynchronize' "$us"
	one "auto, call ${us} us" 'kind = auto\nlearn = cupti' "$us"
done
