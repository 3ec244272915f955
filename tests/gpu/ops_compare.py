#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ops_compare.py - the checks of tests/gpu/ops_check.sh, one PASS/FAIL line each (details after it,
indented). Commands:
  ops NAME REPORT.json TORCH.json   stepprof's `report --by op --json` against ops_torchprof.py's
      key_averages of the same steps: the top 10 by self CUDA time are the same ops (an op at the
      tenth place's boundary may trade places with one within 10% of the tenth's time), and each
      of them has the same call count in both.
  modules NAME REPORT.json          the modules' self forward and backward times and the work
      outside modules add up to the windows' GPU time, and that to the steps' kernel and copy
      time, within 5% each; at least half of it falls in modules (else the attribution is empty).
  cost NAME ON.json OFF.json ON.log OFF.log   [activities] ops = true against false: the median
      (and min, quartiles, max) of the window's step times, stepprof's own step durations; and
      outside the window the program's own "STEP i ms" lines after it. Shown, PASS when both runs
      recorded the same window steps.
Exit status 0 when every check passed."""
import json
import re
import statistics
import sys


def say(ok, name, what, details=()):
    print(f"{'PASS' if ok else 'FAIL'} ops_check {name}: {what}")
    for d in details:
        print(f"    {d}")
    return ok


def load(path):
    with open(path) as f:
        return json.load(f)


def top(rows, key, n=10):
    return sorted(rows, key=lambda r: -r[key])[:n]


def cmp_ops(name, rep_path, torch_path):
    rep, tp = load(rep_path), load(torch_path)
    by_sp = {}
    for r in rep["ops"]["rows"]:  # one row per name (without --shapes there is one already)
        x = by_sp.setdefault(r["name"], {"name": r["name"], "calls": 0, "self_ns": 0})
        x["calls"] += r["calls"]
        x["self_ns"] += r["self_ns"]
    by_t = {r["name"]: r for r in tp["ops"]}
    if not by_sp or not by_t:
        return say(False, name, "op tables", [f"stepprof rows {len(by_sp)}, torch.profiler rows {len(by_t)}"])
    st = top(list(by_sp.values()), "self_ns")
    tt = top(list(by_t.values()), "self_device_us")
    tenth_sp, tenth_t = st[-1]["self_ns"], tt[-1]["self_device_us"]
    bad, lines = [], []
    lines.append(f"steps: stepprof {[(w['first_step'], w['last_step']) for w in rep['windows']]}, "
                 f"torch.profiler {tp['first']}-{tp['last']} ({tp.get('device_rows', 0)} device-side rows of "
                 f"key_averages left out)")
    lines.append(f"{'op':58} {'stepprof self':>14} {'calls':>7} | {'torch self':>12} {'calls':>7}")
    for r in tt:
        s = by_sp.get(r["name"])
        lines.append(f"{r['name'][:58]:58} {(s['self_ns'] / 1e3 if s else 0):12.1f}us {(s['calls'] if s else 0):7d} | "
                     f"{r['self_device_us']:10.1f}us {r['count']:7d}")
    names_sp, names_t = {r["name"] for r in st}, {r["name"] for r in tt}
    for n in names_t - names_sp:  # in torch's top 10, not in stepprof's: near stepprof's tenth?
        s = by_sp.get(n)
        if not s or s["self_ns"] < 0.9 * tenth_sp:
            bad.append(f"{n}: in torch.profiler's top 10, stepprof's self time {s['self_ns'] if s else 'none'} ns")
    for n in names_sp - names_t:
        t = by_t.get(n)
        if not t or t["self_device_us"] < 0.9 * tenth_t:
            bad.append(f"{n}: in stepprof's top 10, torch.profiler's self time {t['self_device_us'] if t else 'none'} us")
    for r in tt:
        s = by_sp.get(r["name"])
        if s and s["calls"] != r["count"]:
            bad.append(f"{r['name']}: calls stepprof {s['calls']} vs torch.profiler {r['count']}")
    return say(not bad, name, "report --by op's top 10 by self CUDA time and their calls equal torch.profiler's "
               "key_averages of the same steps", bad + lines)


def cmp_modules(name, rep_path):
    rep = load(rep_path)
    mods, ops = rep["modules"], rep["ops"]
    in_mod = sum(r["forward_ns"] + r["backward_ns"] for r in mods["rows"])
    gpu = mods["gpu_ns"]
    steps = sum(s["kernel_ns"] + s["copy_ns"] for s in rep["steps"])
    roots = sorted({r["path"].split(".")[0] for r in mods["rows"]})
    d = [f"modules {in_mod / 1e6:.3f} ms + outside {mods['outside_ns'] / 1e6:.3f} ms; windows' GPU time "
         f"{gpu / 1e6:.3f} ms; steps' kernel+copy time {steps / 1e6:.3f} ms; {len(mods['rows'])} modules, roots {roots}"]
    ok = gpu > 0 and steps > 0
    ok = ok and abs(in_mod + mods["outside_ns"] - gpu) <= 0.05 * gpu and abs(gpu - steps) <= 0.05 * steps
    ok = ok and in_mod >= 0.5 * gpu and ops["gpu_ns"] == gpu
    return say(ok, name, "module times (self forward + backward) and the work outside modules sum to the "
               "step's kernel time within 5%, modules hold at least half", d)


def quart(v):
    v = sorted(v)
    if not v:
        return "none"
    q = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0]] * 3
    return (f"median {statistics.median(v):.3f} ms (min {v[0]:.3f}, q1 {q[0]:.3f}, q3 {q[2]:.3f}, "
            f"max {v[-1]:.3f}, n {len(v)})")


def step_lines(path, after):
    out = []
    for line in open(path, errors="replace"):
        m = re.match(r"STEP (\d+) ([0-9.]+)$", line.strip())
        if m and int(m.group(1)) > after:
            out.append(float(m.group(2)))
    return out[:-1]  # the last includes the program's end


def cost(name, on_path, off_path, on_log, off_log):
    on, off = load(on_path), load(off_path)
    won = {s["number"]: s["duration_ns"] / 1e6 for s in on["steps"]}
    woff = {s["number"]: s["duration_ns"] / 1e6 for s in off["steps"]}
    same = sorted(won) == sorted(woff) and len(won) > 0
    d = [f"window steps {min(won) if won else '-'}-{max(won) if won else '-'}; ops = true: {quart(list(won.values()))}",
         f"ops = false: {quart(list(woff.values()))}"]
    if same:
        r = statistics.median(won.values()) / statistics.median(woff.values())
        d.append(f"window step time, ops on / off: {r:.3f}x (medians)")
    last = max(won) if won else 0
    a, b = step_lines(on_log, last + 2), step_lines(off_log, last + 2)
    d.append(f"after the window (the program's STEP lines, iterations > {last + 2}): ops = true {quart(a)}; "
             f"ops = false {quart(b)}")
    if a and b:
        d.append(f"outside, on / off: {statistics.median(a) / statistics.median(b):.3f}x (medians; one run each)")
    return say(same, name, "cost of ops and modules inside the window (shown; PASS: both runs recorded the same "
               "window)", d)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        ok = {"ops": cmp_ops, "modules": cmp_modules, "cost": cost}[cmd](*args)
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError, statistics.StatisticsError) as e:
        ok = say(False, args[0] if args else cmd, f"{cmd}: could not compare ({type(e).__name__}: {e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
