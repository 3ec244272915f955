#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_ops.sh - torch operators and modules offline, on the trace gen_ops writes (two training steps
# with op and module ranges, a forward and a backward thread, see tests/e2e/gen_ops.c):
#  - `report --by op`: self CUDA time, CUDA total, calls, kernels per op as key_averages tables
#    them, FLOPs (addmm, conv2d with its module's stride and padding, flash attention) and TFLOP/s
#    beside the H200's peak; --shapes; --sort cuda_time_total / count; --json;
#  - `report --by module`: the tree, backward kernels tied to their module by sequence number, the
#    modules and "(outside modules)" adding up to the windows' GPU time;
#  - `convert`: cpu_op events with External id and Sequence number, the CUDA calls and kernels an op
#    launched carrying its External id, fwdbwd flows from forward op to backward node, modules as
#    python_function; Kineto's and Perfetto's rules (check_chrome_json.py); HTA's operator views
#    (ATen op kernels, frequent kernel sequences) when ../shared/tools/hta is there (else skipped);
#  - a trace without ops says why; --shapes without --by op is refused.
set -u
B=${SP_BUILD:?}
R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
ok() { echo "ok   $*"; }
SP=$B/stepprof
PY=/usr/bin/python3
"$B/tests/e2e/gen_ops" "$T/ops.sptrace" || { echo "FAIL gen_ops"; exit 1; }

# has NAME FILE REGEX: a line of FILE matches
has() { if grep -Eq "$3" "$2"; then ok "$1"; else bad "$1: no line like '$3' in:"; cat "$2"; fi; }

"$SP" report --by op "$T/ops.sptrace" >"$T/op.txt" 2>&1 || bad "report --by op exits 0"
has "by op: header" "$T/op.txt" '^Torch operators: 2 steps in 1 window, 32 op ranges'
has "by op: addmm first (self CUDA), 2 calls, 2 kernels, its FLOPs" "$T/op.txt" \
	'^aten::addmm +8\.000us +24\.7% +8\.000us +2 +2 +1\.05e\+06 +0\.1 \(0%\)$'
first() { awk 'f { print; exit } /^Name/ { f = 1 }' "$1"; }
first "$T/op.txt" | grep -q '^aten::addmm ' && ok "by op: sorted by self CUDA time" ||
	bad "by op: first row is not aten::addmm: $(first "$T/op.txt")"
has "by op: conv2d's FLOPs from its module's stride and padding, CUDA total of its children" "$T/op.txt" \
	'^aten::conv2d +0ns +0\.0% +6\.000us +2 +0 +1\.42e\+07 '
has "by op: flash attention's FLOPs (torch.utils.flop_counter)" "$T/op.txt" \
	'^aten::_scaled_dot_product_flash_attention +4\.000us .* 6\.71e\+07 +16\.8 \(2%\)$'
has "by op: linear's FLOPs are its addmm's" "$T/op.txt" '^aten::linear +0ns +0\.0% +8\.000us +2 +0 +1\.05e\+06 '
has "by op: backward mm" "$T/op.txt" '^aten::mm +6\.000us +18\.5% +6\.000us +2 +2 +1\.05e\+06 '
has "by op: kernels outside any op" "$T/op.txt" '^GPU work outside any op: 400ns \(1\.2%\), 2 records$'
has "by op: the peak named" "$T/op.txt" "share of NVIDIA H200's dense bf16 peak, 989 TFLOP/s"
grep -q 'my_range' "$T/op.txt" && bad "by op: the program's own NVTX range is not an op" || ok "by op: plain NVTX ranges are not ops"

"$SP" report --by op --shapes --wide "$T/ops.sptrace" >"$T/shapes.txt" 2>&1 || bad "--shapes exits 0"
has "--shapes: a row per input shapes" "$T/shapes.txt" '^aten::addmm +\[\[128\], \[32, 64\], \[64, 128\], \[\], \[\]\] +8\.000us'
"$SP" report --by op --sort cuda_time_total "$T/ops.sptrace" >"$T/tot.txt" 2>&1
first "$T/tot.txt" | grep -Eq '^aten::(addmm|linear) +' && ok "--sort cuda_time_total" ||
	bad "--sort cuda_time_total: $(first "$T/tot.txt")"
"$SP" report --by op --sort count --top 3 "$T/ops.sptrace" >"$T/cnt.txt" 2>&1
has "--top 3 says what is left" "$T/cnt.txt" '^\.\.\. 13 more rows \(--top 0 shows all\)$'

"$SP" report --by module "$T/ops.sptrace" >"$T/mod.txt" 2>&1 || bad "report --by module exits 0"
has "by module: the root" "$T/mod.txt" '^Net +2 +29\.000us +89\.5% +0ns +0ns$'
has "by module: fc1 with its backward (seq 10)" "$T/mod.txt" '^  fc1 +2 +14\.000us +43\.2% +8\.000us +6\.000us$'
has "by module: conv with its backward (seq 11)" "$T/mod.txt" '^  conv +2 +11\.000us +34\.0% +6\.000us +5\.000us$'
has "by module: outside modules" "$T/mod.txt" \
	'^In modules: 29\.000us \(89\.5%\); \(outside modules\): 3\.400us \(10\.5%.*GPU time of the windows: 32\.400us$'

