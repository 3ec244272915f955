#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu_pystacks_check.sh - the checker of tests/gpu/pystacks.sh without a GPU: torch_trace_lines.py
# on a synthetic torch.profiler(with_stack=True) Chrome trace written as torch 2.x writes it
# (python_function spans nested in time, kernels linked to their cudaLaunchKernel/cuLaunchKernel
# by correlation, to a CPU op by External id, a backward thread without Python) gives each kernel
# its innermost user frame, and its key_averages cross-check reads both attribute spellings;
# pystacks_check.py `lines` passes on agreeing synthetic rows and fails on a missing line, a share
# far off and too few common keys; `memory` passes on the right Python lines and owner and fails on a
# wrong line or owner.
set -euo pipefail
R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
C=$R/tests/gpu/pystacks_check.py S=$R/tests/gpu/pyline_train.py
cd "$T"
PYTHONPATH=$R/tests/gpu /usr/bin/python3 - "$S" "$C" <<'PY' || fail "torch_trace_lines on a synthetic torch trace (above)"
import gzip, json, subprocess, sys
import torch_trace_lines as ttl
S, C = sys.argv[1], sys.argv[2]
LIBF = "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/"
ev = [{"ph": "M", "name": "process_name", "pid": 4242, "args": {"name": "python3"}},
      {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 4242, "tid": 4242, "ts": 3}]
def span(name, ts, dur, tid=4242, pid=4242):
    ev.append({"ph": "X", "cat": "python_function", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
               "args": {"Python id": len(ev), "Python thread": 0}})
def op(name, ts, dur, ext, tid=4242):
    ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 4242, "tid": tid, "ts": ts, "dur": dur,
               "args": {"External id": ext, "Record function id": 0, "Sequence number": ext}})
def launch(ts, corr, ext, dur_ns, tid=4242, cat="cuda_runtime", name="cudaLaunchKernel"):
    if cat:
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": 4242, "tid": tid, "ts": ts, "dur": 2.5,
                   "args": {"External id": ext, "cbid": 211, "correlation": corr}})
        ev.append({"ph": "s", "id": corr, "pid": 4242, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g"})
    k = {"ph": "X", "cat": "kernel", "name": f"void k{corr}<float>(float*)", "pid": 0, "tid": 7, "ts": 1000 + ts,
         "dur": dur_ns / 1000, "args": {"External id": ext, "queued": 0, "device": 0, "stream": 7, "correlation": corr}}
    if ext is None:
        del k["args"]["External id"]
    ev.append(k)
span(f"{S}(150): main", 0, 1000); span(f"{S}(95): step", 1, 900)
span(f"{S}(74): scale_batch", 2, 8); op("aten::mean", 4, 3, 9); launch(5, 108, 9, 7000, cat=None)
span(f"{S}(34): project_in", 20, 40); op("aten::matmul", 25, 30, 1); op("aten::mm", 26, 28, 2)
launch(30, 100, 2, 50000)
span(f"{S}(54): head", 70, 50); span("nn.Module: Linear_0", 71, 48); span(LIBF + "module.py(1773): _wrapped_call_impl", 72, 46)
span(LIBF + "module.py(1784): _call_impl", 73, 44); span(LIBF + "linear.py(133): forward", 74, 42)
span("<built-in function linear>", 75, 40); op("aten::linear", 76, 38, 3); launch(80, 101, 3, 30000)
span(f"{S}(46): mix", 130, 40); span("<built-in method tanh of type object at 0x7f3a>", 140, 10)
op("aten::tanh", 141, 8, 4); launch(142, 102, 4, 20000)
op("triton_poi_fused_mul_0", 158, 5, 5); launch(160, 103, 5, 5000, cat="cuda_driver", name="cuLaunchKernel")
span(f"{S}(62): regulariser", 180, 40); span(f"{S}(62): <genexpr>", 185, 15)
op("aten::mul", 189, 3, 6); launch(190, 104, 6, 8000); op("aten::add", 209, 3, 7); launch(210, 105, 7, 4000)
span(f"{S}(70): update", 300, 100); span("torch/optim/optimizer.py(500): wrapper", 305, 90)
span("torch/optim/adamw.py(200): step", 306, 88); op("aten::_foreach_add_", 340, 20, 8); launch(350, 106, 8, 40000)
op("autograd::engine::evaluate_function: MmBackward0", 240, 30, 10, tid=4300); launch(250, 107, 10, 60000, tid=4300)
launch(600, 109, None, 9000, cat=None)
ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 1500, "dur": 3,
           "args": {"correlation": 110}})
