#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu_pystacks_check.sh - the checker of tests/gpu/pystacks.sh without a GPU: pystacks_check.py
# `lines` passes on agreeing synthetic rows and fails on a missing line, a share far off and too
# few common keys; `memory` passes on the right Python lines and fails on a wrong one.
set -euo pipefail
R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
C=$R/tests/gpu/pystacks_check.py S=$R/tests/gpu/pyline_train.py
cd "$T"
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
printf '    alive at the peak: 3 allocations, 1.27GiB\n     768.00MiB  device       made -900.000ms  big_blocks (%s:%s)\n     512.00MiB  device       made -899.000ms  big_blocks (%s:%s)\n' \
	"$S" "$A" "$S" "$B" >mem_good.txt
sed "s/:$B)/:$((B + 1)))/" mem_good.txt >mem_bad.txt
/usr/bin/python3 "$C" memory mem_good.txt "$S" >/dev/null || fail "memory: the right lines fail"
! /usr/bin/python3 "$C" memory mem_bad.txt "$S" >/dev/null || fail "memory: a wrong line passes"
echo "gpu_pystacks_check: ok"
