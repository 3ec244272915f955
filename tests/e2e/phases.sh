#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# phases.sh - [phase.NAME] sections end to end without a GPU: libstepprof preloaded into a
# two-phase "CUDA program" (phases_driver: rounds of one inference call, cudaStreamSynchronize,
# and MICRO training micro-batches, cudaDeviceSynchronize, after 2 and 3 kernel launches) with the
# fake libcupti (fakecupti.c).
#  - the process writes a trace per phase, OUTPUT/fwd/ and OUTPUT/fwd_bwd/, each read alone (its
#    header, thread and string records), holding only its phase's windows with their kernels.
#  - the RL framework's layout: inference every call its own window (wait 0, warmup 0, active 1,
#    repeat 0); training wait = micro-batches - 3, warmup 2, active 1: its window is the last
#    micro-batch of the first round. Each phase numbers its own steps; the windows alternate and
#    never overlap; WINDOW records name their phase.
#  - report / steps / convert --phase select a phase; convert run in the run's folder writes each
#    window into the phase's folder there (no nested phase folder); a run folder given as a trace
#    names its phase folders.
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
	env ${RUN_ENV:-} STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" LD_PRELOAD="$PRE" timeout 60 \
		"$B/tests/e2e/phases_driver" "$rounds" "$micro" 3000 >"$T/$name/stdout" 2>"$T/$name/stderr" ||
		bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
	FW=$(ls "$T/$name"/out/fwd/*.sptrace 2>/dev/null | head -1)
	FB=$(ls "$T/$name"/out/fwd_bwd/*.sptrace 2>/dev/null | head -1)
	[ -n "$FW" ] && [ -n "$FB" ] || bad "$name: no trace per phase: $(ls -R "$T/$name/out" | tr '\n' ' ') $(grep -v begins "$T/$name/stderr" | tail -3)"
	ls "$T/$name"/out/*.sptrace >/dev/null 2>&1 && bad "$name: a trace beside the phase folders: $(ls "$T/$name"/out/*.sptrace)"
}

# windows FILE: "begin|end ID PHASE FIRST-LAST" per WINDOW record of FILE, from stepprof dump
windows() {
	"$SP" dump "$1" | sed -n 's/^window_\(begin\|end\) .* id=\([0-9]*\) steps=\([0-9]*\)\.\.\([0-9]*\).* phase="\([^"]*\)".*/\1 \2 \5 \3-\4/p'
}

# kernels FILE: "STEP:KERNELS " per recorded step of FILE, from stepprof steps
kernels() {
	"$SP" steps "$1" | awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}'
}

# 1. the RL layout: 3 rounds of 1 inference call and 4 micro-batches
run rl 3 4 1 1
windows "$FW" >"$T/rl/win_fwd"
printf 'begin 0 fwd 0-0\nend 0 fwd 0-0\nbegin 2 fwd 1-1\nend 2 fwd 1-1\nbegin 3 fwd 2-2\nend 3 fwd 2-2\n' >"$T/rl/want_fwd"
diff "$T/rl/want_fwd" "$T/rl/win_fwd" >"$T/rl/diff" || bad "rl: fwd/ windows differ (want, got): $(cat "$T/rl/diff")"
windows "$FB" >"$T/rl/win_bwd"
printf 'begin 1 fwd_bwd 3-3\nend 1 fwd_bwd 3-3\n' >"$T/rl/want_bwd"
diff "$T/rl/want_bwd" "$T/rl/win_bwd" >"$T/rl/diff" || bad "rl: fwd_bwd/ windows differ (want, got): $(cat "$T/rl/diff")"
grep -q "driver: 3 infer, 12 train calls" "$T/rl/stdout" || bad "rl: driver: $(cat "$T/rl/stdout")"
# a step runs from its marker call to the next phase's: an inference step holds the 3 launches of
# the micro-batch after it, the last micro-batch the 2 of the next inference call
[ "$(kernels "$FW")" = "0:3 1:3 2:3 " ] || bad "rl: fwd/ kernels per step: $(kernels "$FW")"
[ "$(kernels "$FB")" = "3:2 " ] || bad "rl: fwd_bwd/ kernels per step: $(kernels "$FB")"
for f in "$FW" "$FB"; do
	"$SP" dump "$f" | grep -q '^thread .*name="phases_driver"' || bad "rl: $f names no thread"
	"$SP" dump "$f" | grep -q '^kernel .*name="fake_kernel"' || bad "rl: $f: no kernel named (strings)"