with gzip.open("trace.json.gz", "wt") as f:
    json.dump({"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev, "displayTimeUnit": "ms"}, f)
want = {f"{S}|scale_batch|74": (7000, 1), f"{S}|project_in|34": (50000, 1), f"{S}|head|54": (30000, 1),
        f"{S}|mix|46": (25000, 2), f"{S}|<genexpr>|62": (8000, 1), f"{S}|regulariser|62": (4000, 1),
        f"{S}|update|70": (40000, 1), "(none)": (69000, 2)}
subprocess.run([sys.executable, ttl.__file__, "trace.json.gz", "-o", "rows.json", "--table", "table.tsv"], check=True)
doc = json.load(open("rows.json"))
got = {k: (r["ns"], r["kernels"]) for k, r in doc["rows"].items()}
assert got == want, f"rows:\n{json.dumps(got, indent=1)}\nwant:\n{json.dumps(want, indent=1)}"
assert doc["summary"]["found"] == {"cuda_runtime": 6, "cuda_driver": 1, "cpu_op": 1, "no Python span": 1,
                                   "no launch event": 1}, doc["summary"]
tab = open("table.tsv").read().splitlines()
assert len(tab) == 11 and "<built-in function linear>" in tab[3] and "\t8\t" in tab[3], tab[3]
# an uncompressed trace reads the same
json.dump({"traceEvents": ev}, open("trace.json", "w"))
rows, _, _ = ttl.extract(ttl.load("trace.json"), ttl.make_resolve([]))
assert {k: (r["ns"], r["kernels"]) for k, r in rows.items()} == want
# key_averages: CPU entries only, either attribute spelling, innermost first
class A:
    def __init__(self, **kw): self.__dict__.update(kw)
class P:
    def key_averages(self, group_by_stack_n=0):
        return [A(device_type="DeviceType.CPU", self_device_time_total=50.0, count=4,
                  stack=[LIBF + "linear.py(133): forward", f"{S}(34): project_in", f"{S}(95): step"]),
                A(device_type="DeviceType.CPU", self_cuda_time_total=7.0, count=4, stack=[f"{S}(74): scale_batch"]),
                A(device_type="DeviceType.CUDA", self_device_time_total=57.0, count=8, stack=[]),
                A(device_type="DeviceType.CPU", self_device_time_total=60.0, count=4, stack=[])]
ka, why = ttl.key_average_rows(P(), ttl.make_resolve([]))
assert why == "" and {k: r["ns"] for k, r in ka.items()} == {f"{S}|project_in|34": 50000, f"{S}|scale_batch|74": 7000,
                                                            "(none)": 60000}, (ka, why)
# the extraction's rows through the checker: a stepprof side that agrees passes, lines compared apart
sp = [{"file": k.split("|")[0], "function": k.split("|")[1], "line": int(k.split("|")[2]) + (k.endswith("|34")),
       "user": True, "total_ns": v[0], "kernels": v[1]} for k, v in want.items() if k != "(none)"]
sp.append({"file": None, "function": None, "line": None, "user": False, "what": "no Python frame",
           "total_ns": 9000, "kernels": 1})
# the autograd thread's kernels stepprof ties to the line that called backward(): torch's "(none)"
sp.append({"file": S, "function": "train_step", "line": 99, "user": True, "what": "user", "backward": True,
           "total_ns": 60000, "kernels": 1})
json.dump({"lines": sp}, open("sp_ext.json", "w"))
doc["key_averages"], doc["key_averages_note"] = ka, why
json.dump(doc, open("rows.json", "w"))
out = subprocess.run([sys.executable, C, "lines", "sp_ext.json", "rows.json", S], capture_output=True, text=True)
# 8 keys in all: the "share 8 keys" rule passes with every key common
assert out.returncode == 0, out.stdout
assert "lines equal in 6 of 7 common functions (stepprof/torch: pyline_train.py:project_in 35/34)" in out.stdout, out.stdout
assert "cross-check: torch's key_averages(group_by_stack_n) differs from the trace's rows" in out.stdout, out.stdout
PY
/usr/bin/python3 - "$S" <<'PY'
import json, sys
S = sys.argv[1]
funcs = ["project_in", "activate", "normalise", "mix", "gate", "head", "loss_of", "regulariser", "clip", "update",
         "scale_batch"]
def sp(shares):
    rows = [{"file": S, "line": 10 + i, "function": f, "user": True, "total_ns": ns, "kernels": 1}
            for i, (f, ns) in enumerate(zip(funcs, shares))]
    return {"lines": rows + [{"file": None, "line": None, "function": None, "user": False, "what": "no Python frame",
                              "total_ns": 30000, "kernels": 9}]}
def tr(shares):
    rows = {f"{S}|{f}|{9 + i}": {"ns": ns, "kernels": 1} for i, (f, ns) in enumerate(zip(funcs, shares))}
    rows["(none)"] = {"ns": 30500, "kernels": 9}
    return {"rows": rows}
base = [9000, 8000, 7000, 6000, 5000, 4000, 3000, 2500, 2000, 1500, 1000]
json.dump(sp(base), open("sp.json", "w"))
json.dump(tr([x + 40 for x in base]), open("tr_good.json", "w"))
far = list(base); far[0] = 30000  # project_in 3x as large in torch's
json.dump(tr(far), open("tr_far.json", "w"))
json.dump(tr(base[:1] + [0] * 4 + base[5:]), open("tr_missing.json", "w"))  # 4 rows torch never saw
PY
/usr/bin/python3 "$C" lines sp.json tr_good.json "$S" >good.txt || fail "lines: agreeing rows fail: $(cat good.txt)"
! /usr/bin/python3 "$C" lines sp.json tr_far.json "$S" >far.txt || fail "lines: a share 3x off passes"
grep -q 'problem: pyline_train.py:project_in' far.txt || fail "lines: the share problem is not named: $(cat far.txt)"
! /usr/bin/python3 "$C" lines sp.json tr_missing.json "$S" >missing.txt || fail "lines: missing rows pass"
A=$(grep -n '# BIG_A$' "$S" | cut -d: -f1) B=$(grep -n '# BIG_B$' "$S" | cut -d: -f1)
printf '    alive at the peak: 3 allocations, 1.27GiB\n     768.00MiB  device       made -900.000ms  big_blocks (%s:%s)  [PyTorch caching allocator]\n     512.00MiB  device       made -899.000ms  big_blocks (%s:%s)  [PyTorch caching allocator]\n' \
	"$S" "$A" "$S" "$B" >mem_good.txt
sed "s/:$B)/:$((B + 1)))/" mem_good.txt >mem_bad.txt
sed "s/  \[PyTorch caching allocator\]$/  [NCCL]/" mem_good.txt >mem_owner.txt
/usr/bin/python3 "$C" memory mem_good.txt "$S" >/dev/null || fail "memory: the right lines fail"
! /usr/bin/python3 "$C" memory mem_bad.txt "$S" >/dev/null || fail "memory: a wrong line passes"
! /usr/bin/python3 "$C" memory mem_owner.txt "$S" >/dev/null || fail "memory: a wrong owner passes"
echo "gpu_pystacks_check: ok"
