#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_nccl.sh - NCCL on the CLI, end to end, on the two synthetic ranks of tests/unit/test_nccl.c
# (written by that binary with SP_WRITE_NCCL_SAMPLE set): `stepprof report`'s NCCL table, and
# `stepprof convert --merge-ranks`: a valid file (check_chrome_json.py), ranks sorted and named,
# rank 1 placed by its own clock anchors, each collective's two calls tagged alike and joined by a
# flow from rank 0 to rank 1 with the arrival skew; --window; refusals. Exits non-zero on failure.
set -euo pipefail
B=${SP_BUILD:?} R=${SP_ROOT:?}
CHECK="python3 $R/tests/e2e/check_chrome_json.py"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

SP_WRITE_NCCL_SAMPLE=$T "$B/tests/test_nccl"
cd "$T"

# report: the NCCL table after the others, rows by time, '*' for CPU time, the orphan kernel
"$B/stepprof" report rank0.sptrace >report.txt || fail "report failed"
grep -Eq '^NCCL op +Ranks +Size +Calls +Total bytes +Time +Avg +Algo/proto +algbw GB/s +busbw GB/s$' report.txt ||
	fail "NCCL header: $(cat report.txt)"
[ "$(sed -n '/^NCCL op/,/^$/p' report.txt | sed -n '2,7p' | cut -d' ' -f1 | tr '\n' ' ')" = \
	"AllReduce Broadcast Recv AllGather Send ReduceScatter " ] || fail "NCCL rows: $(cat report.txt)"
grep -Eq '^AllGather +2 +2\.00MiB +1 +2\.00MiB +1\.000ms +1\.000ms +RING/SIMPLE +2\.097 +1\.049$' report.txt ||
	fail "AllGather row: $(cat report.txt)"
grep -Eq '^ReduceScatter .* 50\.000us\* ' report.txt || fail "CPU-timed row"
grep -qx 'NCCL kernels linked to no call: 1, 500.000us' report.txt || fail "orphan line"
"$B/stepprof" convert rank0.sptrace -o one.json 2>/dev/null # a single trace gets no match args
! grep -q nccl_match one*.json || fail "nccl_match outside --merge-ranks"

# merge, ranks given in reverse order
"$B/stepprof" convert --merge-ranks -o merged.json.gz rank1.sptrace rank0.sptrace 2>merge.log ||
	fail "merge: $(cat merge.log)"
grep -q '^wrote merged.json.gz: 2 traces, 4 windows, .* 7 NCCL collectives paired across ranks$' merge.log ||
	fail "merge log: $(cat merge.log)"
$CHECK merged.json.gz --nested --flows 18 --windows 4 --count nccl=18 --count kernel=12 \
	--track "nodeA rank 0" --track "nodeB rank 1" --track "nodeA rank 0 GPU 0" --track "nodeB rank 1 GPU 0"
python3 - merged.json.gz <<'EOF'
import collections, gzip, json, sys
d = json.load(gzip.open(sys.argv[1]))
ev = d["traceEvents"]
def die(msg):
    sys.exit(f"FAIL: {msg}")
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
order = {e["pid"]: e["args"]["sort_index"] for e in ev if e.get("name") == "process_sort_index"}
if names.get(0) != "nodeA rank 0" or names.get(1) != "nodeB rank 1" or not order[0] < order[1]:
    die(f"processes {names} {order}")
if [r["rank"] for r in d["otherData"]["ranks"]] != [0, 1]:
    die("otherData.ranks not in rank order")
if sorted(p.get("rank") for p in d["deviceProperties"]) != [0, 1]:
    die(f"deviceProperties {d['deviceProperties']}")
# rank 1 runs 0.5 ms behind rank 0 on the wall clock (its header anchor is 7 ms off: not used)
steps = {(e["pid"], e["name"]): e["ts"] for e in ev if e.get("name", "").startswith("ProfilerStep#")}
for n in (0, 1):
    gap = steps[(1, f"ProfilerStep#{n}")] - steps[(0, f"ProfilerStep#{n}")]
    if abs(gap - 500) > 0.001:
        die(f"step {n}: rank 1 starts {gap} us after rank 0, expected 500")
