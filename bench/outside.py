#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""outside.py - what stepprof costs before, between and after its windows, paired inside one
process (run by bench/outside.sh on the GPU machine).

Every program prints one line per step with that step's time; stepprof runs with STEPPROF_VERBOSE=1,
so its "step N begins (ACTION)" lines arrive on the same pipe. The harness stamps each line as it
arrives and gives every program step the stepprof step that holds the middle of it, so each step
gets the action the process itself applied (cross-checked against torch's schedule in
tests/gpu/traceutil.py). Phases of one process:
  learning  auto marker: steps before the detector locked (no step numbers yet)
  before    steps before the first window (after the lock)
  inside    WARMUP, RECORD and RECORD_AND_SAVE steps
  between   NONE steps after a window with another window to come in the schedule
  after     NONE steps once the schedule can record nothing more
Each phase: median step, with the 10th-90th percentile spread, over the steps of the run (the first
STARTUP steps left out); compared with an unprofiled run of the same program in the same round
(and, for the launch-bound loop, the CUPTI floor: bench/cupti_floor.c recording kernels all along).
Every stepprof run's trace is checked too: each recorded step must hold as many kernels as the first
one (a window after a detach and re-attach must miss none, CUDA graph kernels included).

Configurations (stepprof's schedule; the api marker pattern is the workload's):
  api         api marker, wait 20 / warmup 1 / active 20 / repeat 0, [cupti] detach_between = auto
              (detach and re-attach between windows; never once the program made a CUDA graph)
  api-never   the same with detach_between = never (the default: stay subscribed between windows)
  api-always  the same with detach_between = always (detach and re-attach, but for CUDA graphs)
  auto        auto marker, same cycles
  once        api marker, wait 100 / warmup 1 / active 20 / repeat 1, then nothing
Built-in workloads (python3 outside.py worker NAME): add (2000 tiny add_ kernels and one
cudaDeviceSynchronize per step), mlp (tests/gpu/mlp_train.py's step), graph (add, plus a CUDA graph
of 200 mul_ kernels replayed every step), learn (add with 2000 + (8 i mod 21) - 10 kernels at step i:
no two consecutive steps alike and a cycle of 21 steps, longer than the automatic marker's longest
period, so it learns all run long and its "learning" phase is the whole run; a lock is a problem). Other programs: --program NAME=COMMAND with
--step-regex NAME=REGEX (groups: step number, milliseconds) and --marker NAME=PATTERN.

Twin runs (--twin GPU, on a host with two GPUs): every stepprof run has an unprofiled run of the
same program beside it, started at the same moment on the other half of --cpus (the halves swap
every round) and on GPU number GPU (CUDA_VISIBLE_DEVICES; the profiled run keeps the default
device). Each phase is then also compared with the twin's steps that ran at the same time (their
middles inside the phase's steps' spans): the host's drift over minutes, which moves whole
processes by 10-20% on a shared machine, moves both alike. The twin of a built-in workload runs
1.5 times the steps, so that it outlasts the profiled run; another program's twin runs the same
command, and a phase it does not cover has no twin ratio. Not on the profiled run's own GPU: there
the two contexts' time-slicing slowed one run or the other by up to 2x (H200, session 10).
--twin-cpus same puts the twin on the same CPUs as the profiled run (e.g. --cpus 5: one CPU that
the two processes share in time). On the GPU machine one CPU runs the same launch loop at two
speeds 1.38x apart, switching every few seconds (session 11, bench/noise_probe.py: the loop's CPU
time moves with its wall time); two processes on one CPU see the same speed at every moment, and
the scheduler gives each half of it, so their step times compare the work each step does.

