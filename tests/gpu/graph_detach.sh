#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# graph_detach.sh [BUILD_DIR] - on a GPU machine, from the repository root: a program that replays
# CUDA graphs runs to its end under stepprof's default configuration, after the schedule's last
# window as well. On an H100 (CUDA 13.0, driver 580) torch's graph replays failed with "unspecified
# launch failure" once stepprof had called cuptiFinalize after its last window; stepprof now never
# detaches once the program has made a graph (decide/life.c). Runs the corpus's graphs_train.py
# (a whole training step captured with torch.cuda.graph) and graphs_infer.py under: the automatic
# marker, an api marker on cudaGraphLaunch, learn = hooks, and detach_between = always. Each must
# exit 0, record its window, never say "detached from CUPTI", and say why it stays subscribed.
# Also runs tests/gpu/tools/graph_fin_probe.cu (CUPTI alone, no stepprof) for the record: its
# graphs of plain kernels survived cuptiFinalize on the H100 (tools/graph_fin_matrix.sh runs the
# whole matrix of CUPTI states). BUILD_DIR: a build folder, or dist/stepprof (the default, after
# 'make dist'). Output in ${OUT:-/tmp}/graph_detach (emptied first; never $OUT itself, which the
# GPU machine's runner sets to its result folder).
# Exit 0 when every run passed, else 1.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp}/graph_detach
PY=${PY:-python3}
B=${1:-$ROOT/dist/stepprof}
LIB=$B/libstepprof.so
[ -e "$LIB" ] || LIB=$B/lib/libstepprof.so
[ -e "$LIB" ] || { echo "graph_detach: no libstepprof.so in $B (run 'make dist')"; exit 2; }
SP=$B/stepprof
[ -e "$SP" ] || SP=$B/bin/stepprof
rm -rf "$OUT" && mkdir -p "$OUT" || exit 2
for v in $(compgen -e | grep '^STEPPROF_'); do unset "$v"; done
unset LD_PRELOAD CUDA_INJECTION64_PATH

bad=0
# one NAME PROGRAM [KEY=VALUE...]: the program's 300 iterations under stepprof (schedule: wait 10,
# warmup 1, active 3, repeat 1, so the schedule ends early and most replays come after it)
one() {
	local name=$1 prog=$2 d=$OUT/$1
	shift 2
	mkdir -p "$d"
	env STEPPROF_PROFILE_OUTPUT="$d/trace" STEPPROF_RANKS_RANKS=all STEPPROF_VERBOSE=1 "$@" LD_PRELOAD="$LIB" \
		timeout 300 "$PY" "$ROOT/tests/gpu/corpus/$prog" 300 >"$d/stdout" 2>"$d/stderr" </dev/null
	local rc=$? why=""
	"$SP" report "$d"/trace/*.sptrace >"$d/report" 2>&1 || why="no readable trace; "
	[ $rc = 0 ] || why+="exit $rc ($(grep -m1 -E 'Error|error' "$d/stderr" | cut -c1-120)); "
	grep -q "detached from CUPTI" "$d/stderr" && why+="detached from CUPTI; "
	grep -q "not detaching from CUPTI.*created a CUDA graph" "$d/stderr" || why+="did not say why it stays subscribed; "
	if [ -z "$why" ]; then
		echo "PASS graph_detach-$name"
	else
		echo "FAIL graph_detach-$name: $why(see $d/stderr)"
		bad=1
	fi
}
one train-auto graphs_train.py
one train-api graphs_train.py STEPPROF_MARKER_KIND=api 'STEPPROF_MARKER_PATTERN=cudaGraphLaunch*'
one train-hooks graphs_train.py STEPPROF_MARKER_LEARN=hooks
one train-always graphs_train.py STEPPROF_CUPTI_DETACH_BETWEEN=always 'STEPPROF_SCHEDULE_REPEAT=3'
one infer-auto graphs_infer.py

C=${CUDA_HOME:-/usr/local/cuda}
CI=$C/extras/CUPTI/include CL=$C/extras/CUPTI/lib64
[ -d "$CI" ] || CI=$C/include
[ -d "$CL" ] || CL=$C/lib64
if nvcc -O2 -I"$CI" -o "$OUT/graph_fin_probe" "$ROOT/tests/gpu/tools/graph_fin_probe.cu" -L"$CL" -lcupti -lcublas \
	-Xlinker -rpath -Xlinker "$CL" >"$OUT/probe-build.txt" 2>&1; then
	for s in iclklKfl ificlklKfl itdmkclklKMfl; do
		echo "probe (CUPTI alone, for the record): $(timeout 60 "$OUT/graph_fin_probe" $s 2>&1 | tail -1)"
	done
else
	echo "probe: not built ($OUT/probe-build.txt)"
fi
exit $bad
