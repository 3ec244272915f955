#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# graph_detach.sh [BUILD_DIR] - on a GPU machine, from the repository root: a program that replays
# CUDA graphs runs to its end under stepprof's default configuration, after the schedule's last
# window as well. torch's graph replays fail with "unspecified launch failure" after a cuptiFinalize
# that followed replays with the activity kinds turned off while subscribed; stepprof now keeps the
# kinds on until a detach turns them off with graph launches held in its hooks ([cupti]
# graph_detach, docs/CONFIG.md). Runs the corpus's graphs_train.py (a whole training step captured
# with torch.cuda.graph), graphs_infer.py, graphs_compile_train.py (reduce-overhead training, an eager
# optimizer: the optimizer marker's window) and tests/gpu/programs/compile_infer_graphs.py
# (torch.compile reduce-overhead) under the default, an api marker on cudaGraphLaunch, learn = hooks,
# detach_between = always with 3 windows, and graph_detach = false (the old rule).
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
# one NAME PROGRAM EXPECT [KEY=VALUE...]: the program's 300 iterations under stepprof (schedule: wait
# 10, warmup 1, active 3, repeat 1, so the schedule ends early and most replays come after it). PASS:
# exit 0 (a replay after a cuptiFinalize that broke it ends in "unspecified launch failure"), a
# readable trace, the output's checksum (graphs_infer.py) equal to a run without stepprof, and as
# EXPECT says: a detach from CUPTI (detach), or a line saying why it stays subscribed (stay). The
# line says which, and the program's median STEP time after the window over before it when it
# prints STEP lines.
one() {
	local name=$1 prog=$2 expect=$3 d=$OUT/$1 path
	shift 3
	mkdir -p "$d"
	path=$ROOT/tests/gpu/corpus/$prog
	[ -e "$path" ] || path=$ROOT/tests/gpu/programs/$prog
	env PYTHONPATH="$ROOT/tests/gpu/corpus:$ROOT/tests/gpu/programs" STEPPROF_PROFILE_OUTPUT="$d/trace" \
		STEPPROF_RANKS_RANKS=all STEPPROF_VERBOSE=1 "$@" LD_PRELOAD="$LIB" \
		timeout 300 "$PY" "$path" 300 >"$d/stdout" 2>"$d/stderr" </dev/null
	local rc=$? why="" how
	"$SP" report "$d"/trace/*.sptrace >"$d/report" 2>&1 || why="no readable trace; "
	[ $rc = 0 ] || why+="exit $rc ($(grep -m1 -E 'Error|error' "$d/stderr" | cut -c1-120)); "
	if grep -q "detached from CUPTI" "$d/stderr"; then
		how="detached ($(grep -c 'detached from CUPTI' "$d/stderr") detaches)"
		[ "$expect" = detach ] || why+="detached, expected to stay subscribed; "
	elif grep -q "not detaching from CUPTI.*created a CUDA graph" "$d/stderr"; then
		how="stayed subscribed ($(grep -o 'a graph launch came past[^:]*\|activity kinds went off[^:]*' "$d/stderr" | head -1))"
		[ "$expect" = stay ] || why+="$how, expected a detach; "
	else
		why+="neither detached nor said why it stays subscribed; "
	fi
	grep -o "called off in step.*" "$d/stderr" | head -2 | sed "s/^/  $name: /"
	if [ "$prog" = graphs_infer.py ]; then
		[ -s "$OUT/infer.plain" ] || PYTHONPATH="$ROOT/tests/gpu/corpus" timeout 300 "$PY" "$path" 300 >"$OUT/infer.plain" 2>&1
		[ "$(grep -o 'checksum=.*' "$d/stdout")" = "$(grep -o 'checksum=.*' "$OUT/infer.plain")" ] ||
			why+="checksum $(grep -o 'checksum=.*' "$d/stdout") against $(grep -o 'checksum=.*' "$OUT/infer.plain") without stepprof; "
	fi
	local ratio
	ratio=$("$PY" - "$d/stdout" "$d/report" <<'PY'
import re, statistics, sys
st = {int(m.group(1)): float(m.group(2)) for m in (re.match(r"STEP (\d+) ([0-9.]+)$", l.strip()) for l in open(sys.argv[1])) if m}
w = re.search(r"steps (\d+)-(\d+)", open(sys.argv[2]).read())
if st and w:
    a, b = int(w.group(1)), int(w.group(2))
    pre = [v for k, v in st.items() if 3 <= k < a - 2]
    post = [v for k, v in st.items() if b + 5 < k < max(st)]
    if pre and post:
        print(f"; after/before the window {statistics.median(post) / statistics.median(pre):.3f} "
              f"({statistics.median(post):.3f} / {statistics.median(pre):.3f} ms, {len(post)}/{len(pre)} steps)")
PY
)
	if [ -z "$why" ]; then
		echo "PASS graph_detach-$name: $how$ratio"
	else
		echo "FAIL graph_detach-$name: $why(see $d/stderr)"
		bad=1
	fi
}
one train-auto graphs_train.py detach
one train-api graphs_train.py detach STEPPROF_MARKER_KIND=api 'STEPPROF_MARKER_PATTERN=cudaGraphLaunch*'
one train-hooks graphs_train.py detach STEPPROF_MARKER_LEARN=hooks
one train-always graphs_train.py detach STEPPROF_CUPTI_DETACH_BETWEEN=always 'STEPPROF_SCHEDULE_REPEAT=3'
one train-nodetach graphs_train.py stay STEPPROF_CUPTI_GRAPH_DETACH=false
one infer-auto graphs_infer.py detach
one infer-nodetach graphs_infer.py stay STEPPROF_CUPTI_GRAPH_DETACH=false
one ctrain-auto graphs_compile_train.py detach
one compile-auto compile_infer_graphs.py detach
one compile-nodetach compile_infer_graphs.py stay STEPPROF_CUPTI_GRAPH_DETACH=false

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
