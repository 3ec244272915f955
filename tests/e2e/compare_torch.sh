#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# compare_torch.sh - tests/gpu/compare_torch.py, the GPU suite's check of stepprof's kernels against
# torch.profiler's, on made-up Chrome traces: equal traces pass; a missing kernel, a kernel 20%
# longer with the GPU as busy before it, or a total off by more than 5% fail; a tiny kernel 20%
# longer that started on a GPU idle 10 us longer than in the other trace passes as `ctx`.
set -u
R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: no /usr/bin/python3"; exit 0; }

# make NAME SPEC: a trace of 3 steps; SPEC is "label:dur_us:idle_before_us,..." (one step's kernels)
make() {
	"$PY" - "$T/$1.json" "$2" <<'PY'
import json, sys
out, spec = sys.argv[1], sys.argv[2]
ev, corr, t = [], 1, 0.0
for step in range(3):
    t0 = t
    for k in spec.split(","):
        label, dur, idle = k.split(":")
        t += float(idle)
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": t - 0.5, "dur": 0.2, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": label, "pid": 0, "tid": 7, "ts": t,
                   "dur": float(dur), "args": {"correlation": corr}})
        t += float(dur)
        corr += 1
    t += 5
    ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 7}", "pid": 1, "tid": 1,
               "ts": t0 - 1, "dur": t - t0 + 1})
json.dump({"traceEvents": ev}, open(out, "w"))
PY
}
# check NAME WANT(0 pass, 1 fail) PATTERN: compare_torch.py on NAME.json against base.json
check() {
	local rc
	(cd "$R/tests/gpu" && "$PY" compare_torch.py "$T/$1.json" "$T/base.json") >"$T/$1.out" 2>&1
	rc=$?
	if [ "$rc" = "$2" ] && grep -q "$3" "$T/$1.out"; then
		echo "ok   $1: exit $rc, $(tail -1 "$T/$1.out" | cut -c1-110)"
	else
		echo "FAIL $1: exit $rc (expected $2), no '$3':"
		sed 's/^/    /' "$T/$1.out" | tail -8
		fail=1
	fi
}
make base "gemm:100:1,loss:5:1,adam:50:1"
make same "gemm:100:1,loss:5:1,adam:50:1"
make missing "gemm:100:1,adam:50:1"
make slow "gemm:100:1,loss:6:1,adam:50:1"
make idle "gemm:100:1,loss:6:11,adam:50:1"
make total "gemm:120:1,loss:5:1,adam:50:1"
make totalidle "gemm:100:1,loss:6:11,adam:60:1"
check same 0 "compare_torch: PASS.*ctx=0"
check missing 1 "counts=DIFFER"
check slow 1 "FAIL .*loss  (GPU idle before it: stepprof 1.0 us, torch 1.0 us)"
check idle 0 "compare_torch: PASS.*ctx=1"
check total 1 "FAIL: total kernel time differs"
check totalidle 1 "compare_torch: FAIL"
exit $fail
