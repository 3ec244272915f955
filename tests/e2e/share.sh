#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# share.sh - a profiler inside the program (as torch.profiler's Kineto) while stepprof holds
# CUPTI, without a GPU: share_driver plays the program and its profiler, libfakecupti.so plays
# CUPTI (one subscriber, activity records through buffer callbacks).
#  - without stepprof: what the second profiler receives (the reference counts);
#  - with stepprof (a window every 4 steps, one inside the program's profiling stretch): the same
#    callbacks and kernel records, its own correlationData kept apart from stepprof's, timestamps
#    converted to its clock and inside its stretch; CUPTI sees one subscriber (stepprof's); stderr
#    says once that the program's profiler is served; every stepprof window holds every kernel of
#    its steps, inside the stretch and outside it;
#  - the same with the program's profiler enabling (and then disabling) the whole runtime domain;
#  - the same with detach_between = always (no detach while the program's profiler records; after
#    it stops, its idle subscription kept, stepprof detaches between windows again);
#  - stepprof done and detached for good before the program's profiler starts: its calls go to
#    CUPTI itself, same counts.
#  - the automatic marker learning from the hooks (learn = hooks, not subscribed): the program's
#    profiler subscribing attaches stepprof at once, same counts.
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
FAKE=$B/tests/e2e/libfakecupti.so
T=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "kept $T" || rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
ARGS="22 5 8 12" # steps, kernels per step, the program's profiler from step 8 to step 11

FAKE_CUPTI=$FAKE FAKE_CUPTI_LOG=$T/ref.log timeout 60 "$B/tests/e2e/share_driver" $ARGS >"$T/ref.out" 2>"$T/ref.err" ||
	bad "reference run exited $?: $(tail -3 "$T/ref.err")"
ref=$(grep '^second:' "$T/ref.out")
case "$ref" in
"second: callbacks 40 of 40, records 20 of 20, corrdata_bad 0, stamp_bad 0, corr_bad 0, subscribe 0, buffers_out 0") ;;
*) bad "reference run: the fake CUPTI does not serve a lone profiler: '$ref'" ;;
esac

