#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_memory_stacks.sh - `stepprof memory`, `stepprof stacks`, the report's allocation sites and
# dump's stack lines on the sample of tests/unit/test_memtl.c (written by the test_memtl binary
# with SP_WRITE_SAMPLE set): its stacks are made of test_memtl's own functions and its MODULE
# records of test_memtl's own mappings, so every frame symbolises offline to a known name.
set -euo pipefail
B=${SP_BUILD:?} R=${SP_ROOT:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

SP_WRITE_SAMPLE=$T/mem.sptrace "$B/tests/test_memtl"
cd "$T"

# memory: the page beside the trace, self-contained, its data well-formed; the text summary
"$B/stepprof" memory mem.sptrace >summary.txt || fail "memory: $(cat summary.txt)"
[ -s mem.memory.html ] || fail "no mem.memory.html: $(ls)"
grep -q 'GPU 0 (NVIDIA H100 80GB HBM3): peak 17.00MiB at +12.000ms (step 6), peak since process start 32.00MiB' \
	summary.txt || fail "summary: $(cat summary.txt)"
grep -q '^       8.00MiB  device       made +1.000ms  sx_alloc_weights+0x4 (test_memtl)  \[other library\]$' summary.txt ||
	fail "summary rows: $(cat summary.txt)"
grep -q '^wrote mem.memory.html: 2 windows$' summary.txt || fail "summary end: $(cat summary.txt)"
if grep -Eq 'https?://' mem.memory.html; then fail "the page references the network"; fi
if grep -Eiq '<(script|link|img|iframe)[^>]* (src|href)=' mem.memory.html; then fail "the page loads a resource"; fi
python3 - mem.memory.html <<'PY' || fail "page data"
import json, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
wins = [json.loads(m) for m in re.findall(r"SP_WINDOWS\.push\((\{.*?\})\);</script>", page, re.S)]
assert [w["id"] for w in wins] == [0, 1], [w["id"] for w in wins]
w0 = wins[0]
gpu = w0["series"][0]
assert gpu["peak"] == 17 << 20 and gpu["peak_ms"] == 12.0, gpu
sizes = sorted((w0["allocs"][i][3] for i in gpu["at_peak"]), reverse=True)
assert sizes == [8 << 20, 4 << 20, 3 << 20, 2 << 20], sizes
assert max(gpu["v"]) == gpu["peak"] and len(gpu["t"]) == len(gpu["v"])
assert [s[0] for s in w0["steps"]] == [5, 6]
stacks = {int(k): v for k, v in w0["stacks"].items()}
assert stacks[1][:2] == ["sx_alloc_weights+0x4 (test_memtl)", "sx_model_forward+0x4 (test_memtl)"], stacks
assert [s["label"] for s in wins[1]["series"]] == ["GPU 0 (NVIDIA H100 80GB HBM3)", "GPU 1", "host"]
print("memory page: ok")
PY
if command -v node >/dev/null; then # the page's own script: draws, hovers, builds the tables
	node "$R/tests/e2e/check_memory_page.js" mem.memory.html 0 12.5 "GPU 0 (NVIDIA H100 80GB HBM3): 17.00MiB live" \
		"8.00MiB device on GPU 0 (NVIDIA H100 80GB HBM3), age 11.500 ms: sx_alloc_weights+0x4 (test_memtl)" ||
		fail "page script"
else
	echo "skipped: the memory page's own script (no node here: Debian's nodejs runs it)"
fi

# stacks: folded lines "frame;...;frame weight", root first
"$B/stepprof" stacks mem.sptrace >alloc.folded || fail "stacks failed"
python3 - alloc.folded <<'PY' || fail "folded lines: $(cat alloc.folded)"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
parsed = {}
for l in lines:
    m = re.fullmatch(r"(\S.*) (\d+)", l)
    assert m and all(m.group(1).split(";")), l
    parsed[m.group(1)] = int(m.group(2))
assert parsed == {
    "[no stack]": 4 << 20,
    "sx_train_loop": 1 << 20,
    "sx_train_loop;sx_launch_gemm": 2 << 20,
    "sx_train_loop;sx_model_forward;sx_alloc_weights": 18 << 20,
}, parsed
print("folded: ok")
PY
[ "$("$B/stepprof" stacks mem.sptrace --kind launch)" = "sx_train_loop;sx_launch_gemm 1" ] || fail "--kind launch"
"$B/stepprof" stacks mem.sptrace --kind all --by calls -o all.folded 2>/dev/null
grep -qx '\[launch\];sx_train_loop;sx_launch_gemm 1' all.folded || fail "--kind all: $(cat all.folded)"

# report: the allocation sites table
"$B/stepprof" report mem.sptrace >report.txt || fail "report failed"
grep -Eq '^Top allocation sites by bytes +Bytes +Calls  Owner \(GPU\)$' report.txt || fail "sites header: $(cat report.txt)"
grep -Eq '^sx_alloc_weights\+0x4 \(test_memtl\) +18\.00MiB +2  other library$' report.txt || fail "sites row: $(cat report.txt)"
grep -Eq '^sx_train_loop\+0x4 \(test_memtl\) +1\.00MiB +1$' report.txt || fail "host site with an owner: $(cat report.txt)"

# dump: each stack once, before its first use
"$B/stepprof" dump mem.sptrace >dump.txt
[ "$(grep -c '^stack id=' dump.txt)" = 3 ] || fail "dump stacks: $(grep '^stack' dump.txt)"
grep -B1 -m1 'stack=1 flags=snapshot' dump.txt | head -1 | grep -q '^stack id=1 pcs=0x' || fail "stack 1 before its use"
echo "cli_memory_stacks: ok"