usage: outside.py run --build DIR --out DIR [--rounds 2] [--workloads add,mlp,...] [--configs ...]
                      [--steps N] [--floor-lib SO] [--program NAME=CMD ...] [--twin GPU]
                      [--twin-cpus split|same] [--instructions]
       outside.py worker add|mlp|graph|learn --steps N"""
import argparse
import bisect
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
sys.path.insert(0, os.path.join(HERE, "..", "tests", "gpu"))
sys.path.insert(0, HERE)
import bench  # noqa: E402 (bench.py: the same clean environment)

CYCLE = (0, 20, 1, 20, 0)      # skip_first, wait, warmup, active, repeat
ONCE = (0, 100, 1, 20, 1)
CONFIGS = {
    "api": ("api", CYCLE, "auto"),
    "api-never": ("api", CYCLE, "never"),
    "api-always": ("api", CYCLE, "always"),
    "auto": ("auto", CYCLE, "auto"),
    "auto-hooks": ("auto", CYCLE, "auto"),   # [marker] learn = hooks (LEARN_FROM)
    "once": ("api", ONCE, None),
}
LEARN_FROM = {"auto-hooks": "hooks"}     # configurations whose automatic marker learns from the hooks
DEFAULT_CONFIGS = ["api", "api-never", "auto", "once"]
PHASES = ["learning", "before", "inside", "between", "after"]
# steps after stepprof let go of CUPTI (a detach: its own step and SETTLE - 1 after it) or took it
# again (a re-attach: its step and the next): their cost is the transition's, not the parked state's
SP_DETACH_STEP = re.compile(r"^stepprof: detached from CUPTI in step (-?\d+)")
SP_REATTACH_STEP = re.compile(r"^stepprof: re-attached to CUPTI in step (-?\d+)")
SETTLE = 4
STARTUP = 3                     # first program steps left out (CUDA and allocator warm-up)
SP_STEP = re.compile(r"^stepprof: step (-?\d+) begins \((\w+)\)")
# a lock or what it decided about a regime (not "learning from stepprof's hooks", said before any lock)
SP_LOCK = re.compile(r"^stepprof: automatic steps(?: \(re-lock\))?: (?:regime |locked on )")
SP_DETACH = re.compile(r"^stepprof: detached from (and re-attached to )?CUPTI")
# stepprof's lines about its hold on CUPTI and its marker, printed under each run's summary
SP_LIFE = re.compile(r"^stepprof: (detached from|re-attached to|detach between|not detaching|the first marker call after|"
                     r"the schedule is done|a marker call came without|the program made a CUDA graph|"
                     r"automatic steps|the program creates CUDA graphs|cannot re-attach|a CUPTI call|"
                     r"a CUPTI callback|.*may have been missed)")
LIFE_LINES = 24                 # at most this many of them per run
BUILTIN_STEP = r"^STEP (\d+) ([\d.]+)$"
BUILTIN = ["add", "mlp", "graph", "learn"]
# `stepprof steps` rows: step, window, duration, kernels, kernel/NCCL/copy time, GPU busy %
STEPS_ROW = re.compile(r"^(\d+)\s+(\d+)\s+\S+\s+(\d+)\s+\S+\s+\S+\s+\S+\s+([\d.]+)%")
ADD_KERNELS, GRAPH_KERNELS = 2000, 200


# ---------------- worker: one program that prints its steps ----------------
def worker(a):
    import torch
    x = torch.zeros(1024, device="cuda")
    graph = None
    if a.workload == "mlp":
        import mlp_train
        step = mlp_train.make_step()
    else:
        count = iter(range(1 << 62))

        def step():
            # learn: 1990-2010 kernels, 8 i mod 21 - 10 at step i: consecutive steps never match and
            # the counts repeat only every 21 steps (~42000 tokens, beyond the detector's longest
            # period), so no stretch of the stream is periodic; the same in every run
            n = ADD_KERNELS + ((8 * next(count)) % 21 - 10 if a.workload == "learn" else 0)
            for _ in range(n):
                x.add_(1.0)
            if graph:
                graph.replay()
    if a.workload == "graph":
        y = torch.ones(1024, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            y.mul_(1.0)  # warm-up outside the capture, as torch asks
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(GRAPH_KERNELS):
                y.mul_(1.0)
    t0 = time.perf_counter()
    for i in range(a.steps):
        step()
        torch.cuda.synchronize()
        t = time.perf_counter()
        print(f"STEP {i} {(t - t0) * 1e3:.4f}", flush=True)
        t0 = t
    return 0


# ---------------- one run ----------------
def write_ini(path, out_dir, kind, pattern, sched, detach, learn=None):
    sk, wa, wu, ac, rp = sched
    with open(path, "w") as f:
        f.write(f"[profile]\nenabled = true\noutput = {out_dir}\n"
                f"[schedule]\nskip_first = {sk}\nwait = {wa}\nwarmup = {wu}\nactive = {ac}\nrepeat = {rp}\n"
                f"[marker]\nkind = {kind}\n" + (f"pattern = {pattern}\n" if kind != "auto" else "") +
                (f"learn = {learn}\n" if learn else ""))
        if detach:
            f.write(f"[cupti]\ndetach_between = {detach}\n")


class Instructions:
    """A hardware counter of the instructions every thread of a process retires (perf_event_open,
    inherit: threads created after it opens are counted too), opened on a child just after it
    starts, read as each of its lines arrives. Instructions do not move with the host's speed:
    on the GPU machine the same launch loop ran at two speeds 1.38x apart, switching every few
    seconds within one process on any CPU (session 11, bench/noise_probe.py), while the work done
    stays the same. User and kernel instructions where allowed, else user only (self.scope).
    self.fd is None where there is no such counter (a VM without a PMU, no permission)."""
    ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0

    def __init__(self, pid):
        import ctypes
        self.fd, self.scope, self.why = None, None, None
        libc = ctypes.CDLL(None, use_errno=True)
        for scope, exclude_kernel in (("user+kernel", 0), ("user", 1)):
            attr = bytearray(self.ATTR_SIZE)
            # type PERF_TYPE_HARDWARE (0), size, config PERF_COUNT_HW_INSTRUCTIONS (1); flags: inherit
            # (bit 1), exclude_kernel (bit 5), exclude_hv (bit 6)
            attr[0:4] = (0).to_bytes(4, "little")
            attr[4:8] = self.ATTR_SIZE.to_bytes(4, "little")
            attr[8:16] = (1).to_bytes(8, "little")
            attr[40:48] = ((1 << 1) | (exclude_kernel << 5) | (1 << 6)).to_bytes(8, "little")
            buf = (ctypes.c_char * self.ATTR_SIZE).from_buffer(attr)
            fd = libc.syscall(298 if os.uname().machine == "x86_64" else 241, buf, pid, -1, -1, 8)  # FD_CLOEXEC
            if fd >= 0:
                self.fd, self.scope = fd, scope
                return
            self.why = os.strerror(ctypes.get_errno())

    def read(self):
        try:
            return int.from_bytes(os.read(self.fd, 8), "little") if self.fd is not None else None
        except OSError:
            return None

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def run_process(cmd, env, log_path, timeout, cpus=None, count=False):
    """Runs cmd with stdout and stderr on one pipe, pinned to the set cpus if given; returns (rc,
    [(t, line)], ins) with the arrival time of every line (time.monotonic, s) and, with count, the
    process's instructions retired by then (Instructions): ins is (the counter's scope, [count or
    None for each line]), or None without count."""
    lines, ins = [], []
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         bufsize=1, errors="replace", preexec_fn=pin)
    counter = Instructions(p.pid) if count else None
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        for line in p.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))
            if counter:
                ins.append(counter.read())
        rc = p.wait()
    finally:
        timer.cancel()
        if counter:
            counter.close()
    with open(log_path, "w") as f:
        f.writelines(f"{t:.6f} {l}\n" for t, l in lines)
    if counter and counter.fd is None and counter.why:
        lines.append((time.monotonic(), f"outside: no instruction counter ({counter.why})"))
    return rc, lines, ((counter.scope, ins) if counter else None)


def step_instructions(lines, ins, step_re):
    """{program step: instructions the process retired from the previous step line to its own}."""
    out, prev = {}, None
    for (_, line), n in zip(lines, ins or []):
        m = step_re.search(line)
        if not m:
            continue
        if n is not None and prev is not None:
            out[int(m.group(1))] = n - prev
        prev = n
    return out


def step_spans(lines, step_re):
    """[(start, end, ms)] of the program's steps (line arrival time as the end, s)."""
    out = []
    for t, line in lines:
        m = step_re.search(line)
        if m:
            ms = float(m.group(2))
            out.append((t - ms / 1e3, t, ms))
    return out


