#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli_kineto.sh - `stepprof convert` output opened by the tools ML engineers use on torch.profiler
# traces: the file names the TensorBoard plugin discovers (and -o FILE written exactly), Perfetto's
# import rules and torch.profiler's layout (check_chrome_json.py --perfetto --kineto), and HTA
# (check_hta.py: both ranks found, its breakdowns run, its per-step kernel time equals `stepprof
# report`'s) on a generated 2-rank data-parallel job (gen_ddp) and on every GPU-recorded trace under
# tests/data (grouped by folder: a folder's traces of several ranks are one job). The merged view
# (--merge-ranks): ids unique per rank. SP_KINETO_DATA=DIR checks the GPU traces under DIR instead of
# tests/data (fresh ones from a GPU run, e.g. the DDP test's). Exits non-zero on the first failure.
# HTA is an optional tool: its checks run when it is found (SP_HTA=DIR holding HTA's hta/ package,
# else ../shared/tools/hta beside the project, else an installed `hta` package) with the Python
# modules it needs, and otherwise print one "skipped: ..." line (tests/run.sh counts it); every
# other check runs always.
set -euo pipefail
B=${SP_BUILD:?} R=${SP_ROOT:?}
CHECK="python3 $R/tests/e2e/check_chrome_json.py"
PY=/usr/bin/python3 # Debian's, with pandas & co. (a python3 earlier on PATH may lack them)
[ -x "$PY" ] || PY=python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
HTA_PKG= HTA_SKIP=
for d in "${SP_HTA:-}" "$R/../shared/tools/hta"; do
	[ -n "$d" ] && [ -d "$d/hta" ] && { HTA_PKG=$(cd "$d" && pwd); break; }
done
[ -n "$HTA_PKG" ] || ! $PY -c 'import hta.trace_analysis' 2>/dev/null || HTA_PKG=installed
if [ -z "$HTA_PKG" ]; then
	HTA_SKIP="no HTA (set SP_HTA=DIR holding its hta/ package, put it at ../shared/tools/hta, or install it)"
elif ! $PY -c 'import pandas, numpy, yaml, plotly, ijson, psutil, networkx' 2>/dev/null; then
	HTA_SKIP="$PY lacks the modules HTA needs (make deps installs python3-pandas, python3-numpy, ...)"
fi
# hta ARGS...: check_hta.py when HTA can run, else nothing (the skip is said once, at the end)
hta() {
	[ -z "$HTA_SKIP" ] || return 0
	$PY "$R/tests/e2e/check_hta.py" --hta "$([ "$HTA_PKG" = installed ] || echo "$HTA_PKG")" "$@"
}

# the TensorBoard plugin's file discovery, exactly as the plugin does it: WORKER_PATTERN copied
# verbatim from pytorch/kineto tb_plugin/torch_tb_profiler/consts.py (commit
# 5b5536847026c5661ba8002d5e2339c8aef1e0e9), and RunLoader.load's use of it
# (tb_plugin/torch_tb_profiler/profiler/loader.py, commit 6da7e1799e387d3ed3b003f013c05f377227042c):
# group(1) is the worker, group(2) without its dot the span; a worker's spans are numbered from 1
# in their sorted (text) order. Prints "worker span-index" per file name given (all of one run
# directory), "no match" for a name the plugin skips.
tb_discover() {
	python3 -c 'import bisect, re, sys
from collections import defaultdict
WORKER_PATTERN = re.compile(r"""^(.*?) # worker name
        (\.\d+)? # optional timestamp like 1619499959628 used as span name
        \.pt\.trace\.json # the ending suffix
        (?:\.gz)?$""", re.X)  # optional .gz extension
workers, spans = [], defaultdict(list)
for path in sys.argv[1:]:
    match = WORKER_PATTERN.match(path)
    if not match:
        workers.append((path, None, "no match"))
        continue
    worker, span = match.group(1), match.group(2)
    if span is not None:
        span = span[1:]
        bisect.insort(spans[worker], span)
    workers.append((worker, span, path))
index = {(w, s): i for w, v in spans.items() for i, s in enumerate(v, 1)}
for worker, span, path in workers:
    print("no match" if path == "no match" else f"{worker} {index[(worker, span)] if span is not None else None}")' "$@"
}

cd "$T"
"$B/tests/e2e/gen_ddp" ddp 2 2 3 30 7

# default names: one gzip file per window, <stem>.<window>.pt.trace.json.gz; the plugin sees worker
# "ddp0" with the windows as its spans
for r in 0 1; do
	"$B/stepprof" convert ddp$r.sptrace 2>convert.log || fail "convert ddp$r: $(cat convert.log)"
	"$B/stepprof" report ddp$r.sptrace --window 0 --json >report$r.w0.json || fail "report ddp$r"
	"$B/stepprof" report ddp$r.sptrace --window 1 --json >report$r.w1.json || fail "report ddp$r"
