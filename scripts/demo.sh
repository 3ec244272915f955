#!/usr/bin/env bash
# demo.sh BUILD - the main job: profiles the bundled CUDA workload (tests/gpu/workload.cu) with the
# built-in default configuration (automatic step detection; wait 5, warmup 1, active 3), then prints
# where the trace went and the kernel report. Needs an NVIDIA GPU and nvcc.
set -euo pipefail
B=$(cd "${1:-build}" && pwd); ROOT=$(cd "$(dirname "$0")/.." && pwd)
if ! { [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; }; then
	echo "stepprof demo: this machine has no NVIDIA GPU; the demo profiles a CUDA program and needs one."
	echo "stepprof demo: everything else works here: 'make test', 'stepprof check', 'stepprof schedule'."
	exit 1
fi
NVCC=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
[ -x "$NVCC" ] || { echo "stepprof demo: nvcc not found (set CUDA_HOME or NVCC)"; exit 1; }
mkdir -p "$B/demo"
"$NVCC" -O2 -o "$B/demo/workload" "$ROOT/tests/gpu/workload.cu" -lcuda
out=$B/demo/traces-$(date +%H%M%S)
"$B/stepprof" run --out "$out" -- "$B/demo/workload" 60
trace=$(ls "$out"/*.sptrace | head -n 1)
echo
"$B/stepprof" report "$trace"
echo
echo "trace: $trace"
echo "view:  $B/stepprof convert $trace -o trace.json.gz   (open in https://ui.perfetto.dev)"
