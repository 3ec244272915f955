#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# share_default.sh [DIST] - on a GPU machine (from the repo root after `make dist`; DIST defaults to
# dist/stepprof; outputs under $OUT or /tmp/stepprof-share-default). About 2-3 minutes on one H200.
# 1. The program's own torch.profiler (tests/gpu/share_sched.py --mode prof: 24 steps, its schedule
#    wait 2, warmup 2, active 5) alone, then under `stepprof run` with the default configuration,
#    `learn = cupti`, an api marker (cudaDeviceSynchronize*, windows from step 4 on: one inside the
#    profiler's active steps), `kind = nvtx` (its "step" ranges) and, if `stepprof check` accepts
#    it, `kind = optimizer`. PASS per run: torch.profiler's kernel, cuda_runtime, gpu_memcpy and
#    gpu_memset counts equal the run alone's, torch says no "CUPTI initialization failed", and
#    every step of stepprof's windows holds as many kernels as a step of the profiler's export.
# 2. A launch-bound loop (--mode add: 2000 tiny add_ kernels a step), a one-step window every other
#    step (warmup 0): the default marker (240 steps) and an api marker (240 steps). PASS per run:
#    "Dropped records: 0 (...)" and no missing kernels, every window step with 2000 kernels, and the
#    program's thread at most 1 ms in stepprof at a window's end (stepprof's own STEPPROF_VERBOSE
#    line, over all windows: about 100). Also shown: the other boundaries' worst time, the GPU
#    records of no window discarded (warmup 0: the steps recorded after a window's end), and the
#    steps with a window's end against the median step.
# 3. The same loop, an api marker, windows 9 steps apart (stepprof parks between them): shown, not
#    judged: how many CUDA calls waited for a detach and the longest wait.
# Prints "PASS share_default: ..." / "FAIL ..." lines and ends with "share_default: N passed, M failed".
set -u
D=$(cd "${1:-dist/stepprof}" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/stepprof-share-default}
PY=${PYTHON:-python3}
SP=$D/bin/stepprof
rm -rf "$O" && mkdir -p "$O"
fail() { echo "FAIL share_default: $*"; }

