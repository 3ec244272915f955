#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# capture.sh - kernel launches captured into a CUDA graph are no lost records: a launch into a
# stream under capture (cudaStreamBeginCapture ... cudaStreamEndCapture) runs nothing and CUPTI
# makes no kernel record for it (torch.compile's reduce-overhead mode captures its graphs during its
# first iterations: a window over them waited 107 ms and said 21 launches "missing", H200). Here
# libstepprof is preloaded into phases_driver with the fake libcupti (CAPTURE=A:B: micro-batches A
# to B launch into a capture, no record) and an api marker; the window (steps 2-3) records the
# launches of micro-batches 3 and 4. Checked: `Dropped records: 0`, nothing said missing, the window
# written without the quiet rule's wait, and each captured launch kept in the trace and marked
# captured; for a capture inside the window, one that began before it (its begin call seen outside
# every window), and launches on a stream that joined a capture (CUPTI's graph node callback).
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
SP=$B/stepprof
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }

# run NAME [ENV...]: 1 inference call and 6 micro-batches of 3 launches; F the trace
run() {
	local name=$1
	shift
	mkdir -p "$T/$name"
	printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[cupti]\nlibrary = %s\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\n[schedule]\nwait = 1\nwarmup = 1\nactive = 2\nrepeat = 1\n' \
		"$T/$name/out" "$B/tests/e2e/libfakecupti.so" >"$T/$name/sp.ini"
	env "$@" STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" LD_PRELOAD="$PRE" timeout 60 \
		"$B/tests/e2e/phases_driver" 1 6 3000 >"$T/$name/stdout" 2>"$T/$name/stderr" ||
		bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
	F=$(ls "$T/$name"/out/*.sptrace 2>/dev/null | head -1)
	[ -n "$F" ] || { bad "$name: no trace"; return 1; }
	"$SP" report "$F" >"$T/$name/report" 2>&1 || bad "$name: report failed: $(cat "$T/$name/report")"
	"$SP" steps "$F" | awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}' >"$T/$name/kernels"
	"$SP" dump "$F" >"$T/$name/dump" 2>&1 || bad "$name: dump failed"
}

# check NAME KERNELS CAPTURED: steps:kernels, nothing lost or said missing, no long wait, and
# CAPTURED launches of the window in the trace marked captured (the others not)
check() {
	local name=$1 kernels=$2 captured=$3 n ms
	[ "$(cat "$T/$name/kernels")" = "$kernels" ] || bad "$name: steps:kernels '$(cat "$T/$name/kernels")', not '$kernels'"
	grep -qi missing "$T/$name/report" "$T/$name/stderr" &&
		bad "$name: captured launches said missing: $(grep -i missing "$T/$name/stderr" "$T/$name/report" | head -3)"
	grep -q '^Dropped records: 0 ' "$T/$name/report" || bad "$name: $(grep '^Dropped' "$T/$name/report")"
	n=$(grep -c '^api .*name="cudaLaunchKernel".*captured' "$T/$name/dump")
	[ "$n" = "$captured" ] || bad "$name: $n launches marked captured in the trace, not $captured"
	n=$(grep -c '^api .*name="cudaLaunchKernel"' "$T/$name/dump")
	[ "$n" = 6 ] || bad "$name: $n launches in the trace, not 6 (captured ones are real calls)"
	# written once its records came (4 ms settle), not after the quiet rule's 100 ms without records
	ms=$(sed -n 's/.*window 0 (steps 2-3) closed after \([0-9.]*\) ms.*/\1/p' "$T/$name/stderr")
	[ -n "$ms" ] && awk -v m="$ms" 'BEGIN { exit !(m < 90) }' ||
		bad "$name: the window waited for kernels that never come: closed after '${ms}' ms"
}

run inside CAPTURE=3:4 && check inside "2:0 3:0 " 6
run early CAPTURE=1:3 && check early "2:0 3:3 " 3
run joined CAPTURE=3:3 CAPTURE_JOIN=1 && check joined "2:0 3:3 " 3
# the Chrome/Kineto export says so on each captured call's args, and on no other call
(cd "$T/inside/out" && "$SP" convert ./*.sptrace >/dev/null 2>&1) || bad "inside: convert failed"
n=$(zcat "$T"/inside/out/*.pt.trace.json.gz 2>/dev/null | grep -o '"captured into a graph":1' | wc -l)
[ "$n" = 6 ] || bad "inside: $n calls marked captured into a graph in the Chrome trace, not 6"
# the capture's own calls are recorded in the window (its end, here)
grep -q '^api .*name="cudaStreamEndCapture"' "$T/early/dump" || bad "early: the end capture call is not in the trace"

[ "$fail" = 0 ] && echo "capture: ok"
exit $fail
