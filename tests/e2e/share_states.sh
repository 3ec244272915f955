#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# share_states.sh - a profiler inside the program that drives CUPTI as torch 2.11's Kineto does
# (tests/e2e/kineto_like.h: subscribes at its first prepare, keeps the subscription, and at the end
# of a session flushes only if one of its buffers is out), in every state stepprof can be in when
# it comes, without a GPU (cupti_life_driver, the stand-in libcupti, libcudart and libcuda; 20
# kernel launches a step). The profiler gets the same kernel records as without stepprof (the
# reference run), says no "CUPTI initialization failed", and every step of stepprof's windows
# holds its 20 kernels:
#  - default: the default [marker] (auto, learning from stepprof's hooks, not subscribed);
#  - cupti: auto, learn = cupti (subscribed, learning);
#  - attached: api marker, detach_between = never (locked and subscribed, between windows);
#  - parked: api marker seen by the hooks (detached between windows, the hooks counting), and
#    parked again once the profiler stopped, its subscription kept;
#  - early: the same, parked before a first window 30 steps away;
#  - window: the profiler's active steps are stepprof's window (both enable kernel records);
#  - tokens: recording the detector's tokens (STEPPROF_RECORD_TOKENS: subscribed all run);
#  - gone: stepprof detached for good after its last window before the profiler starts;
#  - handover: the profiler runs while stepprof holds CUPTI, keeps its idle subscription, and
#    stepprof lets go for good after its last window: the profiler's later sessions get CUPTI
#    itself (its own subscription), and their records.
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
FAKE=$B/tests/e2e/libfakecupti.so
T=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "kept $T" || rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
DRV="VIA_CUDART=$B/tests/e2e/libfakecudart.so VIA_DRIVER=$B/tests/e2e/fakecuda/libcuda.so.1 LAUNCHES=20 FAKE_CUPTI_ONE_CORR=1"

