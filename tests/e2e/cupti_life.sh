#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cupti_life.sh - stepprof's CUPTI life cycle without a GPU: libstepprof preloaded into a "CUDA
# program" (cupti_life_driver) with a stand-in libcupti (libfakecupti.so) that logs every call.
#  - recording the detector's tokens (STEPPROF_RECORD_TOKENS): no detach at all, so that the
#    stream holds the whole run (it is replayed against its truth).
#  - one window, then nothing: after the window is written stepprof detaches once (flush,
#    unsubscribe, cuptiFinalize) and never calls CUPTI again; the trace still closes and reads.
#  - repeating windows with detach_between = always (and auto, no CUDA graph): detach + re-attach
#    between every two windows; the timestamp callback registered exactly once per CUPTI instance
#    and before its activity kinds, by a re-attach only after its marker callbacks (not at once);
#    no marker lost (every step numbered as the schedule says).
#  - a cuptiFinalize of 23 ms in 30 ms steps (longer than 3/4 of the quiet time): timed on stderr;
#    a marker call missed while detached is reported, and when none was the next one proves it.
#  - the same with 3/4 of each step inside the marker call (a GPU-bound loop): a detach never
#    straddles a marker call, so no step is lost and none is reported missed.
#  - the same with four more threads in callbacks all the time (callbacks in flight at every detach).
#  - detach_between = never, or auto with a CUDA graph created: one subscription all along.
#  - marker calls made through the dynamic linker (a stand-in libcudart, as libtorch calls the
#    real one): once stepprof's hooks are proven to see every one, stepprof parks between windows
#    (detached until just before the next window, the hooks numbering the steps): every step
#    numbered as the schedule says, CUPTI saw fewer marker calls than were made, no CUPTI call
#    while parked; one marker call that bypasses the hooks keeps stepprof from parking at all.
#  - a thread polling a hooked call all along (NCCL's watchdog): CUPTI is never finalised while a
#    thread is inside one (the real CUPTI crashed the thread; the fake logs it). The same for kernel
#    launches through stepprof's trampolines, and under stress: four launching threads, 30 parks
#    (cuLaunchKernel, cuLaunchCooperativeKernel, cuLaunchHostFunc, cuMemsetD8Async and cuMemsetD2D8Async,
#    cuMemcpyHtoDAsync, legacy and per-thread lookups).
#  - the automatic marker (MARKER=auto) on a loop of 20 kernel launches and a cudaDeviceSynchronize
#    through the stand-in libcudart: it locks on the sync, launch callbacks go off between counted
#    steps (the sparse check), it parks between windows once the hooks are proven for its anchor,
#    and every window step still has its 20 kernels; then the loop changes (60 kernels, 4.5 times
#    longer steps) while parked: a step's time stands out, stepprof re-attaches, the counted step
#    does not match, detection re-locks on the new loop, and its windows hold 60 kernels a step.
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
T=$(mktemp -d)
trap 'rm -rf "$T" "$T.wrapped"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }

