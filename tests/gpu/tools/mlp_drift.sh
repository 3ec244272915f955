#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mlp_drift.sh [DIST] - why mlp-auto's kernel times read short against torch.profiler's at times
# (issue 36): on the GPU machine, from the repo root after `make dist`. mlp_train.py (16 steps,
# records 7-9) under torch.profiler twice, then ROUNDS (3) rounds of stepprof's default marker
# (parked, re-attached for the window), the same with detach_between = never (attached all run) and
# the kernel marker; each compared with the first torch run (compare_torch.py) and read by
# drift.py; the GPU's clocks sampled every 100 ms meanwhile. Output: $OUT/mlp_drift.txt, logs in
# $OUT/mlp_drift.tgz.
set -u
D=$(cd "${1:-dist/stepprof}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
G=$HERE/..
PY=${PYTHON:-python3}
O=${OUT:-/tmp}
W=${WORK:-/tmp/mlp_drift}
LIB=$D/lib/libstepprof.so
[ -e "$LIB" ] || LIB=$D/libstepprof.so
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH
export PYTHONPATH=$G${PYTHONPATH:+:$PYTHONPATH}
SCHED=(--skip-first 5 --wait 1 --warmup 1 --active 3 --repeat 1)
ini() { # NAME KIND PATTERN EVERY EXTRA
	printf '[profile]\nenabled = true\noutput = %s\n[schedule]\nskip_first = 5\nwait = 1\nwarmup = 1\nactive = 3\nrepeat = 1\n' "$W/$1"
	printf '[marker]\nkind = %s\nevery = %s\n' "$2" "$4"
	[ -n "$3" ] && printf 'pattern = %s\n' "$3"
	printf '[activities]\nkernels = true\nmemcpy = true\nmemset = true\nruntime_api = true\ndriver_api = true\n%s' "$5"
}
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,pstate --format=csv,noheader -lms 100 \
	>clocks.csv 2>&1 &
SMI=$!
{
for r in 1 2; do
	$PY "$G/mlp_train.py" --steps 16 --torch-profiler "$W/ref$r.json" "${SCHED[@]}" >ref$r.log 2>&1
	echo "ref$r: $(date +%T.%N) exit $?"
done
every=$($PY "$G/traceutil.py" count ref1.json '*multi_tensor_apply*')
for r in $(seq "${ROUNDS:-3}"); do
	for c in auto never kernel; do
		n=$c$r
		case $c in
		auto) ini "$n" auto '' 1 '' ;;
		never) ini "$n" auto '' 1 $'[cupti]\ndetach_between = never\n' ;;
		kernel) ini "$n" kernel '*multi_tensor_apply*' "$every" '' ;;
		esac >"$n.ini"
		echo "$n: $(date +%T.%N)"
		STEPPROF_CONFIG=$W/$n.ini LD_PRELOAD=$LIB STEPPROF_VERBOSE=1 $PY "$G/mlp_train.py" --steps 16 >"$n.log" 2>&1
		t=$(find "$W/$n" -name '*.sptrace' | head -1)
		"$D/bin/stepprof" convert "$t" -o "$n.json" --merge >"$n.conv" 2>&1
		$PY "$G/compare_torch.py" "$n.json" ref1.json >"$n.cmp" 2>&1
		echo "$n vs ref1: $(tail -1 "$n.cmp")"
		grep -a 'stepprof:' "$n.log" | grep -ai 'attach\|park\|subscrib' | head -4 | sed 's/^/    /'
	done
done
$PY "$G/compare_torch.py" ref2.json ref1.json >ref2.cmp 2>&1
echo "ref2 vs ref1: $(tail -1 ref2.cmp)"
$PY "$HERE/drift.py" ref1.json ref2.json auto*.json never*.json kernel*.json
for f in auto1 never1 kernel1; do echo "== $f.cmp"; sed -n '/^ *n /,/compare_torch/p' "$f.cmp" | head -14; done
} 2>&1 | tee "$O/mlp_drift.txt"
kill $SMI 2>/dev/null
echo "== clocks (sm MHz: min median max)" | tee -a "$O/mlp_drift.txt"
awk -F', ' '{print $2+0}' clocks.csv | sort -n | awk '{a[NR]=$1} END {print a[1], a[int(NR/2)+1], a[NR]}' | tee -a "$O/mlp_drift.txt"
tar czf "$O/mlp_drift.tgz" *.log *.cmp *.ini clocks.csv 2>/dev/null
