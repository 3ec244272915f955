#!/usr/bin/env bash
# cli_check_schedule.sh - `stepprof check` and `stepprof schedule` end to end: exit codes, error
# messages with FILE:LINE, environment overrides, the print/load round trip, exact schedule tables.
# Needs $SP_BUILD (build dir) and $SP_ROOT (repo root); exits non-zero on any failure.
set -u
SP=${SP_BUILD:?}/stepprof
D=${SP_ROOT:?}/tests/data
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
failed=0

# run NAME CMD...: runs CMD, keeping stdout in $T/NAME.out, stderr in $T/NAME.err, status in $rc
run() {
	local name=$1
	shift
	"$@" >"$T/$name.out" 2>"$T/$name.err"
	rc=$?
}
ok() { # ok DESCRIPTION TEST...
	local what=$1
	shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what"; failed=1; fi
}
has() { grep -qxF -- "$2" "$T/$1"; } # has FILE LINE: FILE holds exactly that line

# check: a valid file
run good "$SP" check "$D/good.ini"
ok "check good.ini exits 0" [ "$rc" = 0 ]
ok "check good.ini header" has good.out "# stepprof: $D/good.ini is valid"
ok "check good.ini prints values" has good.out "wait = 20"
ok "check good.ini quiet stderr" [ ! -s "$T/good.err" ]

# check: what it prints loads back to the same configuration
grep -v '^#' "$T/good.out" >"$T/rt.ini"
run rt "$SP" check "$T/rt.ini"
ok "printed configuration is valid" [ "$rc" = 0 ]
ok "printed configuration round-trips" diff <(grep -v '^#' "$T/good.out") <(grep -v '^#' "$T/rt.out")

# check: every error of a bad file, one per line on stderr, exit 2
run bad "$SP" check "$D/bad.ini"
ok "check bad.ini exits 2" [ "$rc" = 2 ]
ok "check bad.ini prints nothing on stdout" [ ! -s "$T/bad.out" ]
ok "check bad.ini reports all 19 errors" [ "$(wc -l <"$T/bad.err")" = 19 ]
ok "bad int with file:line" has bad.err "stepprof check: $D/bad.ini:7: [schedule] wait: not an integer: 'x' (allowed: integer >= 0)"
ok "unknown key with file:line" has bad.err "stepprof check: $D/bad.ini:11: [schedule] wiat: unknown key (allowed: skip_first, skip_first_wait, wait, warmup, active, repeat, profiling_frequency)"
ok "syntax error with file:line" has bad.err "stepprof check: $D/bad.ini:13: expected 'key = value', '[section]' or a comment: 'this line has no equals sign'"
ok "bad rank set with file:line" has bad.err "stepprof check: $D/bad.ini:22: [ranks] ranks: bad rank or range 'x' (allowed: all, or ranks and ranges like 0 / 0,1 / 0-3,8)"
ok "missing pattern with file:line" has bad.err "stepprof check: $D/bad.ini:18: [marker] kind: kernel needs a pattern (allowed: [marker] pattern = a glob such as ncclAllReduce* with kernel, api, nccl, nvtx)"
run cross "$SP" check "$D/bad_cross.ini"
ok "contradictions exit 2" [ "$rc" = 2 ]
ok "warmup + active > profiling_frequency" has cross.err "stepprof check: $D/bad_cross.ini:6: [schedule] profiling_frequency: 10 is less than warmup + active = 11 (allowed: 0, or at least warmup + active)"

# check: defaults, $STEPPROF_CONFIG, environment overrides, usage errors
run defaults "$SP" check
ok "check with no file: defaults" has defaults.out "# stepprof: built-in defaults"
ok "defaults: wait = 10" has defaults.out "wait = 10"
run envcfg env STEPPROF_CONFIG="$D/frequency.ini" "$SP" check
ok "STEPPROF_CONFIG names the file" has envcfg.out "# stepprof: $D/frequency.ini is valid"
ok "profiling_frequency sets wait" has envcfg.out "wait = 7"
run envset env STEPPROF_SCHEDULE_WAIT=3 STEPPROF_PROFILE_OUTPUT=/tmp/x "$SP" check "$D/good.ini"
ok "env override applied" has envset.out "wait = 3"
ok "env override named in the header" has envset.out "# environment overrides applied: STEPPROF_PROFILE_OUTPUT, STEPPROF_SCHEDULE_WAIT"
run envbad env STEPPROF_SCHEDULE_WAIT=x "$SP" check
ok "bad env value exits 2" [ "$rc" = 2 ]
ok "bad env value message" has envbad.err "stepprof check: STEPPROF_SCHEDULE_WAIT: [schedule] wait: not an integer: 'x' (allowed: integer >= 0)"
run missing "$SP" check /nonexistent/stepprof.ini
ok "missing file exits 2" [ "$rc" = 2 ]
ok "missing file message" has missing.err "stepprof check: /nonexistent/stepprof.ini: cannot open: No such file or directory"
run usage "$SP" check a b
ok "two files: usage error" [ "$rc" = 2 ]
run rank env OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=8 "$SP" check "$D/good.ini"
ok "check shows this process's rank" has rank.out "# this process: rank 5 of 8 (openmpi): not selected"

