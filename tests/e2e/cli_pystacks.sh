#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_pystacks.sh - the CLI on stacks with Python frames (a version-3 trace from gen_pytrace):
# `report --by line` (text and JSON) charges kernel time to the program's own lines, skipping
# library frames, with rows for kernels without Python frames or launch records; `stacks` writes
# the Python frames in folded stacks; `memory` names the line of a block made before the window;
# `dump` prints the Python frame records; old readers are kept off (min_version 5).
set -euo pipefail
B=${SP_BUILD:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$T"
"$B/tests/e2e/gen_pytrace" py.sptrace || fail "gen_pytrace"

"$B/stepprof" report --by line --wide py.sptrace >rep.txt || fail "report: $(cat rep.txt)"
grep -A7 '^Source line' rep.txt | sed 's/  */ /g' >rows.txt
cat >want.txt <<'W'
Source line Total % GPU Kernels
-
/home/u/train.py:42 train_step 10.000us 55.6% 2
(no Python frame) 3.500us 19.4% 2
/home/u/train.py:44 train_step 3.000us 16.7% 1
(library) /opt/venv/lib/python3.12/site-packages/torch/optim/adam.py:200 Adam.step 1.000us 5.6% 1
(no launch record) 500ns 2.8% 1
Total 18.000us 100.0% 7
W
sed -i '2s/.*/-/' rows.txt
diff -u want.txt rows.txt || fail "report --by line rows"
grep -q 'site-packages/, dist-packages/, lib/python3\*, torch/' rep.txt || fail "the rule is not stated"
"$B/stepprof" report --by line --top 1 py.sptrace | grep -q '^\.\.\. 4 more lines: 8.000us, 44.4% of GPU time' ||
	fail "--top 1"
"$B/stepprof" report py.sptrace | grep -q '^ampere_sgemm_128x64_tn' || fail "report by kernel still the default"
grep -q '^Note: recorded without Python frames' rep.txt && fail "the note on a trace with Python frames"
"$B/stepprof" report --by line "${SP_ROOT:?}/tests/golden/small.sptrace" >old.txt || fail "--by line on a version-1 trace"
grep -q '^Note: recorded without Python frames: record with \[activities\] stacks = python or both' old.txt ||
	fail "no note on a trace without Python frames: $(cat old.txt)"
"$B/stepprof" report --by bogus py.sptrace 2>/dev/null && fail "--by bogus accepted"

"$B/stepprof" report --by line --json py.sptrace >rep.json || fail "report --json"
python3 - rep.json <<'PY' || fail "report --json lines"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["lines"]
assert [(r["file"], r["line"], r["function"], r["user"], r["total_ns"], r["kernels"]) for r in rows[::2][:2]] == [
    ("/home/u/train.py", 42, "train_step", True, 10000, 2), ("/home/u/train.py", 44, "train_step", True, 3000, 1)], rows
assert [r["what"] for r in rows] == ["user", "no Python frame", "user", "library", "no launch record"], rows
assert rows[3]["function"] == "Adam.step" and rows[1]["file"] is None, rows
assert sum(r["total_ns"] for r in rows) == 18000
PY

"$B/stepprof" stacks --kind launch py.sptrace >launch.folded || fail "stacks"
grep -qx '<module> (/home/u/train.py:120);main (/home/u/train.py:100);train_step (/home/u/train.py:42);Linear.forward (torch/nn/modules/linear.py:125);0x7f0000001000 2' \
	launch.folded || fail "folded stack with Python frames: $(cat launch.folded)"
grep -qx '0x7f0000002000 1' launch.folded || fail "native-only stack: $(cat launch.folded)"

"$B/stepprof" memory py.sptrace -o mem.html >mem.txt || fail "memory: $(cat mem.txt)"
grep -Eq '^ +64\.00MiB +device +made -500ns +train_step \(/home/u/train\.py:43\)$' mem.txt ||
	fail "memory summary: $(cat mem.txt)"
grep -q '"sites":{"5":"train_step (/home/u/train.py:43)"}' mem.html || fail "memory page: no Python line"

"$B/stepprof" dump py.sptrace >dump.txt || fail "dump"
grep -q '^min_version: 5$' dump.txt || fail "min_version"
grep -q '^features: 0x1211 kernels,runtime_api,stacks,pystacks$' dump.txt || fail "features: $(sed -n 4p dump.txt)"
grep -q '^pyframe id=2 file="/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py" func="Linear.forward" line=125$' \
	dump.txt || fail "dump pyframe"
echo "cli_pystacks: ok"
