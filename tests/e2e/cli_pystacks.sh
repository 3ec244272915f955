#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_pystacks.sh - the CLI on stacks with Python frames (a version-3 trace from gen_pytrace):
# `report --by line` (text and JSON) charges kernel time to the program's own lines, skipping
# library frames, with rows for kernels without Python frames or launch records, and backward
# kernels (frames borrowed from the thread in backward()) marked [backward]; `--by frame` shows the
# innermost frame outside torch, and an HF Trainer-like program (its own code one line) gets it by
# itself from `--by line`; `stacks` writes
# the Python frames in folded stacks; `memory` names the line of a block made before the window;
# `dump` prints the Python frame records; old readers are kept off (min_version 6).
set -euo pipefail
B=${SP_BUILD:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$T"
"$B/tests/e2e/gen_pytrace" py.sptrace || fail "gen_pytrace"

"$B/stepprof" report --by line --wide py.sptrace >rep.txt || fail "report: $(cat rep.txt)"
grep -A8 '^Source line' rep.txt | sed 's/  */ /g' >rows.txt
cat >want.txt <<'W'
Source line Total % GPU Kernels
-
/home/u/train.py:42 train_step 10.000us 45.5% 2
/home/u/train.py:45 train_step [backward] 4.000us 18.2% 1
(no Python frame) 3.500us 15.9% 2
/home/u/train.py:44 train_step 3.000us 13.6% 1
(library) /opt/venv/lib/python3.12/site-packages/torch/optim/adam.py:200 Adam.step 1.000us 4.5% 1
(no launch record) 500ns 2.3% 1
Total 22.000us 100.0% 8
W
sed -i '2s/.*/-/' rows.txt
diff -u want.txt rows.txt || fail "report --by line rows"
grep -q 'site-packages/, dist-packages/, lib/python3\*, torch/' rep.txt || fail "the rule is not stated"
grep -q "^\[backward\]: kernels that autograd's threads launched while the program waited in backward()" rep.txt ||
	fail "the [backward] mark is not explained"
"$B/stepprof" report --by line --top 1 py.sptrace | grep -q '^\.\.\. 5 more lines: 12.000us, 54.5% of GPU time' ||
	fail "--top 1"

# --by frame: the innermost frame outside torch and the standard library (here the same lines, the
# optimizer's frame shortened); the trainer-like program: --by line turns to it by itself
"$B/stepprof" report --by frame --wide py.sptrace | sed 's/  */ /g' >f.txt
grep -qx '/home/u/train.py:42 train_step 10.000us 45.5% 2' f.txt && grep -q '^Frame Total' f.txt &&
	grep -qx '(library) torch/optim/adam.py:200 Adam.step 1.000us 4.5% 1' f.txt || fail "--by frame: $(cat f.txt)"
"$B/tests/e2e/gen_pytrace" tr.sptrace --trainer || fail "gen_pytrace --trainer"
"$B/stepprof" report --by line --wide tr.sptrace >tr.txt || fail "report trainer: $(cat tr.txt)"
grep -q "^The program's own code reaches the GPU through one line only (/home/u/run.py:30 <module>, 100% of GPU time):" tr.txt ||
	fail "no word on the single entry point: $(head -5 tr.txt)"
grep -A6 '^Frame ' tr.txt | sed 's/  */ /g' >rows.txt
cat >want.txt <<'W'
Frame Total % GPU Kernels
-
accelerate/accelerator.py:2240 Accelerator.backward [backward] 8.000us 44.4% 1
transformers/models/bert/modeling_bert.py:350 BertSelfAttention.forward 6.000us 33.3% 1
transformers/models/bert/modeling_bert.py:480 BertIntermediate.forward 3.000us 16.7% 1
transformers/trainer.py:2123 Trainer.train 1.000us 5.6% 1
Total 18.000us 100.0% 4
W
sed -i '2s/.*/-/' rows.txt
diff -u want.txt rows.txt || fail "report --by line on the trainer-like program"
"$B/stepprof" report --by frame --json tr.sptrace | python3 -c '
import json, sys
rows = json.load(sys.stdin)["lines"]
assert [(r["function"], r["backward"], r["by"], r["auto"], r["user"]) for r in rows] == [
    ("Accelerator.backward", True, "frame", False, False), ("BertSelfAttention.forward", False, "frame", False, False),
    ("BertIntermediate.forward", False, "frame", False, False), ("Trainer.train", False, "frame", False, False)], rows
' || fail "report --by frame --json"
"$B/stepprof" report --by line --json tr.sptrace | python3 -c '
import json, sys
rows = json.load(sys.stdin)["lines"]
assert all(r["by"] == "frame" and r["auto"] for r in rows), rows
' || fail "report --by line --json on the trainer-like program: not by frame"
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
assert [(r["file"], r["line"], r["function"], r["user"], r["total_ns"], r["kernels"]) for r in rows[0:4:3]] == [
    ("/home/u/train.py", 42, "train_step", True, 10000, 2), ("/home/u/train.py", 44, "train_step", True, 3000, 1)], rows
assert [r["what"] for r in rows] == ["user", "user", "no Python frame", "user", "library", "no launch record"], rows
assert [r["backward"] for r in rows] == [False, True, False, False, False, False], rows
assert rows[1]["line"] == 45 and all(r["by"] == "line" and not r["auto"] for r in rows), rows
assert rows[4]["function"] == "Adam.step" and rows[2]["file"] is None, rows
assert sum(r["total_ns"] for r in rows) == 22000
PY

"$B/stepprof" stacks --kind launch py.sptrace >launch.folded || fail "stacks"
grep -qx '<module> (/home/u/train.py:120);main (/home/u/train.py:100);train_step (/home/u/train.py:42);Linear.forward (torch/nn/modules/linear.py:125);0x7f0000001000 2' \
	launch.folded || fail "folded stack with Python frames: $(cat launch.folded)"
grep -qx '0x7f0000002000 1' launch.folded || fail "native-only stack: $(cat launch.folded)"
grep -qx '<module> (/home/u/train.py:120);main (/home/u/train.py:100);train_step (/home/u/train.py:45);Tensor.backward (torch/_tensor.py:626);_engine_run_backward (torch/autograd/graph.py:769);\[backward\];0x7f0000004000 1' \
	launch.folded || fail "folded backward stack: $(cat launch.folded)"

"$B/stepprof" memory py.sptrace -o mem.html >mem.txt || fail "memory: $(cat mem.txt)"
grep -Eq '^ +64\.00MiB +device +made -500ns +train_step \(/home/u/train\.py:43\)  \[unknown: no module recorded for its frames\]$' mem.txt ||
	fail "memory summary: $(cat mem.txt)"
grep -q '"sites":{"5":"train_step (/home/u/train.py:43)"}' mem.html || fail "memory page: no Python line"

"$B/stepprof" dump py.sptrace >dump.txt || fail "dump"
grep -q '^min_version: 6$' dump.txt || fail "min_version"
grep -q '^features: 0x1211 kernels,runtime_api,stacks,pystacks$' dump.txt || fail "features: $(sed -n 4p dump.txt)"
grep -q '^pyframe id=2 file="/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py" func="Linear.forward" line=125$' \
	dump.txt || fail "dump pyframe"
echo "cli_pystacks: ok"
