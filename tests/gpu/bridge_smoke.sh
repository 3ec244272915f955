#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bridge_smoke.sh [BUILD_DIR] - on a GPU machine, from the repository root: the Python bridge
# (collector/pybridge/) on a small real torch training loop (tests/gpu/bridge_train.py: two
# optimizers, a GradScaler, fp16 autocast, each iteration in train_step and in an NVTX range
# "iter"). Runs it under the default configuration, kind = optimizer, kind = python
# (__main__:train_step) and kind = nvtx (pattern iter: the truth), and prints one PASS or FAIL line
# per check: steps 11-13 recorded, the same kernels in each and as many as the truth's; the default
# took the optimizer steps (report says so); stepprof detached from CUPTI before the window (parked
# from the start) and after it; then the cost per optimizer step of torch's global post hook with
# stepprof's in it (outside any window) against unprofiled runs interleaved, with the A/A spread.
# BUILD_DIR: a build folder, or dist/stepprof (the default, after 'make dist'). Output in
# ${OUT:-/tmp/stepprof-bridge}. About a minute on one H200. Exit 0 when every check passed.
# Also (tests/gpu/bridge_train.py --probe) what the program sees of the bridge under the default
# configuration: one hook in torch's global post hooks, GradScaler.update wrapped with the same
# signature and type hints, a GradScaler still pickled, sys.monitoring's tool ids 3 and 4 free.
# COMPILE=1: also a torch.compile'd optimizer step (fullgraph=False), unprofiled and profiled: it
# runs, and dynamo's graph-break count with stepprof's hook is printed against the unprofiled one
# (about 2 more minutes: two compilations).
# RECORD=1: the default run also records its token stream with the NVTX truth
# ($OUT/default/run.tokens, for tests/data/corpus/) and replays it with `stepprof autostep --check
# --windows` (one more check line).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/stepprof-bridge}
PY=${PY:-python3}
B=${1:-$ROOT/dist/stepprof}
SP=$B/stepprof
[ -x "$SP" ] || SP=$B/bin/stepprof
LIB=$B/libstepprof-nomalloc.so
[ -e "$LIB" ] || LIB=$B/lib/libstepprof-nomalloc.so
[ -e "$LIB" ] && [ -x "$SP" ] || { echo "bridge_smoke: no stepprof and libstepprof-nomalloc.so in $B (run 'make dist')"; exit 2; }
rm -rf "$OUT" && mkdir -p "$OUT" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH
bad=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; bad=1; }