done
[ "$(ls ddp*.pt.trace.json.gz | tr '\n' ' ')" = \
	"ddp0.0.pt.trace.json.gz ddp0.1.pt.trace.json.gz ddp1.0.pt.trace.json.gz ddp1.1.pt.trace.json.gz " ] ||
	fail "default names: $(ls)"
# the plugin finds every default name: worker ddpR, window W as its span number W + 1
tb=$(tb_discover ddp*.pt.trace.json.gz | tr '\n' ' ')
[ "$tb" = "ddp0 1 ddp0 2 ddp1 1 ddp1 2 " ] || fail "TensorBoard discovery of the default names: $tb"
[ "$(tb_discover run.rank3.0.pt.trace.json)" = "run.rank3 1" ] || fail "TensorBoard discovery (plain JSON)"
[ "$(tb_discover run.json.gz)" = "no match" ] || fail "the plugin's pattern is not the one copied: run.json.gz matched"
for r in 0 1; do
	for w in 0 1; do
		$CHECK ddp$r.$w.pt.trace.json.gz --perfetto --kineto --rank $r --devices --nested --steps \
			$([ $w = 0 ] && echo 10,11,12 || echo 18,19,20) --count kernel=93 --count cuda_sync=4 \
			--count gpu_memcpy=3 --flows 99 >/dev/null
	done
done

# HTA on each window's pair of rank files
for w in 0 1; do
	mkdir hta$w
	cp ddp0.$w.pt.trace.json.gz ddp1.$w.pt.trace.json.gz hta$w/
	hta hta$w --ranks 0,1 --report report0.w$w.json --report report1.w$w.json
done
# a check that can fail: two files of one rank collapse in HTA
mkdir same && cp ddp0.0.pt.trace.json.gz same/a.pt.trace.json.gz && cp ddp0.1.pt.trace.json.gz same/b.pt.trace.json.gz
if [ -z "$HTA_SKIP" ] && hta same --ranks 0,1 >/dev/null 2>&1; then fail "check_hta accepted one rank for two"; fi

# -o FILE: exactly FILE for a single window; per-window names beside it otherwise (plain JSON if
# FILE is plain)
"$B/stepprof" convert ddp0.sptrace --window 1 -o exact.json.gz 2>/dev/null || fail "--window 1 -o"
[ -f exact.json.gz ] && [ "$(ls exact*)" = "exact.json.gz" ] || fail "-o with --window: $(ls exact*)"
"$B/stepprof" convert ddp0.sptrace --steps 11 -o one.json 2>log || fail "--steps 11 -o: $(cat log)"
[ "$(ls one*)" = "one.json" ] && grep -q '^wrote one.json: window 0, steps 11-11' log || fail "-o one window: $(ls one*) $(cat log)"
"$B/stepprof" convert ddp0.sptrace -o two.json 2>log || fail "-o two windows"
[ "$(ls two* | tr '\n' ' ')" = "two.0.pt.trace.json two.1.pt.trace.json " ] || fail "-o two windows: $(ls two*)"
"$B/stepprof" convert ddp0.sptrace --merge -o all.pt.trace.json.gz 2>/dev/null || fail "--merge -o"
[ "$(ls all*)" = "all.pt.trace.json.gz" ] || fail "--merge -o: $(ls all*)"
$CHECK all.pt.trace.json.gz --perfetto --kineto --rank 0 --nested --steps 10,11,12,18,19,20 >/dev/null

