#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh [BUILD] - the main job. On a machine with an NVIDIA GPU: profiles the bundled CUDA
# workload (workload.cu) with the built-in default configuration (automatic step detection; wait
# 10, warmup 1, active 3), then prints where the trace went and the kernel report. Without a GPU:
# says so, then shows the report of a real GPU trace shipped with stepprof (what you will get),
# and exits 0. Works from the source tree (scripts/demo.sh build) and from a dist or installed
# copy alone (share/stepprof/demo.sh: bin/stepprof, share/stepprof/workload.cu, demo.sptrace).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -x "$HERE/../../bin/stepprof" ]; then # dist/ or PREFIX/: share/stepprof/demo.sh
	SP=$(cd "$HERE/../../bin" && pwd)/stepprof
	WORKLOAD=$HERE/workload.cu
	SHIPPED=$HERE/demo.sptrace
	OUTBASE=${TMPDIR:-/tmp}/stepprof-demo
	AGAIN=$HERE/demo.sh
else # the source tree: scripts/demo.sh BUILD
	B=$(cd "${1:-build}" && pwd)
	ROOT=$(cd "$HERE/.." && pwd)
	SP=$B/stepprof
	WORKLOAD=$ROOT/tests/gpu/workload.cu
	SHIPPED=$(ls "$ROOT"/tests/data/demo/*.sptrace 2>/dev/null | head -n 1 || true)
	[ -n "$SHIPPED" ] || SHIPPED=$ROOT/tests/golden/small.sptrace
	OUTBASE=$B/demo
	AGAIN="make demo"
fi
if ! { [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; }; then
	echo "stepprof demo: this machine has no NVIDIA GPU, so nothing can be profiled here."
	if "$SP" dump "$SHIPPED" 2>/dev/null | head -n 20 | grep -q '^producer: stepprof golden'; then
		echo "stepprof demo: here is the report of the synthetic test trace (no GPU recording is shipped in this copy):"
	else
		echo "stepprof demo: here is the report of a trace recorded on a GPU machine ($(basename "$SHIPPED")):"
	fi
	echo
	"$SP" report "$SHIPPED"
	echo
	echo "stepprof demo: on a GPU machine '$AGAIN' profiles the bundled workload and prints the same for it."
	echo "stepprof demo: what works here: $SP check, $SP schedule, and every command on that trace, e.g."
	echo "  $SP convert $SHIPPED -o demo.pt.trace.json.gz   (open in https://ui.perfetto.dev)"
	exit 0
fi
NVCC=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
[ -x "$NVCC" ] || { echo "stepprof demo: nvcc not found (set CUDA_HOME or NVCC)"; exit 1; }
mkdir -p "$OUTBASE"
"$NVCC" -O2 -o "$OUTBASE/workload" "$WORKLOAD" -lcuda
out=$OUTBASE/traces-$(date +%Y%m%d-%H%M%S)
"$SP" run -o "$out" -- "$OUTBASE/workload" 60
trace=$(ls "$out"/*.sptrace | head -n 1)
echo
"$SP" report "$trace"
echo
echo "trace: $trace"
echo "view:  $SP convert $trace -o demo.pt.trace.json.gz   (open in https://ui.perfetto.dev)"