# run NAME STEPS PROF MARKER-LINES SCHEDULE-LINES [ENV...]: the driver under stepprof (STEP_US
# microseconds a step, 3000 if unset; [cupti] detach_between = DETACH, auto if unset);
# MARKER-LINES "none": the reference, without stepprof
run() {
	local name=$1 steps=$2 prof=$3 mk=$4 extra=$5
	shift 5
	mkdir -p "$T/$name"
	if [ "$mk" = none ]; then
		# shellcheck disable=SC2086
		env $DRV "$@" PROF="$prof" FAKE_CUPTI_LOG="$T/$name/log" LD_PRELOAD="$FAKE" timeout 60 \
			"$B/tests/e2e/cupti_life_driver" "$steps" "${STEP_US:-3000}" >"$T/$name/stdout" 2>"$T/$name/stderr" ||
			bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
		return
	fi
	printf "[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwarmup = 1\nactive = 3\n$extra\n[marker]\n$mk\n[cupti]\nlibrary = %s\ndetach_between = %s\n" \
		"$T/$name/out" "$FAKE" "${DETACH:-auto}" >"$T/$name/sp.ini"
	# shellcheck disable=SC2086
	env $DRV "$@" PROF="$prof" FAKE_CUPTI_LOG="$T/$name/log" STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" \
		LD_PRELOAD="$PRE" timeout 60 "$B/tests/e2e/cupti_life_driver" "$steps" "${STEP_US:-3000}" \
		>"$T/$name/stdout" 2>"$T/$name/stderr" || bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
	"$B/stepprof" steps "$T/$name"/out/*.sptrace >"$T/$name/steps" 2>&1 || bad "$name: stepprof steps failed"
}

# check NAME REF MIN_STEPS [STDERR-REGEX]: the profiler's counts equal REF's; at least MIN_STEPS
# window steps, each with 20 kernels; stderr matches STDERR-REGEX (the state was the one meant)
check() {
	/usr/bin/python3 - "$T/$1" "$T/$2" "$3" "${4:-}" <<'PY' || { bad "$1"; grep -v begins "$T/$1/stderr" | sed 's/^/    /' | head -14; return 1; }
import re, sys
d, ref, least, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
line = lambda f: [l.strip() for l in open(f) if l.startswith("kineto:")]
problems = []
got, exp = line(f"{d}/stdout"), line(f"{ref}/stdout")
if not exp or "records 0," in exp[0]:
    problems.append(f"the reference run's profiler got nothing: {exp}")
if got != exp:
    problems.append(f"the profiler got {got}, without stepprof {exp}")
err = open(f"{d}/stderr").read()
if "CUPTI initialization failed" in err:
    problems.append("the profiler said CUPTI initialization failed")
if want and not re.search(want, err):
    problems.append(f"stderr does not say /{want}/ (not the state meant)")
steps = {int(l.split()[0]): int(l.split()[3]) for l in open(f"{d}/steps") if re.match(r"^\d+\s+\d+\s", l)}
if len(steps) < least:
    problems.append(f"{len(steps)} window steps, expected {least} or more")
short = {s: k for s, k in steps.items() if k != 20}
if short:
    problems.append(f"window steps without their 20 kernels (step: kernels): {short}")
for p in problems:
    print("   ", p)
sys.exit(1 if problems else 0)
PY
}

AUTO='kind = auto'
API='kind = api\npattern = cudaDeviceSynchronize'
SCHED='wait = 8\nrepeat = 0'
run ref1 30 0,1,1,3 none ''
run default 30 0,1,1,3 "$AUTO" "$SCHED"
check default ref1 3 "learning from stepprof's hooks, not subscribed.*\n(.*\n)*.*the program's profiler needs CUPTI while learning from stepprof's hooks" &&
	echo "ok   default configuration, learning from the hooks (not subscribed): the profiler attaches stepprof and gets every record"
run cupti 30 0,1,1,3 "$AUTO\nlearn = cupti" "$SCHED"
check cupti ref1 3 && echo "ok   automatic marker learning with CUPTI (subscribed): the profiler gets every record"
run ref2 30 14,1,1,3 none ''
DETACH=never run attached 30 14,1,1,3 "$API" "$SCHED"
check attached ref2 6 && echo "ok   api marker, subscribed between windows: the profiler gets every record"
# windows 31-33 and 65-67; parked after step 33, the profiler's session at steps 40-43, parked
# again after it (its subscription kept, idle); 20 ms steps leave a loaded machine time to park
run ref7 70 39,1,1,3 none ''
STEP_US=20000 run parked 70 39,1,1,3 "$API" 'wait = 30\nrepeat = 0'
check parked ref7 6 "detached from CUPTI in step 3[4-9] until the next window(.*\n)*.*attached to CUPTI for the program's profiler(.*\n)*.*detached from CUPTI in step (4[3-9]|5[0-9]) until the next window" &&
	echo "ok   parked between windows: the profiler's activity attaches stepprof on its own thread, every record; parked again once it stopped"
run ref3 40 11,1,1,3 none ''
run early 40 11,1,1,3 "$API" 'wait = 30\nrepeat = 1'
check early ref3 3 "detached from CUPTI in step [0-9]+ until the next window(.*\n)*.*attached to CUPTI for the program's profiler" &&
	echo "ok   parked before a far first window: the profiler attaches stepprof, every record"
run ref4 30 7,1,1,3 none ''
DETACH=never run window 30 7,1,1,3 "$API" "$SCHED"
check window ref4 6 && echo "ok   the profiler's active steps are stepprof's window: both get every kernel"
run tokens 30 14,1,1,3 "$AUTO\nlearn = cupti" "$SCHED" STEPPROF_RECORD_TOKENS="$T/tokens/tok.sptok"
check tokens ref2 3 && echo "ok   recording the detector's tokens (subscribed all run): the profiler gets every record"
run ref5 24 15,1,1,3 none ''
STEP_US=10000 run gone 24 15,1,1,3 "$API" 'wait = 8\nrepeat = 1'
if check gone ref5 3 "detached from CUPTI in step 1[1-4] \(the schedule is done\)"; then
	[ "$(grep -c '^subscribe' "$T/gone/log")" = 2 ] &&
		echo "ok   detached for good before the profiler starts: it subscribes to CUPTI itself, every record" ||
		bad "gone: $(grep -c '^subscribe' "$T/gone/log") subscriptions reached the stand-in, expected stepprof's and the profiler's"
fi
# the profiler's sessions at steps 3-6, 8-11 and 13-16; stepprof's only window 3-5
run ref6 20 2,1,1,3,3 none ''
STEP_US=10000 run handover 20 2,1,1,3,3 "$API" 'wait = 2\nrepeat = 1'
if check handover ref6 3 "the program's profiler holds CUPTI itself from now on"; then
	awk '/^finalize/ {f = 1} f && /^subscribe/ {s = 1} END {exit !s}' "$T/handover/log" &&
		echo "ok   stepprof lets go for good while the profiler keeps its idle subscription: the profiler holds CUPTI itself from then on, every record of its later sessions" ||
		bad "handover: no subscription of the profiler's own after stepprof's cuptiFinalize"
fi
exit $fail