"$SP" report --by op --json "$T/ops.sptrace" >"$T/r.json" 2>&1 || bad "--json exits 0"
$PY - "$T/r.json" <<'EOF' && ok "--json: ops and modules, modules and outside add up to the GPU time" || bad "--json"
import json, sys
d = json.load(open(sys.argv[1]))
ops, mods = d["ops"], d["modules"]
row = {r["name"]: r for r in ops["rows"]}
assert ops["device"] == "NVIDIA H200" and ops["peak_tflops"] == 989.4, ops
assert row["aten::addmm"]["self_ns"] == 8000 and row["aten::addmm"]["calls"] == 2 and row["aten::addmm"]["flops"] == 1048576
assert row["aten::conv2d"]["total_ns"] == 6000 and row["aten::conv2d"]["flops"] == 2 * 7077888
assert ops["gpu_ns"] == 32400 and ops["outside_ops_ns"] == 400
s = sum(r["forward_ns"] + r["backward_ns"] for r in mods["rows"]) + mods["outside_ns"]
assert s == mods["gpu_ns"] == 32400, (s, mods)
EOF

"$SP" convert "$T/ops.sptrace" -o "$T/ops.pt.trace.json" >/dev/null 2>&1 || bad "convert exits 0"
$PY "$R/tests/e2e/check_chrome_json.py" "$T/ops.pt.trace.json" --perfetto --kineto --nested --count cpu_op=32 \
	--count python_function=8 >"$T/chk.txt" 2>&1 && ok "convert: Kineto's and Perfetto's rules, 32 cpu_op, 8 modules" ||
	bad "convert: $(cat "$T/chk.txt")"
$PY - "$T/ops.pt.trace.json" <<'EOF' && ok "convert: External ids tie calls and kernels to their op; fwdbwd flows" || bad "convert: ids or flows"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
op = {e["args"]["External id"]: e for e in ev if e.get("cat") == "cpu_op"}
addmm = [e for e in op.values() if e["name"] == "aten::addmm"]
assert sorted(e["args"]["Sequence number"] for e in addmm) == [10, 110]
assert addmm[0]["args"]["Input Dims"] == [[128], [32, 64], [64, 128], [], []]
gemm = [e for e in ev if e.get("cat") == "kernel" and e["name"] == "sm90_xmma_gemm_bf16"]
calls = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "cuda_runtime"}
for k in gemm:
    x = k["args"]["External id"]
    assert op[x]["name"] == "aten::addmm", op[x]
    assert calls[k["args"]["correlation"]]["args"]["External id"] == x
stray = [e for e in ev if e.get("cat") == "kernel" and e["name"] == "stray_kernel"]
assert all(k["args"]["External id"] == k["args"]["correlation"] for k in stray)
fl = [e for e in ev if e.get("cat") == "fwdbwd"]
s = {e["id"]: e for e in fl if e["ph"] == "s"}
f = {e["id"]: e for e in fl if e["ph"] == "f"}
assert len(s) == len(f) == 4 and set(s) == set(f), fl
for i in s:
    assert s[i]["tid"] == 100 and f[i]["tid"] == 200 and f[i]["bp"] == "e"
EOF

HTA_PKG=$R/../shared/tools/hta
if [ -d "$HTA_PKG/hta" ] && $PY -c 'import pandas, numpy, yaml, plotly' 2>/dev/null; then
	mkdir "$T/hta" && cp "$T/ops.pt.trace.json" "$T/hta/"
	$PY - "$HTA_PKG" "$T/hta" <<'EOF' >"$T/hta.txt" 2>&1 && ok "HTA: its ATen op kernels and frequent kernel sequences" || bad "HTA: $(tail -5 "$T/hta.txt")"
import contextlib, io, logging, os, sys
sys.path.insert(0, sys.argv[1])
os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
with contextlib.redirect_stdout(io.StringIO()):
    ta = TraceAnalysis(trace_dir=sys.argv[2], include_last_profiler_step=True)
    k = ta.get_aten_op_kernels_and_delay()[0]
    os.makedirs(sys.argv[2] + "/out")
    p = ta.get_frequent_cuda_kernel_sequences(operator_name="aten::linear", output_dir=sys.argv[2] + "/out",
                                              min_pattern_len=1, visualize=False)
got = {(r.aten_op_name, r.kernel_sequence): r.occurrence_count for r in k.itertuples()}
assert got[("aten::addmm", "sm90_xmma_gemm_bf16")] == 2, got
assert got[("aten::mm", "sm90_xmma_gemm_bf16_bwd")] == 2, got
assert list(p["pattern"]) == ["aten::linear|sm90_xmma_gemm_bf16"] and list(p["count"]) == [2], p
EOF
else
	echo "skip HTA's operator views: no HTA package at $HTA_PKG (../shared/tools/hta) or no pandas for $PY"
fi

"$SP" report --by op "$R/tests/golden/small-v4.sptrace" >"$T/none.txt" 2>&1
has "a trace without ops says why" "$T/none.txt" '^No torch operator was recorded in these windows\.'
has "... and that ops are off by default" "$T/none.txt" 'ops = true \(off by default\)'
"$SP" report --shapes "$T/ops.sptrace" >/dev/null 2>&1
[ $? -eq 2 ] && ok "--shapes without --by op: exit 2" || bad "--shapes without --by op is not refused"

[ $fail = 0 ] && echo "cli_ops: ok" || echo "cli_ops: FAIL"
exit $fail