# run NAME WAIT REPEAT DETACH STEPS [ENV...]: the driver under stepprof (schedule WAIT, warmup 1,
# active 2, REPEAT), STEPS steps, the program's profiler in steps FROM (8 if unset) to FROM+3
run() {
	local name=$1 wait=$2 repeat=$3 detach=$4 steps=$5
	shift 5
	mkdir -p "$T/$name"
	printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = %s\nwarmup = 1\nactive = 2\nrepeat = %s\n[marker]\nkind = api\npattern = cudaDeviceSynchronize\n[cupti]\nlibrary = %s\ndetach_between = %s\n' \
		"$T/$name/out" "$wait" "$repeat" "$FAKE" "$detach" >"$T/$name/sp.ini"
	env "$@" FAKE_CUPTI_LOG="$T/$name/log" STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" LD_PRELOAD="$PRE" \
		timeout 60 "$B/tests/e2e/share_driver" "$steps" 5 "${FROM:-8}" "$((${FROM:-8} + 4))" >"$T/$name/stdout" 2>"$T/$name/stderr" ||
		bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
	"$B/stepprof" steps "$T/$name"/out/*.sptrace >"$T/$name/steps" 2>&1 || bad "$name: stepprof steps failed"
}

# check NAME SERVED STEPS... (FROM as for run): the second profiler got what it got alone; stepprof's windows hold
# 5 kernels in each of STEPS; SERVED 1: stepprof served it (one subscriber, said once), 0: CUPTI did
check() {
	/usr/bin/python3 - "$T/$1" "$ref" "${FROM:-8}" "$2" "${@:3}" <<'PY' || { bad "$1"; grep -v begins "$T/$1/stderr" | sed 's/^/    /' | head -12; return 1; }
import re, sys
d, ref, start, served, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", [int(x) for x in sys.argv[5:]]
problems = []
got = [l.strip() for l in open(f"{d}/stdout") if l.startswith("second:")]
if got != [ref]:
    problems.append(f"the program's profiler got {got}, alone it got '{ref}'")
log = [l.split()[0] for l in open(f"{d}/log")]
err = open(f"{d}/stderr").read()
said = err.count("the program uses CUPTI itself")
if served:
    inst = 1 + err.count("re-attached to CUPTI")  # stepprof's CUPTI instances
    if log.count("subscribe") != inst:
        problems.append(f"{log.count('subscribe')} subscriptions reached CUPTI, expected stepprof's alone ({inst})")
    # once per instance at most (a re-attach registers at its first window), in the first for sure
    per = []
    for c in log:
        if c == "subscribe":
            per.append(0)
        elif c == "register_timestamp" and per:
            per[-1] += 1
    if not per or per[0] != 1 or max(per) > 1:
        problems.append(f"timestamp callback registrations per CUPTI instance: {per} (once each at most, the first once)")
    if said != 1:
        problems.append(f"the sharing was said {said} times, expected once")
    # the program's profiler records from step `start` to start + 3; then it keeps an idle subscription
    # (as Kineto does), which does not hold stepprof any more
    late = [int(s) for s in re.findall(r"detached from (?:and re-attached to )?CUPTI in step (\d+)", err) if start <= int(s) < start + 4]
    if late:
        problems.append(f"stepprof detached from CUPTI in steps {late}, while the program's profiler recorded")
elif said:
    problems.append("said to serve the program although stepprof had let go of CUPTI")
steps = {int(l.split()[0]): int(l.split()[3]) for l in open(f"{d}/steps") if re.match(r"^\d+\s+\d+\s", l)}
if sorted(steps) != want:
    problems.append(f"recorded steps {sorted(steps)}, expected {want}")
short = {s: k for s, k in steps.items() if k != 5}
if short:
    problems.append(f"steps whose window lacks kernels (step: kernels): {short}")
for p in problems:
    print("   ", p)
sys.exit(1 if problems else 0)
PY
}

run served 1 0 auto 22
check served 1 2 3 6 7 10 11 14 15 18 19 && echo "ok   the program's profiler under stepprof gets the same callbacks and kernel records as alone (own correlationData, its clock, its stretch); stepprof's windows complete in and out of the stretch"
run domain 1 0 auto 22 DOMAIN=1
check domain 1 2 3 6 7 10 11 14 15 18 19 && echo "ok   the program's profiler enables and disables the whole runtime domain: the same counts; stepprof's marker callbacks survive its disabling"
FROM=14 run always 6 0 always 30 STEP_US=20000
if FROM=14 check always 1 7 8 16 17 25 26; then
	grep -Eq "re-attached to CUPTI in step ([0-9]|1[0-3]) " "$T/always/stderr" &&
		grep -Eq "re-attached to CUPTI in step (1[89]|2[0-9]) " "$T/always/stderr" &&
		echo "ok   detach_between = always: detaches between windows before the program's profiler, none while it records, again once it stopped (its subscription kept); the same counts" ||
		bad "always: no detach between windows before the program's profiler started (the test proves nothing)"
fi
STEP_US=20000 run done 1 1 auto 22 # (a loaded machine writes the window late: the detach must come before step 8)
check done 0 2 3 && echo "ok   stepprof let go of CUPTI before the program's profiler started: its calls reach CUPTI itself, the same counts"
# the automatic marker learning from the hooks ([marker] learn = hooks): stepprof is not subscribed
# when the program's profiler subscribes; it attaches at once and serves it as above
mkdir -p "$T/hooklearn"
printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 1\nwarmup = 1\nactive = 2\nrepeat = 0\n[marker]\nkind = auto\nlearn = hooks\n[cupti]\nlibrary = %s\n' \
	"$T/hooklearn/out" "$FAKE" >"$T/hooklearn/sp.ini"
FAKE_CUPTI_LOG="$T/hooklearn/log" STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/hooklearn/sp.ini" LD_PRELOAD="$PRE" \
	timeout 60 "$B/tests/e2e/share_driver" 22 5 8 12 >"$T/hooklearn/stdout" 2>"$T/hooklearn/stderr"
if [ "$(grep '^second:' "$T/hooklearn/stdout")" = "$ref" ] &&
	grep -q "the program's profiler needs CUPTI while learning from stepprof's hooks: attaching to CUPTI" "$T/hooklearn/stderr" &&
	[ "$(grep -c '^subscribe' "$T/hooklearn/log")" = 1 ]; then
	echo "ok   learn = hooks: the program's profiler subscribes while stepprof is not subscribed: stepprof attaches at once and serves it, the same counts"
else
	bad "hooklearn: $(grep '^second:' "$T/hooklearn/stdout"; grep -v begins "$T/hooklearn/stderr" | head -6)"
fi
exit $fail
