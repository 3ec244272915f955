#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_convert_report.sh - `stepprof convert` and `stepprof report` on the sample trace of
# tests/unit/trace_fixture.h (written by the test_convert binary with SP_WRITE_SAMPLE set):
# one valid JSON file per window, --merge gives one (gzip), --window picks one, --steps cuts to
# steps; the report's
# columns, row order, drop line and window lines. Exits non-zero on the first failure.
set -euo pipefail
B=${SP_BUILD:?} R=${SP_ROOT:?}
CHECK="python3 $R/tests/e2e/check_chrome_json.py"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

SP_WRITE_SAMPLE=$T/run.sptrace "$B/tests/test_convert"
cd "$T"

# one file per window, named after the trace (gzip), or after -o (plain JSON for a plain name)
"$B/stepprof" convert run.sptrace 2>convert.log || fail "convert: $(cat convert.log)"
[ "$(ls run.*.gz | tr '\n' ' ')" = "run.0.pt.trace.json.gz run.1.pt.trace.json.gz " ] || fail "per-window files: $(ls)"
grep -q "^wrote run.0.pt.trace.json.gz: window 0, steps 5-7" convert.log || fail "convert log: $(cat convert.log)"
"$B/stepprof" convert run.sptrace -o run.json 2>convert.log || fail "convert -o: $(cat convert.log)"
[ "$(ls run.*.json | tr '\n' ' ')" = "run.0.pt.trace.json run.1.pt.trace.json " ] || fail "-o files: $(ls)"
$CHECK run.0.pt.trace.json --perfetto --kineto --rank 1 --nested --steps 5,6,7 --flows 12 --windows 1 --count kernel=8 --count gpu_memcpy=3 \
	--count gpu_memset=1 --count nccl=1 --count cuda_runtime=13 --count cuda_driver=1 \
	--track "node1 rank 1" --track "node1 rank 1 GPU 0" --track "python main" --track "thread 101" \
	--track "stream 7" --track "stream 13"
$CHECK run.1.pt.trace.json --perfetto --kineto --rank 1 --steps 15,16 --flows 2 --windows 1 --count kernel=2

# --merge: one gzip file, all windows, wall clock
"$B/stepprof" convert run.sptrace --merge -o merged.json.gz 2>convert.log || fail "merge: $(cat convert.log)"
[ "$(ls merged*)" = "merged.json.gz" ] || fail "merge files: $(ls)"
$CHECK merged.json.gz --perfetto --kineto --rank 1 --nested --steps 5,6,7,15,16 --flows 14 --windows 2 --count kernel=10

# --window N: only that one
"$B/stepprof" convert run.sptrace --window 1 -o one.json 2>/dev/null
[ "$(ls one*)" = "one.json" ] || fail "--window files: $(ls)"
if "$B/stepprof" convert run.sptrace --window 9 2>/dev/null; then fail "--window 9 succeeded"; fi

# --steps: only those steps, with the GPU work their calls launched (step 6: two kernels and a
# copy, as the report's per-step row says; step 7 four kernels); a range over two windows gives
# two files; steps no window holds are an error, a malformed range a usage error
"$B/stepprof" convert run.sptrace --steps 6 -o s.json 2>steps.log || fail "--steps 6: $(cat steps.log)"
grep -q "^wrote s.json: window 0, steps 6-6, " steps.log || fail "--steps log: $(cat steps.log)"
$CHECK s.json --perfetto --nested --steps 6 --flows 3 --count kernel=2 --count gpu_memcpy=1 --count gpu_memset=0
"$B/stepprof" convert run.sptrace --steps 7-15 -o t.json 2>/dev/null || fail "--steps 7-15"
[ "$(ls t.*.json | tr '\n' ' ')" = "t.0.pt.trace.json t.1.pt.trace.json " ] || fail "--steps 7-15 files: $(ls)"
$CHECK t.0.pt.trace.json --steps 7 --count kernel=4 --count nccl=1
$CHECK t.1.pt.trace.json --steps 15 --count kernel=1
# every step: the kernels `convert --steps N` keeps are the ones the report's per-step row counts
"$B/stepprof" report run.sptrace --window all >perstep.txt || fail "report --window all"
for n in 5 6 7 15 16; do
	k=$(sed -n '/^Per step/,/^$/p' perstep.txt | awk -v n=$n '$1 == n { print $4 }')
	[ -n "$k" ] || fail "no per-step row for step $n: $(cat perstep.txt)"
	"$B/stepprof" convert run.sptrace --steps $n -o p$n.json 2>/dev/null || fail "--steps $n"
	$CHECK p$n.json --steps $n --count kernel=$k
