#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/run.sh BUILD_DIR - stepprof's overhead benchmark in one command, on the GPU machine:
# builds the CUPTI floor injection library, then bench/bench.py runs every workload x
# configuration as separate processes over ROUNDS rounds. Writes ${OUT:-/tmp/stepprof-bench}/
# bench.md (the table, also printed) and bench.json (raw step times). Settings: ROUNDS (2),
# MARKER (auto, or KIND:PATTERN such as api:cudaDeviceSynchronize*), ACTIVE (30), and
# BENCH_ARGS for anything else bench.py takes (--workloads mlp, --configs ..., --keep-traces).
set -u
BUILD=$(cd "${1:?usage: bench/run.sh BUILD_DIR}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/stepprof-bench}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PY=${PYTHON:-python3}
for f in "$BUILD/libstepprof.so" "$BUILD/stepprof"; do [ -e "$f" ] || { echo "missing $f: run make first"; exit 2; }; done
rm -rf "$OUT" && mkdir -p "$OUT" || exit 2
CUPTI_LIB=$CUDA_HOME/lib64
[ -e "$CUPTI_LIB/libcupti.so" ] || CUPTI_LIB=$CUDA_HOME/extras/CUPTI/lib64
gcc -std=gnu11 -O2 -Wall -shared -fPIC -I"$CUDA_HOME/include" -I"$CUDA_HOME/extras/CUPTI/include" \
	"$HERE/cupti_floor.c" -o "$OUT/libcuptifloor.so" -L"$CUPTI_LIB" -lcupti -Wl,-rpath,"$CUPTI_LIB" ||
	{ echo "bench: cannot build cupti_floor.c"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
# shellcheck disable=SC2086
exec "$PY" "$HERE/bench.py" run --build "$BUILD" --out "$OUT" --floor-lib "$OUT/libcuptifloor.so" \
	--rounds "${ROUNDS:-2}" --marker "${MARKER:-auto}" --active "${ACTIVE:-30}" ${BENCH_ARGS:-}
