#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# missing_kernel.sh - a kernel whose activity record never comes (tests/gpu/trigger.sh once saw the
# last step of an on-demand window hold 37 of 38 kernels) is never a silent loss: libstepprof
# preloaded into phases_driver (kernel launches, then cudaDeviceSynchronize, the marker) with the
# fake libcupti told to lose the record of the last launch of the window's last step
# (FAKE_CUPTI_LOSE_CORR). The window is written once no record comes (the quiet rule), with a
# DROPPED 'missing' record of 1, a stderr line, and `stepprof report` (text, JSON, findings) says
# so; the same run without the loss has none of it. One that comes long after the window was
# written is counted once (missing), not late as well.
# And how the last kernel of a window's last step was lost with nothing said (the trigger.sh
# signature): a kernel launched inside a runtime call that is not a launch is not counted as a
# launch but its record counts as arrived, so the counts matched while the last launch's record
# was still on its way (here 20 ms late): the window was written after 4 ms without it. A window
# now also waits for the record of its last counted launch; lost for good, it is said missing.
# And a window's last copy (its record comes after the kernels'): waited for, never said missing.
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
SP=$B/stepprof
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }

# run NAME [ENV...]: 1 inference call and 6 micro-batches (3 launches each); the window records
# micro-batches 2 and 3: correlation ids 16-18 and 20-22 (docs in phases_driver.c)
run() {
	local name=$1
	shift
	mkdir -p "$T/$name"
	printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[cupti]\nlibrary = %s\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\n[schedule]\nwait = 1\nwarmup = 1\nactive = 2\nrepeat = 1\n' \
		"$T/$name/out" "$B/tests/e2e/libfakecupti.so" >"$T/$name/sp.ini"
	env "$@" STEPPROF_CONFIG="$T/$name/sp.ini" LD_PRELOAD="$PRE" timeout 60 "$B/tests/e2e/phases_driver" 1 "${MICRO:-6}" 3000 \
		>"$T/$name/stdout" 2>"$T/$name/stderr" || bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
	F=$(ls "$T/$name"/out/*.sptrace 2>/dev/null | head -1)
	[ -n "$F" ] || { bad "$name: no trace"; return; }
	"$SP" report "$F" >"$T/$name/report" 2>&1 || bad "$name: report failed: $(cat "$T/$name/report")"
	"$SP" report --json "$F" >"$T/$name/json" 2>&1 || bad "$name: report --json failed"
	"$SP" steps "$F" | awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}' >"$T/$name/kernels"
}

run whole
[ "$(cat "$T/whole/kernels")" = "2:3 3:3 " ] || bad "whole: steps:kernels $(cat "$T/whole/kernels")"
grep -qi missing "$T/whole/report" "$T/whole/stderr" && bad "whole: a kernel said missing: $(grep -i missing "$T/whole/report" "$T/whole/stderr")"
grep -q '"missing":0,"complete":true' "$T/whole/json" || bad "whole: JSON window: $(grep -o '"windows".*' "$T/whole/json" | head -c 300)"

run lost FAKE_CUPTI_LOSE_CORR=22
[ "$(cat "$T/lost/kernels")" = "2:3 3:2 " ] || bad "lost: steps:kernels $(cat "$T/lost/kernels")"
grep -q "window 0 (steps 2-3): 1 of its 6 kernel launches had no kernel record" "$T/lost/stderr" ||
	bad "lost: stderr says nothing: $(cat "$T/lost/stderr")"
"$SP" dump "$F" | grep -q '^dropped .*source=missing.*count=1\|^dropped .*count=1.*missing' ||
	bad "lost: no DROPPED missing record: $("$SP" dump "$F" | grep '^dropped')"
grep -q "^Window 0: steps 2-3 (2 steps), .*, 5 kernels, .*1 kernel missing (launched in it, never arrived)" "$T/lost/report" ||
	bad "lost: report window line: $(grep '^Window' "$T/lost/report")"
grep -q "^Missing kernels: 1 launched" "$T/lost/report" || bad "lost: report: no 'Missing kernels' line"
grep -q "1 kernel launched in a window never arrived" "$T/lost/report" || bad "lost: report findings say nothing"
grep -q '"missing":1,"complete":true' "$T/lost/json" || bad "lost: JSON window: $(grep -o '"windows".*' "$T/lost/json" | head -c 300)"

# the same kernel's record comes 400 ms late, after its window was written (the program runs on
# for 600 ms; recording tokens keeps stepprof subscribed to the end, where it flushes): said
# missing once, not counted 'late' on top (it was: two records said lost)
MICRO=200 run latemissing FAKE_CUPTI_LATE_CORR=22 FAKE_CUPTI_LATE_MS=400 STEPPROF_RECORD_TOKENS="$T/latemissing.tok"
grep -q "window 0 (steps 2-3): 1 of its 6 kernel launches had no kernel record" "$T/latemissing/stderr" ||
	bad "latemissing: not said missing: $(grep -v begins "$T/latemissing/stderr" | head -3)"
grep -q "^Missing kernels: 1 launched" "$T/latemissing/report" &&
	grep -qx 'Dropped records: 0 (cupti: 0, ring_full: 0, window_cap: 0, late: 0)' "$T/latemissing/report" &&
	grep -q "1 record was lost: 1 kernel launched in a window never arrived" "$T/latemissing/report" ||
	bad "latemissing: $(grep -E 'Dropped|Missing|lost' "$T/latemissing/report")"

# nested: each micro-batch also launches one kernel inside a cudaStreamSynchronize (uncounted):
# the window records corr 19-22 (step 2) and 24-27 (step 3); 27 is the last launch
run late DRIVER_NESTED=1 FAKE_CUPTI_LATE_CORR=27 FAKE_CUPTI_LATE_MS=20
[ "$(cat "$T/late/kernels")" = "2:4 3:4 " ] || bad "late: the last kernel of the last step is lost: steps:kernels $(cat "$T/late/kernels")"
grep -qi missing "$T/late/report" "$T/late/stderr" && bad "late: a kernel said missing: $(grep -i missing "$T/late/report" "$T/late/stderr")"
run nested_lost DRIVER_NESTED=1 FAKE_CUPTI_LOSE_CORR=27
[ "$(cat "$T/nested_lost/kernels")" = "2:4 3:3 " ] || bad "nested_lost: steps:kernels $(cat "$T/nested_lost/kernels")"
grep -q '"missing":1,"complete":true' "$T/nested_lost/json" || bad "nested_lost: the lost last kernel is not said: $(grep -o '"windows".*' "$T/nested_lost/json" | head -c 300)"

# copies: each micro-batch ends with a cudaMemcpyAsync after its kernels (phases_driver COPY_AFTER):
# the window records corr 19-22 (step 2) and 24-27 (step 3); 27 is its last copy. Copies trail
# kernels (an all-reduce bucket's DtoD copies were lost at a DDP window's end, 2 x H100): the window
# waits for the last one's record; one that never comes is no kernel lost (quiet rule, nothing said)
run copylate COPY_AFTER=1 FAKE_CUPTI_LATE_CORR=27 FAKE_CUPTI_LATE_MS=30
[ "$("$SP" dump "$F" | grep -c '^memcpy')" = 2 ] || bad "copylate: the last copy of the last step is lost: $("$SP" dump "$F" | grep -c '^memcpy') copies"
[ "$(cat "$T/copylate/kernels")" = "2:3 3:3 " ] || bad "copylate: steps:kernels $(cat "$T/copylate/kernels")"
grep -qi missing "$T/copylate/report" "$T/copylate/stderr" && bad "copylate: said missing: $(grep -i missing "$T/copylate/stderr")"
run copylost COPY_AFTER=1 FAKE_CUPTI_LOSE_CORR=27
[ "$("$SP" dump "$F" | grep -c '^memcpy')" = 1 ] || bad "copylost: $("$SP" dump "$F" | grep -c '^memcpy') copies, not 1"
grep -q '"missing":0,"complete":true' "$T/copylost/json" || bad "copylost: JSON window: $(grep -o '"windows".*' "$T/copylost/json" | head -c 300)"
grep -qi missing "$T/copylost/stderr" && bad "copylost: a copy without a record said missing: $(grep -i missing "$T/copylost/stderr")"

# a kernel still running when the window closes (the optimizer step ends an iteration whose kernels the
# GPU has not run yet): CUPTI's forced flush hands its record over incomplete, with a timestamp unset
# (FAKE_CUPTI_INCOMPLETE). The window's flushes wait for complete buffers: its record comes whole,
# 20 ms late; lost for good (400 ms), an incomplete one is never written, and the kernel is missing.
# Before: a kernel starting 1 us after the clock's zero (mlp-auto on an H200: step 9's busy time 40% short)
for part in start end; do
	run "inc_$part" FAKE_CUPTI_LATE_CORR=22 FAKE_CUPTI_LATE_MS=20 FAKE_CUPTI_INCOMPLETE=$part
	[ "$(cat "$T/inc_$part/kernels")" = "2:3 3:3 " ] || bad "inc_$part: steps:kernels $(cat "$T/inc_$part/kernels")"
	"$SP" dump "$F" | awk '/^window_begin/ {b = $0; sub(/.*start=/, "", b); sub(/ .*/, "", b)}
		/^kernel/ {s = $0; sub(/.*start=/, "", s); sub(/ .*/, "", s); d = $0; sub(/.*dur=/, "", d); sub(/ .*/, "", d)
			if (s + 0 < b + 0 || d + 0 < 0 || d + 0 > 1e12) { print "bad kernel: " $0; bad = 1 } }
		END { exit bad }' >"$T/inc_$part/badk" || bad "inc_$part: a kernel outside its window: $(head -2 "$T/inc_$part/badk")"
	grep -qi missing "$T/inc_$part/stderr" && bad "inc_$part: said missing: $(grep -i missing "$T/inc_$part/stderr")"
done
MICRO=200 run inc_lost FAKE_CUPTI_LATE_CORR=22 FAKE_CUPTI_LATE_MS=400 FAKE_CUPTI_INCOMPLETE=start
[ "$(cat "$T/inc_lost/kernels")" = "2:3 3:2 " ] || bad "inc_lost: steps:kernels $(cat "$T/inc_lost/kernels")"
grep -q '"missing":1,"complete":true' "$T/inc_lost/json" || bad "inc_lost: JSON window: $(grep -o '"windows".*' "$T/inc_lost/json" | head -c 300)"

[ "$fail" = 0 ] && echo "missing_kernel: ok"
exit $fail