# the merged view: one process group per rank, correlation and flow ids unique per rank
"$B/stepprof" convert --merge-ranks -o merged.json.gz ddp1.sptrace ddp0.sptrace 2>/dev/null || fail "--merge-ranks"
[ "$(ls merged*)" = "merged.json.gz" ] || fail "--merge-ranks name: $(ls merged*)"
$CHECK merged.json.gz --perfetto --nested --track "node0 rank 0" --track "node0 rank 1 GPU 1" >/dev/null
python3 - merged.json.gz <<'EOF' || fail "merged view ids"
import collections, gzip, json, sys
d = json.load(gzip.open(sys.argv[1]))
ev = d["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
owner = collections.defaultdict(set)  # correlation -> ranks whose processes carry it
for e in ev:
    c = (e.get("args") or {}).get("correlation")
    if e.get("ph") == "X" and c is not None:
        owner[c].add(names[e["pid"]].split(" GPU")[0])
shared = [c for c, o in owner.items() if len(o) > 1]
assert not shared, f"correlation ids shared by ranks: {shared[:5]}"
assert len(owner) > 300, len(owner)
assert '"rank": ' not in json.dumps(d.get("distributedInfo")), "a merged file must not pose as one rank to HTA"
EOF

# GPU-recorded traces kept under tests/data: every window of every one converted and checked; a
# folder holding traces of several ranks is a job, loaded by HTA window by window
n=0
while IFS= read -r -d '' dir; do
	nranked=0
	for t in "$dir"/*.sptrace; do
		base=$(basename "$t" .sptrace)
		"$B/stepprof" report "$t" --json >"gpu$n.$base.report" || fail "report $t"
		read -r rank windows < <(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(d["rank"], " ".join(str(w["id"]) for w in d["windows"]))' "gpu$n.$base.report")
		[ "$rank" -ge 0 ] && nranked=$((nranked + 1))
		for w in $windows; do
			mkdir -p "gpu$n/w$w"
			f="gpu$n/w$w/$base.pt.trace.json.gz"
			"$B/stepprof" convert "$t" --window "$w" -o "$f" 2>log || fail "convert $t window $w: $(cat log)"
			$CHECK "$f" --perfetto --kineto $([ "$rank" -ge 0 ] && echo --rank "$rank") >/dev/null ||
				fail "Perfetto/Kineto rules on $t window $w"
			"$B/stepprof" report "$t" --window "$w" --json >"gpu$n/w$w/$base.report"
		done
	done
	ntr=$(ls "$dir"/*.sptrace | wc -l)
	for wd in gpu$n/w*; do # HTA on a job's ranks, or on a lone trace (HTA takes a trace without rank for 0)
		[ -d "$wd" ] && { [ "$nranked" -ge 2 ] || [ "$ntr" -eq 1 ]; } || continue
		ls "$wd"/*.report >/dev/null 2>&1 || continue
		ranks=$(python3 -c 'import json, sys; print(",".join(sorted((str(max(json.load(open(f))["rank"], 0)) for f in sys.argv[1:]), key=int)))' "$wd"/*.report)
		[ "$ntr" -eq 1 ] || [ "$(echo "$ranks" | tr ',' '\n' | wc -l)" -ge 2 ] || continue
		mkdir -p "$wd/hta" && mv "$wd"/*.pt.trace.json.gz "$wd/hta/"
		hta "$wd/hta" --ranks "$ranks" $(for f in "$wd"/*.report; do echo --report "$f"; done) ||
			fail "HTA on $dir $(basename "$wd")"
	done
	if [ "$nranked" -ge 2 ]; then # the merged view of the job
		"$B/stepprof" convert --merge-ranks -o "gpu$n/merged.json.gz" "$dir"/*.sptrace 2>log ||
			fail "--merge-ranks $dir: $(cat log)"
		$CHECK "gpu$n/merged.json.gz" --perfetto >/dev/null || fail "Perfetto's rules on the merged view of $dir"
	fi
	echo "cli_kineto: $dir: $(ls "$dir"/*.sptrace | wc -l) traces checked, $nranked with a rank"
	n=$((n + 1))
done < <(find "${SP_KINETO_DATA:-$R/tests/data}" -name '*.sptrace' -printf '%h\0' | sort -zu)

# the Perfetto checker fails on what Perfetto rejects: a flow without its end, a partial overlap
python3 - <<'EOF'
import json
base = {"schemaVersion": 1, "displayTimeUnit": "ns", "otherData": {}, "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "t"}},
    {"ph": "X", "cat": "c", "name": "a", "pid": 1, "tid": 2, "ts": 1.0, "dur": 2.0}]}
flow = json.loads(json.dumps(base))
flow["traceEvents"].append({"ph": "s", "id": 5, "pid": 1, "tid": 2, "ts": 1.5, "cat": "ac2g", "name": "ac2g"})
json.dump(flow, open("badflow.json", "w"))
over = json.loads(json.dumps(base))
over["traceEvents"].append({"ph": "X", "cat": "c", "name": "b", "pid": 1, "tid": 2, "ts": 2.0, "dur": 1.001})
json.dump(over, open("overlap.json", "w"))
steps = json.loads(json.dumps(base))
steps["traceEvents"] += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 2,
                          "ts": ts, "dur": dur} for n, ts, dur in ((1, 0.1, 0.2), (2, 0.3, 0.1))]
json.dump(steps, open("steps.json", "w"))  # 0.1 + 0.2 > 0.3 in doubles
EOF
out=$($CHECK steps.json --kineto 2>&1 || true)
grep -q "ProfilerStep at 0.1 ends at 0.30000000000000004" <<<"$out" ||
	fail "check_chrome_json --kineto accepted steps that overlap in doubles: $out"
for f in badflow.json overlap.json; do
	if $CHECK $f --perfetto >/dev/null 2>&1; then fail "check_chrome_json --perfetto accepted $f"; fi
done
[ -z "$HTA_SKIP" ] || echo "skipped: cli_kineto's HTA checks: $HTA_SKIP"
echo "cli_kineto: ok"
