#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# phases.sh - [phase.NAME] sections end to end without a GPU: libstepprof preloaded into a
# two-phase "CUDA program" (phases_driver: rounds of one inference call, cudaStreamSynchronize,
# and MICRO training micro-batches, cudaDeviceSynchronize) with the fake libcupti (fakecupti.c).
#  - the RL framework's layout: inference every call its own window (wait 0, warmup 0, active 1,
#    repeat 0); training wait = micro-batches - 3, warmup 2, active 1: its window is the last
#    micro-batch of the first round. Each phase numbers its own steps; the windows alternate and
#    never overlap; WINDOW records name their phase.
#  - report / steps / convert --phase select a phase; convert puts each phase's windows in its folder.
#  - training with active 3 while inference interleaves: the training window is cut at the next
#    inference step (a window never holds another phase's steps) and the next one opens.
#  - check shows each phase; schedule --phase dry-runs one; a second auto phase is refused.
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
SP=$B/stepprof
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }

# run NAME ROUNDS MICRO TRAIN_WAIT TRAIN_ACTIVE: one driver run in $T/NAME
run() {
	local name=$1 rounds=$2 micro=$3 tw=$4 ta=$5
	mkdir -p "$T/$name"
	cat >"$T/$name/sp.ini" <<INI
[profile]
output = $T/$name/out
[ranks]
ranks = all
[cupti]
library = $B/tests/e2e/libfakecupti.so
[phase.fwd]
kind = api
pattern = cudaStreamSynchronize
wait = 0
warmup = 0
active = 1
repeat = 0
[phase.fwd_bwd]
kind = api
pattern = cudaDeviceSynchronize
wait = $tw
warmup = 2
active = $ta
repeat = 1
INI
	STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" LD_PRELOAD="$PRE" timeout 60 \
		"$B/tests/e2e/phases_driver" "$rounds" "$micro" 3000 >"$T/$name/stdout" 2>"$T/$name/stderr" ||
		bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
	F=$(ls "$T/$name"/out/*.sptrace 2>/dev/null | head -1)
	[ -n "$F" ] || bad "$name: no trace: $(grep -v begins "$T/$name/stderr" | tail -3)"
}

# windows: "begin|end ID PHASE FIRST-LAST" per WINDOW record of $F, from stepprof dump
windows() {
	"$SP" dump "$F" | sed -n 's/^window_\(begin\|end\) .* id=\([0-9]*\) steps=\([0-9]*\)\.\.\([0-9]*\).* phase="\([^"]*\)".*/\1 \2 \5 \3-\4/p'
}

# 1. the RL layout: 3 rounds of 1 inference call and 4 micro-batches
run rl 3 4 1 1
windows >"$T/rl/win"
cat >"$T/rl/want" <<'W'
begin 0 fwd 0-0
end 0 fwd 0-0
begin 1 fwd_bwd 3-3
end 1 fwd_bwd 3-3
begin 2 fwd 1-1
end 2 fwd 1-1
begin 3 fwd 2-2
end 3 fwd 2-2
W
diff "$T/rl/want" "$T/rl/win" >"$T/rl/diff" || bad "rl: windows differ (want, got): $(cat "$T/rl/diff")"
grep -q "driver: 3 infer, 12 train calls" "$T/rl/stdout" || bad "rl: driver: $(cat "$T/rl/stdout")"
"$SP" steps --phase fwd "$F" | awk '$1 ~ /^[0-9]+$/ {print $1, $2}' | tr '\n' ' ' >"$T/rl/s_fwd"
[ "$(cat "$T/rl/s_fwd")" = "0 0 1 2 2 3 " ] || bad "rl: steps --phase fwd: $(cat "$T/rl/s_fwd")"
"$SP" steps --phase fwd_bwd "$F" | awk '$1 ~ /^[0-9]+$/ {print $1, $2}' | tr '\n' ' ' >"$T/rl/s_bwd"
[ "$(cat "$T/rl/s_bwd")" = "3 1 " ] || bad "rl: steps --phase fwd_bwd: $(cat "$T/rl/s_bwd")"
"$SP" steps "$F" >/dev/null 2>"$T/rl/s_all" || bad "rl: steps failed"
grep -q "note: the windows belong to several phases" "$T/rl/s_all" || bad "rl: steps of all phases say nothing"
"$SP" report "$F" 2>&1 | grep -q "^(of several phases" || bad "rl: report of all phases says nothing"
"$SP" report --phase fwd_bwd "$F" >"$T/rl/report" 2>&1 || bad "rl: report --phase fwd_bwd failed"
grep -q "^Window 1 (phase fwd_bwd): steps 3-3 (1 step)" "$T/rl/report" || bad "rl: report: $(grep Window "$T/rl/report")"
grep -q "^Window [023]" "$T/rl/report" && bad "rl: report --phase fwd_bwd shows another phase's window"
"$SP" report --phase nosuch "$F" >/dev/null 2>"$T/rl/nosuch" && bad "rl: report --phase nosuch succeeded"
grep -q "no window of phase 'nosuch' (4 of other phases)" "$T/rl/nosuch" || bad "rl: report --phase nosuch: $(cat "$T/rl/nosuch")"
"$SP" convert "$F" 2>"$T/rl/convert" || bad "rl: convert failed: $(cat "$T/rl/convert")"
D=$(dirname "$F") S=$(basename "$F" .sptrace)
for f in fwd/$S.0 fwd_bwd/$S.1 fwd/$S.2 fwd/$S.3; do
	[ -s "$D/$f.pt.trace.json.gz" ] || bad "rl: convert: no $f.pt.trace.json.gz ($(ls -R "$D" | tr '\n' ' '))"
done
[ "$(ls "$D"/fwd_bwd | wc -l)" = 1 ] || bad "rl: fwd_bwd/ holds $(ls "$D"/fwd_bwd | wc -l) files"
grep -q "not recorded: a window of phase" "$T/rl/stderr" && bad "rl: a window was skipped: $(grep "not recorded" "$T/rl/stderr")"

# 2. training records 3 steps, but inference comes between micro-batches 1 and 2 of a round:
#    its window is cut there and the rest of the active steps open a new one
run cut 2 3 0 3
windows >"$T/cut/win"
cat >"$T/cut/want" <<'W'
begin 0 fwd 0-0
end 0 fwd 0-0
begin 1 fwd_bwd 2-2
end 1 fwd_bwd 2-2
begin 2 fwd 1-1
end 2 fwd 1-1
begin 3 fwd_bwd 3-3
end 3 fwd_bwd 3-4
W
diff "$T/cut/want" "$T/cut/win" >"$T/cut/diff" || bad "cut: windows differ (want, got): $(cat "$T/cut/diff")"

# 3. check and schedule
"$SP" check "$T/rl/sp.ini" >"$T/check" 2>&1 || bad "check failed: $(cat "$T/check")"
grep -q "^# phase fwd: api marker 'cudaStreamSynchronize', every 1; .*first window: steps 0-0; repeats forever" \
	"$T/check" || bad "check: $(grep '^# phase' "$T/check")"
grep -q "^\[phase.fwd_bwd\]" "$T/check" || bad "check does not print [phase.fwd_bwd]"
grep -q "^\[schedule\]" "$T/check" && bad "check prints [schedule] beside phases"
"$SP" schedule -c "$T/rl/sp.ini" --phase fwd_bwd -n 6 2>/dev/null | tr '\n' ' ' >"$T/sched"
[ "$(cat "$T/sched")" = "0 NONE 1 WARMUP 2 WARMUP 3 RECORD_AND_SAVE 4 NONE 5 NONE " ] || bad "schedule --phase: $(cat "$T/sched")"
"$SP" schedule -c "$T/rl/sp.ini" >/dev/null 2>"$T/sched_err" && bad "schedule without --phase succeeded"
grep -q "name one with --phase NAME: fwd fwd_bwd" "$T/sched_err" || bad "schedule: $(cat "$T/sched_err")"
printf '[phase.a]\nkind = auto\n[phase.b]\nkind = auto\n' >"$T/two_auto.ini"
"$SP" check "$T/two_auto.ini" >/dev/null 2>"$T/two_auto" && bad "two auto phases accepted"
grep -q "a second phase with kind = auto" "$T/two_auto" || bad "two auto: $(cat "$T/two_auto")"

[ "$fail" = 0 ] && echo "phases: ok"
exit $fail