calls = collections.defaultdict(dict)
for e in ev:
    if e.get("ph") == "X" and e["cat"] == "nccl" and "nccl_match" in e["args"]:
        calls[e["args"]["nccl_match"]][e["pid"]] = e
if len(calls) != 7 or any(sorted(c) != [0, 1] for c in calls.values()):
    die(f"collectives: {dict((k, sorted(v)) for k, v in calls.items())}")
skew = {"0x1111222233334444:10": 2000, "0x1111222233334444:11": 300, "0x1111222233334444:12": 100,
        "0x1111222233334444:13": 100, "0x5555666677778888:0": 100, "0x1111222233334444:14": 0,
        "0x1111222233334444:20": 100}
flows = {(e["ph"], e["pid"], e["ts"]): e["id"] for e in ev if e.get("cat") == "nccl" and e["ph"] in "sf"}
for key, c in calls.items():
    a, b = c[0], c[1]
    if a["args"]["arrival skew (us)"] != skew[key] or b["args"]["arrival skew (us)"] != skew[key]:
        die(f"{key}: skew {a['args']['arrival skew (us)']}, expected {skew[key]}")
    if abs(abs(b["ts"] - a["ts"]) - skew[key]) > 0.001:
        die(f"{key}: calls {b['ts'] - a['ts']} us apart, skew says {skew[key]}")
    late = 1 if b["ts"] > a["ts"] else 0
    if a["args"]["last to arrive"] != late or c[late]["args"]["wait for last arrival (us)"] != 0:
        die(f"{key}: last to arrive {a['args']['last to arrive']}")
    s, f = flows.get(("s", 0, a["ts"])), flows.get(("f", 1, b["ts"]))
    if s is None or s != f:
        die(f"{key}: no flow from rank 0's call to rank 1's ({s}, {f})")
print("cli_nccl merge: ok")
EOF

# --window 1: one window per rank, one collective
"$B/stepprof" convert --merge-ranks --window 1 -o w1.json rank0.sptrace rank1.sptrace 2>merge.log ||
	fail "--window 1: $(cat merge.log)"
$CHECK w1.json --flows 3 --windows 2 --steps 1,1
[ "$(grep -o '"nccl_match"' w1.json | wc -l)" -eq 2 ] || fail "--window 1 match count"

# --steps 1: the same step from each rank, the same as --window 1 here
"$B/stepprof" convert --merge-ranks --steps 1 -o s1.json rank0.sptrace rank1.sptrace 2>merge.log ||
	fail "--steps 1: $(cat merge.log)"
$CHECK s1.json --flows 3 --windows 2 --steps 1,1
[ "$(grep -o '"nccl_match"' s1.json | wc -l)" -eq 2 ] || fail "--steps 1 match count"

# another trace (the convert sample: rank 1 of host node1, other windows) merges too
SP_WRITE_SAMPLE=$T/sample.sptrace "$B/tests/test_convert"
"$B/stepprof" report sample.sptrace >sample.txt # its one AllReduce: kernel found by the launch inside the call
grep -Eq '^AllReduce +2 +4\.00MiB +1 +4\.00MiB +8\.000ms +8\.000ms +RING/LL +0\.524 +0\.524$' sample.txt ||
	fail "sample's NCCL row: $(cat sample.txt)"
"$B/stepprof" convert --merge-ranks -o mixed.json rank0.sptrace sample.sptrace 2>merge.log ||
	fail "mixed merge: $(cat merge.log)"
$CHECK mixed.json --windows 4 --track "nodeA rank 0" --track "node1 rank 1"

# refusals
set +e
"$B/stepprof" convert --merge-ranks rank0.sptrace rank1.sptrace 2>/dev/null; [ $? -eq 2 ] || fail "no -o not a usage error"
"$B/stepprof" convert --merge-ranks -o x.json rank1.sptrace sample.sptrace 2>err.txt; [ $? -eq 1 ] || fail "same rank twice"
grep -q 'are both rank 1' err.txt || fail "same rank message: $(cat err.txt)"
"$B/stepprof" convert --merge-ranks -o x.json --window 7 rank0.sptrace rank1.sptrace 2>/dev/null
[ $? -eq 1 ] || fail "--window 7 (no such window) succeeded"
[ ! -e x.json ] || fail "a failed merge left x.json"
echo "cli_nccl: ok"
