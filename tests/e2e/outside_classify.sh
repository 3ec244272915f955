#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# outside_classify.sh - bench/outside.py's mapping of a program's printed steps to stepprof's
# schedule phases, without a GPU: synthetic output where the marker ends each program step (so
# program step i runs in stepprof step i-1), windows 15 ms a step and everything else 10 ms. The
# phases must come out exact (learning, before, inside, between, after), an announced action that
# is not the schedule's must be reported, and the kernel check must name a short window.
set -euo pipefail
R=${SP_ROOT:?}
fail() { echo "FAIL: $*" >&2; exit 1; }

/usr/bin/python3 - "$R/bench" "$R/tests/gpu" <<'PY' || fail "outside.py classify"
import collections
import re
import sys
sys.path[:0] = sys.argv[1:3]
import outside
import traceutil as tu

def synth(sched, n, lock_at=None, lie_at=None):
    """Lines of a run: n program steps; stepprof announces step i-1 just before program step i ends
    (from lock_at on, for auto); inside windows a step takes 15 ms."""
    kw = dict(zip(("skip_first", "wait", "warmup", "active", "repeat"), sched))
    lines, t = [], 0.0
    for i in range(n):
        act = tu.schedule_action(i, **kw) if i >= 0 else "NONE"
        ms = 15.0 if i >= 1 and tu.schedule_action(i - 1, **kw) != "NONE" and (lock_at is None or i > lock_at) else 10.0
        t += ms / 1e3
        if lock_at is not None and i == lock_at:
            lines.append((t - 1e-4, "stepprof: automatic steps: regime 1, period 2001 calls (2000 launches), boundary after 'cudaDeviceSynchronize' (every 1), at step %d" % i))
        if lock_at is None or i >= lock_at:
            a = "RECORD" if lie_at == i else act
            lines.append((t - 1e-4, f"stepprof: step {i} begins ({a}) on thread 7"))
        lines.append((t, f"STEP {i} {ms:.4f}"))
    return lines