# run NAME SCHED(wait,warmup,active,repeat) DETACH STEPS [ENV...]: one driver run in $T/NAME (steps
# of $STEP_US microseconds, 20000 if unset); its trace's steps in $T/NAME/steps unless NOTRACE is set
run() {
	local name=$1 sched=$2 detach=$3 steps=$4 wa wu ac rp
	shift 4
	IFS=, read -r wa wu ac rp <<<"$sched"
	mkdir -p "$T/$name"
	local mk="kind = api\npattern = ${MARKER:-cudaDeviceSynchronize}"
	[ "${MARKER:-}" = auto ] && mk='kind = auto'
	[ -n "${KMARKER:-}" ] && mk="kind = kernel\npattern = $KMARKER"
	printf "[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = %s\nwarmup = %s\nactive = %s\nrepeat = %s\n[marker]\n$mk\nlearn = ${LEARN:-cupti}\n[cupti]\nlibrary = %s\ndetach_between = %s\n" \
		"$T/$name/out" "$wa" "$wu" "$ac" "$rp" "$B/tests/e2e/libfakecupti.so" "$detach" >"$T/$name/sp.ini"
	env "$@" FAKE_CUPTI_LOG="$T/$name/log" STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" \
		LD_PRELOAD="$PRE" timeout 60 "$B/tests/e2e/cupti_life_driver" "$steps" "${STEP_US:-20000}" \
		>"$T/$name/stdout" 2>"$T/$name/stderr" || bad "$name: driver exited $?: $(tail -3 "$T/$name/stderr")"
	[ -n "${NOTRACE:-}" ] && return # a run that records nothing (it says why)
	"$B/stepprof" steps "$T/$name"/out/*.sptrace >"$T/$name/steps" 2>&1 || bad "$name: stepprof steps failed: $(tail -2 "$T/$name/steps")"
}

# check NAME CYCLES FINAL STEPS...: the log's life cycle and the recorded step numbers
check() {
	/usr/bin/python3 - "$T/$1" "$2" "$3" "${@:4}" <<'PY' || { bad "$1"; sed 's/^/    /' "$T/$1/stderr" | grep -v begins | head -20; false; }
import re, sys
d, cycles, final, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(x) for x in sys.argv[4:]]
log = [l.split()[0] for l in open(f"{d}/log") if not l.startswith("enable_cb")]
err = open(f"{d}/stderr").read()
problems = []
if "AFTER_FINALIZE" in log:
    problems.append("a CUPTI call after cuptiFinalize: " + str(log[log.index("AFTER_FINALIZE"):][:4]))
if cycles < 0:  # any number of cycles: as many subscriptions as finalisations, plus one
    cycles = log.count("finalize") - final
if log.count("finalize") != cycles + final:
    problems.append(f"{log.count('finalize')} cuptiFinalize calls, expected {cycles + final}")
if log.count("subscribe") != cycles + 1:
    problems.append(f"{log.count('subscribe')} subscriptions, expected {cycles + 1}")
# each instance: subscribe, then register_timestamp exactly once, before any activity kind
inst = []
for w in log:
    if w == "subscribe":
        inst.append([])
    elif inst:
        inst[-1].append(w)
for k, calls in enumerate(inst):
    if calls.count("register_timestamp") != 1:
        problems.append(f"instance {k}: timestamp callback registered {calls.count('register_timestamp')} times")
    elif "activity_enable" in calls and calls.index("activity_enable") < calls.index("register_timestamp"):
        problems.append(f"instance {k}: an activity kind enabled before the timestamp callback")
    if "finalize" in calls and calls[calls.index("finalize") - 1] != "unsubscribe":
        problems.append(f"instance {k}: cuptiFinalize not right after cuptiUnsubscribe")
# a re-attach holds only the marker's callbacks: its activity callbacks come later (before its window)
full = [l.split()[0] for l in open(f"{d}/log")]
subs = [i for i, w in enumerate(full) if w == "subscribe"]
for k, i in enumerate(subs[1:], 1):
    nxt = full[i + 1:i + 2]
    if nxt == ["register_timestamp"]:
        problems.append(f"instance {k}: activity callbacks registered at the re-attach itself")
if final and log[-1] != "finalize":
    problems.append(f"CUPTI called after the final detach: {log[-3:]}")
if final and "detached from CUPTI in step" not in err:
    problems.append("no 'detached from CUPTI' message with STEPPROF_VERBOSE")
if err.count("re-attached to CUPTI") != cycles:
    problems.append(f"{err.count('re-attached to CUPTI')} re-attach messages, expected {cycles}")
if "may have been missed" in err:
    problems.append("a missed boundary was reported")
got = [int(l.split()[0]) for l in open(f"{d}/steps") if re.match(r"^\d+\s", l)]
if got != want:
    problems.append(f"recorded steps {got}, expected {want}")
for p in problems:
    print("   ", p)
sys.exit(1 if problems else 0)
PY
}

run once 5,1,3,1 auto 30
check once 0 1 6 7 8 && echo "ok   one window: detached for good after it (flush, unsubscribe, finalize, then no CUPTI call); trace complete"
run tokrec 5,1,3,1 auto 30 STEPPROF_RECORD_TOKENS="$T/tokrec/run.tokens"
n=$("$B/stepprof" autostep "$T/tokrec/run.tokens" 2>/dev/null | awk '$1 == "api" && $3 == "cudaDeviceSynchronize" { print $2; exit }')
check tokrec 0 0 6 7 8 && [ "${n:-0}" -ge 30 ] &&
	echo "ok   recording the detector's tokens: CUPTI stays after the last window, the stream holds all 30 steps' syncs" ||
	bad "tokrec: the token stream holds ${n:-no} of the 30 marker calls (or CUPTI was let go)"
run always 6,1,3,0 always 40
check always 3 0 7 8 9 17 18 19 27 28 29 37 38 39 && echo "ok   detach_between = always: 3 re-attaches, one timestamp registration per instance, no step lost"
# steps shorter than a window takes to close (about 5 ms here): the next window comes before the
# last is written, nothing to detach for, and stepprof says so once (not in 20 ms steps). A loaded
# machine may stretch the steps until a gap fits a detach after all: then saying it is optional
STEP_US=200 run shortgap 8,1,2,0 always 600
n=$(grep -c "still being written when the next one came close" "$T/shortgap/stderr")
d=$(grep -cE "detached from CUPTI in step [0-9]+ until|detached from and re-attached to CUPTI" "$T/shortgap/stderr")
{ [ "$n" = 1 ] || { [ "$n" = 0 ] && [ "$d" -gt 0 ]; }; } && ! grep -q "still being written" "$T/always/stderr" &&
	echo "ok   steps shorter than a window's close: no detach between windows, said once ($d detaches)" ||
	bad "shortgap: said $n times, $d detaches; $(grep -v begins "$T/shortgap/stderr" | head -5)"
run auto 6,1,3,0 auto 40
check auto 0 0 7 8 9 17 18 19 27 28 29 37 38 39 && grep -q "not every marker call comes through stepprof's hooks" "$T/auto/stderr" &&
	echo "ok   detach_between = auto, marker calls not through the hooks: stays subscribed, and says why"
run gpubound 6,1,3,0 always 40 SYNC_US=15000
check gpubound -1 0 7 8 9 17 18 19 27 28 29 37 38 39 && echo "ok   detach_between = always, GPU-bound: detaches fall between marker calls, no step lost"
run threads 6,1,3,0 always 40 THREADS=4
check threads 3 0 7 8 9 17 18 19 27 28 29 37 38 39 && echo "ok   detach_between = always with 4 threads in callbacks all along: 3 re-attaches, no step lost"
# a cuptiFinalize of 23 ms in 30 ms steps: each detach outlasts 3/4 of the time between marker
# calls; every cycle is timed on stderr, and whether a marker call came while detached is either
# proven not to have happened (the next one came early enough) or reported: never silent
STEP_US=30000 run slowfin 6,1,3,0 always 40 FAKE_FINALIZE_US=23000
/usr/bin/python3 - "$T/slowfin" <<'PY' && echo "ok   a detach that outlasts the quiet time: timed on stderr; a missed marker call is reported, one that was not is proven" || bad "slowfin: $(grep -v begins "$T/slowfin/stderr" | head -8)"
import re, sys
d = sys.argv[1]
err = open(f"{d}/stderr").read()
seen, steps = map(int, re.search(r"driver: (\d+) of (\d+) syncs seen", open(f"{d}/stdout").read()).groups())
cycles = re.findall(r"re-attached to CUPTI in step \d+ .*cuptiFinalize ([\d.]+) ms", err)
ok = bool(cycles) and all(float(c) >= 23 for c in cycles)
missed = "may have been missed" in err
if seen < steps:
    ok = ok and missed  # a marker call came while detached: it must be said
else:
    ok = ok and (missed or "no marker call was missed while detached" in err)
sys.exit(0 if ok else 1)
PY
run graph 6,1,3,0 auto 40 GRAPH=1
check graph 0 0 7 8 9 17 18 19 27 28 29 37 38 39 && echo "ok   detach_between = auto with a CUDA graph: stays subscribed"
# a CUDA graph keeps the subscription under every policy and after the last window (cuptiFinalize
# broke torch's graph replays on an H100: tests/gpu/graph_detach.sh), said once
run graphalways 6,1,3,0 always 40 GRAPH=1
check graphalways 0 0 7 8 9 17 18 19 27 28 29 37 38 39 &&
	[ "$(grep -c "not detaching from CUPTI in step [0-9]*: the program created a CUDA graph" "$T/graphalways/stderr")" = 1 ] &&
	echo "ok   detach_between = always with a CUDA graph: stays subscribed, said once" ||
	bad "graphalways: $(grep -c 'created a CUDA graph' "$T/graphalways/stderr") graph messages"
run graphonce 5,1,3,1 auto 30 GRAPH=1
check graphonce 0 0 6 7 8 && grep -q "not detaching from CUPTI in step [0-9]* (the schedule is done): the program created a CUDA graph" "$T/graphonce/stderr" &&
	echo "ok   one window with a CUDA graph: no detach after it either, and stepprof says why" ||
	bad "graphonce: $(grep -v begins "$T/graphonce/stderr" | head -5)"
run never 6,1,3,0 never 40
check never 0 0 7 8 9 17 18 19 27 28 29 37 38 39 && echo "ok   detach_between = never: stays subscribed"

# parked: CUPTI holds nothing between windows, the hooks count the steps
parked() {
	/usr/bin/python3 - "$T/$1" "$2" "${@:3}" <<'PY' || { bad "$1"; grep -v begins "$T/$1/stderr" | sed 's/^/    /' | head -20; false; }
import re, sys
d, want_parks, want = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3:]]
err = open(f"{d}/stderr").read()
log = [l.split()[0] for l in open(f"{d}/log")]
seen, steps = map(int, re.search(r"driver: (\d+) of (\d+) syncs seen", open(f"{d}/stdout").read()).groups())
parks = len(re.findall(r"detached from CUPTI in step \d+ until the next window", err))
unparks = len(re.findall(r"re-attached to CUPTI in step \d+ for the next window", err))
problems = []
if (parks >= 1) != (want_parks >= 1) or (want_parks and parks < want_parks):
    problems.append(f"{parks} parks, expected {want_parks or 'none'}")
if want_parks and not unparks >= parks - 1:
    problems.append(f"{parks} parks but {unparks} re-attaches")
if want_parks and seen >= steps:
    problems.append(f"CUPTI saw all {steps} marker calls while parked")
if "AFTER_FINALIZE" in log:
    problems.append("a CUPTI call after cuptiFinalize")
if log.count("subscribe") != unparks + 1 + (0 if want_parks else log.count("subscribe") - 1):
    problems.append(f"{log.count('subscribe')} subscriptions for {unparks} re-attaches")
if "may have been missed" in err or "took over 1 s" in err:
    problems.append("a missed boundary or a slow re-attach was reported")
got = [int(l.split()[0]) for l in open(f"{d}/steps") if re.match(r"^\d+\s", l)]
if got != want:
    problems.append(f"recorded steps {got}, expected {want}")
for p in problems:
    print("   ", p)
sys.exit(1 if problems else 0)
PY
}
FAKERT=$B/tests/e2e/libfakecudart.so
FAKECUDA=$B/tests/e2e/fakecuda/libcuda.so.1
run hooked 8,1,3,0 auto 48 VIA_CUDART="$FAKERT"
parked hooked 3 9 10 11 21 22 23 33 34 35 45 46 47 &&
	echo "ok   marker calls through the dynamic linker: parked between windows, the hooks numbered every step"
run hooklocal 8,1,3,0 auto 48 VIA_CUDART="$FAKERT" CUDART_LOCAL=1
parked hooklocal 3 9 10 11 21 22 23 33 34 35 45 46 47 &&
	echo "ok   the runtime under another name, loaded out of the global scope: the hooks still find it and park"
STEP_US=3000 run hookfast 8,1,3,0 always 48 VIA_CUDART="$FAKERT"
parked hookfast 1 9 10 11 21 22 23 33 34 35 45 46 47 &&
	echo "ok   parked with 3 ms steps: the re-attach before each window in time (or waited for), no step lost"
# a first window far away: parked from the proof of the hooks (8 marker calls) until just before
# it, by the application thread's own tick (no writer thread yet), with auto and with always; one
# park, one re-attach, then the window and the final detach
for pol in auto always; do
	run "early$pol" 30,1,3,1 "$pol" 48 VIA_CUDART="$FAKERT"
	parked "early$pol" 1 31 32 33 &&
		grep -Eq "detached from CUPTI in step ([7-9]|1[0-2]) until the next window" "$T/early$pol/stderr" &&
		grep -Eq "re-attached to CUPTI in step 2[6-9] for the next window" "$T/early$pol/stderr" &&
		echo "ok   first window at step 30 ($pol): parked from step 7-12 (the hooks proven) until step 26-29, no step lost" ||
		bad "early$pol: $(grep -E 'detached|re-attached' "$T/early$pol/stderr" | head -4)"
done
# a program that replays a CUDA graph every step (from step 2) through the runtime's cudaGraphLaunch:
# the activity kinds stay on after a window until the detach turns them off, graph launches held
# in the hook, so no graph is replayed with the kinds off while subscribed before cuptiFinalize
# (the fake logs GRAPH_FINALIZE_HAZARD: torch's replays failed after that on an H200). Detached for
# good after the last window, parked between windows; a graph launch past the hooks keeps it subscribed
nohazard() {
	! grep -qE "GRAPH_FINALIZE_HAZARD|FINALIZE_UNDER_CALL|GRAPH_DURING_FINALIZE" "$T/$1/log" ||
		{ bad "$1: $(grep -E 'HAZARD|UNDER_CALL|DURING' "$T/$1/log" | head -2)"; false; }
}
run graphdetach 5,1,3,1 auto 30 VIA_CUDART="$FAKERT" GRAPH=1 GLAUNCH=hooked
check graphdetach 0 1 6 7 8 && nohazard graphdetach &&
	echo "ok   graphs replayed through the hooks: detached for good after the last window, the kinds off inside the detach"
# each replay blocked 30 ms (a full launch queue behind the GPU): the detach after the window is
# called off while a replay is in flight, the kinds stay on while it is tried again, and it detaches
# (before, the kinds went off 10 ms after the window and it stayed subscribed)
run graphblocked 5,1,3,1 auto 30 VIA_CUDART="$FAKERT" GRAPH=1 GLAUNCH=hooked GLAUNCH_US=30000
check graphblocked 0 1 6 7 8 && nohazard graphblocked && grep -q "called off in step [0-9]* (a hooked CUDA call" "$T/graphblocked/stderr" &&
	echo "ok   graph replays blocked 30 ms each: the detach after the window called off, tried again, and done" ||
	bad "graphblocked: $(grep -E 'called off|went off|detached' "$T/graphblocked/stderr" | head -3)"
# automatic steps with 20 ms steps: after the window the tick stays while the hooks are proven
# (several steps), then parks; the kinds stay on until that detach (before: off 10 ms after the
# window, and stepprof stayed subscribed for the rest of the run, as graph_detach.sh saw on an H200)
MARKER=auto run graphauto 10,1,3,1 auto 40 VIA_CUDART="$FAKERT" GRAPH=1 GLAUNCH=hooked LAUNCHES=20 FAKE_CUPTI_ONE_CORR=1
grep -q "detached from CUPTI in step [0-9]* until the next window" "$T/graphauto/stderr" && nohazard graphauto &&
	! grep -q "activity kinds went off" "$T/graphauto/stderr" &&
	echo "ok   automatic steps, a graph program: kinds held while the hooks are proven, then parked" ||
	bad "graphauto: $(grep -E 'went off|detached|not detaching' "$T/graphauto/stderr" | head -2 | cut -c1-150)"
# a marker call past the hooks (no park can come), the next window 1.2 s away: the kinds held for a
# detach to come go off after 1 s, said (before: held 10 s, the program paying for them all along)
run graphwait 60,1,3,2 auto 140 VIA_CUDART="$FAKERT" GRAPH=1 GLAUNCH=hooked BYPASS_AT=3
grep -Eq "no detach came within (9[0-9]{2}|1[0-9]{3}) ms of the window" "$T/graphwait/stderr" && nohazard graphwait &&
	echo "ok   no park can come: the kinds held for one go off after 1 s, said" ||
	bad "graphwait: $(grep -E 'went off|detached|not detaching' "$T/graphwait/stderr" | head -2 | cut -c1-150)"
# a cuptiFinalize of 2.5 s: the graph launch that comes 1 s in waits for it, as a kernel launch does
# (10 s at most), where a hooked call gives up after 1 s (before: the replay went ahead under it)
run graphslowfin 5,1,3,1 auto 30 VIA_CUDART="$FAKERT" GRAPH=1 GLAUNCH=hooked FAKE_FINALIZE_US=2500000
check graphslowfin 0 1 6 7 8 && nohazard graphslowfin &&
	echo "ok   a cuptiFinalize of 2.5 s: the graph launch made meanwhile waited for it"
run graphpark 8,1,3,0 auto 48 VIA_CUDART="$FAKERT" GRAPH=1 GLAUNCH=hooked
parked graphpark 3 9 10 11 21 22 23 33 34 35 45 46 47 && nohazard graphpark &&
	echo "ok   graphs replayed through the hooks: parked between windows, no replay with the kinds off before a finalise"
run graphdirect 5,1,3,1 auto 30 VIA_CUDART="$FAKERT" GRAPH=1 GLAUNCH=direct
check graphdirect 0 0 6 7 8 && grep -q "a CUDA graph launch came past stepprof's hooks" "$T/graphdirect/stderr" &&
	echo "ok   a graph launch past the hooks: stays subscribed after the last window, and says why" ||
	bad "graphdirect: $(grep -v begins "$T/graphdirect/stderr" | head -5)"
# the kinds off while subscribed without a window's end: the program's own profiler turns its kind
# off (steps 3-5), or stepprof's went off before the program made its first graph (step 6): a graph
# replayed with the kinds off after they were on in this instance; no detach may finalise under it
run graphprog 8,1,3,0 auto 30 VIA_CUDART="$FAKERT" GRAPH=1 GLAUNCH=hooked PROG_KIND=3,5
nohazard graphprog && echo "ok   graphs and the program's own kind turned off while subscribed: no finalise after"
run graphlate 2,1,2,2 auto 16 VIA_CUDART="$FAKERT" GRAPH=1 GLAUNCH=hooked GRAPH_AT=7
nohazard graphlate && echo "ok   a graph made after the kinds went off while subscribed: no finalise after"
run bypass 8,1,3,0 auto 48 VIA_CUDART="$FAKERT" BYPASS_AT=3
parked bypass 0 9 10 11 21 22 23 33 34 35 45 46 47 &&
	echo "ok   one marker call that bypasses the hooks: never parked, every step numbered"
# a thread inside a call that the real CUPTI wraps nearly all the time, where a cuptiFinalize under
# it crashed: a hooked call (NCCL's watchdog polling cudaEventQuery, H100) or a kernel launch through
# stepprof's trampolines (PyTorch's autograd thread; H200: a SIGSEGV in CUPTI's dispatch of the
# launch, or heap corruption). Every detach waits until no thread is inside one, the final detach
# and the parks between windows alike, the park before the first window made on the application
# thread too (the fake logs FINALIZE_UNDER_CALL). NAME:SCHED:STEPS:DETACHES:WHAT[:ENV]; launchdlsym
# launches through the driver's exported symbol as dlsym finds it (stepprof's definition, as XLA);
# launchslow's launches take 20 ms (blocked on a full queue): every detach is called off, none
# finalises under one, and the run ends on time.
for wd in watchdog:5,1,3,1:48:1:hooked watchpark:8,1,3,0:48:3:hooked launchfinal:5,1,3,1:96:1:launch \
	launchpark:20,1,3,0:96:3:launch launchearly:30,1,3,1:48:2:launch launchdlsym:20,1,3,0:96:3:launch:LAUNCH_DLSYM=1 \
	launchslow:20,1,3,0:96:0:launch:FAKE_LAUNCH_US=20000; do
	IFS=: read -r name sched steps nfin what extra <<<"$wd"
	if [ "$what" = hooked ]; then
		run "$name" "$sched" auto "$steps" VIA_CUDART="$FAKERT" WATCHDOG=1
		what="a hooked call"
	else
		run "$name" "$sched" auto "$steps" VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=0 LAUNCHER=1 \
			FAKE_LAUNCH_US=200 ${extra:+"$extra"}
		what="a kernel launch"
	fi
	if [ "$name" = launchearly ] && ! grep -Eq "detached from CUPTI in step ([0-9]|1[0-9]) until the next window" "$T/$name/stderr"; then
		bad "$name: no park before the first window: $(grep -E 'detached|re-attached' "$T/$name/stderr" | head -3)"
		continue
	fi
	if grep -q FINALIZE_UNDER_CALL "$T/$name/log"; then
		bad "$name: cuptiFinalize while a thread was inside $what: $(grep -c FINALIZE_UNDER_CALL "$T/$name/log") times"
	elif [ "$(grep -c '^finalize' "$T/$name/log")" -lt "$nfin" ]; then
		bad "$name: $(grep -c '^finalize' "$T/$name/log") cuptiFinalize calls, expected $nfin or more: $(grep -v begins "$T/$name/stderr" | tail -3)"
	else
		echo "ok   $name: a thread inside $what all along: CUPTI finalised only with none in flight ($nfin+ detaches)"
	fi
done
# the same under stress, as the GPU crash loop (tests/gpu/tools/park_crash_loop.sh): four threads
# launching all along, 3 ms steps, a park between every two of 30 windows; correlation ids from one
# counter, as CUPTI's. Another thread's launch that entered before a window began and returns inside
# it is not the window's (its kernel record is not): no window waits for it and calls it missing.
# a window that begins at a marker call's exit (automatic, after the sync) takes its lower bound
# from the next call to reach the callbacks; another thread's, with a later id, may come first
# (RACE_SPLIT): the first launch of the window's thread is the window's all the same, 21 kernels
# in every step (before: 20 in each window's first step, its kernel in no window, unsaid)
MARKER=auto run racesplit 8,1,3,0 never 60 VIA_CUDART="$FAKERT" LAUNCHES=20 FAKE_CUPTI_ONE_CORR=1 RACE_SPLIT=1
k=$("$B/stepprof" steps "$T"/racesplit/out/*.sptrace | awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}')
[ "$k" = "9:21 10:21 11:21 21:21 22:21 23:21 33:21 34:21 35:21 45:21 46:21 47:21 57:21 58:21 59:21 " ] &&
	echo "ok   a window's lower bound filled by another thread's later call first: the window's own first launch kept (21 kernels a step)" ||
	bad "racesplit: kernels per step: $k"

# one kernel more every 7th step (a norm logged): the automatic regime keeps its lock through each
# such step (said, flagged irregular in the trace), the window keeps its 20 steps, the report's
# finding names them as the iteration's occasional extra work (before: the first one ended the
# regime and the window with it)
MARKER=auto run irregular 10,0,20,1 never 60 VIA_CUDART="$FAKERT" LAUNCHES=20 EXTRA_EVERY=7 FAKE_CUPTI_ONE_CORR=1
"$B/stepprof" report --json "$T"/irregular/out/*.sptrace >"$T/irregular/report.json" 2>/dev/null
/usr/bin/python3 - "$T/irregular" <<'PY' && echo "ok   an extra kernel every 7th step: the automatic lock kept, 20 window steps, steps 13, 20, 27 irregular (21 kernels)" || { bad irregular; grep -v begins "$T/irregular/stderr" | head -12 | sed 's/^/    /'; }
import json, sys
d = sys.argv[1]
st = json.load(open(f"{d}/report.json"))["steps"]
err = open(f"{d}/stderr").read()
nums = [s["number"] for s in st]
odd = [(s["number"], s["kernels"]) for s in st if s["irregular"] or s["refuted"] or s["kernels"] != 20]
ok = nums == list(range(10, 30)) and odd == [(13, 21), (20, 21), (27, 21)]
ok = ok and all(s["irregular"] and not s["refuted"] for s in st if s["kernels"] == 21)
ok = ok and "learns again" not in err and "re-lock" not in err and err.count("kept as an irregular step") >= 3
sys.exit(0 if ok else 1)
PY

# one cudaDeviceSynchronize more two thirds into every 7th step (a norm read): inside the window
# (every step counted) it is no boundary, each step keeps its 20 kernels and its number (before:
# the step was split and refuted, and the window ended with it)
MARKER=auto run xsync 10,0,20,1 never 60 VIA_CUDART="$FAKERT" LAUNCHES=20 EXTRA_SYNC_EVERY=7 FAKE_CUPTI_ONE_CORR=1
k=$(awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}' "$T/xsync/steps")
want=$(for i in $(seq 10 29); do printf '%s:20 ' "$i"; done)
[ "$k" = "$want" ] && ! grep -qE "step (1[0-9]|2[0-9]) did not match" "$T/xsync/stderr" &&
	echo "ok   an extra anchor call two thirds into every 7th step: no boundary in the window, 20 steps of 20 kernels" ||
	bad "xsync: steps:kernels $k; $(grep -m2 "did not match" "$T/xsync/stderr")"

# the marker call only every 5th step (a loss read every 5 iterations, nothing else synchronises):
# the lock is on one iteration of 40 launches, not on five; the window holds 10 steps of 40 kernels
MARKER=auto run syncevery 30,0,10,1 never 60 VIA_CUDART="$FAKERT" LAUNCHES=40 SYNC_EVERY=5 FAKE_CUPTI_ONE_CORR=1
k=$(awk '$1 ~ /^[0-9]+$/ {printf "%s:%s ", $1, $4}' "$T/syncevery/steps")
want=$(for i in $(seq 30 39); do printf '%s:40 ' "$i"; done)
[ "$k" = "$want" ] && grep -q "the host synchronises only every 5 iterations" "$T/syncevery/stderr" &&
	echo "ok   a sync every 5th iteration only: each iteration a step (40 kernels), said at the lock" ||
	bad "syncevery: steps:kernels $k; $(grep -m1 "automatic steps:" "$T/syncevery/stderr")"

for lm in launchmany launchcoop launchhost launchmemset launchcopy; do
	coop= what=cuLaunchKernel
	[ "$lm" = launchcoop ] && coop=LAUNCH_COOP=1 what=cuLaunchCooperativeKernel
	[ "$lm" = launchhost ] && coop=LAUNCH_HOSTFN=1 what=cuLaunchHostFunc
	[ "$lm" = launchmemset ] && coop=LAUNCH_MEMSET=1 what="cuMemsetD8Async and cuMemsetD2D8Async"
	[ "$lm" = launchcopy ] && coop=LAUNCH_COPY=1 what=cuMemcpyHtoDAsync
	STEP_US=3000 run $lm 8,1,1,0 auto 300 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=0 LAUNCHER=4 \
		FAKE_CUPTI_ONE_CORR=1 FAKE_LAUNCH_US=100 ${coop:+"$coop"}
	nfin=$(grep -c '^finalize' "$T/$lm/log")
	if grep -q FINALIZE_UNDER_CALL "$T/$lm/log"; then
		bad "$lm: cuptiFinalize while a thread was inside a kernel launch: $(grep -c FINALIZE_UNDER_CALL "$T/$lm/log") of $nfin times"
	elif grep -q "had no kernel record" "$T/$lm/stderr"; then
		bad "$lm: $(grep -c "had no kernel record" "$T/$lm/stderr") windows waited for kernels that were not theirs: $(grep -m1 "had no kernel record" "$T/$lm/stderr")"
	elif [ "${lm#launch}" != many ] && [ "${lm#launch}" != coop ] && ! grep -q "guarded calls did what they were asked to" "$T/$lm/stdout"; then
		bad "$lm: $(grep "guarded calls" "$T/$lm/stdout" || echo "no guarded call made")"
	elif [ "$nfin" -lt 15 ]; then
		bad "$lm: $nfin cuptiFinalize calls, expected 15 or more: $(grep -v begins "$T/$lm/stderr" | tail -3)"
	else
		echo "ok   $lm: four threads calling $what all along, 3 ms steps: $nfin detaches, none with a launch in flight; no window waited for another's kernel"
	fi
done

# the automatic marker parks on its anchor call (issue 20): autoparked NAME PARKS KERNELS [hooks], KERNELS
# "step:kernels ..." of the windows; with hooks it learned from stepprof's hooks ([marker] learn =
# hooks), else with CUPTI (launch callbacks off between counted steps)
autoparked() {
	/usr/bin/python3 - "$T/$1" "$2" "$3" "${4:-cupti}" <<'PY' || { bad "$1"; grep -v begins "$T/$1/stderr" | sed 's/^/    /' | head -24; false; }
import re, sys
d, want_parks, want, learn_from = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
err = open(f"{d}/stderr").read()
log = [l.split()[0] for l in open(f"{d}/log")]
parks = len(re.findall(r"detached from CUPTI in step \d+ until the next window", err))
problems = []
lock = "automatic steps: regime 1, period 21 calls (20 launches), boundary after 'cudaDeviceSynchronize'"
if learn_from == "hooks":
    learn = err.find("automatic steps: learning from stepprof's hooks, not subscribed to CUPTI")
    handed = err.find("locked on 'cudaDeviceSynchronize' while learning from stepprof's hooks: attaching to CUPTI")
    attach = err.find("re-attached to CUPTI in step")
    if min(learn, err.find(lock), handed, attach) < 0 or not learn < err.find(lock) < handed < attach:
        problems.append("not: learning from the hooks, the lock, then the first attach (in that order)")
    if log[:1] != ["subscribe"]:
        problems.append(f"a CUPTI call before the first subscription: {log[:2]}")
    # every park but one at the very end (the last window closed before the program did) re-attaches
    if log.count("subscribe") not in (parks, parks + 1) or log.count("subscribe") != err.count("re-attached to CUPTI in step"):
        problems.append(f"{log.count('subscribe')} subscriptions for {parks} parks")
else:
    out = open(f"{d}/stdout").read()
    lseen, lall = map(int, re.search(r"driver: (\d+) of (\d+) launches seen", out).groups())
    if lock not in err:
        problems.append("no lock on cudaDeviceSynchronize with 20 launches")
    # launch callbacks off between counted steps and while parked: only the learning, the windows' and
    # the steps next to them, and one step in 16 see their launches
    if lseen > 0.7 * lall:
        problems.append(f"{lseen} of {lall} launches seen: launch callbacks stayed on")
if parks < want_parks:
    problems.append(f"{parks} parks, expected {want_parks} or more")
if "AFTER_FINALIZE" in log:
    problems.append("a CUPTI call after cuptiFinalize")
if "may have been missed" in err or "took over 1 s" in err:
    problems.append("a missed boundary or a slow re-attach was reported")
got = [f"{l.split()[0]}:{l.split()[3]}" for l in open(f"{d}/steps") if re.match(r"^\d+\s", l)]
if got != want:
    problems.append(f"recorded steps:kernels {got}, expected {want}")
for p in problems:
    print("   ", p)
sys.exit(1 if problems else 0)
PY
}
# a lock after the schedule's first window would have begun (wait 0: its warmup is step 0, and the
# automatic marker locks in the loop's 5th iteration): the schedule starts from the lock, so its one
# window holds the three steps after the first watched one, 20 kernels each, flagged late in the
# trace and said in report (before: the window was lost and nothing was recorded). Learning with
# CUPTI, and from the hooks (attached at the lock, the window's warmup right after it).
latecheck() {
	"$B/stepprof" report --json "$T/$1"/out/*.sptrace >"$T/$1/report.json" 2>"$T/$1/report.err"
	/usr/bin/python3 - "$T/$1" <<'PY' || { bad "$1"; grep -v begins "$T/$1/stderr" | head -8 | sed 's/^/    /'; false; }
import json, re, sys
d = sys.argv[1]
err = open(f"{d}/stderr").read()
got = [(int(l.split()[0]), int(l.split()[3])) for l in open(f"{d}/steps") if re.match(r"^\d+\s", l)]
m = re.search(r"the schedule's first window would have begun \(its step 0\): the schedule starts from here "
              r"instead, so no window is lost: step (\d+) is the schedule's step 0", err)
try:
    rep = json.load(open(f"{d}/report.json"))
except ValueError:
    rep = {"steps": [], "steps_found_by": ""}
problems = []
if not m:
    problems.append("no late-start line")
elif [n for n, _ in got] != [int(m.group(1)) + 1 + i for i in range(3)]:
    problems.append(f"recorded steps {got}, expected the three after step {m.group(1)}")
if any(k != 20 for _, k in got):
    problems.append(f"kernels per step {got}")
if not rep["steps"] or not all(s.get("late") for s in rep["steps"]):
    problems.append("steps not flagged late in report --json")
if "found after the schedule's first window would have begun" not in (rep.get("steps_found_by") or ""):
    problems.append("report does not say how the schedule started")
for p in problems:
    print("   ", p)
sys.exit(1 if problems else 0)
PY
}
MARKER=auto run late 0,1,3,1 never 30 VIA_CUDART="$FAKERT" LAUNCHES=20 FAKE_CUPTI_ONE_CORR=1
latecheck late && echo "ok   a lock after the first window would have begun: the schedule starts from it, the window holds 3 steps of 20 kernels (late in the trace and in report)"
LEARN=hooks MARKER=auto run latehooks 0,1,3,1 auto 30 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=20
latecheck latehooks && echo "ok   ... learning from the hooks: attached at the lock, the window right after it holds its 3 steps"
K20="9:20 10:20 11:20 21:20 22:20 23:20 33:20 34:20 35:20"
MARKER=auto run autopark 8,1,3,0 auto 60 VIA_CUDART="$FAKERT" LAUNCHES=20
autoparked autopark 2 "$K20 45:20 46:20 47:20 57:20 58:20 59:20" &&
	echo "ok   auto marker: locked on its sync, launch callbacks off between counted steps, parked between windows, every window step has its 20 kernels"
MARKER=auto run autochange 8,1,3,0 auto 70 VIA_CUDART="$FAKERT" LAUNCHES=20 CHANGE_AT=38 LAUNCHES2=60 STEP2_US=90000 \
	CHANGE_NAME=adam
# the new regime numbers on from the first (issue 12: no step number twice in a trace): the gap rule
# moves the window whose warmup (schedule step 44) fell in the re-lock's gap to steps 47-49
autoparked autochange 1 "$K20 47:60 48:60 49:60 59:60 60:60 61:60" && {
	! grep -q "automatic step detection needed" "$T/autochange/stderr" &&
	grep -q "a step took over 4 times more or less time" "$T/autochange/stderr" &&
		grep -qE "re-attached to CUPTI in step (3[89]|4[0-9])" "$T/autochange/stderr" &&
		grep -qE "step (39|4[0-9]) did not match the detected period" "$T/autochange/stderr" &&
		grep -q "automatic steps (re-lock): regime 2, period 61 calls (60 launches)" "$T/autochange/stderr"
} && echo "ok   auto marker parked, the loop changes: the step's time stands out, re-attached, the counted step refuted, re-locked on 60 kernels a step" ||
	bad "autochange: $(grep -v begins "$T/autochange/stderr" | grep -E 'took over|re-attached|did not match|re-lock' | head -5)"

# a runtime linked in statically (llm.c, any nvcc program): its marker calls never reach the hooks;
# it reaches the driver through cuGetProcAddress (dlsym'ed from a libcuda loaded out of the global
# scope), and the driver call nested in each marker call stands for it
run static 8,1,3,0 auto 48 VIA_DRIVER="$FAKECUDA"
parked static 3 9 10 11 21 22 23 33 34 35 45 46 47 && grep -q "cuGetProcAddress_v2 from .*libstepprof" "$T/static/stdout" &&
	echo "ok   a static runtime: its driver calls through cuGetProcAddress prove and count the marker; parked, every step numbered"
# 5 ms of its marker call after the driver call: the hook that counts the last step before a window
# kicks the writer, which re-attaches while that runtime call goes on; CUPTI then sees its exit, not
# its entry, and that call was counted all the same (said missed before: 12 of 12 runs)
run statictail 8,1,3,0 auto 48 VIA_DRIVER="$FAKECUDA" SYNC_US=5000
parked statictail 3 9 10 11 21 22 23 33 34 35 45 46 47 &&
	echo "ok   a static runtime re-attached inside its marker call, after the hooks counted it: not said missed, every step numbered"
# a re-attach that takes 100 ms (5 steps): the first window's marker call waits for it inside its
# driver call, and the hooks count that call (CUPTI saw none of its entry; said missed before)
run staticslow 8,1,3,0 auto 48 VIA_DRIVER="$FAKECUDA" FAKE_SUBSCRIBE_US=100000
parked staticslow 3 9 10 11 21 22 23 33 34 35 45 46 47 &&
	echo "ok   a static runtime with a slow re-attach: the marker call that waited for it counted by the hooks, every step numbered"
# 10 ms of the marker call before its driver call, a 15 ms re-attach: it lands between the two, and
# the driver call (from the proven place, on a thread with no callback since) is the marker's
# (before: taken for a stray, said missed, the last step lost)
run statichead 8,1,3,0 auto 48 VIA_DRIVER="$FAKECUDA" HEAD_US=10000 FAKE_SUBSCRIBE_US=15000
parked statichead 3 9 10 11 21 22 23 33 34 35 45 46 47 &&
	echo "ok   a static runtime re-attached between its marker call's entry and its driver call: counted by the hooks, no stray, every step numbered"
run staticint 8,1,3,0 auto 48 VIA_DRIVER="$FAKECUDA" FAKE_CUDA_INTERNAL=1
parked staticint 3 9 10 11 21 22 23 33 34 35 45 46 47 &&
	grep -q "cuGetProcAddress_v2 from .*libstepprof" "$T/staticint/stdout" &&
	echo "ok   the same with a driver whose entry points are not its exported symbols (known by name and version)"
run staticbypass 8,1,3,0 auto 48 VIA_DRIVER="$FAKECUDA" BYPASS_AT=3
parked staticbypass 0 9 10 11 21 22 23 33 34 35 45 46 47 && grep -q "came without going through stepprof's hooks" "$T/staticbypass/stderr" &&
	echo "ok   a static runtime's marker call without its driver call: never parked, and said"
# a driver call that stands for the marker made also outside marker calls: from another place in
# the program (as cudart's own cuCtxSynchronize in cudaFree), it is not counted and parking holds;
# from the very place the runtime makes its marker calls' driver call, the hooks cannot tell: never parked
run staticstray 8,1,3,0 auto 48 VIA_DRIVER="$FAKECUDA" STRAY_AT=3 STRAY_ALL=1
parked staticstray 3 9 10 11 21 22 23 33 34 35 45 46 47 &&
	echo "ok   the driver call also made outside marker calls from another place: parked, only the marker's place counted, every step numbered"
run staticsame 8,1,3,0 auto 48 VIA_DRIVER="$FAKECUDA" STRAY_AT=3 STRAY_SAME=1
parked staticsame 0 9 10 11 21 22 23 33 34 35 45 46 47 && grep -q "was also called outside them" "$T/staticsame/stderr" &&
	echo "ok   the driver call made once outside a marker call from the marker's own place: never parked (it would count a step that is none), and said"
run hookstray 8,1,3,0 auto 48 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" STRAY_AT=3 STRAY_ALL=1
parked hookstray 3 9 10 11 21 22 23 33 34 35 45 46 47 &&
	echo "ok   a runtime the hooks see, and the driver function its marker calls also called outside them: parked, only the marker counted"
# a driver marker (cuCtxSynchronize) called by the program itself once a step, and by its runtime
# inside a runtime call (one stepprof watches only for nesting): CUPTI counts only the first, the
# hooks would count both
MARKER=cuCtxSynchronize run drvinner 8,1,3,0 auto 48 VIA_DRIVER="$FAKECUDA" STRAY_AT=0 STRAY_ALL=1 RT_CBID=5
parked drvinner 0 9 10 11 21 22 23 33 34 35 45 46 47 && grep -q "was not a marker call for CUPTI" "$T/drvinner/stderr" &&
	echo "ok   a driver marker whose function the runtime also calls inside its own calls: never parked, every step numbered"
# the schedule done (its marker callbacks off), not yet detached: a marker call then is no call
# "CUPTI did not count" (said falsely on 2 x H200, trigger.sh detached-1gpu, in 1 ms steps)
STEP_US=300 run donewatch 5,0,2,1 auto 60 VIA_CUDART="$FAKERT"
! grep -q "was not a marker call for CUPTI" "$T/donewatch/stderr" &&
	grep -q "detached from CUPTI in step [0-9]* (the schedule is done)" "$T/donewatch/stderr" &&
	echo "ok   marker calls after the schedule is done, before the detach: not taken for calls CUPTI missed" ||
	bad "donewatch: $(grep -v begins "$T/donewatch/stderr" | head -6)"
mkdir -p "$T/staticoff"
STEPPROF_PROFILE_ENABLED=0 LD_PRELOAD="$PRE" VIA_DRIVER="$FAKECUDA" PRINT_STEPS=1 timeout 60 \
	"$B/tests/e2e/cupti_life_driver" 5 1000 >"$T/staticoff/stdout" 2>"$T/staticoff/stderr"
if grep -q "cuGetProcAddress_v2 from $FAKECUDA" "$T/staticoff/stdout" && [ "$(grep -c '^STEP' "$T/staticoff/stdout")" = 5 ] &&
	! grep -q stepprof "$T/staticoff/stderr"; then
	echo "ok   stepprof off: cuGetProcAddress is the driver's own, nothing wrapped"
else
	bad "staticoff: $(cat "$T/staticoff/stdout" "$T/staticoff/stderr" | head -5)"
fi
# learning from the hooks ([marker] learn = hooks): the automatic marker learns from the launches
# a runtime makes through cuGetProcAddress'd cuLaunchKernel (kernels named by cuFuncGetName) and
# the hooked syncs, with no CUPTI subscription until it locks; then the run goes on as autopark's
# whole NAME: the first two windows' steps (9-11, 21-23) each hold their 20 kernels
whole() { [ "$(grep -cE '^(9|10|11|21|22|23) +[0-9]+ .* 20 ' "$T/$1/steps")" = 6 ]; }
# saidwhole NAME OK PATTERN...: NAME's stderr matches every PATTERN (a leading '!': matches none of
# it) and its first two windows are whole (whole); prints "ok   OK"
saidwhole() {
	local name=$1 ok=$2 pat
	shift 2
	for pat in "$@"; do
		if [ "${pat:0:1}" = '!' ]; then
			grep -q "${pat:1}" "$T/$name/stderr" && break
		else
			grep -q "$pat" "$T/$name/stderr" || break
		fi
		pat=
	done
	[ -z "$pat" ] && whole "$name" && echo "ok   $ok" || bad "$name: $(grep -v begins "$T/$name/stderr" | head -8)"
}
# hooked NAME SAID OK: NAME learned from the hooks and parked (autoparked), no launch unseen and no
# lookup left unhooked, and its stderr says SAID (a grep pattern); prints "ok   OK"
hooked() {
	autoparked "$1" 2 "$K20 45:20 46:20 47:20 57:20 58:20 59:20" hooks && ! grep -q "did not see\|not hooked" "$T/$1/stderr" &&
		grep -q "$2" "$T/$1/stderr" && echo "ok   $3" ||
		bad "$1: $(grep -v begins "$T/$1/stderr" | grep "did not see\|not hooked")"
}
# hookrun NAME STEPS [ENV...]: the automatic marker learning from the hooks ([marker] learn = hooks)
# on the stand-in runtime and driver, 20 launches a step, schedule 8,1,3,0 (auto)
hookrun() {
	local name=$1 steps=$2
	shift 2
	LEARN=hooks MARKER=auto run "$name" 8,1,3,0 auto "$steps" VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=20 "$@"
}
hookrun hooklearn 60
autoparked hooklearn 2 "$K20 45:20 46:20 47:20 57:20 58:20 59:20" hooks &&
	echo "ok   learn = hooks: learned from the launch and sync hooks with no CUPTI subscription, attached at the lock, parked between windows, every window step has its 20 kernels"
# parked, nothing reports launches: the launch hooks pass them straight through (no kernel name
# asked of the driver for the proof); 17 of the 60 steps are parked, 340 of the 1200 launches
all=$(sed -n 's/^driver: [0-9]* of \([0-9]*\) launches seen$/\1/p' "$T/hooklearn/stdout")
names=$(sed -n 's/^fakecuda: \([0-9]*\) kernel name lookups$/\1/p' "$T/hooklearn/stdout")
[ -n "$all" ] && [ -n "$names" ] && [ $((names + 200)) -le "$all" ] &&
	echo "ok   parked after learning from the hooks: the launch hooks pass launches through ($names name lookups for $all launches)" ||
	bad "hooklearn: ${names:-no} kernel name lookups for ${all:-no} launches: the launch hooks stay on while parked"
# a run too short for its schedule says why it recorded nothing, though CUPTI never reported the
# context's creation (it was made before stepprof subscribed): the steps tell that one exists
for l in cupti auto; do
	NOTRACE=1 LEARN=$l MARKER=auto run short$l 40,1,3,0 auto 12 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=20 NO_CONTEXT_EVENT=1
	grep -q "^stepprof: no step recorded: the program ended in step" "$T/short$l/stderr" &&
		echo "ok   learn = $l, a context CUPTI never reported: a run too short for its schedule says so at exit" ||
		bad "short$l: no 'no step recorded' warning: $(grep -v begins "$T/short$l/stderr" | tail -4)"
done
# a module unloaded and another loaded at the same addresses (XLA's autotuning): from step 11 the
# eval kernels come through the CUfunctions (and the name pointers) the adam kernels had. The launch
# hooks' names and CUPTI's must follow the driver, not a cache: the proof sees no mismatch
# (FAKE_CUDA_KERNELS: the same with CUkernels, which only cuKernelGetName names)
for kn in "" 1; do
	LEARN=hooks MARKER=auto run reuse$kn 8,1,3,0 auto 30 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=20 \
		CHANGE_AT=11 LAUNCHES2=20 REUSE_NAMES=1 ${kn:+FAKE_CUDA_KERNELS=1}
	if grep -q "locked on .* while learning from stepprof's hooks" "$T/reuse$kn/stderr" &&
		! grep -qE "the driver names a kernel|cannot learn from" "$T/reuse$kn/stderr"; then
		echo "ok   ${kn:+CUkernels }named again at a reused address: the launch hooks and CUPTI's callbacks agree"
	else
		bad "reuse$kn: $(grep -v begins "$T/reuse$kn/stderr" | grep -E 'names a kernel|locked|cannot learn' | head -3)"
	fi
done
# ... and a kernel marker on a kernel loaded at a reused address finds it (steps 5 on)
KMARKER=eval_fake_3 NOTRACE=1 run reusek 2,1,3,1 auto 16 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=20 \
	CHANGE_AT=5 LAUNCHES2=20 REUSE_NAMES=1
"$B/stepprof" steps "$T"/reusek/out/*.sptrace >"$T/reusek/steps" 2>&1
[ "$(grep -cE '^[0-9]+ +0 ' "$T/reusek/steps")" = 3 ] &&
	echo "ok   a kernel marker on a kernel loaded at a reused address: its 3 steps recorded" ||
	bad "reusek: $(grep -v begins "$T/reusek/stderr" | head -2; head -6 "$T/reusek/steps")"
LEARN=auto MARKER=auto run hooklearnauto 8,1,3,0 auto 30 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=20
grep -q "learning from stepprof's hooks" "$T/hooklearnauto/stderr" &&
	echo "ok   learn = auto with device_memory on: learns from the hooks (the allocation hooks keep device memory)" ||
	bad "hooklearnauto: learn = auto did not learn from the hooks: $(grep -v begins "$T/hooklearnauto/stderr" | head -4)"
# locked (step 5) far from the first window (step 40): the anchor's hook is proven against CUPTI's
# callbacks (8 calls) and stepprof parks until just before the window, no writer thread yet; the
# window's steps hold their 20 kernels each
LEARN=hooks MARKER=auto run autoearly 40,1,3,1 auto 60 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=20
if grep -Eq "detached from CUPTI in step 1[0-9] until the next window" "$T/autoearly/stderr" &&
	grep -Eq "re-attached to CUPTI in step 3[6-9] for the next window" "$T/autoearly/stderr" &&
	[ "$(awk '$1 ~ /^4[123]$/ && $2 == 0 && $4 == 20' "$T/autoearly/steps" | wc -l)" = 3 ]; then
	echo "ok   automatic marker locked at step 5, first window at 40: parked from the anchor's proof until step 36-39, the window whole"
else
	bad "autoearly: $(grep -E 'locked|detached|re-attached' "$T/autoearly/stderr" | head -5) $(grep -E '^4[0-4] ' "$T/autoearly/steps")"
fi
# 2 ms steps and a 15 ms cuptiFinalize: each park makes a step stand out, automatic detection
# re-attaches to check the next one; clean after that check, stepprof must not park again until
# the next window (a loop of parks and checks: 37 parks in 200 steps when it did)
STEP_US=2000 LEARN=hooks MARKER=auto run autoloop 30,1,3,0 auto 200 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" \
	LAUNCHES=20 FAKE_FINALIZE_US=15000
n=$(grep -c "until the next window" "$T/autoloop/stderr")
[ "$n" -ge 1 ] && [ "$n" -le 7 ] &&
	echo "ok   parks made steps stand out (15 ms finalize, 2 ms steps): $n parks in 200 steps, no loop of parks and checks" ||
	bad "autoloop: $n parks in 200 steps (windows every 34)"
# device memory while stepprof is not subscribed: blocks of 1, 2 and 3 MiB made by the driver's
# cuMemAlloc as cuGetProcAddress hands it out, at step 3 (learning from the hooks: no CUPTI), 7
# (attached: CUPTI's callback accounts, the hook leaves it) and 10 (in the first window: recorded
# once); the first freed at step 26, parked between windows 21-23 and 33-35. Each window's
# snapshot must hold what is alive: 6 MiB in the first two, 5 MiB in the third
LEARN=hooks MARKER=auto run hookmem 8,1,3,0 auto 40 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=20 \
	ALLOC_AT=3,7,10 FREE_AT=26
"$B/stepprof" memory "$T"/hookmem/out/*.sptrace -o "$T/hookmem/m.html" >"$T/hookmem/mem" 2>&1
if grep -q "step 26 freed" "$T/hookmem/stdout" && grep -q "detached from CUPTI in step 2[45] until" "$T/hookmem/stderr" &&
	grep -A1 '^Window 0' "$T/hookmem/mem" | grep -q 'peak 6.00MiB .*; 1 allocation, 0 frees in the window' &&
	grep -A1 '^Window 1' "$T/hookmem/mem" | grep -q 'peak 6.00MiB' &&
	grep -A1 '^Window 2' "$T/hookmem/mem" | grep -q 'peak 5.00MiB'; then
	echo "ok   device memory through the allocation hooks: a block made while learning from the hooks and a free while parked counted, none twice"
else
	bad "hookmem: $(cat "$T/hookmem/mem" | head -12; grep -v begins "$T/hookmem/stderr" | head -6)"
fi
# the same with each block made inside a runtime cudaMalloc that CUPTI reports too (as libcudart
# makes them): the hook accounts for the driver call and the runtime call's exit leaves it, so the
# window's block is recorded once and every level is as above
LEARN=hooks MARKER=auto run hookmemrt 8,1,3,0 auto 40 VIA_CUDART="$FAKERT" VIA_DRIVER="$FAKECUDA" LAUNCHES=20 \
	ALLOC_AT=3,7,10 FREE_AT=26 ALLOC_RT=1
"$B/stepprof" memory "$T"/hookmemrt/out/*.sptrace -o "$T/hookmemrt/m.html" >"$T/hookmemrt/mem" 2>&1
if grep -A1 '^Window 0' "$T/hookmemrt/mem" | grep -q 'peak 6.00MiB .*; 1 allocation, 0 frees in the window' &&
	grep -A1 '^Window 2' "$T/hookmemrt/mem" | grep -q 'peak 5.00MiB'; then
	echo "ok   device memory, blocks made inside runtime allocation calls: each accounted once (by the hook), levels exact"
else
	bad "hookmemrt: $(cat "$T/hookmemrt/mem" | head -12)"
fi
hookrun hookgraph 30 CAPTURE_AT=2
grep -q "graph capture with CUPTI subscribed: 1" "$T/hookgraph/stdout" &&
	grep -q "attached to CUPTI before the program's CUDA graph capture" "$T/hookgraph/stderr" &&
	! grep -q "until the next window" "$T/hookgraph/stderr" &&
	whole hookgraph &&
	echo "ok   learn = hooks, a graph capture while learning: CUPTI attached before the capture began, never parked, windows whole" ||
	bad "hookgraph: $(cat "$T/hookgraph/stdout"; grep -v begins "$T/hookgraph/stderr" | head -8)"
hookrun hookbypass 30 LAUNCH_BYPASS_AT=10
saidwhole hookbypass "learn = hooks, a launch the hooks did not see (after the attach): said, learning with CUPTI from then on" \
	"a kernel launch came that stepprof's launch hooks did not see"
# the launch function as cuBLAS(Lt) may get it: looked up at a version newer than stepprof's cuda.h
# (the driver answers the same unexported function as at the newest version stepprof knows:
# hooked), at a newer version where the driver answers another one (left unhooked, and the
# warning names that lookup), or found with dlsym on the driver's own handle (hooked, though
# cuGetProcAddress gave the driver's other, unexported entry point before)
hookrun hooknewer 60 LAUNCH_NEWER=1 FAKE_CUDA_LAUNCH=internal
hooked hooknewer "cuLaunchKernel at version [0-9]* is hooked: the driver answers the same function as at version 13000" \
	"learn = hooks, cuLaunchKernel looked up at a newer version where the driver answers as at 13000: hooked, learned from it"
hookrun hooknewabi 30 LAUNCH_NEWER=1 FAKE_CUDA_LAUNCH=newabi
v=$(grep -o 'looked up at version [0-9]*' "$T/hooknewabi/stdout" | grep -o '[0-9]*$')
unhooked="cuLaunchKernel at version ${v:-?} (the driver answers another function there than at version 13000"
saidwhole hooknewabi "learn = hooks, cuLaunchKernel at a newer version with another function there: unhooked, said, learned with CUPTI" \
	"learning with CUPTI all the same (a launch lookup stepprof left unhooked: $unhooked" \
	"stepprof: cuLaunchKernel at version ${v:-?} is not hooked: the driver answers another function"
# the same lookup made while learning from the hooks (a library loaded at its first use): learns
# with CUPTI from then on
hookrun hookmid 30 LAUNCH_NEWER_AT=1 FAKE_CUDA_LAUNCH=newabi
saidwhole hookmid "learn = hooks, that lookup made while learning: learning with CUPTI from then on, said, windows whole" \
	"cannot learn from stepprof's hooks (a launch lookup stepprof left unhooked: $unhooked" '!did not see'
# the same lookup made late (a library loaded at its first use), once CUPTI is attached: the proof
# against CUPTI's launch callbacks names it
hookrun hooklate 30 LAUNCH_NEWER_AT=10 FAKE_CUDA_LAUNCH=newabi
saidwhole hooklate "learn = hooks, that lookup made after the attach: the launch through it is not seen, and the warning names the lookup" \
	"did not see (kernel 'adam_fake_0'; the first launch lookup stepprof left unhooked: $unhooked"
hookrun hookdlsym 60 LAUNCH_DLSYM=1 FAKE_CUDA_LAUNCH=internal
hooked hookdlsym "cuLaunchKernel by dlsym on a library's handle is hooked: the driver's own symbol, handed out as stepprof's" \
	"learn = hooks, cuLaunchKernel found with dlsym on the driver's handle: hooked, learned from it"
hookrun hooknonames 30 FAKE_CUDA_NO_NAMES=1
saidwhole hooknonames "learn = hooks, a driver without cuFuncGetName: said, learned with CUPTI, windows whole" \
	"cannot learn from stepprof's hooks (the driver does not name kernels"
mkdir -p "$T/hookoff"
STEPPROF_PROFILE_ENABLED=0 STEPPROF_MARKER_LEARN=hooks LD_PRELOAD="$PRE" VIA_DRIVER="$FAKECUDA" LAUNCHES=20 PRINT_STEPS=1 \
	timeout 60 "$B/tests/e2e/cupti_life_driver" 5 1000 >"$T/hookoff/stdout" 2>"$T/hookoff/stderr"
if grep -q "cuGetProcAddress_v2 from $FAKECUDA" "$T/hookoff/stdout" && [ "$(grep -c '^STEP' "$T/hookoff/stdout")" = 5 ] &&
	grep -q "driver: 0 of 100 launches seen" "$T/hookoff/stdout" && ! grep -q stepprof "$T/hookoff/stderr"; then
	echo "ok   stepprof off with learn = hooks: launches go straight to the driver, nothing wrapped"
else
	bad "hookoff: $(cat "$T/hookoff/stdout" "$T/hookoff/stderr" | head -5)"
fi
# the launch symbols the library exports (a caller linked with libcuda, as XLA): stepprof's, and
# they reach the driver's (its answer for a NULL function comes back)
got=$(LD_PRELOAD="$PRE" /usr/bin/python3 -c "
import ctypes
ctypes.CDLL('$FAKECUDA', mode=ctypes.RTLD_GLOBAL)
me, sp = ctypes.CDLL(None), ctypes.CDLL('${PRE##* }')
same = ctypes.cast(me.cuLaunchKernel, ctypes.c_void_p).value == ctypes.cast(sp.cuLaunchKernel, ctypes.c_void_p).value
print(same, me.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, None, None, None), me.cuLaunchKernelEx(None, None, None, None),
      me.cuLaunchKernel(ctypes.c_char_p(b'k'), 1, 1, 1, 1, 1, 1, 0, None, None, None))" 2>&1)
[ "$got" = "True 400 400 0" ] && echo "ok   exported cuLaunchKernel and cuLaunchKernelEx are stepprof's and forward to the driver" ||
	bad "exported launch symbols: $got"
# the program exits inside a window: the step it exits in ends at exit, not at a boundary, and says so
# (report JSON at_exit, the step table's note); the other steps are whole
run atexit 4,1,100,1 auto 14
if "$B/stepprof" report --json "$T/atexit"/out/*.sptrace 2>/dev/null | /usr/bin/python3 -c '
import json, sys
st = json.load(sys.stdin)["steps"]
sys.exit(not (len(st) >= 3 and st[-1]["at_exit"] and not any(s["at_exit"] for s in st[:-1])))' &&
	grep -q "^Step [0-9]* ended when the process exited" "$T/atexit/steps"; then
	echo "ok   the step the process exited in is marked as ended at exit, the others are whole"
else
	bad "atexit: $(grep -c . "$T/atexit/steps") lines: $(tail -3 "$T/atexit/steps")"
fi
# a window's age is never negative (the writer's clock read before a window began closing once
# wrapped to "closed after 18446744073709.5 ms" and closed it at once, before its records came)
if grep -rh "closed after [0-9]\{10,\}" "$T" >"$T.wrapped"; then
	bad "a window closed after a wrapped age: $(head -2 "$T.wrapped")"
else
	echo "ok   every window's close time is a plausible age"
fi
# XLA's way (xla/tsl/cuda/cuda_stub.cc): libcuda dlopen'ed RTLD_LOCAL (out of the global scope), each
# driver function found by dlsym on that handle, then called. The hooked names come back as
# stepprof's own definitions, whose real function must be the driver's, never themselves (a lookup
# inside sp_resolve went through the interposed dlsym and handed a hook itself: endless recursion,
# jax_train's SIGSEGV on an H100)
got=$(LD_PRELOAD="$PRE" timeout 20 /usr/bin/python3 -c "
import ctypes, os
cu, sp = ctypes.CDLL('$FAKECUDA', mode=os.RTLD_LAZY), ctypes.CDLL('${PRE##* }')
ours = all(ctypes.cast(getattr(cu, n), ctypes.c_void_p).value == ctypes.cast(getattr(sp, n), ctypes.c_void_p).value
           for n in ('cuStreamSynchronize', 'cuCtxSynchronize', 'cuLaunchKernel', 'cuStreamBeginCapture_v2'))
n0 = cu.fake_cuda_calls()
r = (cu.cuStreamSynchronize(None), cu.cuCtxSynchronize(), cu.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, None, None, None),
     cu.cuStreamBeginCapture_v2(None, 0))
print(ours, *r, cu.fake_cuda_calls() - n0)" 2>&1)
[ "$got" = "True 0 0 400 0 1" ] && echo "ok   libcuda loaded RTLD_LOCAL, functions by dlsym on its handle (XLA): stepprof's, reaching the driver" ||
	bad "dlsym on a RTLD_LOCAL libcuda's handle (XLA): $(echo "$got" | tail -2)"
exit $fail