# schedule: the exact table on stdout, the summary on stderr
run sched "$SP" schedule --count 12 skip_first=2 wait=1 warmup=1 active=2 repeat=2
ok "schedule exits 0" [ "$rc" = 0 ]
ok "schedule table" diff "$T/sched.out" - <<'EOF'
0 NONE
1 NONE
2 NONE
3 WARMUP
4 RECORD
5 RECORD_AND_SAVE
6 NONE
7 WARMUP
8 RECORD
9 RECORD_AND_SAVE
10 NONE
11 NONE
EOF
ok "auto: a window before the lock is a note (the schedule starts from the lock)" grep -q "^stepprof schedule: note: the schedule collects from step 3, but automatic step detection .* the schedule then starts from the lock, .* raise skip_first or wait by 3" "$T/sched.err"
grep -v "^stepprof schedule: note: the schedule collects" "$T/sched.err" >"$T/sched.err2"
ok "schedule summary on stderr" diff "$T/sched.err2" - <<'EOF'
# windows (recorded steps): steps 4-5, 8-9
# nothing is recorded after step 9
EOF
run sdef "$SP" schedule
ok "default schedule: a note for loops without a host sync" grep -q "^stepprof schedule: note: the schedule collects from step 10" "$T/sdef.err"
run slate "$SP" schedule skip_first=30
ok "a late schedule: no warning" sh -c "! grep -q 'automatic step detection' '$T/slate.err'"
run sapi env STEPPROF_MARKER_KIND=api STEPPROF_MARKER_PATTERN=cudaDeviceSynchronize "$SP" schedule skip_first=0 wait=0
ok "an explicit marker: no warning" sh -c "! grep -q 'automatic step detection' '$T/sapi.err'"
ok "default steps: skip_first + cycle * repeat + 2" [ "$(wc -l <"$T/sdef.out")" = 16 ]
ok "default schedule records 11-13" has sdef.out "13 RECORD_AND_SAVE"
run sw0 "$SP" schedule --count=5 warmup=0 active=1 wait=1 repeat=0
ok "warmup = 0 warns on stderr" grep -q "warning: warmup = 0" "$T/sw0.err"
ok "stdout stays exactly the table" diff "$T/sw0.out" - <<'EOF'
0 NONE
1 RECORD_AND_SAVE
2 NONE
3 RECORD_AND_SAVE
4 NONE
EOF
ok "forever noted" grep -q "^# repeat = 0: the cycle of 2 steps goes on forever$" "$T/sw0.err"
run scut "$SP" schedule -n 5 wait=1 warmup=1 active=4
ok "window cut off by --count" has scut.err "# windows (recorded steps): steps 2-4 (cut off by the end of the table)"
run sfreq "$SP" schedule --config "$D/frequency.ini" --count 20
ok "frequency file: two windows in 20 steps" [ "$(grep -c RECORD_AND_SAVE "$T/sfreq.out")" = 2 ]
ok "frequency file: the second ends at step 19" has sfreq.out "19 RECORD_AND_SAVE"
run sfreq2 "$SP" schedule repeat=0 profiling_frequency=4 warmup=1 active=1 --count 3
ok "an option after KEY=VALUE is taken" [ "$rc" = 0 ] && ok "options anywhere: 3 steps" [ "$(wc -l <"$T/sfreq2.out")" = 3 ]
run sdot "$SP" schedule -c "$D/frequency.ini" schedule.wait=1 --set schedule.warmup=0 warmup=1 --steps 10-12
ok "schedule.KEY=VALUE, --set and KEY=VALUE are one thing; --steps A-B" [ "$(tr '\n' ' ' <"$T/sdot.out")" = "$("$SP" schedule -c "$D/frequency.ini" wait=1 warmup=1 --count 13 2>/dev/null | tail -n 3 | tr '\n' ' ')" ]
run sbare "$SP" schedule --steps 12 skip_first=2 wait=1 warmup=1 active=2 repeat=2
ok "--steps A: step A alone, as convert --steps takes it" [ "$(cat "$T/sbare.out")" = "12 NONE" ]
run sfrom "$SP" schedule --steps 3- --count 3 skip_first=2 wait=1 warmup=1 active=2 repeat=2
ok "--steps A-: from A, --count steps" [ "$(tr '\n' ' ' <"$T/sfrom.out")" = "3 WARMUP 4 RECORD 5 RECORD_AND_SAVE " ]
run sfreq3 "$SP" schedule --count 8 repeat=0 profiling_frequency=4 warmup=1 active=1
ok "profiling_frequency on the command line" [ "$(tr '\n' ' ' <"$T/sfreq3.out")" = "0 NONE 1 NONE 2 WARMUP 3 RECORD_AND_SAVE 4 NONE 5 NONE 6 WARMUP 7 RECORD_AND_SAVE " ]
run sfrepeat "$SP" schedule profiling_frequency=10
ok "profiling_frequency with repeat > 0 exits 2" [ "$rc" = 2 ]
ok "profiling_frequency with repeat > 0 message" grep -qF "stepprof schedule: profiling_frequency=10: [schedule] profiling_frequency: 10 is only allowed with repeat = 0" "$T/sfrepeat.err"
run senv env STEPPROF_SCHEDULE_WAIT=5 STEPPROF_SCHEDULE_REPEAT=1 "$SP" schedule --count 2 warmup=0 active=1 wait=0
ok "the command line wins over the environment" [ "$(tr '\n' ' ' <"$T/senv.out")" = "0 RECORD_AND_SAVE 1 NONE " ]

