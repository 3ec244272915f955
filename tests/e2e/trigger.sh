#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# trigger.sh - on-demand windows without a GPU: libstepprof preloaded into cupti_life_driver (a
# "CUDA program" of 20 ms steps ending in cudaDeviceSynchronize, the marker) with the fake
# libcupti, and `stepprof trigger` from outside while it runs.
#  - the schedule's one window is over and stepprof detached from CUPTI: --job re-attaches, records
#    exactly 3 whole consecutive steps (origin trigger, "uncounted" said), detaches again.
#  - "armed but idle" (wait = 100000000): PID trigger, 3 steps, still subscribed all along.
#  - --ms 300 (a time range on demand) and [ondemand] delay_ms/duration_ms: origin timed.
#  - hostile control files (another owner, group-writable, a link, too big, garbage) are ignored
#    with a warning; a control directory others may write disables triggers; a request older than
#    the process is not obeyed; --phase with a single-phase process is refused.
#  - two processes with one pid and one host name (pid namespaces) in one output directory: one --job
#    trigger reaches both.
set -u
B=${SP_BUILD:?}
# shellcheck source=tests/e2e/lib/preload.sh
. "$(dirname "$0")/lib/preload.sh"
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }

# ini NAME SCHED(wait,warmup,active,repeat) [INI LINES...]: $T/NAME/sp.ini, writing into $T/NAME/out
ini() {
	local name=$1 sched=$2 wa wu ac rp
	shift 2
	IFS=, read -r wa wu ac rp <<<"$sched"
	mkdir -p "$T/$name"
	{
		printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = %s\nwarmup = %s\nactive = %s\nrepeat = %s\n' \
			"$T/$name/out" "$wa" "$wu" "$ac" "$rp"
		printf '[marker]\nkind = api\npattern = cudaDeviceSynchronize\n[cupti]\nlibrary = %s\n[ondemand]\npoll_ms = 50\n' \
			"$B/tests/e2e/libfakecupti.so"
		for l in "$@"; do echo "$l"; done
	} >"$T/$name/sp.ini"
}

# start NAME SCHED(wait,warmup,active,repeat) STEPS [INI LINES...]: the driver in the background
# (PID in $T/NAME/pid), writing into $T/NAME/out
start() {
	local name=$1 sched=$2 steps=$3
	shift 3
	ini "$name" "$sched" "$@"
	env ${DRIVER_ENV:-} FAKE_CUPTI_LOG="$T/$name/log" STEPPROF_VERBOSE=1 STEPPROF_CONFIG="$T/$name/sp.ini" LD_PRELOAD="$PRE" \
		timeout 60 "$B/tests/e2e/cupti_life_driver" "$steps" 20000 >"$T/$name/stdout" 2>"$T/$name/stderr" &
	echo $! >"$T/$name/pid"
}

# child NAME: the driver's pid (timeout's child)
child() {
	local t c=
	t=$(cat "$T/$1/pid")
	read -r c _ <"/proc/$t/task/$t/children" 2>/dev/null
	echo "${c:-0}"
}

# ready NAME: waits (at most 5 s) until the process has written its status file
ready() {
	for _ in $(seq 100); do
		ls "$T/$1/out/.stepprof/"*.status >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	bad "$1: no status file in $T/$1/out/.stepprof"
	return 1
}