done
"$SP" steps --phase fwd "$FW" | awk '$1 ~ /^[0-9]+$/ {print $1, $2}' | tr '\n' ' ' >"$T/rl/s_fwd"
[ "$(cat "$T/rl/s_fwd")" = "0 0 1 2 2 3 " ] || bad "rl: steps --phase fwd: $(cat "$T/rl/s_fwd")"
"$SP" steps --phase fwd_bwd "$FB" | awk '$1 ~ /^[0-9]+$/ {print $1, $2}' | tr '\n' ' ' >"$T/rl/s_bwd"
[ "$(cat "$T/rl/s_bwd")" = "3 1 " ] || bad "rl: steps --phase fwd_bwd: $(cat "$T/rl/s_bwd")"
"$SP" report --phase fwd_bwd "$FB" >"$T/rl/report" 2>&1 || bad "rl: report --phase fwd_bwd failed"
grep -q "^Window 1 (phase fwd_bwd): steps 3-3 (1 step), .*, 2 kernels" "$T/rl/report" || bad "rl: report: $(grep Window "$T/rl/report")"
grep -q "^Window [023]" "$T/rl/report" && bad "rl: report --phase fwd_bwd shows another phase's window"
"$SP" report --phase fwd "$FB" >/dev/null 2>"$T/rl/nosuch" && bad "rl: report --phase fwd of fwd_bwd/ succeeded"
grep -q "no window of phase 'fwd' (1 of other phases)" "$T/rl/nosuch" || bad "rl: report --phase fwd of fwd_bwd/: $(cat "$T/rl/nosuch")"
"$SP" report "$T/rl/out" >/dev/null 2>"$T/rl/dir" && bad "rl: report of the run folder succeeded"
grep -q "a folder, not a trace file: its phases' traces are .*/out/fwd/\*.sptrace" "$T/rl/dir" &&
	grep -q "/out/fwd_bwd/\*.sptrace" "$T/rl/dir" || bad "rl: report of the run folder: $(cat "$T/rl/dir")"
# run in the run's folder: each window goes into the current directory's folder of its phase
D=$(dirname "$(dirname "$FW")") S=$(basename "$FW" .sptrace)
(cd "$D" && "$SP" convert "$FW") 2>"$T/rl/convert" || bad "rl: convert failed: $(cat "$T/rl/convert")"
(cd "$D" && "$SP" convert "$FB") 2>>"$T/rl/convert" || bad "rl: convert failed: $(cat "$T/rl/convert")"
for f in fwd/$S.0 fwd_bwd/$S.1 fwd/$S.2 fwd/$S.3; do
	[ -s "$D/$f.pt.trace.json.gz" ] || bad "rl: convert: no $f.pt.trace.json.gz ($(ls -R "$D" | tr '\n' ' '))"
done
[ "$(ls "$D"/fwd_bwd | wc -l)" = 2 ] || bad "rl: fwd_bwd/ holds $(ls "$D"/fwd_bwd | wc -l) files: $(ls "$D"/fwd_bwd)"
[ -e "$D/fwd/fwd" ] && bad "rl: convert nested a phase folder in fwd/"
grep -q "not recorded: a window of phase" "$T/rl/stderr" && bad "rl: a window was skipped: $(grep "not recorded" "$T/rl/stderr")"

# 1b. the same with the GPU records of inference window 0 slow (its last kernel 40 ms late): window 0
#     still waits for it when the training window 1 and inference window 2 begin; window 2 is held
#     behind 0 in fwd/, and its records must go there all the same, not to fwd_bwd/
RUN_ENV="FAKE_CUPTI_LATE_CORR=6 FAKE_CUPTI_LATE_MS=40" run slow 3 4 1 1
windows "$FW" >"$T/slow/win_fwd"
diff "$T/rl/want_fwd" "$T/slow/win_fwd" >"$T/slow/diff" || bad "slow: fwd/ windows differ (want, got): $(cat "$T/slow/diff")"
windows "$FB" >"$T/slow/win_bwd"
diff "$T/rl/want_bwd" "$T/slow/win_bwd" >"$T/slow/diff" || bad "slow: fwd_bwd/ windows differ (want, got): $(cat "$T/slow/diff")"
[ "$(kernels "$FW")" = "0:3 1:3 2:3 " ] || bad "slow: fwd/ kernels per step: $(kernels "$FW")"
[ "$(kernels "$FB")" = "3:2 " ] || bad "slow: fwd_bwd/ kernels per step: $(kernels "$FB")"
grep -q "window 0 (steps 0-0) closed after [4-9][0-9]\." "$T/slow/stderr" || bad "slow: window 0 did not wait: $(grep 'window 0' "$T/slow/stderr")"

# 2. training records 3 steps, but inference comes between micro-batches 1 and 2 of a round:
#    its window is cut there and the rest of the active steps open a new one
run cut 2 3 0 3
windows "$FW" >"$T/cut/win"
windows "$FB" >>"$T/cut/win"
cat >"$T/cut/want" <<'W'
begin 0 fwd 0-0
end 0 fwd 0-0
begin 2 fwd 1-1
end 2 fwd 1-1
begin 1 fwd_bwd 2-2
end 1 fwd_bwd 2-2
begin 3 fwd_bwd 3-3
end 3 fwd_bwd 3-4
W
diff "$T/cut/want" "$T/cut/win" >"$T/cut/diff" || bad "cut: windows differ (want, got): $(cat "$T/cut/diff")"
[ "$(kernels "$FB")" = "2:2 3:3 4:3 " ] || bad "cut: fwd_bwd/ kernels per step: $(kernels "$FB")"

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
