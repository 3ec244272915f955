#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu_programs.sh - the unseen-program suite (tests/gpu/programs) without a GPU: every program and
# the torch graph probe parse under each Python there is; suite.py's checks on synthetic reports
# (a run's steps equal to the truth's at the same numbers, shifted by an evaluation, or not; too few
# steps; an incomplete window; a step that ended at exit left out; torch.profiler's counts equal or
# not), the smoke parser on each kind of closing line, bench.py's in-process classing of steps by
# the window stepprof announced; then run.sh itself: DRY=1 in every mode, smoke with a stand-in
# Python (one program right, one that fails), and steps with the stand-in under the real stepprof
# (no CUDA: it records nothing, which must be said and FAIL).
set -euo pipefail
R=${SP_ROOT:?}
B=${SP_BUILD:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
P=$R/tests/gpu/programs
export PYTHONDONTWRITEBYTECODE=1

for py in /usr/bin/python3 /root/.pyenv/versions/*/bin/python3; do
	[ -x "$py" ] || continue
	"$py" -c 'import ast, sys; [ast.parse(open(f).read(), f) for f in sys.argv[1:]]' "$P"/*.py \
		"$R/tests/gpu/tools/torch_graph_probe.py" || fail "a program does not parse under $py"
done

/usr/bin/python3 - "$P" <<'PY' || fail "suite.py / bench.py checks (above)"
import sys
sys.path.insert(0, sys.argv[1])
import bench
import suite

def rep(counts, first=11, at_exit=None, complete=True):
    steps = [{"number": first + i, "kernels": k, "at_exit": False} for i, k in enumerate(counts)]
    if at_exit is not None:
        steps.append({"number": first + len(counts), "kernels": at_exit, "at_exit": True})
    return {"steps": steps, "windows": [{"id": 0, "complete": complete, "missing": 0}]}

flat = rep([846] * 58, first=1)
ok, d = suite.compare(rep([846] * 3), flat)
assert ok and "every truth step holds 846" in d, d
evals = rep([100] * 19 + [150] + [100] * 38, first=1)          # truth step 20 holds an evaluation
ok, d = suite.compare(rep([150, 100, 100], first=21), evals)
assert ok and "shifted -1" in d, d
ok, d = suite.compare(rep([100, 150, 100], first=19), evals)
assert ok and "same numbers" in d, d
ok, d = suite.compare(rep([0, 0, 0]), evals)
assert not ok and "no 3 consecutive truth steps" in d, d
ok, d = suite.compare(rep([100, 100]), evals)
assert not ok and "2 steps recorded" in d, d
ok, d = suite.compare(rep([100] * 3, at_exit=999), evals)
assert ok, d
ok, d = suite.compare(rep([100] * 3, complete=False), evals)
assert not ok and "incomplete" in d, d
ok, d = suite.compare(rep([]), evals)
assert not ok and "recorded no step" in d, d
lossy = dict(evals, dropped={"cupti": 0, "ring_full": 7, "late": 0})
ok, d = suite.compare(rep([100] * 3), lossy)
assert not ok and "truth run lost records (7 dropped)" in d, d
ok, d = suite.compare(rep([100] * 3), dict(evals, dropped={"ring_full": 0, "late": 40}))
assert ok, d
ok, d = suite.compare(rep([100] * 3), rep([]))
assert not ok and "truth run recorded no step" in d, d

base = {"kernel": 120, "cuda_runtime": 300, "gpu_memcpy": 10, "gpu_memset": 0}
ok, d = suite.prof_check(base, dict(base), rep([40] * 3))
assert ok, d
ok, d = suite.prof_check(base, dict(base, kernel=0), None)
assert not ok and "differ" in d, d
ok, d = suite.prof_check(base, None, None)
assert not ok, d
ok, d = suite.prof_check(base, dict(base), rep([40] * 3, complete=False))
assert not ok and "incomplete" in d, d

import os, tempfile
def its(text):
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(text)
    try:
        return suite.iterations(f.name)[:2]
    finally:
        os.unlink(f.name)
assert its("STEP 0 1.0\nPROG gan ok iterations=60 expected=60 loop_s=1.00\n") == (60, 60)
assert its("PROG gan WRONG iterations=59 expected=60 loop_s=1.00\n") == (59, 60)
assert its("iter 0 loss 1\njax_train ok iters=300\n") == (300, None)
assert its("step    1/3 | x\nstep    2/3 | x\nstep    3/3 | x\n") == (3, 3)
assert its("Traceback\n") == (None, None)

# bench: 10 ms steps, 15 ms inside the window (stepprof steps 10-13), 11 ms after it
lines, steps, t = [], [], 0.0
for i in range(40):
    act = {10: "WARMUP", 11: "RECORD", 12: "RECORD", 13: "RECORD_AND_SAVE"}.get(i, "NONE")
    lines.append((t + 1e-4, f"stepprof: step {i} begins ({act}) on thread 1"))
    ms = 15.0 if 10 <= i <= 13 else (11.0 if i > 13 else 10.0)
    t += ms / 1e3
    lines.append((t, f"STEP {i} {ms:.3f}"))
    steps.append((i, ms, t))
r, before, after, why = bench.inproc(lines, steps)
assert r is not None and abs(r - 1.1) < 1e-9 and set(before) == {10.0} and set(after) == {11.0}, (r, before, after, why)
# step 14 starts where the announcement of stepprof step 14 arrives: not after the window
assert len(before) == 10 - bench.STARTUP and len(after) == 40 - 15 - bench.SETTLE, (len(before), len(after))
quiet = [(a, b) for a, b in lines if not b.startswith("stepprof") or "(NONE)" not in b or int(b.split()[2]) < 14]
r2, _, after2, _ = bench.inproc(quiet, steps)     # nothing announced after the window: its end is estimated
assert r2 is not None and set(after2) == {11.0}, (r2, after2)
r3, _, _, why3 = bench.inproc([l for l in lines if "stepprof" not in l[1]], steps)
assert r3 is None and "no window" in why3, why3
print("suite/bench checks: ok")
PY

# run.sh in every mode without running anything
for m in smoke steps prof bench; do
	only=""; [ $m = steps ] && only='^(hf_trainer|jax_train)$'
	DRY=1 ONLY=$only OUT=$T/out WORK=$T/work bash "$P/run.sh" "$B" $m >"$T/dry-$m.txt" 2>&1 || fail "DRY run.sh $m: $(tail -3 "$T/dry-$m.txt")"
	grep -q '^0 passed, 0 failed, [1-9][0-9]* skipped' "$T/dry-$m.txt" || fail "DRY $m: no table ($(tail -2 "$T/dry-$m.txt"))"
	[ -s "$T/out/$m-table.txt" ] || fail "DRY $m wrote no $m-table.txt"
done
grep -q 'DRY \[hf_trainer/truth\] .*--set marker.kind=api --set marker.pattern=cuGetErrorName .*schedule.active=58' \
	"$T/dry-steps.txt" || fail "DRY steps: the truth run records steps 1-58 of hf_trainer"
grep -q 'DRY \[bench hf_trainer r2 default\]' "$T/dry-bench.txt" || fail "DRY bench: three rounds"

# a stand-in Python: gan marks its 60 iterations, wgan dies
cat >"$T/py" <<'SH'
#!/bin/sh
case "$1" in
*gan.py) case "$1" in *wgan.py) echo "Traceback: no torch here"; exit 1 ;; esac
	i=0; while [ $i -lt 60 ]; do echo "STEP $i 1.000"; i=$((i + 1)); done
	echo "PROG gan ok iterations=60 expected=60 loop_s=0.10" ;;
*) echo "unexpected $*"; exit 2 ;;
esac
SH
chmod +x "$T/py"
rc=0
PROG_PY=$T/py ONLY='^w?gan$' OUT=$T/out WORK=$T/work bash "$P/run.sh" "$B" smoke >"$T/smoke.txt" 2>&1 || rc=$?
[ $rc = 1 ] || fail "smoke with a failing program exits 1, not $rc: $(tail -4 "$T/smoke.txt")"
grep -qE '^PASS gan +smoke +exit 0, 60/60 iterations' "$T/smoke.txt" || fail "smoke: gan passes ($(grep gan "$T/smoke.txt"))"
grep -qE '^FAIL wgan +smoke +exit 1, \?/40 iterations.*no torch here' "$T/smoke.txt" || fail "smoke: wgan fails, saying why"
grep -q '^1 passed, 1 failed, 0 skipped' "$T/smoke.txt" || fail "smoke: the count line"
tar tzf "$T/out/smoke-logs.tgz" >"$T/tgz.txt" && grep -q 'gan/log' "$T/tgz.txt" || fail "smoke: logs in smoke-logs.tgz"

# steps under the real stepprof: the stand-in makes no CUDA context, so nothing is recorded
rc=0
PROG_PY=$T/py ONLY='^gan$' OUT=$T/out WORK=$T/work T=60 bash "$P/run.sh" "$B" steps >"$T/steps.txt" 2>&1 || rc=$?
[ $rc = 1 ] || fail "steps with nothing recorded exits 1, not $rc: $(tail -4 "$T/steps.txt")"
grep -qE '^FAIL gan +default +recorded no step; the truth run recorded none either' "$T/steps.txt" || fail "steps: gan's default FAILs ($(grep gan "$T/steps.txt"))"
grep -qE '^(SKIP gan +optimizer +this build refuses|FAIL gan +optimizer )' "$T/steps.txt" || fail "steps: the optimizer line"
# bench.py end to end on a stand-in trainer (no CUDA: the default run announces no window)
cat >"$T/hf" <<'SH'
#!/bin/sh
i=0; while [ $i -lt 30 ]; do echo "STEP $i 2.000"; i=$((i + 1)); done
echo "hf_trainer metrics train_runtime=1.5 train_samples_per_second=10"
SH
chmod +x "$T/hf"
/usr/bin/python3 "$P/bench.py" --sp "$B/stepprof" --work "$T/bw" --results "$T/bres" --rounds 2 --limit 600 \
	--hf-cmd "$T/hf" >"$T/bench.txt" 2>&1 || fail "bench.py: $(tail -3 "$T/bench.txt")"
grep -q '^| hf_trainer | train_runtime_s | 2 | 1.5 \[1.5-1.5\] | 1.5 \[1.5-1.5\] | 1.5 \[1.5-1.5\] | 1 \[1-1\] | 1 \[1-1\] | n/a (no window announced' \
	"$T/bench.txt" || fail "bench.py's table: $(grep hf_trainer "$T/bench.txt")"
grep -qE '^PASS	hf_trainer	bench	train_runtime_s: base 1.5' "$T/bres" || fail "bench.py's result line: $(cat "$T/bres")"
echo "gpu_programs: ok"