def twin_ratios(steps, spans, twin_spans, keep=None):
    """{phase: {"n", "twin_n", "ratio"}}: each phase's median over the median of the twin's steps
    whose middles lie inside that phase's steps' spans (steps as classify gives them; spans of the
    profiled run by program step index); "settled" is the between- and after-window steps in keep
    (settled_steps: no detach or re-attach touched them), every one of them if keep is None."""
    by_idx = spans
    mids = sorted(((a + b) / 2, ms) for a, b, ms in twin_spans)
    keys = [m for m, _ in mids]
    out = {}
    phases = sorted({p for _, _, p, _, _ in steps})
    for ph in phases + ["settled"]:
        own = [(i, ms) for i, ms, p, _, _ in steps
               if (p == ph if ph != "settled" else p in ("between", "after") and (keep is None or i in keep))]
        if not own:
            continue
        twin = []
        for i, _ in own:
            if i not in by_idx:
                continue
            a, b, _ = by_idx[i]
            lo, hi = bisect.bisect_left(keys, a), bisect.bisect_right(keys, b)
            twin += [ms for _, ms in mids[lo:hi]]
        if len(twin) >= 3:
            out[ph] = {"n": len(own), "twin_n": len(twin),
                       "ratio": statistics.median(ms for _, ms in own) / statistics.median(twin)}
    return out


