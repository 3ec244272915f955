#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""suite.py - the checks behind tests/gpu/programs/run.sh; each subcommand appends result lines
"STATUS<TAB>PROGRAM<TAB>CHECK<TAB>DETAIL" (STATUS PASS, FAIL or SKIP) to a results file, and
`table` prints them.

  report SP DIR            `stepprof report --json` of DIR/trace/*.sptrace into DIR/report.json
                           (the trace with the most kernels when a run wrote several: DataLoader
                           workers and compile workers make no context, but a launcher could)
  smoke RESULTS NAME ITERS DIR
                           the program's exit status and iterations (its closing PROG line; JAX's
                           "ok iters=N"; llm.c's "step N/M" lines) against ITERS
  compare RESULTS NAME CHECK RUN TRUTH
                           the steps a run recorded (RUN/report.json) against the truth run's
                           (TRUTH/report.json: every iteration recorded with the truth marker)
  prof RESULTS NAME BASE RUN...
                           torch.profiler's counts printed by profiler_in_program.py ("kineto
                           counts {...}") in each RUN against BASE (the program without stepprof),
                           and the stepprof windows of each RUN complete
  table RESULTS            the results, PASS/FAIL per program and check, and a count line

Why compare aligns instead of matching step numbers: the default configuration ends a step when an
optimizer step returns, the truth marker begins one at the start of an iteration, and numbering
starts where each marker is first seen (the bridge's install, the first truth call). So a default
step holds the end of one iteration and the start of the next (the same kernels, when what follows
the optimizer step is the same every iteration), and its number may differ from the truth's by a
few. compare therefore records every iteration in the truth run and accepts the run's recorded
steps when their kernel counts equal those of as many consecutive truth steps, at the same numbers
(said as "same numbers") or shifted (said with the shift); where every truth step holds the same
count the shift cannot be told and is not claimed. A run's step that ended at exit is left out."""
import json
import os
import re
import subprocess
import sys

WANT_STEPS = 3          # the default schedule's active steps
MAX_SHIFT = 80          # how far apart the run's and the truth's numbering may start


def append(results, status, name, check, detail):
    with open(results, "a") as f:
        f.write(f"{status}\t{name}\t{check}\t{' '.join(str(detail).split())}\n")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tail(path, n=6, pat=None):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip("\n") for l in f]
    except OSError:
        return []
    if pat:
        lines = [l for l in lines if re.search(pat, l)]
    return lines[-n:]


def rc_of(d):
    try:
        with open(os.path.join(d, "rc")) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def wall_of(d):
    try:
        with open(os.path.join(d, "wall")) as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


# ---------------- report ----------------
def cmd_report(sp, d):
    tdir = os.path.join(d, "trace")
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(tdir) for f in fs if f.endswith(".sptrace"))
    best, notes = None, []
    for f in files:
        r = subprocess.run([sp, "report", "--json", f], capture_output=True, text=True)
        try:
            rep = json.loads(r.stdout)
        except ValueError:
            notes.append(f"{os.path.basename(f)}: unreadable ({(r.stderr or '').strip()[:120]})")
            continue
        k = sum(s.get("kernels", 0) for s in rep.get("steps", []))
        notes.append(f"{os.path.basename(f)}: {len(rep.get('steps', []))} steps, {k} kernels")
        if best is None or k > best[0]:
            best = (k, rep)
    with open(os.path.join(d, "report-files.txt"), "w") as f:
        f.write("\n".join(notes or ["no .sptrace under " + tdir]) + "\n")
    if best:
        with open(os.path.join(d, "report.json"), "w") as f:
            json.dump(best[1], f)
    return 0


# ---------------- smoke ----------------
def iterations(log):
    """(iterations, expected or None, notes) from a program's output."""
    text = "\n".join(tail(log, 100000))
    notes = [l.split(":", 1)[0] for l in text.splitlines() if l.startswith("API-FALLBACK")]
    m = None
    for m in re.finditer(r"^PROG (\S+) (ok|WRONG) iterations=(\d+) expected=(\d+)", text, re.M):
        pass
    if m:
        return int(m.group(3)), int(m.group(4)), notes
    m = re.search(r"^jax_train ok iters=(\d+)", text, re.M)
    if m:
        return int(m.group(1)), None, notes
    steps = re.findall(r"^step\s+(\d+)/(\d+)", text, re.M)  # llm.c
    if steps:
        return len({s for s, _ in steps}), int(steps[-1][1]), notes
    return None, None, notes


def cmd_smoke(results, name, iters, d):
    iters = int(iters)
    rc, wall = rc_of(d), wall_of(d)
    got, exp, notes = iterations(os.path.join(d, "log"))
    loop = re.search(r"loop_s=([\d.]+)", "\n".join(tail(os.path.join(d, "log"), 3, "^PROG ")))
    what = f"exit {rc}, {got if got is not None else '?'}/{iters} iterations, wall {wall if wall is not None else '?'} s"
    if loop:
        what += f" (loop {loop.group(1)} s)"
    if notes:
        what += "; API fallbacks: " + ", ".join(sorted(set(notes)))
    ok = rc == 0 and got == iters and (exp is None or exp == iters)
    if not ok:
        what += " | " + " / ".join(tail(os.path.join(d, "log"), 4))[-400:]
    append(results, "PASS" if ok else "FAIL", name, "smoke", what)
    return 0


# ---------------- compare ----------------
def steps_of(rep):
    return [s for s in (rep or {}).get("steps", []) if not s.get("at_exit")]


def align(nums, counts, truth):
    """(shift, how) so that truth[n + shift] == count for every (n, count), smallest |shift|
    first; None if no shift within MAX_SHIFT fits."""
    for d in sorted(range(-MAX_SHIFT, MAX_SHIFT + 1), key=lambda x: (abs(x), x)):
        if all(truth.get(n + d) == k for n, k in zip(nums, counts)):
            return d
    return None


def found_by(rep):
    fb = (rep or {}).get("steps_found_by")
    if isinstance(fb, list):
        fb = "; ".join(str(x) for x in fb[:2])
    return str(fb)[:160] if fb else "?"


def why_nothing(d):
    """The run's stepprof lines that say why it recorded nothing (or its last ones)."""
    lines = tail(os.path.join(d, "log"), 400, r"^stepprof")
    key = [l for l in lines if re.search(r"no step recorded|undecided|never|refus|warn|error|fail", l, re.I)]
    return " / ".join((key or lines)[-3:])[:500]


def compare(run_rep, truth_rep, want=WANT_STEPS):
    """(ok, detail) for a run's recorded steps against the truth run's (pure: no files)."""
    truth = {s["number"]: s["kernels"] for s in steps_of(truth_rep)}
    got = steps_of(run_rep)
    if not got:
        return False, "recorded no step" + ("; the truth run recorded none either" if not truth else "")
    if not truth:
        return False, "the truth run recorded no step"
    nums, counts = [s["number"] for s in got], [s["kernels"] for s in got]
    problems = []
    if len(got) != want:
        problems.append(f"{len(got)} steps recorded, the schedule asks {want}")
    bad_w = [w for w in (run_rep or {}).get("windows", []) if not w.get("complete", True) or w.get("missing")]
    if bad_w:
        problems.append(f"{len(bad_w)} window(s) incomplete or missing kernels")
    flagged = [s["number"] for s in got if s.get("refuted") or s.get("irregular")]
    if flagged:
        problems.append(f"steps {flagged} refuted or irregular")
    shift = align(nums, counts, truth)
    desc = f"steps {nums[0]}-{nums[-1]} kernels {counts}"
    if shift is None:
        near = [truth.get(n) for n in range(nums[0] - 2, nums[-1] + 3)]
        problems.append(f"no {len(counts)} consecutive truth steps hold these counts (truth around "
                        f"{nums[0] - 2}-{nums[-1] + 2}: {near}; truth counts seen: {sorted(set(truth.values()))[:8]})")
        how = ""
    elif len(set(truth.values())) == 1:
        how = f"= truth (every truth step holds {counts[0]})"
    elif shift == 0:
        how = "= truth at the same numbers"
    else:
        how = f"= truth steps {nums[0] + shift}-{nums[-1] + shift} (shifted {shift:+d})"
    lost = dropped(truth_rep, but=("late",))  # late: records of the step after a window (issue 34)
    if lost or any(not w.get("complete", True) or w.get("missing") for w in truth_rep.get("windows", [])):
        problems.append(f"the truth run lost records ({lost} dropped) or left a window incomplete: its counts may be short")
    return not problems, f"{desc} {how}" + ("; " + "; ".join(problems) if problems else "")


def dropped(rep, but=()):
    """The records a report says were dropped, all sources together but those named."""
    d = (rep or {}).get("dropped") or {}
    if not isinstance(d, dict):
        return int(d or 0)
    return sum(v for k, v in d.items() if isinstance(v, int) and k not in but)


def cmd_compare(results, name, check, run_dir, truth_dir):
    rc, trc = rc_of(run_dir), rc_of(truth_dir)
    run_rep, truth_rep = load(os.path.join(run_dir, "report.json")), load(os.path.join(truth_dir, "report.json"))
    ok, detail = compare(run_rep, truth_rep)
    if rc != 0:
        ok, detail = False, f"the run exited {rc}; " + detail
    if trc != 0:
        ok, detail = False, f"the truth run exited {trc}; " + detail
    if not steps_of(run_rep):
        detail += " | " + why_nothing(run_dir)
    detail += f" | found by: {found_by(run_rep)} | wall {wall_of(run_dir)} s"
    append(results, "PASS" if ok else "FAIL", name, check, detail)
    return 0


# ---------------- prof ----------------
PROF_KEYS = ("kernel", "cuda_runtime", "gpu_memcpy", "gpu_memset")


def kineto_counts(log):
    for l in reversed(tail(log, 100000)):
        if l.startswith("kineto counts "):
            try:
                return json.loads(l[len("kineto counts "):])
            except ValueError:
                return None
    return None


def prof_check(base, got, rep):
    """(ok, detail): torch.profiler's counts under stepprof against the program alone, and the
    stepprof trace's windows complete (pure: no files)."""
    if not base or not got:
        return False, f"no 'kineto counts' line (alone: {base is not None}, under stepprof: {got is not None})"
    same = all(base.get(k, 0) == got.get(k, 0) for k in PROF_KEYS) and base.get("kernel", 0) > 0
    detail = ", ".join(f"{k} {base.get(k, 0)} vs {got.get(k, 0)}" for k in PROF_KEYS + ("cuda_driver",))
    problems = [] if same else ["torch.profiler's counts differ from the program alone"]
    if rep:
        wins = rep.get("windows", [])
        bad = [w.get("id") for w in wins if not w.get("complete", True) or w.get("missing")]
        detail += f"; stepprof: {len(steps_of(rep))} steps in {len(wins)} window(s), dropped {dropped(rep)}"
        if bad:
            problems.append(f"stepprof windows {bad} incomplete")
    else:
        detail += "; stepprof recorded no trace"
    return not problems, detail + ("; " + "; ".join(problems) if problems else "")


def cmd_prof(results, name, base_dir, *runs):
    base = kineto_counts(os.path.join(base_dir, "log"))
    if rc_of(base_dir) != 0:
        append(results, "FAIL", name, "alone", f"the program alone exited {rc_of(base_dir)}: "
               + " / ".join(tail(os.path.join(base_dir, "log"), 3)))
    for d in runs:
        check = os.path.basename(d.rstrip("/"))
        ok, detail = prof_check(base, kineto_counts(os.path.join(d, "log")), load(os.path.join(d, "report.json")))
        if rc_of(d) != 0:
            ok, detail = False, f"exited {rc_of(d)}; " + detail
        said = sum(1 for l in tail(os.path.join(d, "log"), 100000) if "uses CUPTI itself" in l)
        failed = any(re.search(r"CUPTI initialization failed|MULTIPLE_SUBSCRIBERS", l)
                     for l in tail(os.path.join(d, "log"), 100000))
        detail += f"; stepprof said it serves the program's CUPTI {said}x; torch's CUPTI failure " \
                  f"{'REPORTED' if failed else 'absent'}"
        append(results, "PASS" if ok and not failed else "FAIL", name, check, detail)
    return 0


# ---------------- table ----------------
def cmd_table(results):
    try:
        with open(results) as f:
            rows = [l.rstrip("\n").split("\t", 3) for l in f if l.strip()]
    except OSError:
        rows = []
    n = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    w = max([len(r[1]) for r in rows if len(r) == 4] + [8])
    c = max([len(r[2]) for r in rows if len(r) == 4] + [5])
    for r in rows:
        if len(r) != 4:
            continue
        n[r[0]] = n.get(r[0], 0) + 1
        print(f"{r[0]:<4} {r[1]:<{w}} {r[2]:<{c}} {r[3][:600]}")
    print(f"{n['PASS']} passed, {n['FAIL']} failed, {n['SKIP']} skipped")
    return 1 if n["FAIL"] else 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    fn = {"report": cmd_report, "smoke": cmd_smoke, "compare": cmd_compare, "prof": cmd_prof,
          "table": cmd_table}.get(cmd)
    if fn is None:
        print(__doc__)
        return 2
    return fn(*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
