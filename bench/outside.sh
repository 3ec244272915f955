#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/outside.sh - what stepprof costs before, between and after its windows, in one GPU call, run
# from the repository root: lays dist/stepprof out flat as a build dir (make dist first), builds the
# CUPTI floor library, and, if karpathy/llm.c's train_gpt2cu is built in .thirdparty/llm.c
# (git-ignored; tests/gpu/corpus/README.md), runs it on a random-init GPT-2 124M and random tokens;
# then bench/outside.py runs every workload x configuration against an unprofiled run, ROUNDS rounds.
# Writes $OUT/outside.md (the table, printed last), $OUT/outside.json (every step) and the runs' logs.
# Settings: ROUNDS (2), WORKLOADS (add,mlp,llmc; llmc only if .thirdparty/llm.c/train_gpt2cu is built),
# CONFIGS (api,api-never,auto,once; also api-always, auto-hooks), STEPS (200), LLMC_ARGS (-b 4 -t 128),
# GRAPH=1 adds the graph workload with api-always (a window after a re-attach must keep its CUDA
# graph kernels), LEARN=0 leaves out the learn workload (the automatic marker learning all run
# long, against an unprofiled run; with CUPTI (auto) and from the hooks with CUPTI detached
# (auto-hooks: [marker] learn = hooks)), CPUS (e.g. 2-7: every process pinned to these CPUs, for
# less noise between processes), OUTSIDE_ARGS for anything else outside.py run takes (all three runs:
# the main one, learn and graph), e.g. --twin 1 on a two-GPU host (an unprofiled twin on GPU 1 beside
# every run, each phase paired with it in time: outside.py), with --twin-cpus same and CPUS=5 (both
# processes on one CPU: the measurement of record on the GPU machine, whose CPUs switch between two
# speeds within a process; docs/BENCHMARKS.md, "Eleventh session"), OUTSIDE_BUILD (the flat build
# dir, /tmp/spbuild-outside: another for each run at the same time, e.g. a second GPU pair of a
# 4-GPU host with CUDA_VISIBLE_DEVICES=2 and --twin 3).
# Exit status: 0 with no problem found, 1 otherwise (the table lists them).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/stepprof-outside}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PY=${PYTHON:-python3}
STEPS=${STEPS:-200}
B=${OUTSIDE_BUILD:-/tmp/spbuild-outside}  # another per concurrent run
mkdir -p "$OUT" || exit 2
rm -rf "$B" && mkdir -p "$B" || exit 2
if [ -e "$ROOT/dist/stepprof/bin/stepprof" ]; then
	cp "$ROOT/dist/stepprof/bin/stepprof" "$ROOT"/dist/stepprof/lib/* "$B/"
elif [ -e "$ROOT/build/libstepprof.so" ]; then
	cp "$ROOT/build/stepprof" "$ROOT"/build/libstepprof*.so "$B/"
else
	echo "outside: no dist/stepprof (run 'make dist' first)"; exit 2
fi
ldd "$B/stepprof" "$B/libstepprof-nomalloc.so" | grep "not found" && { echo "outside: libraries missing"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

CUPTI_LIB=$CUDA_HOME/lib64
[ -e "$CUPTI_LIB/libcupti.so" ] || CUPTI_LIB=$CUDA_HOME/extras/CUPTI/lib64
FLOOR=()
if gcc -std=gnu11 -O2 -Wall -shared -fPIC -I"$CUDA_HOME/include" -I"$CUDA_HOME/extras/CUPTI/include" \
	"$ROOT/bench/cupti_floor.c" -o "$OUT/libcuptifloor.so" -L"$CUPTI_LIB" -lcupti -Wl,-rpath,"$CUPTI_LIB"; then
	FLOOR=(--floor-lib "$OUT/libcuptifloor.so")
else
	echo "outside: cannot build cupti_floor.c; no floor column"
fi

WL=${WORKLOADS:-add,mlp,llmc}
LLMC=$ROOT/.thirdparty/llm.c
PROG=()
if [[ ",$WL," == *,llmc,* ]]; then
	if [ -x "$LLMC/train_gpt2cu" ]; then
		# karpathy/llm.c's own trainer (bf16, cuBLASLt; built as tests/gpu/corpus/README.md says),
		# GPT-2 124M initialised from its descriptor (-e d12), random tokens (llmc_data.py)
		D=/tmp/llmc-data
		[ -e "$D/train.bin" ] || "$PY" "$ROOT/tests/gpu/corpus/llmc_data.py" "$D" || exit 1
		# one line per step, as it happens: "step    N/M | loss ... | X ms | ..."
		PROG=(--program "llmc=stdbuf -oL $LLMC/train_gpt2cu -i $D/train.bin -j $D/val.bin -e d12 ${LLMC_ARGS:--b 4 -t 128} -x $STEPS -v 1000000 -s 0 -h 0"
			--step-regex 'llmc=^step\s+(\d+)/\d+ \|.*\| ([\d.]+) ms \|' --marker llmc=cudaEventSynchronize)
	else
		echo "outside: no $LLMC/train_gpt2cu (build it: tests/gpu/corpus/README.md): the third-party trainer is left out"
		WL=$(echo ",$WL," | sed 's/,llmc,/,/; s/^,//; s/,$//')
	fi
fi
CF=${CONFIGS:-api,api-never,auto,once}
PIN=(); [ -n "${CPUS:-}" ] && PIN=(--cpus "$CPUS")
"$PY" "$ROOT/bench/outside.py" run --build "$B" --out "$OUT" --rounds "${ROUNDS:-2}" --steps "$STEPS" \
	--workloads "$WL" --configs "$CF" "${FLOOR[@]}" "${PROG[@]}" "${PIN[@]}" ${OUTSIDE_ARGS:-} 2>&1 | tee "$OUT/outside.log" |
	grep -v '^|' ; rc=${PIPESTATUS[0]}
if [ "${LEARN:-1}" = 1 ]; then
	"$PY" "$ROOT/bench/outside.py" run --build "$B" --out "$OUT/learn" --rounds "${ROUNDS:-2}" --steps "$STEPS" \
		--workloads learn --configs auto,auto-hooks "${PIN[@]}" ${OUTSIDE_ARGS:-} 2>&1 | tee "$OUT/learn.log" | grep -v '^|'
	rc=$((rc | PIPESTATUS[0]))
fi
if [ "${GRAPH:-0}" = 1 ]; then
	"$PY" "$ROOT/bench/outside.py" run --build "$B" --out "$OUT/graph" --rounds 1 --steps "$STEPS" \
		--workloads graph --configs api,api-always "${PIN[@]}" ${OUTSIDE_ARGS:-} 2>&1 | tee "$OUT/graph.log" | grep -v '^|'
	rc=$((rc | PIPESTATUS[0]))
	echo "== CUDA graph workload (parked between windows: graph_detach; always re-attaches)"
	grep '^|' "$OUT/graph/outside.md"
fi
if [ "${LEARN:-1}" = 1 ]; then
	echo "== automatic marker that never locks (its learning phase is the whole run)"
	grep '^|' "$OUT/learn/outside.md"
fi
echo "== $OUT/outside.md"
cat "$OUT/outside.md"
exit "$rc"