def twin_cmd(cmd, builtin):
    """The twin's command: a built-in worker with 1.5 times the steps, another program as is."""
    if not builtin or "--steps" not in cmd:
        return cmd
    c = list(cmd)
    k = c.index("--steps") + 1
    c[k] = str(int(c[k]) * 3 // 2)
    return c


def percentile(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def phase_stats(xs):
    if not xs:
        return None
    return {"n": len(xs), "median": statistics.median(xs), "p10": percentile(xs, 0.1),
            "p90": percentile(xs, 0.9), "max": max(xs)}


def transition_steps(lines):
    """{stepprof step: how many steps from it on a detach (SETTLE) or re-attach (2) touched}."""
    out = {}
    for _, l in lines:
        m = SP_DETACH_STEP.match(l)
        if m:
            out[int(m.group(1))] = SETTLE
        m = SP_REATTACH_STEP.match(l)
        if m:
            out[int(m.group(1))] = 2
    return out


def settled(steps, lines):
    """Phase stats of the between- and after-window steps that no detach or re-attach touched:
    what being parked or detached costs in itself (the transitions' cost is the rest). Counted in
    program steps from the first one in the transition's stepprof step (after the schedule is done
    stepprof numbers no more steps)."""
    keep = settled_steps(steps, lines)
    return phase_stats([ms for idx, ms, p, _, _ in steps if p in ("between", "after") and idx in keep])


def settled_steps(steps, lines):
    """The program steps that no detach or re-attach touched (settled's rule), as a set."""
    first = {}
    for idx, _, _, n, _ in steps:
        first.setdefault(n, idx)
    edge = {i for n, k in transition_steps(lines).items() if n in first for i in range(first[n], first[n] + k)}
    return {idx for idx, _, _, _, _ in steps if idx not in edge}


def classify(lines, step_re, sched, marker):
    """Program steps of one run with their phase: [(index, ms, phase, step, action)], problems."""
    import traceutil as tu
    kw = dict(zip(("skip_first", "wait", "warmup", "active", "repeat"), sched))
    prog, begins, problems, locked_at, shifted = [], [], [], None, False
    for t, line in lines:
        m = step_re.search(line)
        if m:
            prog.append((t, int(m.group(1)), float(m.group(2))))
            continue
        m = SP_STEP.match(line)
        if m:
            begins.append((t, int(m.group(1)), m.group(2)))
        elif SP_LOCK.match(line):
            locked_at = t
            # a regime's steps that count late, or not at all, towards the schedule, or a schedule
            # started from a late lock (docs/STEPS.md, "Regimes", "The late start"): the process's own
            # actions are right, the program's numbering is not theirs
            shifted = shifted or "count towards the schedule only after" in line or "not recorded" in line
        elif "the schedule starts from here" in line:
            shifted = True
    starts = [b[0] for b in begins]
    bad = {(n, act) for _, n, act in begins if n >= 0 and tu.schedule_action(n, **kw) != act}
    if bad and not shifted:
        problems.append(f"{len(bad)} steps announced an action other than the schedule's, e.g. {sorted(bad)[:3]}")
    windows = [n for _, n, act in begins if act != "NONE"]
    first_window = min(windows) if windows else None
    out = []
    for k, (t, idx, ms) in enumerate(prog):
        if k < STARTUP:
            continue
        mid = t - ms / 2e3
        j = bisect.bisect_right(starts, mid) - 1
        if j < 0:
            phase = "learning" if marker == "auto" and (locked_at is None or t <= locked_at) else "before"
            out.append((idx, ms, phase, None, None))
            continue
        _, n, act = begins[j]
        if act != "NONE":
            phase = "inside"
        elif first_window is None or n < first_window:
            phase = "before"
        else:
            later = any(tu.schedule_action(s, **kw) != "NONE" for s in range(n + 1, n + 2 + sum(sched[1:4])))
            phase = "between" if later else "after"
        out.append((idx, ms, phase, n, act))
    return out, problems


def kernels_per_step(build, trace_dir, run_dir):
    """{step: (window, kernels, GPU busy %)} of the stepprof trace under trace_dir (from `stepprof
    steps`, which counts each kernel in the step whose CPU call launched it and times the GPU's
    busy share within the step's span), or a problem string."""
    files = [os.path.join(d, f) for d, _, fs in os.walk(trace_dir) for f in fs if f.endswith(".sptrace")]
    if len(files) != 1:
        return f"expected one trace under {trace_dir}, found {len(files)}"
    r = subprocess.run([os.path.join(build, "stepprof"), "steps", files[0]], capture_output=True, text=True)
    with open(os.path.join(run_dir, "steps.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        return f"stepprof steps failed: {(r.stdout + r.stderr).strip()[-300:]}"
    rows = (STEPS_ROW.match(l) for l in r.stdout.splitlines())
    return {int(m.group(1)): (int(m.group(2)), int(m.group(3)), float(m.group(4))) for m in rows if m}


def exit_step(run_dir, default):
    """The step the process exited in as the trace says (its AT_EXIT flag, named under `stepprof
    steps`' table in run_dir/steps.txt), else default: the last "step N begins" line need not be
    it (the automatic marker's parked steps print none)."""
    try:
        with open(os.path.join(run_dir, "steps.txt")) as f:
            m = re.search(r"^Step (\d+) ended when the process exited", f.read(), re.M)
    except OSError:
        m = None
    return int(m.group(1)) if m else default


def check_kernels(per_step, workload):
    """Problems with the recorded steps: each must hold as many kernels as a step of the first
    window, and, if the first window's steps kept the GPU busy, show the GPU busy too (a window
    whose kernels are stamped in another clock, after a re-attach, would show it idle)."""
    if isinstance(per_step, str):
        return [per_step]
    if not per_step:
        return ["the trace holds no recorded step"]
    want = {"add": ADD_KERNELS, "graph": ADD_KERNELS + GRAPH_KERNELS}.get(workload)
    want = want or statistics.mode(k for _, k, _ in per_step.values())
    problems = []
    off = {n: k for n, (_, k, _) in sorted(per_step.items()) if k != want}
    if off:
        problems.append(f"{len(off)} of {len(per_step)} recorded steps do not hold {want} kernels: "
                        f"{dict(list(off.items())[:6])}")
    first = min(w for w, _, _ in per_step.values())
    if statistics.median(b for w, _, b in per_step.values() if w == first) > 1.0:
        idle = sorted(n for n, (w, _, b) in per_step.items() if w != first and b == 0.0)
        if idle:
            problems.append(f"{len(idle)} recorded steps after the first window show the GPU idle "
                            f"(kernel times outside their steps?): {idle[:6]}")
    return problems


def check_boundaries(lines, wl, marker, once):
    """The built-in workloads call the api marker (cudaDeviceSynchronize) once at the end of each
    program step, so a process that printed N steps must have begun stepprof steps 0 .. N-1; fewer
    means step boundaries were lost (a marker call unseen, e.g. while detached from CUPTI). Once
    the schedule is done (`once`) stepprof stops numbering steps; one more boundary than printed
    steps is the program's last synchronisation at exit, after its last printed step."""
    if marker != "api" or wl["name"] not in BUILTIN or wl["marker"] != "cudaDeviceSynchronize" or once:
        return []
    printed = sum(1 for _, l in lines if wl["step_re"].search(l))
    begun = [int(m.group(1)) for m in (SP_STEP.match(l) for _, l in lines) if m]
    if printed and begun and max(begun) < printed - 1:
        return [f"{printed} program steps but stepprof's last step is {max(begun)}, not {printed - 1}: "
                f"{printed - 1 - max(begun)} step boundaries lost"]
    return []


def check_life(life, config, workload, steps):
    """Problems with stepprof's hold on CUPTI between windows: a configuration that may detach and
    re-attach there (detach_between auto or always, no CUDA graph) and ran steps between windows
    must show a re-attach or say why it stayed; a marker call possibly missed while detached is one
    too. A program with CUDA graphs detaches too since graph_detach (docs/CONFIG.md): its replays
    after a detach must work, which the run's exit status shows."""
    detach = CONFIGS[config][2]
    want = detach in ("always", "auto")
    problems = []
    said = any("re-attached to CUPTI" in l or l.startswith("stepprof: not detaching") for l in life)
    if want and any(p == "between" for _, _, p, _, _ in steps) and not said:
        problems.append("no detach between windows (the stepprof lines under the run say why)")
    if any("may have been missed" in l for l in life):
        problems.append("a marker call may have been missed while detached")
    return problems


def run_one(a, wl, config, rnd):
    run_dir = os.path.join(a.out, "runs", f"{wl['name']}-{config}-r{rnd}")
    os.makedirs(run_dir, exist_ok=True)
    env = bench.clean_env()  # no inherited stepprof settings, preloads or injections
    rec = {"workload": wl["name"], "config": config, "round": rnd, "problems": []}
    marker, sched = "none", None
    if config == "floor":
        env.update(CUDA_INJECTION64_PATH=a.floor_lib, CUPTI_FLOOR_MODE="kernel")
    elif config != "plain":
        kind, sched, detach = CONFIGS[config]
        marker = kind
        ini = os.path.join(run_dir, "stepprof.ini")
        write_ini(ini, os.path.join(run_dir, "trace"), kind, wl["marker"], sched, detach, LEARN_FROM.get(config))
        r = subprocess.run([os.path.join(a.build, "stepprof"), "check", ini], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"outside: stepprof check {ini} rejected the configuration:\n{r.stdout}{r.stderr}")
        env.update(LD_PRELOAD=os.path.join(a.build, "libstepprof-nomalloc.so"), STEPPROF_CONFIG=ini,
                   STEPPROF_VERBOSE="1")
        env.update(parse_named(a.env, "--env"))
    cpus, twin = a.cpus, None
    if a.twin:  # the unprofiled run too (its twin ratio is the method's own error), and the floor
        halves = sorted(a.cpus or range(os.cpu_count() or 2))
        h = len(halves) // 2
        first, second = set(halves[:h] or halves), set(halves[h:] or halves)
        cpus, twin_cpus = (first, second) if rnd % 2 == 0 else (second, first)
        if a.twin_cpus == "same":  # both on all of --cpus: they share its CPUs' speed at every moment
            cpus = twin_cpus = set(halves)
        twin = {}
        tenv = bench.clean_env()
        tenv["CUDA_VISIBLE_DEVICES"] = a.twin
        th = threading.Thread(target=lambda: twin.update(out=run_process(
            twin_cmd(wl["cmd"], wl["name"] in BUILTIN), tenv, os.path.join(run_dir, "twin.log"),
            a.timeout, twin_cpus)[:2]))
        th.start()
    rc, lines, ins = run_process(wl["cmd"], env, os.path.join(run_dir, "output.log"), a.timeout, cpus,
                                 a.instructions)
    if twin is not None:
        th.join()
    rec["stepprof"] = [l for _, l in lines if l.startswith("stepprof:") and " begins (" not in l][:12]
    rec["life"] = [l for _, l in lines if SP_LIFE.match(l)]
    if rc != 0:
        rec["problems"].append(f"exited {rc}: {(lines or [(0, '(no output)')])[-1][1][-200:]} (see {run_dir})")
    steps, problems = classify(lines, wl["step_re"], sched or CYCLE, marker)
    rec["problems"] += problems
    rec["problems"] += check_boundaries(lines, wl, marker, sched == ONCE)
    if len(steps) < 20:
        rec["problems"].append(f"only {len(steps)} steps printed")
    if config == "floor" and not any("cupti_floor: mode kernel enabled" in l for _, l in lines):
        rec["problems"].append("the CUPTI floor library did not load")
    rec["phases"] = {}
    for ph in PHASES if sched else ["all"]:
        xs = [ms for _, ms, p, _, _ in steps if p == ph or not sched]
        if xs:
            rec["phases"][ph] = phase_stats(xs)
    if sched and settled(steps, lines):
        rec["phases"]["settled"] = settled(steps, lines)
    if ins is not None:
        per = step_instructions(lines, ins[1], wl["step_re"])
        rec["instr"], rec["instr_scope"] = {}, ins[0]
        for ph in PHASES + ["settled"] if sched else ["all"]:
            if ph == "settled":
                keep = {i for i, _, p, _, _ in steps if p in ("between", "after")} & settled_steps(steps, lines)
            else:
                keep = {i for i, _, p, _, _ in steps if p == ph or not sched}
            xs = [per[i] for i in keep if i in per]
            if xs:
                rec["instr"][ph] = phase_stats(xs)
        if not per:
            rec["problems"].append(next((l for _, l in lines if l.startswith("outside: no instruction counter")),
                                        "no instructions counted"))
    if sched and wl["name"] == "learn":
        if any(SP_LOCK.match(l) for _, l in lines):
            rec["problems"].append("the automatic marker locked: its learning is not the whole run")
    elif sched:
        per_step = kernels_per_step(a.build, os.path.join(run_dir, "trace"), run_dir)
        rec["kernels_per_step"] = per_step if isinstance(per_step, dict) else None
        # the step the process was in when it exited: stepprof closes it at exit, so it holds
        # what the program did after its last marker call (with a marker that ends each step,
        # nothing: the last program step's kernels are in the step before), not a whole step
        last = max((int(m.group(1)) for m in (SP_STEP.match(l) for _, l in lines) if m), default=None)
        last = exit_step(run_dir, last)
        if isinstance(per_step, dict) and last in per_step:
            rec["cut_at_exit"] = last
            per_step = {k: v for k, v in per_step.items() if k != last}
        # a third-party program's last step may do more than the others (llm.c runs its validation
        # pass there): not a step of the loop, so left out of the check when it was recorded
        if wl["name"] not in BUILTIN and isinstance(per_step, dict) and per_step and steps and \
                max(per_step) >= steps[-1][3]:
            rec["program_last"] = max(per_step)
            per_step = {k: v for k, v in per_step.items() if k != rec["program_last"]}
        rec["problems"] += check_kernels(per_step, wl["name"])
        rec["problems"] += check_life(rec["life"], config, wl["name"], steps)
    if twin is not None:
        trc, tlines = twin.get("out", (1, []))
        if trc != 0:
            rec["problems"].append(f"the unprofiled twin exited {trc} (see {run_dir}/twin.log)")
        # classify drops the first STARTUP steps: its indexes are the program's own step numbers
        spans = {}
        for (t0, t1, ms), (t, line) in zip(step_spans(lines, wl["step_re"]),
                                           [(t, l) for t, l in lines if wl["step_re"].search(l)]):
            spans[int(wl["step_re"].search(line).group(1))] = (t0, t1, ms)
        tsp = step_spans(tlines, wl["step_re"])[STARTUP:]
        rec["twin"] = twin_ratios(steps, spans, tsp, settled_steps(steps, lines) if sched else None)
    rec["steps"] = [(i, ms, p) for i, ms, p, _, _ in steps]
    return rec


# ---------------- table ----------------
def cell(recs, base, phase):
    """'m1, m2 (r.rrx)': each round's median, and the median over rounds of the ratio to the
    same round's unprofiled median."""
    vals, ratios = [], []
    for r in recs:
        ph = r["phases"].get(phase)
        b = base.get(r["round"])
        if ph:
            vals.append(f"{ph['median']:.2f}")
            if b:
                ratios.append(ph["median"] / b)
    if not vals:
        return "-"
    return ", ".join(vals) + (f" ({statistics.median(ratios):.3f}x)" if ratios else "")


def summarise(a, records):
    out = ["| workload | configuration | learning | before first window | inside windows | between windows "
           "| after last window | between/after, settled | unprofiled | CUPTI floor |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for wl in a.workloads:
        recs = [r for r in records if r["workload"] == wl]
        base = {r["round"]: r["phases"]["all"]["median"] for r in recs if r["config"] == "plain" and "all" in r["phases"]}
        plain = ", ".join(f"{base[k]:.2f}" for k in sorted(base)) or "-"
        floor = [r for r in recs if r["config"] == "floor"]
        fl = cell(floor, base, "all") if floor else "-"
        for c in [c for c in a.configs if c in CONFIGS]:
            rs = [r for r in recs if r["config"] == c]
            out.append(f"| {wl} | {c} | " + " | ".join(cell(rs, base, p) for p in PHASES + ["settled"]) + f" | {plain} | {fl} |")
    out.append("")
    out.append("Milliseconds per step: each round's median, then (in parentheses) the median over rounds of "
               "phase median / the same round's unprofiled median. Spread (p10-p90) and every step: outside.json. "
               f"Settled: the between- and after-window steps but a detach's step and the {SETTLE - 1} after it "
               "and a re-attach's step and the next (the parked or detached state itself).")
    if a.cpus:
        out.append(f"Every process pinned to CPUs {sorted(a.cpus)}.")
    if any("twin" in r for r in records):
        out += ["", f"Twin-paired (--twin {a.twin}): each phase's median over the median of the unprofiled twin's steps that ran at "
                "the same time; per round, then the median over rounds. The row 'plain' is an unprofiled run beside its "
                "unprofiled twin (its 'before' column): how far the pairing itself is from 1; the row 'floor' is "
                "the CUPTI floor recording kernels all run (its 'before' column), to compare with 'inside'.", "",
                "| workload | configuration | " + " | ".join(PHASES + ["between/after, settled"]) + " |",
                "|---|---|" + "---|" * (len(PHASES) + 1)]
        for wl in a.workloads:
            for c in ["plain"] + [c for c in a.configs if c in CONFIGS] + ["floor"]:
                rs = [r for r in records if r["workload"] == wl and r["config"] == c and "twin" in r]
                if not rs:
                    continue
                cells = []
                for ph in PHASES + ["settled"]:
                    xs = [r["twin"][ph]["ratio"] for r in rs if ph in r["twin"]]
                    cells.append(", ".join(f"{x:.3f}" for x in xs) + f" ({statistics.median(xs):.3f}x)" if xs else "-")
                out.append(f"| {wl} | {c} | " + " | ".join(cells) + " |")
    if any("instr" in r for r in records):
        out += ["", "Instructions per step (every thread of the process; the counter's scope: "
                + ", ".join(sorted({r.get("instr_scope") or "?" for r in records if "instr" in r}))
                + "): each round's median in millions, then the median over rounds of phase median / the same "
                "round's unprofiled median. The host's speed does not move them; a CPU that waits for the GPU "
                "by spinning (a synchronisation) adds instructions with the time it waits.", "",
                "| workload | configuration | " + " | ".join(PHASES + ["between/after, settled"]) + " | unprofiled |",
                "|---|---|" + "---|" * (len(PHASES) + 2)]
        for wl in a.workloads:
            recs = [r for r in records if r["workload"] == wl and "instr" in r]
            base = {r["round"]: r["instr"]["all"]["median"] for r in recs if r["config"] == "plain" and "all" in r["instr"]}
            for c in [c for c in a.configs if c in CONFIGS]:
                rs = [r for r in recs if r["config"] == c]
                cells = []
                for ph in PHASES + ["settled"]:
                    vals = [(r["instr"][ph]["median"], base.get(r["round"])) for r in rs if ph in r["instr"]]
                    ratios = [v / b for v, b in vals if b]
                    cells.append(", ".join(f"{v / 1e6:.3f}" for v, _ in vals)
                                 + (f" ({statistics.median(ratios):.4f}x)" if ratios else "") if vals else "-")
                out.append(f"| {wl} | {c} | " + " | ".join(cells) + " | "
                           + (", ".join(f"{base[k] / 1e6:.3f}" for k in sorted(base)) or "-") + " |")
    problems = [f"{r['workload']}/{r['config']}/r{r['round']}: {p}" for r in records for p in r["problems"]]
    out += ["", "Problems:" if problems else "Problems: none"] + [f"- {p}" for p in problems]
    return "\n".join(out), problems


def parse_named(items, what):
    d = {}
    for it in items or []:
        name, eq, val = it.partition("=")
        if not eq or not name:
            sys.exit(f"outside: {what} '{it}': expected NAME=VALUE")
        d[name] = val
    return d


def orchestrate(a):
    programs = parse_named(a.program, "--program")
    regexes = parse_named(a.step_regex, "--step-regex")
    markers = parse_named(a.marker, "--marker")
    wls = {}
    for name in a.workloads:
        if name in programs:
            cmd = shlex.split(programs[name])
        elif name in BUILTIN:
            cmd = [sys.executable, os.path.abspath(__file__), "worker", name, "--steps", str(a.steps)]
        else:
            sys.exit(f"outside: workload '{name}' is not built in and has no --program")
        wls[name] = {"name": name, "cmd": cmd, "marker": markers.get(name, "cudaDeviceSynchronize"),
                     "step_re": re.compile(regexes.get(name, BUILTIN_STEP))}
    configs = ["plain"] + [c for c in a.configs if c in CONFIGS]
    os.makedirs(a.out, exist_ok=True)
    records = []
    for rnd in range(a.rounds):
        for wl in a.workloads:
            cs = configs + (["floor"] if a.floor_lib and wl in ("add", "graph") else [])
            k = rnd % len(cs)
            for c in cs[k:] + cs[:k]:  # rotated order: no configuration always runs first
                t0 = time.monotonic()
                rec = run_one(a, wls[wl], c, rnd)
                records.append(rec)
                print(f"outside: {wl} {c} round {rnd}: {time.monotonic() - t0:.0f} s, phases "
                      + ", ".join(f"{p} {v['median']:.2f}" for p, v in rec["phases"].items())
                      + (f"; step {rec['cut_at_exit']} ended at exit (not checked)" if "cut_at_exit" in rec else "")
                      + (f"; step {rec['program_last']} is the program's last (not checked)" if "program_last" in rec else "")
                      + (f"; PROBLEMS {rec['problems']}" if rec["problems"] else ""), flush=True)
                life = rec.get("life", [])
                for l in life[:LIFE_LINES]:
                    print(f"    {l}", flush=True)
                if len(life) > LIFE_LINES:
                    print(f"    ... {len(life) - LIFE_LINES} more in {a.out}/runs/{wl}-{c}-r{rnd}/output.log", flush=True)
    with open(os.path.join(a.out, "outside.json"), "w") as f:
        json.dump(records, f, indent=1)
    table, problems = summarise(a, records)
    with open(os.path.join(a.out, "outside.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    return 1 if problems else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--build", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("--steps", type=int, default=200, help="steps of the built-in workloads")
    r.add_argument("--workloads", type=lambda s: s.split(","), default=["add", "mlp"])
    r.add_argument("--configs", type=lambda s: s.split(","), default=DEFAULT_CONFIGS)
    r.add_argument("--floor-lib")
    r.add_argument("--timeout", type=int, default=300, help="seconds per process")
    r.add_argument("--cpus", type=bench.cpu_list, default=None,
                   help="pin every process to these CPUs, e.g. 2-7 (fewer migrations; the same set for all)")
    r.add_argument("--program", action="append", help="NAME=COMMAND LINE of another workload")
    r.add_argument("--step-regex", action="append", help="NAME=REGEX: its step lines (step, ms)")
    r.add_argument("--marker", action="append", help="NAME=PATTERN: its api marker (cudaDeviceSynchronize)")
    r.add_argument("--env", action="append", help="VAR=VALUE for the stepprof runs (e.g. STEPPROF_CUPTI_LIBRARY)")
    r.add_argument("--twin-cpus", choices=("split", "same"), default="split",
                   help="split: the twin on the other half of --cpus; same: both on all of them (a CPU "
                        "shared in time, so both see its speed alike)")
    r.add_argument("--instructions", action="store_true",
                   help="also count every process's instructions per step (a hardware counter)")
    r.add_argument("--twin", metavar="GPU",
                   help="run an unprofiled twin beside every stepprof run, on GPU number GPU (another than the "
                        "profiled run's) and the other half of --cpus")
    w = sub.add_parser("worker")
    w.add_argument("workload", choices=BUILTIN)
    w.add_argument("--steps", type=int, required=True)
    a = p.parse_args()
    if a.cmd == "worker":
        return worker(a)
    unknown = [c for c in a.configs if c not in CONFIGS]
    if unknown:
        sys.exit(f"outside: unknown configuration {unknown} (known: {', '.join(CONFIGS)})")
    a.build = os.path.abspath(a.build)
    return orchestrate(a)


if __name__ == "__main__":
    sys.exit(main())
