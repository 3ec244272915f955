#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/trigger.sh [BUILD_DIR] - on-demand windows on the GPU: training loops started with
# nothing scheduled (wait = 100000000), or whose one scheduled window is over (stepprof detached
# from CUPTI), get `stepprof trigger` from outside; each window must hold exactly the steps asked
# for, each with the kernel count of the same loop's steps recorded by a plain schedule (a
# reference run). Single GPU (a --job trigger, then a PID trigger) and, with 2 GPUs, torchrun
# with every rank selected. Without BUILD_DIR, dist/stepprof (`make dist`) is laid flat in
# /tmp/sptrig-build, so from the repository root on the GPU machine: bash tests/gpu/trigger.sh
# Prints PASS/FAIL per test and "N passed, N failed" last; logs and traces under
# /tmp/stepprof-trigger/TEST/ (the logs also under $OUT/trigger/ when OUT is set).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
if [ $# -ge 1 ]; then
	BUILD=$(cd "$1" && pwd) || exit 2
else
	BUILD=/tmp/sptrig-build
	rm -rf "$BUILD" && mkdir -p "$BUILD" && cp "$HERE/../../dist/stepprof/bin/stepprof" "$HERE/../../dist/stepprof/lib/"* "$BUILD/" ||
		{ echo "no dist/stepprof: run 'make dist' first"; exit 2; }
fi
SP=$BUILD/stepprof
LIB=$BUILD/libstepprof.so
PY=${PYTHON:-python3}
# work under /tmp; the logs (not the traces) are copied to $OUT at the end when it is set (the device
# tool's folder that comes back)
KEEP=${OUT:-}
OUT=/tmp/stepprof-trigger
rm -rf "$OUT" && mkdir -p "$OUT"
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH
export NCCL_NVLS_ENABLE=0
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
LAUNCH=(torchrun)
command -v torchrun >/dev/null || LAUNCH=("$PY" -m torch.distributed.run)
pass=0 fail=0

# ini DIR WAIT WARMUP ACTIVE REPEAT: DIR/sp.ini (every rank, api marker cudaDeviceSynchronize,
# polled every 200 ms), checked by `stepprof check`
ini() {
	printf '[profile]\noutput = %s/trace\n[ranks]\nranks = all\n[schedule]\nwait = %s\nwarmup = %s\nactive = %s\nrepeat = %s\n[marker]\nkind = api\npattern = cudaDeviceSynchronize*\n[ondemand]\npoll_ms = 200\n' \
		"$1" "$2" "$3" "$4" "$5" >"$1/sp.ini"
	"$SP" check "$1/sp.ini" >"$1/check.log" 2>&1 || { cat "$1/check.log"; return 1; }
}

# loop DIR NPROC ARGS...: the training loop under stepprof (torchrun when NPROC > 1), in the
# background; its pid in $LOOP
loop() {
	local d=$1 n=$2
	shift 2
	local cmd=("$PY" "$HERE/trigger_train.py")
	[ "$n" -gt 1 ] && cmd=("${LAUNCH[@]}" --standalone --nproc_per_node "$n" "$HERE/trigger_train.py")
	echo "+ ${cmd[*]} $*" >>"$d/test.log"
	STEPPROF_CONFIG="$d/sp.ini" STEPPROF_VERBOSE=1 LD_PRELOAD="$LIB" timeout 300 "${cmd[@]}" "$@" >"$d/stdout.log" 2>"$d/stderr.log" &
	LOOP=$!
}

# ready DIR NPROC: waits (at most 180 s) for each rank's ready file
ready() {
	local k
	for _ in $(seq 1800); do
		k=$(ls "$1"/ready.* 2>/dev/null | wc -l)
		[ "$k" -ge "$2" ] && return 0
		sleep 0.1
	done
	echo "the loop never became ready" >>"$1/test.log"
	return 1
}

# check DIR NPROC REF_DIR SIZES UNCOUNTED: each rank's trace holds trigger windows of SIZES
# (comma-separated step counts, in order), each of whole consecutive steps whose kernel counts all
# equal the reference run's for that rank; UNCOUNTED (0/1) what the windows say about step numbers
check() {
	local t
	for t in "$1"/trace/*.sptrace "$3"/trace/*.sptrace; do
		"$SP" report --json "$t" >"$t.json" 2>>"$1/test.log" || return 1
	done
	"$PY" - "$1" "$2" "$3" "$4" "$5" <<'PY' >>"$1/test.log" 2>&1
import glob, json, sys
d, nproc, ref, sizes, unc = sys.argv[1], int(sys.argv[2]), sys.argv[3], [int(x) for x in sys.argv[4].split(",")], sys.argv[5] == "1"
def load(dirname):
    out = {}
    for f in glob.glob(f"{dirname}/trace/*.sptrace.json"):
        j = json.load(open(f))
        out[j["rank"] if j["rank"] >= 0 else 0] = j
    return out
got, want = load(d), load(ref)
ok = len(got) == nproc and len(want) == nproc
for r in sorted(got):
    kref = {s["kernels"] for s in want[r]["steps"]}
    print(f"rank {r}: reference steps {[s['number'] for s in want[r]['steps']]} kernels {sorted(kref)}")
    if len(kref) != 1:
        print("  the reference steps differ in kernel count: no single expectation"); ok = False; continue
    k = kref.pop()
    wins = [w for w in got[r]["windows"] if w["origin"] == "trigger"]
    print(f"  trigger windows: {[(w['id'], w['first_step'], w['last_step'], w['steps'], w['complete'], w['steps_uncounted_before']) for w in wins]}")
    if [w["steps"] for w in wins] != sizes:
        print(f"  step counts {[w['steps'] for w in wins]}, expected {sizes}"); ok = False
    for w in wins:
        steps = [s for s in got[r]["steps"] if s["window"] == w["id"]]
        nums = [s["number"] for s in steps]
        kern = [s["kernels"] for s in steps]
        print(f"  window {w['id']}: steps {nums} kernels {kern}")
        if nums != list(range(w["first_step"], w["last_step"] + 1)) or len(nums) != w["steps"]:
            print("  not whole consecutive steps"); ok = False
        if any(x != k for x in kern):
            print(f"  a step's kernel count differs from the reference's {k}"); ok = False
        if not w["complete"] or w["steps_uncounted_before"] != unc or w["dropped"] or w.get("missing"):
            print(f"  complete {w['complete']} uncounted {w['steps_uncounted_before']} (expected {unc}) dropped {w['dropped']} missing {w.get('missing')} (kernels launched whose record never came)"); ok = False
firsts = {r: [w["first_step"] for w in got[r]["windows"] if w["origin"] == "trigger"] for r in got}
if nproc > 1:  # the request names a start time so that ranks stepping together pick the same steps
    same = len({tuple(v) for v in firsts.values()}) == 1
    print(f"NOTE every rank recorded the same steps: {'yes' if same else 'no'} {firsts}")
sys.exit(0 if ok else 1)
PY
}

# result NAME RC
result() {
	if [ "$2" = 0 ]; then
		pass=$((pass + 1))
		echo "PASS $1"
	else
		fail=$((fail + 1))
		echo "FAIL $1 (log $OUT/$1/test.log):"
		tail -n 40 "$OUT/$1/test.log" | sed 's/^/    /'
		grep -v 'begins' "$OUT/$1/stderr.log" 2>/dev/null | tail -n 15 | sed 's/^/    stderr: /'
	fi
}

# reference NAME NPROC: the same loop, 60 steps, the schedule recording steps 41-43
reference() {
	local d=$OUT/$1
	mkdir -p "$d"
	ini "$d" 40 1 3 1 >>"$d/test.log" 2>&1 || return 1
	loop "$d" "$2" --steps 60
	wait "$LOOP" || { echo "the loop exited $?" >>"$d/test.log"; return 1; }
}

# triggered NAME NPROC REF WAIT WARMUP ACTIVE REPEAT UNCOUNTED: the loop, then a --job trigger of
# 5 steps, then (single process) a PID trigger of 2 steps; checked against REF
triggered() {
	local n=$2 ref=$3 unc=$8 d=$OUT/$1 sizes=5 rc=0
	mkdir -p "$d"
	ini "$d" "$4" "$5" "$6" "$7" >>"$d/test.log" 2>&1 || return 1
	loop "$d" "$n" --stop "$d/stop" --ready "$d/ready.{rank}" --ready-after 40
	ready "$d" "$n" || { touch "$d/stop"; wait "$LOOP"; return 1; }
	"$SP" trigger --steps 5 --wait --timeout 120 --job "$d/trace" >>"$d/test.log" 2>&1 || rc=1
	if [ "$n" = 1 ]; then
		sizes=5,2
		"$SP" trigger --steps 2 --wait --timeout 120 "$(cat "$d/ready.0")" >>"$d/test.log" 2>&1 || rc=1
	fi
	touch "$d/stop"
	wait "$LOOP" || { echo "the loop exited $?" >>"$d/test.log"; rc=1; }
	[ "$(grep -c 'trigger_train ok' "$d/stdout.log")" = "$n" ] || rc=1
	[ "$(grep -c ': window [0-9]* written' "$d/test.log")" = "$((n + (n == 1)))" ] || { echo "not every window was reported written" >>"$d/test.log"; rc=1; }
	if [ "$unc" = 1 ] && ! grep -q 're-attached to CUPTI for an on-demand window' "$d/stderr.log"; then
		echo "no re-attach said on stderr" >>"$d/test.log"
		rc=1
	fi
	check "$d" "$n" "$OUT/$ref" "$sizes" "$unc" || rc=1
	grep '^NOTE' "$d/test.log"
	return $rc
}

reference ref-1gpu 1; result ref-1gpu $?
triggered idle-1gpu 1 ref-1gpu 100000000 1 3 1 0; result idle-1gpu $?
triggered detached-1gpu 1 ref-1gpu 5 0 2 1 1; result detached-1gpu $?
if [ "$NGPU" -ge 2 ]; then
	reference ref-ddp 2; result ref-ddp $?
	triggered idle-ddp 2 ref-ddp 100000000 1 3 1 0; result idle-ddp $?
	triggered detached-ddp 2 ref-ddp 5 0 2 1 1; result detached-ddp $?
else
	echo "SKIP the torchrun tests: $NGPU GPU(s)"
fi
echo "$pass passed, $fail failed"
if [ -n "$KEEP" ]; then
	for f in "$OUT"/*/test.log "$OUT"/*/stderr.log "$OUT"/*/stdout.log; do
		[ -f "$f" ] && mkdir -p "$KEEP/trigger/$(basename "$(dirname "$f")")" && cp "$f" "$KEEP/trigger/$(basename "$(dirname "$f")")/"
	done
fi
[ "$fail" = 0 ]
