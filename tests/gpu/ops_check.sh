#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ops_check.sh [DIST] - torch operators and modules (issue 41) on the GPU machine, from the repo root
# after `make dist` (DIST: dist/stepprof). About 100 s on one H200, 120 s at most (LIMIT): every run
# is cut to end by then and what did not run is said FAIL. For tests/gpu/programs/gradscaler_resnet.py
# (--iters 30 --eval-every 1000) and hf_trainer.py (--steps 30 --eval-steps 1000: no evaluation in the window), both
# unmodified, with `[marker] kind = optimizer` and the schedule wait 10, warmup 2, active 10:
#  1. stepprof with [activities] ops and modules on (whatever the default), then torch.profiler on the same
#     steps (ops_torchprof.py: the program through runpy inside torch.profiler.profile(schedule=...)):
#     `report --by op --json`'s top 10 by self CUDA time and their calls against key_averages;
#  2. the module times and the work outside modules sum to the steps' kernel time within 5%;
#  3. `convert` of the window to $OUT/NAME.pt.trace.json.gz (tests/gpu/ops_hta.sh loads them with
#     HTA afterwards, on the machine that has ../shared/tools/hta);
#  4. the same run with [activities] ops = false and modules = false: the window's step times beside
#     the first run's (median, quartiles; stepprof's own step durations), and the program's STEP
#     lines after the window. The runs go one after another (a run beside another on the GPU would
#     time the other); the two torch.profiler runs go together.
# Prints one "PASS/FAIL ops_check NAME: ..." line per check (details indented below it) and ends
# with "ops_check: N passed, M failed". $OUT (default /tmp/stepprof-ops) gets at most 4 files:
# gradscaler_resnet.pt.trace.json.gz, hf_trainer.pt.trace.json.gz, ops_check.txt (this output),
# ops_logs.tgz (every run's log, report JSON, torch.profiler JSON; no traces).
set -u
D=$(cd "${1:-dist/stepprof}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
P=$HERE/programs
O=${OUT:-/tmp/stepprof-ops}
W=${WORK:-/tmp/stepprof-ops-work}
PY=${PYTHON:-python3}
LIMIT=${LIMIT:-118}
SP=$D/bin/stepprof
[ -x "$SP" ] || SP=$D/stepprof
mkdir -p "$O" && rm -rf "$W" && mkdir -p "$W" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SCHED=(--set marker.kind=optimizer --set schedule.wait=10 --set schedule.warmup=2 --set schedule.active=10
	--set schedule.repeat=1)
declare -A ARGS=([gradscaler_resnet]="--iters 30 --eval-every 1000" [hf_trainer]="--steps 30 --eval-steps 1000")
PROGS=(gradscaler_resnet hf_trainer)

# timed SECONDS_WANTED COMMAND...: the command, cut to end by LIMIT (at least 5 s)
timed() {
	local t=$1 left=$((LIMIT - SECONDS))
	shift
	[ "$left" -lt "$t" ] && t=$left
	[ "$t" -lt 5 ] && { echo "not run (LIMIT $LIMIT s spent): $*"; return 124; }
	timeout -k 5 "$t" "$@"
}
# sp NAME HOW [--set ...]: the program under stepprof into $W/NAME/HOW (trace, log, report.json)
sp() {
	local n=$1 how=$2 d=$W/$1/$2 tr
	shift 2
	mkdir -p "$d"
	# shellcheck disable=SC2086
	timed 60 env STEPPROF_VERBOSE=1 "$SP" run -o "$d/trace" "${SCHED[@]}" "$@" -- "$PY" "$P/$n.py" ${ARGS[$n]} \
		>"$d/log" 2>&1 </dev/null
	local rc=$?
	echo "$n $how: exit $rc after ${SECONDS}s; $(grep -a '^PROG ' "$d/log" | tail -1)"
	[ "$rc" = 0 ] || tail -3 "$d/log" | sed 's/^/    log: /'
	tr=$(ls -S "$d"/trace/*.sptrace 2>/dev/null | head -1)
	[ -n "$tr" ] && "$SP" report --by op --json "$tr" >"$d/report.json" 2>"$d/report.err"
	[ -n "$tr" ] && echo "$tr" >"$d/trace.path"
}

main() {
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
	echo "ops_check: stepprof $SP ($("$SP" --version 2>&1 | head -1)), LIMIT $LIMIT s"
	for n in "${PROGS[@]}"; do sp "$n" ops --set activities.ops=true --set activities.modules=true; done

	# torch.profiler on the window's steps (as stepprof numbered them; 12-21 if it recorded none)
	for n in "${PROGS[@]}"; do
		read -r a b < <("$PY" -c 'import json,sys; w=json.load(open(sys.argv[1]))["windows"][0]; print(w["first_step"], w["last_step"])' \
			"$W/$n/ops/report.json" 2>/dev/null || echo 12 21)
		mkdir -p "$W/$n/torch"
		# shellcheck disable=SC2086
		timed 60 "$PY" "$HERE/ops_torchprof.py" --first "$a" --last "$b" --out "$W/$n/torch/ops.json" -- \
			"$P/$n.py" ${ARGS[$n]} >"$W/$n/torch/log" 2>&1 </dev/null &
	done
	wait
	for n in "${PROGS[@]}"; do
		echo "$n torch.profiler: $(grep -a '^ops_torchprof:\|^PROG ' "$W/$n/torch/log" | tr '\n' ' ')"
		grep -q '^ops_torchprof:' "$W/$n/torch/log" || tail -3 "$W/$n/torch/log" | sed 's/^/    log: /'
	done
	for n in "${PROGS[@]}"; do sp "$n" off --set activities.ops=false --set activities.modules=false; done

	pass=0 failed=0
	count() { if [ "$1" = 0 ]; then pass=$((pass + 1)); else failed=$((failed + 1)); fi; }
	for n in "${PROGS[@]}"; do
		"$PY" "$HERE/ops_compare.py" ops "$n" "$W/$n/ops/report.json" "$W/$n/torch/ops.json"
		count $?
		"$PY" "$HERE/ops_compare.py" modules "$n" "$W/$n/ops/report.json"
		count $?
		rm -f "$O/$n.pt.trace.json.gz"
		if [ -s "$W/$n/ops/trace.path" ] && "$SP" convert "$(cat "$W/$n/ops/trace.path")" -o "$O/$n.pt.trace.json.gz" \
			>"$W/$n/convert.log" 2>&1 && "$PY" - "$O/$n.pt.trace.json.gz" <<-'EOF'; then
	import gzip, json, sys
	ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
	ops = [e for e in ev if e.get("cat") == "cpu_op"]
	ids = {e["args"]["External id"] for e in ops}
	k = [e for e in ev if e.get("cat") == "kernel"]
	tied = sum(1 for e in k if e["args"].get("External id") in ids)
	seq = sum(1 for e in ops if "Sequence number" in e["args"])
	print(f"    {len(ops)} cpu_op ({seq} with a Sequence number), {len(k)} kernels ({tied} tied to an op by External id), "
	      f"{sum(1 for e in ev if e.get('cat') == 'fwdbwd') // 2} fwdbwd flows")
	sys.exit(0 if ops and tied >= 0.8 * len(k) and seq else 1)
	EOF
			echo "PASS ops_check $n: convert wrote $n.pt.trace.json.gz ($(du -k "$O/$n.pt.trace.json.gz" | cut -f1) KB): cpu_op events, kernels tied to them"
			count 0
		else
			echo "FAIL ops_check $n: convert: $(tail -3 "$W/$n/convert.log" 2>/dev/null || echo no trace)"
			count 1
		fi
		"$PY" "$HERE/ops_compare.py" cost "$n" "$W/$n/ops/report.json" "$W/$n/off/report.json" "$W/$n/ops/log" "$W/$n/off/log"
		count $?
		grep -a '^stepprof' "$W/$n/ops/log" | grep -i 'torch operators\|NVTX\|warn' | head -5 | sed 's/^/    stepprof said: /'
	done
	(cd "$W" && tar czf "$O/ops_logs.tgz" --exclude='*.sptrace' --exclude='trace' . 2>/dev/null)
	echo "ops_check: $pass passed, $failed failed ($SECONDS s)"
	[ "$failed" = 0 ]
}
main 2>&1 | tee "$O/ops_check.txt"
exit "${PIPESTATUS[0]}"