done
set +e
"$B/stepprof" convert run.sptrace --steps 8-9 2>steps.log; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "has no recorded step in --steps 8-9; it holds steps 5-7 (window 0), 15-16 (window 1)" steps.log || fail "--steps 8-9: exit $rc, $(cat steps.log)"
set +e
"$B/stepprof" convert run.sptrace --steps 7-5 2>/dev/null; rc=$?
set -e
[ $rc -eq 2 ] || fail "--steps 7-5: exit $rc"

# report: columns, order by total GPU time, totals, drops, windows
"$B/stepprof" report run.sptrace >report.txt || fail "report failed"
grep -Eq '^Name +Calls +Total +Avg +Min +Max +% GPU$' report.txt || fail "header: $(cat report.txt)"
rows=$(sed -n '/^----/,/^Total /p' report.txt | sed '1d;$d' | cut -c1-22)
[ "$(echo "$rows" | head -2 | tr '\n' '|')" = "ampere_sgemm_128x64_nn|ncclDevKernel_AllReduc|" ] ||
	fail "row order: $rows"
grep -Eq '^Total +10 +20\.000ms +100\.0%$' report.txt || fail "total line: $(cat report.txt)"
grep -qx 'Dropped records: 6 (cupti: 2, ring_full: 3, window_cap: 0, late: 1)' report.txt || fail "drops"
grep -qx 'Window 0: steps 5-7 (3 steps), 30.000ms, 8 kernels, GPU busy 44.0%, 3 dropped' report.txt ||
	fail "window 0 line: $(cat report.txt)"
grep -Eq '^Memcpy HtoD +3 +3\.00MiB' report.txt || fail "memcpy table"

"$B/stepprof" report run.sptrace --sort calls --top 2 >top.txt
sed -n '/^----/,/^Total /p' top.txt | grep -q '^\.\.\. 2 more kernel names' || fail "--top: $(cat top.txt)"
[ "$(sed -n '/^----/{n;p}' top.txt | cut -c1-12)" = "ampere_sgemm" ] || fail "--sort calls first row"
[ "$(sed -n '/^----/{n;n;p}' top.txt | cut -c1-12)" = "void at::nat" ] || fail "--sort calls second row"

# --json: one object that parses and holds what the tables show (numbers as in test_report.c)
"$B/stepprof" report run.sptrace --json >report.json || fail "report --json exit status"
python3 - report.json <<'PY' || fail "report --json content: $(head -c 600 report.json)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["rank"] == 1 and d["world_size"] == 2 and d["window"] is None, d
assert [k["name"] for k in d["kernels"]][:2] == ["ampere_sgemm_128x64_nn", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
assert sum(k["calls"] for k in d["kernels"]) == 10 and sum(k["total_ns"] for k in d["kernels"]) == 20_000_000
assert d["dropped"] == {"cupti": 2, "ring_full": 3, "window_cap": 0, "late": 1, "missing": 0}
assert [(w["id"], w["steps"], w["kernels"], w["gpu_busy_ns"]) for w in d["windows"]] == [(0, 3, 8, 13_200_000), (1, 2, 2, 4_000_000)]
s7 = next(s for s in d["steps"] if s["number"] == 7)
assert (s7["kernels"], s7["kernel_ns"], s7["nccl_ns"], s7["copy_ns"], s7["gpu_busy_ns"], s7["longest_idle_ns"]) == (4, 11_000_000, 8_000_000, 200_000, 8_000_000, 1_000_000), s7
assert d["nccl"][0]["op"] == "AllReduce" and d["nccl"][0]["algo"] == "RING/LL", d["nccl"]
assert len(d["findings"]) == 4 and d["findings"][0].startswith("The GPU is idle"), d["findings"]
assert any("\n" in k["raw_name"] for k in d["kernels"]), "control characters must survive escaping"
PY
"$B/stepprof" report run.sptrace --window 1 >w1.txt
grep -q '^Window 1:' w1.txt && ! grep -q '^Window 0:' w1.txt || fail "--window 1: $(cat w1.txt)"
set +e
"$B/stepprof" report run.sptrace --sort bogus 2>/dev/null; [ $? -eq 2 ] || fail "bad --sort not a usage error"
"$B/stepprof" report nothing.sptrace 2>/dev/null; [ $? -eq 1 ] || fail "missing file not a runtime error"
echo "cli_convert_report: ok"
