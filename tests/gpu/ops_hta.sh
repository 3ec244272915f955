#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ops_hta.sh DIR - on this (host) machine after tests/gpu/ops_check.sh ran on the GPU machine: loads
# each DIR/*.pt.trace.json.gz that it returned (stepprof convert of a window with torch operators)
# with HTA (../shared/tools/hta beside the checkout, or $HTA) and runs its operator views: ATen op
# kernels and delay (get_aten_op_kernels_and_delay) and the frequent kernel sequences of the op
# with the most kernels (get_frequent_cuda_kernel_sequences). One PASS/FAIL line per file; skips,
# saying so, where HTA or pandas is absent. Exit status 0 when nothing failed.
set -u
DIR=${1:?usage: ops_hta.sh DIR, the folder ops_check.sh wrote into}
R=$(cd "$(dirname "$0")/../.." && pwd)
HTA_PKG=${HTA:-$R/../shared/tools/hta}
PY=${PYTHON:-/usr/bin/python3}
if [ ! -d "$HTA_PKG/hta" ] || ! $PY -c 'import pandas, numpy, yaml, plotly' 2>/dev/null; then
	echo "skip ops_hta: no HTA package at $HTA_PKG (../shared/tools/hta) or no pandas/plotly for $PY"
	exit 0
fi
fail=0 n=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for f in "$DIR"/*.pt.trace.json.gz; do
	[ -e "$f" ] || continue
	n=$((n + 1))
	name=$(basename "$f" .pt.trace.json.gz)
	mkdir -p "$T/$name/out" && cp "$f" "$T/$name/"
	if $PY - "$HTA_PKG" "$T/$name" >"$T/$name.txt" 2>&1 <<'EOF'; then
import contextlib, io, logging, os, sys
sys.path.insert(0, sys.argv[1])
os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
with contextlib.redirect_stdout(io.StringIO()):
    ta = TraceAnalysis(trace_dir=sys.argv[2], include_last_profiler_step=True)
    k = ta.get_aten_op_kernels_and_delay()[0]
assert len(k), "no ATen op with kernels"
k = k.sort_values("occurrence_count", ascending=False)
print(f"{len(k)} (ATen op, kernel sequence) rows; most frequent:")
for r in k.head(5).itertuples():
    print(f"  {r.occurrence_count:6d}  {r.aten_op_name}: {str(r.kernel_sequence)[:100]}")
top = k.iloc[0].aten_op_name
with contextlib.redirect_stdout(io.StringIO()):
    p = ta.get_frequent_cuda_kernel_sequences(operator_name=top, output_dir=sys.argv[2] + "/out",
                                              min_pattern_len=1, visualize=False)
assert len(p), f"no frequent kernel sequence of {top}"
print(f"frequent kernel sequences of {top}: {len(p)}, first {list(p['pattern'])[0][:100]} x {list(p['count'])[0]}")
EOF
		echo "PASS ops_hta $name: HTA loads it; ATen op kernels and frequent kernel sequences"
	else
		echo "FAIL ops_hta $name:"
		fail=1
	fi
	sed 's/^/    /' "$T/$name.txt" | tail -12
done
[ "$n" -gt 0 ] || { echo "FAIL ops_hta: no *.pt.trace.json.gz in $DIR"; fail=1; }
exit $fail