# windows NAME: "id origin first last nsteps" per window of its trace (python over stepprof dump)
windows() {
	"$B/stepprof" dump "$T/$1"/out/*.sptrace | /usr/bin/python3 -c '
import re, sys
wins, steps = {}, {}
cur = None
for l in sys.stdin:
    m = re.search(r"^window_begin .*id=(\d+) steps=(-?\d+)\.\.(-?\d+)( origin=(\S+))?( uncounted)?", l)
    if m:
        cur = int(m.group(1)); wins[cur] = [m.group(5) or "schedule", m.group(6) and "uncounted" or "counted", None, None]; steps[cur] = []
        continue
    m = re.search(r"^window_end .*id=(\d+) steps=(-?\d+)\.\.(-?\d+)", l)
    if m:
        wins[int(m.group(1))][2:] = [int(m.group(2)), int(m.group(3))]; cur = None
        continue
    m = re.search(r"^step .*number=(-?\d+)", l)
    if m and cur is not None:
        steps[cur].append(int(m.group(1)))
for k in sorted(wins):
    o, u, a, b = wins[k]
    print(k, o, u, a, b, " ".join(map(str, steps[k])) or "-")
'
}

# 1. after the schedule's last window: detached for good; a job trigger re-attaches (marker calls
# through a stand-in libcudart: the hooks, disarmed by then, must not be judged by the calls CUPTI
# reports in the on-demand window)
DRIVER_ENV="VIA_CUDART=$B/tests/e2e/libfakecudart.so" start detached 2,0,1,1 150
ready detached && sleep 0.3
"$B/stepprof" trigger --steps 3 --wait --timeout 10 --job "$T/detached/out" >"$T/detached/trigger" 2>&1
rc=$?
wait "$(cat "$T/detached/pid")"
# reached: armed, or already recording or written when the trigger's 50 ms poll read the status
grep -Eq 'reached \((armed|recording|written)' "$T/detached/trigger" && grep -q 'window 1 written, steps' "$T/detached/trigger" && [ $rc = 0 ] ||
	bad "detached: trigger said (rc $rc): $(cat "$T/detached/trigger")"
! grep -q "came without going through stepprof's hooks" "$T/detached/stderr" ||
	bad "detached: the disarmed hooks were judged by the on-demand window's marker calls"
w=$(windows detached)
/usr/bin/python3 - "$w" "$T/detached/log" <<'PY' && echo "ok   repeat exhausted, detached: trigger re-attaches, records 3 whole steps (origin trigger, uncounted), detaches again" || bad "detached: windows: $w; $(grep -c subscribe "$T/detached/log") subscriptions"
import sys
rows = [l.split(None, 5) for l in sys.argv[1].splitlines()]
log = [l.split()[0] for l in open(sys.argv[2]) if not l.startswith("enable_cb")]
ok = len(rows) == 2 and rows[0][1:5] == ["schedule", "counted", "2", "2"]
r = rows[1]
steps = [int(x) for x in r[5].split()]
ok = ok and r[1] == "trigger" and r[2] == "uncounted" and len(steps) == 3 and steps == list(range(steps[0], steps[0] + 3))
ok = ok and [int(r[3]), int(r[4])] == [steps[0], steps[-1]]
ok = ok and log.count("subscribe") == 2 and log.count("finalize") == 2 and "AFTER_FINALIZE" not in log and log[-1] == "finalize"
sys.exit(0 if ok else 1)
PY

# 1b. parked between windows (marker calls through a stand-in libcudart, so stepprof's hooks count
# them while detached): a trigger re-attaches first; its window holds 3 counted steps, and the
# schedule's windows keep their exact step numbers around it
DRIVER_ENV="VIA_CUDART=$B/tests/e2e/libfakecudart.so" start parked 100,1,2,0 260
# (stepprof parks before the first window too, far as it is: wait for the second park, after it)
for _ in $(seq 200); do [ "$(grep -c 'until the next window' "$T/parked/stderr" 2>/dev/null)" -ge 2 ] && break; sleep 0.05; done
"$B/stepprof" trigger --steps 3 --wait --timeout 10 --job "$T/parked/out" >"$T/parked/trigger" 2>&1
rc=$?
wait "$(cat "$T/parked/pid")"
w=$(windows parked)
[ $rc = 0 ] && grep -q 'window 1 written' "$T/parked/trigger" || bad "parked: trigger said (rc $rc): $(cat "$T/parked/trigger")"
/usr/bin/python3 - "$w" "$T/parked/stderr" <<'PY' && echo "ok   parked between windows: a trigger re-attaches first, records 3 counted steps; scheduled windows keep their step numbers" || bad "parked: windows: $w; $(grep -v begins "$T/parked/stderr" | head -12)"
import re, sys
rows = [l.split(None, 5) for l in sys.argv[1].splitlines()]
err = open(sys.argv[2]).read()
sched = [[int(x) for x in r[5].split()] for r in rows if r[1] == "schedule"]
trig = [[int(x) for x in r[5].split()] for r in rows if r[1] == "trigger" and r[2] == "counted"]
park = [int(x) for x in re.findall(r"detached from CUPTI in step (\d+) until the next window", err)]
ok = sched[:2] == [[101, 102], [204, 205]] and len(trig) == 1 and len(trig[0]) == 3
ok = ok and trig[0] == list(range(trig[0][0], trig[0][0] + 3)) and len(park) >= 2 and park[1] < trig[0][0] < 203
ok = ok and "may have been missed" not in err and "took over 1 s" not in err
sys.exit(0 if ok else 1)
PY

# 1c. parked before the first window (no writer thread yet: the application thread parked itself
# once the hooks were proven): a trigger re-attaches first, its window holds 3 counted steps before
# the schedule's first, which keeps its step numbers
DRIVER_ENV="VIA_CUDART=$B/tests/e2e/libfakecudart.so" start early 100,1,2,1 140
for _ in $(seq 200); do grep -q 'until the next window' "$T/early/stderr" 2>/dev/null && break; sleep 0.05; done
"$B/stepprof" trigger --steps 3 --wait --timeout 10 --job "$T/early/out" >"$T/early/trigger" 2>&1
rc=$?
wait "$(cat "$T/early/pid")"
w=$(windows early)
/usr/bin/python3 - "$w" "$T/early/stderr" <<'PY' && [ $rc = 0 ] &&
import re, sys
rows = [l.split(None, 5) for l in sys.argv[1].splitlines()]
err = open(sys.argv[2]).read()
sched = [[int(x) for x in r[5].split()] for r in rows if r[1] == "schedule"]
trig = [[int(x) for x in r[5].split()] for r in rows if r[1] == "trigger" and r[2] == "counted"]
park = [int(x) for x in re.findall(r"detached from CUPTI in step (\d+) until the next window", err)]
ok = sched == [[101, 102]] and len(trig) == 1 and trig[0] == list(range(trig[0][0], trig[0][0] + 3))
ok = ok and park and park[0] < trig[0][0] < 99 and "may have been missed" not in err and "took over 1 s" not in err
sys.exit(0 if ok else 1)
PY
	echo "ok   parked before the first window: a trigger re-attaches first, records 3 counted steps; the scheduled window keeps its steps" ||
	bad "early: trigger rc $rc, windows: $w; $(grep -v begins "$T/early/stderr" | head -8)"

# 2. armed but idle (wait = 100000000): a PID trigger; stays subscribed, step numbers exact
start idle 100000000,1,3,1 150
ready idle && sleep 0.3
"$B/stepprof" trigger --steps 3 --wait --timeout 10 "$(child idle)" >"$T/idle/trigger" 2>&1
rc=$?
wait "$(cat "$T/idle/pid")"
w=$(windows idle)
[ $rc = 0 ] && grep -q 'window 0 written' "$T/idle/trigger" ||
	bad "idle: trigger said (rc $rc): $(cat "$T/idle/trigger")"
/usr/bin/python3 - "$w" "$T/idle/log" <<'PY' && echo "ok   wait = 100000000 (armed but idle): a PID trigger records exactly 3 whole steps; one subscription all along" || bad "idle: windows: $w"
import sys
rows = [l.split(None, 5) for l in sys.argv[1].splitlines()]
log = [l.split()[0] for l in open(sys.argv[2])]
ok = len(rows) == 1 and rows[0][1:3] == ["trigger", "counted"]
steps = [int(x) for x in rows[0][5].split()] if ok else []
ok = ok and len(steps) == 3 and steps == list(range(steps[0], steps[0] + 3)) and steps[0] >= 10
ok = ok and log.count("subscribe") == 1
sys.exit(0 if ok else 1)
PY

# 2b. a request whose steps fall inside a scheduled window: that window is neither cut nor split
start inside 5,0,40,1 100
ready inside && sleep 0.4
"$B/stepprof" trigger --steps 3 --wait --timeout 10 --job "$T/inside/out" >"$T/inside/trigger" 2>&1 || bad "inside: $(cat "$T/inside/trigger")"
wait "$(cat "$T/inside/pid")"
w=$(windows inside)
[ "$(echo "$w" | cut -d' ' -f1-5)" = "0 schedule counted 5 44" ] && [ "$(echo "$w" | wc -w)" = 45 ] &&
	grep -q 'window 0 written.*inside a window the schedule had opened' "$T/inside/trigger" &&
	echo "ok   a request inside a scheduled window: the window keeps its 40 steps, the request is answered with it" ||
	bad "inside: windows $w; $(cat "$T/inside/trigger")"

# 2c. two processes writing into one output directory (a job's ranks): one --job trigger reaches
# both, each writes its window; the request names a start time after both have read it
start pair 100000000,1,3,1 150
mkdir -p "$T/pair2"
FAKE_CUPTI_LOG="$T/pair2/log" STEPPROF_CONFIG="$T/pair/sp.ini" LD_PRELOAD="$PRE" \
	timeout 60 "$B/tests/e2e/cupti_life_driver" 150 20000 >"$T/pair2/stdout" 2>"$T/pair2/stderr" &
p2=$!
for _ in $(seq 100); do [ "$(ls "$T/pair/out/.stepprof/"*.status 2>/dev/null | wc -l)" = 2 ] && break; sleep 0.05; done
"$B/stepprof" trigger --steps 3 --wait --timeout 10 --job "$T/pair/out" >"$T/pair/trigger" 2>&1 || bad "pair: $(cat "$T/pair/trigger")"
wait "$(cat "$T/pair/pid")" "$p2"
grep -q 'to 2 running processes' "$T/pair/trigger" && [ "$(grep -c 'window 0 written' "$T/pair/trigger")" = 2 ] &&
	[ "$(for f in "$T/pair/out/"*.sptrace; do "$B/stepprof" dump "$f"; done | grep -c '^window_end.*origin=trigger')" = 2 ] &&
	grep -q '^at [0-9]' "$T/pair/out/.stepprof/trigger" &&
	echo "ok   a --job trigger reaches both processes of one output directory; each writes its window" ||
	bad "pair: $(cat "$T/pair/trigger")"

# 2d. two processes with the same pid and host name (a pid namespace each, as one container per
# rank; where unshare is not allowed, the pid forced into their names): their status files and
# traces keep apart, and one --job trigger reaches both
ini ns 100000000,1,3,1
if unshare -p -f true 2>/dev/null; then
	how="a pid namespace each" wrap="unshare -p -f" nsenv=
else
	how="the pid forced into the names (unshare is not allowed here)" wrap= nsenv=STEPPROF_TEST_NAME_PID=7
fi
for k in 1 2; do
	env $nsenv FAKE_CUPTI_LOG=/dev/null STEPPROF_CONFIG="$T/ns/sp.ini" LD_PRELOAD="$PRE" \
		$wrap timeout 60 "$B/tests/e2e/cupti_life_driver" 150 20000 >"$T/ns/stdout$k" 2>"$T/ns/stderr$k" &
	eval "ns$k=\$!"
done
for _ in $(seq 100); do [ "$(ls "$T/ns/out/.stepprof/"*.status 2>/dev/null | wc -l)" = 2 ] && break; sleep 0.05; done
"$B/stepprof" trigger --steps 3 --wait --timeout 10 --job "$T/ns/out" >"$T/ns/trigger" 2>&1 || bad "ns: $(cat "$T/ns/trigger")"
wait "$ns1" "$ns2"
names=$(cd "$T/ns/out" && ls .stepprof/*.status *.sptrace | sed 's/\.[0-9a-f]\{8\}\./.TAG./' | sort | uniq -c | awk '{ print $1 }' | sort -u)
grep -q 'to 2 running processes' "$T/ns/trigger" && [ "$(grep -c 'window 0 written' "$T/ns/trigger")" = 2 ] &&
	[ "$(ls "$T/ns/out/"*.sptrace | wc -l)" = 2 ] && [ "$names" = 2 ] && ! grep -q "exists; writing" "$T/ns/stderr"* &&
	echo "ok   two processes of one pid and host name ($how): two status files and traces, one --job trigger reaches both" ||
	bad "ns ($how): $(ls -a "$T/ns/out" "$T/ns/out/.stepprof"; cat "$T/ns/trigger")"

# 2e. inside a pid namespace with its own /proc: `stepprof trigger PID` finds the tagged status file
if unshare -p -f -m --mount-proc true 2>/dev/null; then
	ini nspid 100000000,1,3,1
	unshare -p -f -m --mount-proc sh -c '
		env FAKE_CUPTI_LOG=/dev/null STEPPROF_CONFIG="$1/nspid/sp.ini" LD_PRELOAD="$2" "$3/tests/e2e/cupti_life_driver" 150 20000 \
			>"$1/nspid/stdout" 2>"$1/nspid/stderr" &
		for _ in $(seq 100); do ls "$1/nspid/out/.stepprof/"*.status >/dev/null 2>&1 && break; sleep 0.05; done
		"$3/stepprof" trigger --steps 3 --wait --timeout 10 $! >"$1/nspid/trigger" 2>&1
		echo "trigger rc=$?" >>"$1/nspid/trigger"
		wait' sh "$T" "$PRE" "$B"
	grep -q 'trigger rc=0' "$T/nspid/trigger" && grep -q 'window 0 written' "$T/nspid/trigger" &&
		ls "$T/nspid/out/.stepprof/" | grep -Eq '\.[0-9]+\.[0-9a-f]{8}\.status$' &&
		echo "ok   inside a pid namespace: stepprof trigger PID finds the process's tagged status file" ||
		bad "nspid: $(ls -a "$T/nspid/out/.stepprof"; cat "$T/nspid/trigger")"
else
	echo "skip stepprof trigger PID inside a pid namespace: unshare -p -m is not allowed here"
fi

# 3. --ms: a time range on demand; and [ondemand] delay_ms/duration_ms with nothing scheduled
start ms 100000000,1,3,1 100
ready ms && sleep 0.2
"$B/stepprof" trigger --ms 300 --wait --timeout 10 --job "$T/ms/out" >"$T/ms/trigger" 2>&1 || bad "ms: $(cat "$T/ms/trigger")"
start range 100000000,1,3,1 80 "delay_ms = 400" "duration_ms = 400"
wait "$(cat "$T/ms/pid")" "$(cat "$T/range/pid")"
fail_before=$fail fail=0
for n in ms range; do
	/usr/bin/python3 - "$(windows $n)" <<'PY' || bad "$n: windows: $(windows $n)"
import sys
rows = [l.split(None, 5) for l in sys.argv[1].splitlines()]
ok = len(rows) == 1 and rows[0][1] == "timed"
steps = [int(x) for x in rows[0][5].split()] if ok and rows[0][5] != "-" else []
# 300-400 ms of 20 ms steps: 12 to 22 whole steps, consecutive
ok = ok and 12 <= len(steps) <= 22 and steps == list(range(steps[0], steps[0] + len(steps)))
sys.exit(0 if ok else 1)
PY
done
[ "$fail" = 0 ] && echo "ok   --ms 300 and [ondemand] delay_ms/duration_ms = 400: one timed window of the whole steps inside"
fail=$((fail | fail_before))

# 4. hostile control files: each ignored with a warning, the process runs on; then a good one
start hostile 100000000,1,3,1 150
ready hostile && sleep 0.2
C=$T/hostile/out/.stepprof
good=$(printf 'stepprof-trigger 1\nid 00000000000000aa\nsteps 2\n')
printf '%s\n' "$good" >"$T/req" && chmod 600 "$T/req"
want=4
if [ "$(id -u)" = 0 ]; then # another owner: only root can make one
	want=5
	cp "$T/req" "$C/tmp" && chown nobody "$C/tmp" && mv "$C/tmp" "$C/trigger" && sleep 0.2
fi
cp "$T/req" "$C/tmp" && chmod 620 "$C/tmp" && mv "$C/tmp" "$C/trigger" && sleep 0.2
ln -s "$T/req" "$C/tmp" && mv "$C/tmp" "$C/trigger" && sleep 0.2
head -c 5000 /dev/zero | tr '\0' x >"$C/tmp" && chmod 600 "$C/tmp" && mv "$C/tmp" "$C/trigger" && sleep 0.2
printf 'stepprof-trigger 1\nid 00000000000000ab\nsteps 2\nrun /bin/sh\n' >"$C/tmp" && chmod 600 "$C/tmp" && mv "$C/tmp" "$C/trigger" && sleep 0.2
"$B/stepprof" trigger --phase train --job "$T/hostile/out" >"$T/hostile/phase" 2>&1 && bad "hostile: --phase on a single-phase process was not refused"
grep -q 'refused' "$T/hostile/phase" || bad "hostile: --phase: $(cat "$T/hostile/phase")"
"$B/stepprof" trigger --steps 2 --wait --timeout 10 --job "$T/hostile/out" >"$T/hostile/trigger" 2>&1 || bad "hostile: good trigger: $(cat "$T/hostile/trigger")"
wait "$(cat "$T/hostile/pid")"
e=$T/hostile/stderr
n=$(grep -c 'ignoring the on-demand request' "$e")
{ [ "$want" = 4 ] || grep -q 'belongs to uid' "$e"; } && grep -q 'may be written by other users' "$e" && grep -q 'cannot open.*trigger' "$e" &&
	grep -q 'larger than 4096' "$e" && grep -q "bad 'run'" "$e" && [ "$n" = "$want" ] &&
	[ "$(windows hostile | wc -l)" = 1 ] && grep -q 'driver: 150 of 150' "$T/hostile/stdout" &&
	echo "ok   hostile request files (owner, mode, link, size, unknown key) ignored with a warning; --phase refused; a good one obeyed" ||
	bad "hostile: $n warnings: $(grep -v begins "$e" | head -12); windows: $(windows hostile)"

# 5. a control directory others may write: no triggers (said); an old request is not obeyed
mkdir -p "$T/open/out/.stepprof" && chmod 777 "$T/open/out/.stepprof"
start open 100000000,1,3,1 20
wait "$(cat "$T/open/pid")"
grep -q 'may be written by other users.*no on-demand windows' "$T/open/stderr" || bad "open: $(grep -v begins "$T/open/stderr" | head -5)"
"$B/stepprof" trigger --job "$T/open/out" >/dev/null 2>&1 && bad "open: trigger into a world-writable control directory succeeded"
mkdir -p "$T/old/out/.stepprof" && chmod 700 "$T/old/out/.stepprof"
printf 'stepprof-trigger 1\nid 00000000000000cc\nsteps 2\n' >"$T/old/out/.stepprof/trigger" && chmod 600 "$T/old/out/.stepprof/trigger"
start old 100000000,1,3,1 30
wait "$(cat "$T/old/pid")"
[ -z "$(ls "$T/old/out/"*.sptrace 2>/dev/null)" ] && echo "ok   a control directory others may write disables triggers; a request older than the process is not obeyed" ||
	bad "old: a request older than the process was obeyed"
"$B/stepprof" trigger --job "$T/old/out" >"$T/old/none" 2>&1 && bad "old: trigger with no live process succeeded"
grep -q 'no running process' "$T/old/none" || bad "old: $(cat "$T/old/none")"

# 6. stepprof check validates the [ondemand] keys (file and environment)
printf '[ondemand]\npoll_ms = 5\nduration_ms = -1\ndelay_ms = 1w\n' >"$T/bad.ini"
"$B/stepprof" check "$T/bad.ini" >"$T/check" 2>&1 && bad "check accepted $(cat "$T/bad.ini")"
[ "$(grep -c 'ondemand\]' "$T/check")" = 3 ] || bad "check: $(cat "$T/check")"
STEPPROF_ONDEMAND_TRIGGER=maybe "$B/stepprof" check >"$T/check" 2>&1 && bad "check accepted STEPPROF_ONDEMAND_TRIGGER=maybe"
STEPPROF_ONDEMAND_DELAY_MS=1500 STEPPROF_ONDEMAND_DURATION_MS=200 "$B/stepprof" check 2>&1 | grep -q '^delay_ms = 1500' &&
	echo "ok   stepprof check refuses bad [ondemand] values from a file or the environment, shows good ones" ||
	bad "check: good [ondemand] values from the environment"
exit $fail
