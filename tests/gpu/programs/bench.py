#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench.py - end-to-end cost of stepprof's default configuration on real training programs
(issue 37 item 4), run by tests/gpu/programs/run.sh MODE=bench on the GPU machine.

Programs: hf_trainer.py (transformers.Trainer, 200 optimizer steps; figure: its own train_runtime)
and karpathy/llm.c's train_gpt2cu when built (GPT-2 124M from its descriptor, -b 4 -t 128, 200
steps; figure: the median of its printed ms per step from step 5). Configurations, each its own
process: base and base2 (no stepprof: base2/base is the A/A noise of two unprofiled runs) and
default (`stepprof run`, no INI; STEPPROF_VERBOSE=1 so the process says when its window begins and
ends). Each round runs the three in a rotated order; a program's rounds all run before the next
program's. Reported per program: each configuration's median over rounds with its range, the
median over rounds of default/base and of base2/base (each round's ratio), and the in-process
ratio of every default run: the median host time of its steps after the window (from SETTLE steps
after the window's end) over the median of its steps before the window began (from step STARTUP),
both in the same process, so the machine's drift between processes does not enter it. Steps are
the programs' own (HF: one optimizer step, mark to mark; llm.c: its printed ms), and every printed
line is stamped as it arrives, stepprof's "step N begins (ACTION)" lines included.
Writes WORK/bench.md (the table, printed last), WORK/bench.json (every step of every run) and
WORK/runs/*.log; appends PASS/FAIL lines to RESULTS for run.sh's table (FAIL: a run that failed
or gave no figure; the cost itself is reported, never judged).

usage: bench.py --sp STEPPROF --work DIR --results FILE [--rounds 3] [--limit SECONDS]
                [--llmc BIN --llmc-data DIR [--llmc-ready FILE]] [--hf-steps 200] [--llmc-steps 200]
                [--hf-cmd CMD] [--only REGEX] [--dry]"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
STARTUP, SETTLE = 5, 4
SP_BEGINS = re.compile(r"^stepprof: (?:phase [^:]+: )?step (-?\d+) begins \((\w+)\)")
SP_AFTER = re.compile(r"^stepprof: (detached from CUPTI|.*the schedule is done)")
CONFIGS = ["base", "default", "base2"]


def programs(a):
    hf = shlex.split(a.hf_cmd) if a.hf_cmd else [sys.executable, os.path.join(HERE, "hf_trainer.py")]
    out = {"hf_trainer": dict(
        cmd=hf + ["--steps", str(a.hf_steps)],
        step=re.compile(r"^STEP (\d+) ([\d.]+)$"), figure="train_runtime_s",
        get=lambda text, steps: first_float(r"^hf_trainer metrics train_runtime=([\d.]+)", text))}
    if a.llmc:
        d = a.llmc_data
        out["llmc"] = dict(
            cmd=["stdbuf", "-oL", a.llmc, "-i", f"{d}/train.bin", "-j", f"{d}/val.bin", "-e", "d12", "-b", "4",
                 "-t", "128", "-x", str(a.llmc_steps), "-v", "1000000", "-s", "0", "-h", "0"],
            step=re.compile(r"^step\s+(\d+)/\d+ \|.*\| ([\d.]+) ms \|"), figure="median_ms_per_step",
            get=lambda text, steps: statistics.median([ms for i, ms, _ in steps if i >= 5]) if len(steps) > 5 else None)
    if a.only:
        out = {k: v for k, v in out.items() if re.search(a.only, k)}
    return out


def wait_for(ready, until):
    """True once the file ready (NAME.ready) exists; False once NAME.failed (the build's other
    outcome) exists or the monotonic time until passes."""
    failed = re.sub(r"\.ready$", "", ready) + ".failed"
    while time.monotonic() < until:
        if os.path.exists(ready):
            return True
        if os.path.exists(failed):
            return False
        time.sleep(1)
    return False


def first_float(pat, text):
    m = re.search(pat, text, re.M)
    return float(m.group(1)) if m else None


def run_process(cmd, env, log_path, timeout):
    """Runs cmd with stdout and stderr on one pipe; returns (rc, [(t, line)]) with each line's
    arrival time (time.monotonic, s)."""
    lines = []
    try:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                             errors="replace", cwd=ROOT)
    except OSError as e:
        with open(log_path, "w") as f:
            f.write(f"bench: cannot run {cmd[0]}: {e}\n")
        return 127, [(time.monotonic(), f"bench: cannot run {cmd[0]}: {e}")]
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        for line in p.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))
        rc = p.wait()
    finally:
        timer.cancel()
    with open(log_path, "w") as f:
        f.writelines(f"{t:.6f} {l}\n" for t, l in lines)
    return rc, lines


def program_steps(lines, step_re):
    """[(index, ms, arrival time)] of the program's step lines."""
    out = []
    for t, l in lines:
        m = step_re.search(l)
        if m:
            out.append((int(m.group(1)), float(m.group(2)), t))
    return out


def inproc(lines, steps):
    """The in-process ratio of one profiled run: (ratio, before, after, why) where before and after
    are the step times classed by the window the process announced (pure: no files)."""
    begins = [(t, int(m.group(1)), m.group(2)) for t, l in lines for m in [SP_BEGINS.match(l)] if m]
    rec = [t for t, _, act in begins if act != "NONE"]
    if not rec:
        return None, [], [], "no window announced (no 'step N begins (WARMUP)' or (RECORD...) line)"
    start = rec[0]
    saves = [t for t, _, act in begins if act == "RECORD_AND_SAVE"]
    last = saves[-1] if saves else rec[-1]
    ends = [t for t, _, _ in begins if t > last] + [t for t, l in lines if t > last and SP_AFTER.match(l)]
    med = statistics.median([ms for _, ms, _ in steps]) if steps else 0.0
    end = min(ends) if ends else last + 3 * med / 1e3
    before = [ms for i, ms, t in steps if i >= STARTUP and t < start]
    later = [(i, ms) for i, ms, t in steps if t - ms / 1e3 > end]
    after = [ms for _, ms in later[SETTLE:]]
    if len(before) < 3 or len(after) < 3:
        return None, before, after, f"too few steps to compare ({len(before)} before, {len(after)} after the window)"
    return statistics.median(after) / statistics.median(before), before, after, ""


def spread(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    return f"{statistics.median(xs):.4g} [{min(xs):.4g}-{max(xs):.4g}]" if len(xs) > 1 else f"{xs[0]:.4g}"


def env_for(cfg):
    e = {k: v for k, v in os.environ.items() if not k.startswith("STEPPROF_") and k not in
         ("LD_PRELOAD", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")}
    e["PYTHONUNBUFFERED"] = "1"
    if cfg == "default":
        e["STEPPROF_VERBOSE"] = "1"
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sp", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=float, default=540)
    ap.add_argument("--llmc")
    ap.add_argument("--llmc-data")
    ap.add_argument("--llmc-ready", help="a file the llm.c build makes when done (FILE.failed: failed)")
    ap.add_argument("--hf-steps", type=int, default=200)
    ap.add_argument("--llmc-steps", type=int, default=200)
    ap.add_argument("--hf-cmd", help="what runs hf_trainer.py (default: this Python and the file beside it)")
    ap.add_argument("--only")
    ap.add_argument("--dry", action="store_true")
    a = ap.parse_args()
    t_end = time.monotonic() + a.limit
    os.makedirs(os.path.join(a.work, "runs"), exist_ok=True)
    progs = programs(a)
    if not a.llmc and (not a.only or re.search(a.only, "llmc")):
        print("bench: llm.c not built (.thirdparty/llm.c): left out", flush=True)
    runs = []
    for name, p in progs.items():
        took = []
        if name == "llmc" and a.llmc_ready and not a.dry and not wait_for(a.llmc_ready, t_end - 120):
            print("bench: llm.c's build failed or did not finish in time: left out", flush=True)
            continue
        for r in range(a.rounds):
            order = CONFIGS[r % 3:] + CONFIGS[:r % 3]
            need = 3 * (statistics.median(took) if took else 60)
            if time.monotonic() + need > t_end:
                print(f"bench: {name}: round {r + 1} not run (the time left is under {need:.0f} s)", flush=True)
                break
            for cfg in order:
                cmd = p["cmd"] if cfg != "default" else [a.sp, "run", "-o", os.path.join(a.work, "traces", f"{name}-r{r}")] + ["--"] + p["cmd"]
                log = os.path.join(a.work, "runs", f"{name}-r{r}-{cfg}.log")
                if a.dry:
                    print("DRY [bench " + f"{name} r{r} {cfg}] " + " ".join(cmd), flush=True)
                    continue
                t0 = time.monotonic()
                rc, lines = run_process(cmd, env_for(cfg), log, max(10.0, min(300.0, t_end - time.monotonic())))
                wall = time.monotonic() - t0
                took.append(wall)
                text = "\n".join(l for _, l in lines)
                steps = program_steps(lines, p["step"])
                fig = p["get"](text, steps) if rc == 0 else None
                ratio, before, after, why = inproc(lines, steps) if cfg == "default" else (None, [], [], "")
                runs.append(dict(program=name, round=r, config=cfg, rc=rc, wall_s=round(wall, 2), figure=fig,
                                 inproc=ratio, inproc_why=why, before_n=len(before), after_n=len(after),
                                 steps=[(i, ms) for i, ms, _ in steps]))
                print(f"bench {name} round {r + 1} {cfg}: exit {rc}, {wall:.1f} s, {p['figure']} {fig}"
                      + (f", in-process {ratio:.4f} ({len(before)} steps before, {len(after)} after)" if ratio
                         else (f", in-process n/a: {why}" if cfg == "default" else "")), flush=True)
    with open(os.path.join(a.work, "bench.json"), "w") as f:
        json.dump(runs, f)
    table(progs, runs, a)
    return 0


def table(progs, runs, a):
    rows = ["| program | figure | rounds | base | base2 | default | default/base | A/A base2/base | in-process after/before |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, p in progs.items():
        mine = [r for r in runs if r["program"] == name]
        if a.dry:
            with open(a.results, "a") as f:
                f.write(f"SKIP\t{name}\tbench\tDRY\n")
            continue
        by = {c: [r["figure"] for r in mine if r["config"] == c] for c in CONFIGS}
        rounds = sorted({r["round"] for r in mine})

        def ratio(c):
            out = []
            for k in rounds:
                x = [r["figure"] for r in mine if r["round"] == k and r["config"] == c]
                b = [r["figure"] for r in mine if r["round"] == k and r["config"] == "base"]
                if x and b and x[0] and b[0]:
                    out.append(x[0] / b[0])
            return out
        ip = [r["inproc"] for r in mine if r["config"] == "default"]
        whys = sorted({r["inproc_why"] for r in mine if r["config"] == "default" and r["inproc_why"]})
        rows.append(f"| {name} | {p['figure']} | {len(rounds)} | {spread(by['base'])} | {spread(by['base2'])} | "
                    f"{spread(by['default'])} | {spread(ratio('default'))} | {spread(ratio('base2'))} | "
                    f"{spread(ip)}{' (' + '; '.join(whys) + ')' if whys else ''} |")
        bad = [f"{r['config']} r{r['round']} exit {r['rc']}" for r in mine if r["rc"] != 0 or r["figure"] is None]
        detail = (f"{p['figure']}: base {spread(by['base'])}, default {spread(by['default'])}, default/base "
                  f"{spread(ratio('default'))}, A/A {spread(ratio('base2'))}, in-process {spread(ip)}, {len(rounds)} rounds")
        status = "FAIL" if bad or not mine else "PASS"
        if bad:
            detail += "; failed runs: " + ", ".join(bad)
        with open(a.results, "a") as f:
            f.write(f"{status}\t{name}\tbench\t{detail}\n")
    md = "\n".join(rows) + "\n"
    with open(os.path.join(a.work, "bench.md"), "w") as f:
        f.write(md)
    print(md, end="")


if __name__ == "__main__":
    sys.exit(main())