# prof NAME [--set ...]: the profiler program, alone (NAME alone) or under stepprof
prof() {
	local name=$1
	shift
	mkdir -p "$O/$name"
	if [ "$name" = alone ]; then
		"$PY" "$HERE/share_sched.py" --mode prof --json "$O/$name/prof.json" >"$O/$name/out" 2>"$O/$name/err" ||
			fail "$name: the program exited $?: $(tail -3 "$O/$name/err")"
		return
	fi
	STEPPROF_VERBOSE=1 "$SP" run -o "$O/$name/trace" "$@" -- "$PY" "$HERE/share_sched.py" --mode prof \
		--json "$O/$name/prof.json" >"$O/$name/out" 2>"$O/$name/err" ||
		fail "$name: the program under stepprof exited $?: $(grep -v begins "$O/$name/err" | tail -3)"
	"$SP" steps "$O/$name"/trace/*.sptrace >"$O/$name/steps" 2>&1 || fail "$name: stepprof steps: $(tail -2 "$O/$name/steps")"
	"$PY" - "$O" "$name" <<'PY'
import json, re, sys
o, name = sys.argv[1], sys.argv[2]
def counts(n):
    for l in open(f"{o}/{n}/out"):
        if l.startswith("share counts "):
            return json.loads(l[len("share counts "):])
alone, got = counts("alone"), counts(name)
err = open(f"{o}/{name}/err", errors="replace").read()
keys = ["kernel", "cuda_runtime", "gpu_memcpy", "gpu_memset"]
res = []
if not alone or not got:
    res.append(f"no counts line (alone {alone}, {name} {got})")
else:
    if any(alone.get(k, 0) != got.get(k, 0) for k in keys) or not alone.get("kernel"):
        res.append("torch.profiler's events differ: " + ", ".join(f"{k} {alone.get(k, 0)} vs {got.get(k, 0)}" for k in keys))
    per = alone.get("kernels_per_step", 0)
    steps = {}
    for l in open(f"{o}/{name}/steps"):
        m = re.match(r"^(\d+)\s+(\d+)\s+\S+\s+(\d+)\s", l)
        if m:
            steps[int(m.group(1))] = int(m.group(3))
    short = {s: k for s, k in steps.items() if k != per}
    if not steps or short:
        res.append(f"stepprof's window steps {sorted(steps)}: {per:g} kernels each expected, short: {short}")
if "CUPTI initialization failed" in err or "MULTIPLE_SUBSCRIBERS" in err:
    res.append("torch reports a CUPTI failure")
line = ", ".join(f"{k} {got.get(k, 0)}" for k in keys) if got else "-"
print(("FAIL" if res else "PASS") + f" share_default: {name}: torch.profiler's events {line} (alone: " +
      (", ".join(f"{k} {alone.get(k, 0)}" for k in keys) if alone else "-") + ")" + ("; " + "; ".join(res) if res else ""))
PY
}

# add NAME STEPS JUDGE [--set ...]: the launch-bound loop under stepprof
add() {
	local name=$1 steps=$2 judge=$3
	shift 3
	mkdir -p "$O/$name"
	STEPPROF_VERBOSE=1 "$SP" run -o "$O/$name/trace" "$@" -- "$PY" "$HERE/share_sched.py" --mode add --steps "$steps" \
		>"$O/$name/out" 2>"$O/$name/err" || fail "$name: the loop under stepprof exited $?: $(grep -v begins "$O/$name/err" | tail -3)"
	"$SP" report "$O/$name"/trace/*.sptrace >"$O/$name/report" 2>&1 || fail "$name: stepprof report failed"
	"$SP" steps "$O/$name"/trace/*.sptrace >"$O/$name/steps" 2>&1
	"$PY" - "$O/$name" "$name" "$judge" <<'PY'
import re, statistics, sys
d, name, judge = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rep = open(f"{d}/report").read()
err = open(f"{d}/err", errors="replace").read()
res, info = [], []
m = re.search(r"^Dropped records: .*$", rep, re.M)
info.append(m.group(0) if m else "no Dropped line")
if not m or not m.group(0).startswith("Dropped records: 0 ") or "Missing kernels" in rep:
    res.append("records dropped or kernels missing")
steps = {}
for l in open(f"{d}/steps"):
    s = re.match(r"^(\d+)\s+(\d+)\s+\S+\s+(\d+)\s", l)
    if s:
        steps[int(s.group(1))] = int(s.group(3))
short = {s: k for s, k in steps.items() if k != 2000}
info.append(f"{len(steps)} window steps")
if not steps or short:
    res.append(f"window steps without their 2000 kernels: {dict(list(short.items())[:8])}")
w = re.search(r"at (\d+) window ends the program's thread spent in stepprof: median ([\d.]+) ms, p99 ([\d.]+) ms, at most ([\d.]+) ms.*at the (\d+) other step boundaries outside windows at most ([\d.]+) ms", err)
if w:
    info.append(f"window ends {w.group(1)}: median {w.group(2)} ms, p99 {w.group(3)} ms, worst {w.group(4)} ms; other boundaries worst {w.group(6)} ms")
    if float(w.group(4)) > 1.0:
        res.append(f"the program's thread spent up to {w.group(4)} ms in stepprof at a window's end")
else:
    res.append("no window-end line on stderr")
for pat in (r"(\d+) GPU records of no window were discarded", r"(\d+) CUDA calls of the program's waited for a detach from CUPTI, the longest ([\d.]+) ms"):
    x = re.search(pat, err)
    if x:
        info.append(x.group(0))
times = [float(l.split()[2]) for l in open(f"{d}/out") if l.startswith("STEP ")]
if len(times) > 20:
    med = statistics.median(times[10:])
    info.append(f"steps: median {med:.3f} ms, longest {max(times[10:]):.3f} ms")
verdict = ("FAIL" if res else "PASS") if judge else "INFO"
print(f"{verdict} share_default: {name}: " + "; ".join(info) + ("; " + "; ".join(res) if res and judge else ""))
PY
}

main() {
	prof alone
	prof default
	prof learn-cupti --set marker.learn=cupti
	prof api --set marker.kind=api --set 'marker.pattern=cudaDeviceSynchronize*' --set schedule.wait=3 --set schedule.repeat=0
	prof nvtx --set marker.kind=nvtx --set marker.pattern=step
	printf '[marker]\nkind = optimizer\n' >"$O/optimizer.ini"
	if "$SP" check -c "$O/optimizer.ini" >"$O/optimizer.check" 2>&1; then
		prof optimizer --set marker.kind=optimizer
	else
		echo "SKIP share_default: kind = optimizer: stepprof check does not accept it in this build ($(head -1 "$O/optimizer.check"))"
	fi

	ONE='--set schedule.wait=1 --set schedule.warmup=0 --set schedule.active=1 --set schedule.repeat=0'
	# shellcheck disable=SC2086
	add add-default 240 1 $ONE
	# shellcheck disable=SC2086
	add add-api 240 1 --set marker.kind=api --set 'marker.pattern=cudaDeviceSynchronize*' $ONE
	add add-park 180 0 --set marker.kind=api --set 'marker.pattern=cudaDeviceSynchronize*' --set schedule.wait=8 \
		--set schedule.warmup=0 --set schedule.active=1 --set schedule.repeat=0
}

main 2>&1 | tee "$O/summary"
p=$(grep -c '^PASS' "$O/summary") f=$(grep -c '^FAIL' "$O/summary")
echo "share_default: $p passed, $f failed (outputs in $O)"
[ "$f" -eq 0 ]