# schedule: bad arguments and config errors exit 2 and print every error
run sbad "$SP" schedule wiat=1 wait=x foo active=0
ok "bad KEY/VALUE exits 2" [ "$rc" = 2 ]
ok "bad KEY/VALUE prints no table" [ ! -s "$T/sbad.out" ]
ok "unknown key" grep -qF "stepprof schedule: wiat=1: [schedule] wiat: unknown key (allowed: skip_first," "$T/sbad.err"
ok "bad value" has sbad.err "stepprof schedule: wait=x: [schedule] wait: not an integer: 'x' (allowed: integer >= 0)"
ok "not KEY=VALUE" grep -qF "stepprof schedule: foo: expected KEY=VALUE" "$T/sbad.err"
ok "out of range" has sbad.err "stepprof schedule: active=0: [schedule] active: out of range: '0' (allowed: integer >= 1)"
run ssteps "$SP" schedule --count 0
ok "--count 0 exits 2" [ "$rc" = 2 ]
run sconf "$SP" schedule --config "$D/bad.ini"
ok "config errors exit 2" [ "$rc" = 2 ]
ok "config errors all printed" [ "$(wc -l <"$T/sconf.err")" = 19 ]

# the Python bridge's kinds: accepted and explained; a python pattern is module:qualname
run copt env STEPPROF_MARKER_KIND=optimizer "$SP" check
ok "kind = optimizer is valid" [ "$rc" = 0 ]
ok "kind = optimizer explained" grep -q "^stepprof check: note: kind = optimizer: a step ends when a torch optimizer's step() returns" "$T/copt.err"
run cpy env STEPPROF_MARKER_KIND=python STEPPROF_MARKER_PATTERN=__main__:train_step "$SP" schedule --count 1
ok "kind = python explained by schedule" grep -q "^stepprof schedule: note: kind = python: a step begins at each call of __main__:train_step" "$T/cpy.err"
run cpybad env STEPPROF_MARKER_KIND=python STEPPROF_MARKER_PATTERN='train*' "$SP" check
ok "a python pattern that is no module:qualname exits 2" [ "$rc" = 2 ]
ok "... and says what is allowed" grep -qF "STEPPROF_MARKER_PATTERN: [marker] pattern: 'train*' is not module:qualname" "$T/cpybad.err"

exit $failed