# one NAME [MARKER LINES]: bridge_train.py under stepprof (default schedule: steps 11-13)
one() {
	local name=$1 d=$OUT/$1
	shift
	mkdir -p "$d"
	printf '[profile]\noutput = %s\n[ranks]\nranks = all\n' "$d/trace" >"$d/sp.ini"
	[ $# -gt 0 ] && { printf '[marker]\n'; printf '%s\n' "$@"; } >>"$d/sp.ini"
	local t0=$SECONDS rec=()
	[ "$name" = default ] && [ "${RECORD:-0}" = 1 ] &&
		rec=(STEPPROF_RECORD_TOKENS="$d/run.tokens" STEPPROF_RECORD_TRUTH=nvtx:iter)
	env "${rec[@]}" STEPPROF_CONFIG="$d/sp.ini" STEPPROF_VERBOSE=1 LD_PRELOAD="$LIB" timeout 120 "$PY" \
		"$ROOT/tests/gpu/bridge_train.py" >"$d/stdout" 2>"$d/stderr"
	echo $? >"$d/rc"
	"$SP" report --json "$d"/trace/*.sptrace >"$d/report.json" 2>"$d/report.err"
	"$PY" - "$d/report.json" >"$d/steps" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    sys.exit()
print(" ".join("%d:%d" % (s["number"], s["kernels"]) for s in r["steps"]))
print(r.get("steps_found_by") or "")
PY
	echo "-- $name: exit $(cat "$d/rc") in $((SECONDS - t0)) s; steps $(head -1 "$d/steps"); $(sed -n 2p "$d/steps" | cut -c1-160)"
}

# kernels NAME: the kernels of its three recorded steps if steps 11-13 hold the same number, else ""
kernels() {
	local s
	s=$(head -1 "$OUT/$1/steps")
	case "$s" in
	"11:"*" 12:"*" 13:"*) ;;
	*) return ;;
	esac
	echo "$s" | tr ' ' '\n' | cut -d: -f2 | sort -u | awk 'NR == 1 { k = $1 } END { if (NR == 1) print k }'
}

one truth "kind = nvtx" "pattern = iter"
one default
one optimizer "kind = optimizer"
one python "kind = python" "pattern = __main__:train_step"
truth=$(kernels truth)
[ -n "$truth" ] && pass "truth (NVTX 'iter'): steps 11-13, $truth kernels each" || fail "truth: steps $(head -1 "$OUT/truth/steps")"
for n in default optimizer python; do
	k=$(kernels $n)
	if [ "$(cat "$OUT/$n/rc")" = 0 ] && [ -n "$k" ] && [ "$k" = "$truth" ]; then
		pass "$n: steps 11-13 with $k kernels each, as the truth"
	else
		fail "$n: exit $(cat "$OUT/$n/rc"), steps $(head -1 "$OUT/$n/steps") (truth: $truth kernels a step)"
	fi
done
grep -q "kind = auto took them" "$OUT/default/steps" && grep -q "GradScaler#1's update() begins" "$OUT/default/steps" &&
	pass "default: the program's optimizer steps, ended by GradScaler.update ($(sed -n 2p "$OUT/default/steps" | cut -c1-120)...)" ||
	fail "default: steps found by: $(sed -n 2p "$OUT/default/steps")"
for n in optimizer python; do
	e=$OUT/$n/stderr
	if grep -q "re-attached to CUPTI in step .* (parked since step 0" "$e" &&
		grep -q "detached from CUPTI in step .* (the schedule is done)" "$e"; then
		pass "$n: parked from the start, attached for the window only ($(grep -o 're-attached to CUPTI in step [0-9]*' "$e"), $(grep -o 'detached from CUPTI in step [0-9]* (the schedule is done)' "$e"))"
	else
		fail "$n: not parked outside the window: $(grep -E 'attached|detached' "$e" | head -3)"
	fi
done

# what the program sees of the bridge (the default configuration, outside any window)
mkdir -p "$OUT/probe"
printf '[profile]\noutput = %s\n[ranks]\nranks = all\n' "$OUT/probe/trace" >"$OUT/probe/sp.ini"
STEPPROF_CONFIG=$OUT/probe/sp.ini LD_PRELOAD=$LIB timeout 120 "$PY" "$ROOT/tests/gpu/bridge_train.py" --probe \
	>"$OUT/probe/stdout" 2>"$OUT/probe/stderr"
p=$(grep '^PROBE' "$OUT/probe/stdout")
case "$p" in
*"hooks=1 scaler_wrapped=True signature_same=True hints_same="*" pickled_scaler=GradScaler tools=[None, None]"* | \
	*"hooks=1 scaler_wrapped=True signature_same=True hints_same="*" pickled_scaler=GradScaler tools=no sys.monitoring"*)
	case "$p" in
	*"hints_same=False"*) fail "probe: GradScaler.update's type hints differ under its wrapper: $p" ;;
	*) pass "probe: $p" ;;
	esac ;;
*) fail "probe: '$p' $(tail -2 "$OUT/probe/stderr")" ;;
esac

if [ "${COMPILE:-0}" = 1 ]; then
	cu=$(timeout 300 "$PY" "$ROOT/tests/gpu/bridge_train.py" --compile-opt 50 2>"$OUT/probe/compile.none" | grep '^COMPILE')
	cp=$(STEPPROF_CONFIG=$OUT/probe/sp.ini LD_PRELOAD=$LIB timeout 300 "$PY" "$ROOT/tests/gpu/bridge_train.py" \
		--compile-opt 50 2>"$OUT/probe/compile.profiled" | grep '^COMPILE')
	case "$cu/$cp" in
	"COMPILE ok "*"/COMPILE ok "*) pass "torch.compile(opt.step): runs with stepprof's hook; graph breaks unprofiled ${cu#COMPILE ok }, profiled ${cp#COMPILE ok }" ;;
	*) fail "torch.compile(opt.step): unprofiled '$cu', profiled '$cp'" ;;
	esac
fi

if [ "${RECORD:-0}" = 1 ]; then
	"$SP" autostep --check --windows "$OUT/default/run.tokens" >"$OUT/default/replay" 2>&1 &&
		pass "recorded stream: the replay agrees with the NVTX truth ($(grep '^truth: dominant' "$OUT/default/replay" | cut -c1-100))" ||
		fail "recorded stream: $(tail -2 "$OUT/default/replay")"
fi

# the cost per optimizer step: the hook stepprof installs, outside windows, against unprofiled runs
printf '[profile]\noutput = %s\n[ranks]\nranks = all\n[schedule]\nwait = 1000000000\n[marker]\nkind = optimizer\n' \
	"$OUT/cost/trace" >"$OUT/cost.ini" && mkdir -p "$OUT/cost"
cost() { # cost none|profiled: ns per step
	if [ "$1" = none ]; then
		timeout 120 "$PY" "$ROOT/tests/gpu/bridge_train.py" --cost 100000
	else
		STEPPROF_CONFIG=$OUT/cost.ini LD_PRELOAD=$LIB timeout 120 "$PY" "$ROOT/tests/gpu/bridge_train.py" --cost 100000
	fi 2>>"$OUT/cost/stderr" | awk '/^COST/ { print $3 }'
}
u1=$(cost none) p1=$(cost profiled) u2=$(cost none) p2=$(cost profiled)
echo "-- cost: unprofiled $u1 $u2 ns a step, profiled $p1 $p2 ns a step"
awk -v u1="$u1" -v u2="$u2" -v p1="$p1" -v p2="$p2" 'BEGIN {
	if (u1 == "" || u2 == "" || p1 == "" || p2 == "") { print "FAIL cost: a run printed no COST line"; exit 1 }
	d = ((p1 + p2) - (u1 + u2)) / 2000; aa = (u1 > u2 ? u1 - u2 : u2 - u1) / 1000
	printf "%s cost: torch optimizer step %+.2f us with the stepprof post hook between windows (unprofiled %.0f ns; A/A spread %.2f us; limit 2 us)\n",
		d <= 2 ? "PASS" : "FAIL", d, (u1 + u2) / 2, aa
	exit d <= 2 ? 0 : 1 }' || bad=1
exit $bad
