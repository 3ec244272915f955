#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# before.sh BUILD_DIR - runs each corpus program once under the library with the default
# configuration (auto marker, steps 11-13) and STEPPROF_VERBOSE=1, and prints what automatic
# detection did (its "stepprof:" lines) and the kernels per recorded step. Used to show a build's
# behaviour on the corpus; logs go to $OUT/before.log.
set -u
B=$(cd "${1:?usage: before.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd); cd "$HERE/../../.." || exit 2
. "$HERE/programs.sh"
W=${WORK:-/tmp/corpus-before}; rm -rf "$W"; mkdir -p "$W"
export CORPUS_BIN=$W/bin; mkdir -p "$CORPUS_BIN"
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
nvcc -O2 -arch=sm_90 -o "$CORPUS_BIN/cublas_loop" "$HERE/cublas_loop.cu" -lcublas -lcuda || echo "FAIL build cublas_loop"
[ -x .thirdparty/llm.c/train_gpt2cu ] && python3 "$HERE/llmc_data.py" "$CORPUS_BIN/llmc" >/dev/null
corpus_programs | while IFS='|' read -r name truth cmd; do
	[ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]] && continue
	d=$W/$name; mkdir -p "$d"
	t0=$(date +%s)
	STEPPROF_PROFILE_OUTPUT=$d STEPPROF_VERBOSE=1 LD_PRELOAD=$B/libstepprof.so timeout 240 $cmd >"$d/log" 2>&1
	rc=$?
	echo "== $name exit=$rc $(( $(date +%s) - t0 ))s"
	grep -E "^stepprof: (auto|no step|warn|.*lock|.*period)" "$d/log" | grep -v "step [0-9]* begins" | head -6
	grep -vE "^stepprof" "$d/log" | tail -2
	for t in "$d"/*.sptrace; do [ -f "$t" ] && "$B/stepprof" report --json "$t" | python3 -c '
import json,sys; r=json.load(sys.stdin); print("steps:", [(s["number"], s["kernels"], round(s["duration_ns"]/1e6,2)) for s in r.get("steps",[])])'; done
done 2>&1 | tee "${OUT:-/tmp}/before.log"
exit 0