step_re = re.compile(outside.BUILTIN_STEP)
def phases(lines, sched, marker="api"):
    steps, problems = outside.classify(lines, step_re, sched, marker)
    c = collections.Counter(p for _, _, p, _, _ in steps)
    med = {p: sorted(ms for _, ms, q, _, _ in steps if q == p)[len([1 for s in steps if s[2] == p]) // 2] for p in c}
    return c, med, problems

# one window then nothing: program steps 101-121 are stepprof steps 100-120 (WARMUP..RECORD_AND_SAVE)
c, med, pr = phases(synth(outside.ONCE, 200), outside.ONCE)
assert not pr, pr
assert c == {"before": 98, "inside": 21, "after": 78}, c
assert med == {"before": 10.0, "inside": 15.0, "after": 10.0}, med

# repeating cycles: windows at steps 20-40, 61-81, 102-122; the NONE steps after each are "between"
c, med, pr = phases(synth(outside.CYCLE, 130), outside.CYCLE)
assert not pr, pr
assert c == {"before": 18, "inside": 21 * 3, "between": 20 * 2 + 6} and "after" not in c, c
assert med["between"] == 10.0 and med["inside"] == 15.0, med

# auto: nothing announced before the lock, which comes as program step 30 ends (steps 3-29 learn;
# step 30 ended after it); the first window is then recorded from step 30 on only
c, med, pr = phases(synth(outside.CYCLE, 130, lock_at=30), outside.CYCLE, "auto")
assert c == {"learning": 27, "before": 1, "inside": 11 + 21 * 2, "between": 46}, c

# learning from the hooks is said before any lock: it is no lock (the learn workload's check)
ls = synth(outside.CYCLE, 130, lock_at=30)
ls.insert(0, (0.0, "stepprof: automatic steps: learning from stepprof's hooks, not subscribed to CUPTI until it locks ([marker] learn = hooks)"))
c, _, _ = phases(ls, outside.CYCLE, "auto")
assert c["learning"] == 27, c
assert not outside.SP_LOCK.match(ls[0][1])
assert outside.SP_LOCK.match("stepprof: automatic steps: locked on 'k' while learning from stepprof's hooks: attaching to CUPTI")

# settled: between-window steps that no detach (its step and the next 3) or re-attach (its step and
# the next) touched; the transitions' slow steps do not count there
ls = synth(outside.CYCLE, 130) + [
    (0.0, "stepprof: detached from CUPTI in step 42 until the next window in 3.60 ms (cuptiUnsubscribe + cuptiFinalize 2.9 ms): stepprof's hooks count the marker calls meanwhile"),
    (0.0, "stepprof: re-attached to CUPTI in step 58 for the next window in 9.10 ms (parked since step 42, 90.0 ms; cycle 1)")]
assert outside.transition_steps(ls) == {42: 4, 58: 2}, outside.transition_steps(ls)
edge = {42, 43, 44, 45, 58, 59}
steps, _ = outside.classify(ls, step_re, outside.CYCLE, "api")
slow = [(i, 99.0 if n in edge else ms, p, n, a) for i, ms, p, n, a in steps]
btw = [x for x in slow if x[2] in ("between", "after")]
st = outside.settled(slow, ls)
assert st["median"] == 10.0 and st["max"] == 10.0 and st["n"] == len([x for x in btw if x[3] not in edge]) < len(btw), st
# after the schedule is done stepprof numbers no more steps: the final detach's transition is
# counted in program steps (the 4 from its step on), the rest of the run is settled
ls = [(0.0, "stepprof: step 10 begins (NONE)"), (0.0, "stepprof: detached from CUPTI in step 10 (the schedule is done)")]
st = outside.settled([(i, 99.0 if i < 14 else 10.0, "after", 10, "NONE") for i in range(10, 40)], ls)
assert st["n"] == 26 and st["max"] == 10.0, st

# a step whose announced action is not the schedule's is a problem
_, _, pr = phases(synth(outside.CYCLE, 130, lie_at=5), outside.CYCLE)
assert len(pr) == 1 and "1 steps announced an action other than the schedule's" in pr[0], pr
# ... unless the detector said its regime counts late towards the schedule (docs/STEPS.md, Regimes)
ls = synth(outside.CYCLE, 130, lock_at=30, lie_at=40)
ls.insert(0, (0.0, "stepprof: automatic steps: regime 1 (2000 launches a step) launches no backward or optimizer kernel: its steps count towards the schedule only after 32 of them in a row"))
_, _, pr = phases(ls, outside.CYCLE, "auto")
assert pr == [], pr

# kernels: every recorded step like the first window's (add: 2000), or named; a later window whose
# steps show the GPU idle while the first window's did not is named too
assert outside.check_kernels({20: (0, 2000, 40.0), 61: (1, 2000, 38.5)}, "add") == []
p = outside.check_kernels({20: (0, 2000, 40.0), 61: (1, 1800, 38.0)}, "add")
assert len(p) == 1 and "1 of 2 recorded steps do not hold 2000 kernels" in p[0] and "61: 1800" in p[0], p
assert outside.check_kernels({20: (0, 2200, 9.0), 61: (1, 2000, 9.0)}, "graph") != []
p = outside.check_kernels({20: (0, 50, 90.0), 21: (0, 50, 91.0), 61: (1, 50, 0.0)}, "mlp")
assert len(p) == 1 and "show the GPU idle" in p[0] and "[61]" in p[0], p
assert outside.check_kernels({20: (0, 0, 0.0), 61: (1, 0, 0.0)}, "fake") == []
assert outside.check_kernels({}, "mlp") == ["the trace holds no recorded step"]
# the hold on CUPTI: a configuration that should re-attach between windows and ran steps there
# without one is named, as is a marker call possibly missed; never: no re-attach due
btw = [(50, 10.0, "between", 45, "NONE")]
att = ["stepprof: detached from and re-attached to CUPTI in step 42 (detach_between = auto, cycle 1): 9.00 ms in all"]
assert outside.check_life([], "api", "add", btw) == ["no detach between windows (the stepprof lines under the run say why)"]
assert outside.check_life(att, "api", "add", btw) == []
assert outside.check_life([], "api", "add", [(50, 10.0, "inside", 45, "RECORD")]) == []
assert outside.check_life([], "api-never", "add", btw) == []
# a CUDA graph program detaches like any other (graph_detach); one that stays says why
assert outside.check_life([], "api", "graph", btw) == ["no detach between windows (the stepprof lines under the run say why)"]
assert outside.check_life(["stepprof: not detaching from CUPTI in step 12: the program created a CUDA graph, and ..."],
                          "api", "graph", btw) == []
assert outside.check_life(["stepprof: detached from CUPTI in step 121 (the schedule is done) in 2 ms"], "once", "graph", btw) == []
assert outside.check_life(["stepprof: detached from CUPTI in step 121 (the schedule is done) in 2 ms"], "once", "add", btw) == []
p = outside.check_life(att + ["stepprof: the detach outlasted ...: a step boundary may have been missed while detached"], "auto", "add", btw)
assert p == ["a marker call may have been missed while detached"], p
# boundaries: a built-in workload with 200 printed steps must begin stepprof steps 0-199
wl = {"name": "add", "marker": "cudaDeviceSynchronize", "step_re": re.compile(outside.BUILTIN_STEP)}
ls = [(0, f"STEP {i} 10.0") for i in range(200)]
assert outside.check_boundaries(ls + [(0, f"stepprof: step {i} begins (NONE)") for i in range(200)], wl, "api", False) == []
p = outside.check_boundaries(ls + [(0, f"stepprof: step {i} begins (NONE)") for i in range(197)], wl, "api", False)
assert p == ["200 program steps but stepprof's last step is 196, not 199: 3 step boundaries lost"], p
assert outside.check_boundaries(ls, wl, "auto", False) == []
# the program's last synchronisation at exit begins one step more; once the schedule is done
# (`once`) stepprof numbers no more steps
assert outside.check_boundaries(ls + [(0, f"stepprof: step {i} begins (NONE)") for i in range(201)], wl, "api", False) == []
assert outside.check_boundaries(ls + [(0, f"stepprof: step {i} begins (NONE)") for i in range(122)], wl, "api", True) == []
# a park and its re-attach count as a detach between windows
park = ["stepprof: detached from CUPTI in step 41 until the next window in 3.65 ms (cuptiUnsubscribe + cuptiFinalize 2.97 ms): stepprof's hooks count the marker calls meanwhile",
        "stepprof: re-attached to CUPTI in step 57 for the next window in 16.2 ms (parked since step 41, 200.0 ms; cycle 1)"]
assert all(outside.SP_LIFE.match(l) for l in park)
assert outside.check_life(park, "api", "add", btw) == []
# staying attached between windows is fine when stepprof says why (auto without hooks, graphs...)
assert outside.check_life(["stepprof: not detaching from CUPTI between windows in step 41: not every marker call comes through stepprof's hooks"], "api", "llmc", btw) == []
# the step the process exited in, as `stepprof steps` names it (AT_EXIT), over the last "begins" line
import os, tempfile
with tempfile.TemporaryDirectory() as d:
    assert outside.exit_step(d, 7) == 7
    with open(os.path.join(d, "steps.txt"), "w") as f:
        f.write("  198 1 ... 497\n  199 1 ... 1026\n\nStep 199 ended when the process exited, not at a step boundary\n")
    assert outside.exit_step(d, 150) == 199
# twin pairing: a machine that slows down by half midway slows the twin alike; a phase 10% slower
# than its twin must read 1.10 whatever the drift, and the twin's steps outside the phase's spans
# (before it) must not count
steps, spans, tw, t = [], {}, [], 0.0
for i in range(100):
    drift = 1.0 if i < 50 else 1.5
    ms = 10.0 * drift * (1.1 if i >= 20 else 1.0)
    steps.append((i, ms, "before" if i < 20 else "between", None, None))
    spans[i] = (t, t + ms / 1e3, ms)
    t += ms / 1e3
t = 0.0
for i in range(160):
    drift = 1.0 if t < spans[50][0] else 1.5
    tw.append((t, t + 10.0 * drift / 1e3, 10.0 * drift))
    t += 10.0 * drift / 1e3
r = outside.twin_ratios(steps, spans, tw)
assert abs(r["before"]["ratio"] - 1.0) < 0.01 and abs(r["between"]["ratio"] - 1.1) < 0.03, r
# settled keeps only the steps no transition touched: slow transition steps (3x) left out of it
steps2 = [(i, ms * (3.0 if i in (20, 21, 22, 23, 24) else 1.0), p, a, b) for i, ms, p, a, b in steps]
r2 = outside.twin_ratios(steps2, spans, tw, keep=set(range(25, 100)))
assert abs(r2["settled"]["ratio"] - 1.1) < 0.03 and r2["settled"]["n"] == 75, r2
assert outside.twin_cmd(["python3", "outside.py", "worker", "add", "--steps", "200"], True)[-1] == "300"
assert outside.twin_cmd(["prog", "-x", "200"], False) == ["prog", "-x", "200"]
# instructions per step: the count read as each step line arrived, minus the previous step line's
# (other lines between them change nothing; a line read without a counter gives no step)
import re as _re
sre = _re.compile(outside.BUILTIN_STEP)
lines = [(0, "STEP 0 1.0"), (0, "stepprof: step 1 begins (NONE)"), (0, "STEP 1 1.0"), (0, "STEP 2 1.0"), (0, "STEP 3 1.0")]
assert outside.step_instructions(lines, [100, 150, 400, 1000, None], sre) == {1: 300, 2: 600}, "step instructions"
# the instructions table: a phase's median over the same round's unprofiled median
recs = [{"workload": "w", "config": "plain", "round": 0, "problems": [], "phases": {"all": {"median": 10.0}},
         "instr": {"all": {"median": 2.0e6}}, "instr_scope": "user"},
        {"workload": "w", "config": "api", "round": 0, "problems": [], "phases": {"between": {"median": 10.0}},
         "instr": {"between": {"median": 2.02e6}}, "instr_scope": "user"}]
ns = type("A", (), {"workloads": ["w"], "configs": ["api"], "cpus": None, "twin": None})
tab, _ = outside.summarise(ns, recs)
assert "| w | api | - | - | - | 2.020 (1.0100x) | - | - | 2.000 |" in tab and "scope: user" in tab, tab
print("ok   outside.py: phases before/inside/between/after/learning exact, a wrong action and a short window named; missing re-attaches and lost boundaries named; twin pairing cancels drift")
PY

# end to end with the real library and the stand-in libcupti (tests/e2e/cupti_life.sh): a program
# printing its steps, an unprofiled run, the api (detach + re-attach between windows) and once
# (detached after the window) configurations; the table must hold every phase they have
B=${SP_BUILD:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
FAKE_CUPTI_LOG=/dev/null PRINT_STEPS=1 timeout 120 /usr/bin/python3 "$R/bench/outside.py" run --build "$B" \
	--out "$T" --rounds 1 --workloads fake --configs api,once --cpus 0 \
	--program "fake=env VIA_CUDART=$B/tests/e2e/libfakecudart.so $B/tests/e2e/cupti_life_driver 160 5000" \
	--env STEPPROF_CUPTI_LIBRARY="$B/tests/e2e/libfakecupti.so" >"$T/log" 2>&1 ||
	{ tail -20 "$T/log"; fail "outside.py run with the stand-in CUPTI exited non-zero"; }
grep -Eq '^\| fake \| api \| - \| [0-9.]+ \([0-9.]+x\) \| [0-9.]+ .* \| [0-9.]+ \([0-9.]+x\) \| - \| [0-9.]+ \([0-9.]+x\) \| [0-9.]+ \|' "$T/outside.md" ||
	{ cat "$T/outside.md"; fail "the api row lacks before, inside, between or settled"; }
grep -Eq '^\| fake \| once \| - \| [0-9.]+ .* \| [0-9.]+ .* \| - \| [0-9.]+ \([0-9.]+x\) \| [0-9.]+ \([0-9.]+x\) \|' "$T/outside.md" ||
	{ cat "$T/outside.md"; fail "the once row lacks after or settled"; }
grep -q '^Every process pinned to CPUs \[0\]\.' "$T/outside.md" || fail "--cpus 0 is not said under the table"
grep -q 're-attached to CUPTI' "$T/runs/fake-api-r0/output.log" || fail "no re-attach between windows in the api run"
grep -q 'detached from CUPTI in step' "$T/runs/fake-once-r0/output.log" || fail "no final detach in the once run"
# each run's hold on CUPTI comes back in the output (indented under its summary line), and the step
# the program exited in (159, inside the last window) is left out of the kernel check
grep -Eq '^    stepprof: detached from CUPTI in step [0-9]+ until the next window .*cuptiFinalize [0-9.]+ ms' "$T/log" ||
	{ tail -30 "$T/log"; fail "the re-attach lines are not in outside.py's output"; }
grep -q '^outside: fake api round 0: .*step 159 ended at exit (not checked)' "$T/log" ||
	{ grep '^outside: fake api' "$T/log"; fail "the step cut at exit is not named"; }
echo "ok   outside.py end to end (stand-in CUPTI): phases per configuration, re-attach and final detach seen"

# --twin: an unprofiled twin beside the api run, on the other CPU (and "GPU 1", which the stand-in
# ignores); the twin table has its row
rm -rf "$T/tw"
FAKE_CUPTI_LOG=/dev/null PRINT_STEPS=1 timeout 120 /usr/bin/python3 "$R/bench/outside.py" run --build "$B" \
	--out "$T/tw" --rounds 1 --workloads fake --configs api --cpus 0,1 --twin 1 \
	--program "fake=env VIA_CUDART=$B/tests/e2e/libfakecudart.so $B/tests/e2e/cupti_life_driver 160 5000" \
	--env STEPPROF_CUPTI_LIBRARY="$B/tests/e2e/libfakecupti.so" >"$T/twlog" 2>&1 ||
	{ tail -20 "$T/twlog"; fail "outside.py run --twin exited non-zero"; }
[ -s "$T/tw/runs/fake-api-r0/twin.log" ] || fail "no twin ran beside the api run"
grep -Eq '^\| fake \| api \| - \| [0-9.]+ \([0-9.]+x\) \| [0-9.]+ \([0-9.]+x\) \| [0-9.]+ \([0-9.]+x\) \|' "$T/tw/outside.md" ||
	{ cat "$T/tw/outside.md"; fail "the twin table lacks before, inside or between for the api run"; }
grep -Eq '^\| fake \| plain \| - \| [0-9.]+ \([0-9.]+x\) \|' "$T/tw/outside.md" ||
	{ cat "$T/tw/outside.md"; fail "the twin table lacks the unprofiled run beside its twin (the method's own error)"; }
echo "ok   outside.py --twin: an unprofiled twin ran beside the api run, each phase paired with it in time"
