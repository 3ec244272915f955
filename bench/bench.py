#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench.py - stepprof's overhead benchmark (run by bench/run.sh on the GPU machine).

Workloads: add (2000 tiny add_ kernels per step, launch-bound) and mlp (tests/gpu/mlp_train.py's
step); not run by default, hostprep (a data loader's CPU work in the training process, then a small
training step: the malloc-heavy program of a real user, for host tracking; see hostprep_step).
Configurations, each a separate process:
  baseline     no profiler
  sp-outside   stepprof loaded, schedule that never records (skip_first huge)
  sp-window    stepprof recording every measured step (skip_first S, warmup 1, active A)
  torch        torch.profiler (CPU+CUDA), same schedule, Chrome JSON exported at the window's end
  cupti-floor  bench/cupti_floor.c injected: CONCURRENT_KERNEL records only, dropped
  baseline-again  no profiler, a second time: its ratio to baseline is the machine's own noise
  cupti-sub    (not run by default) cupti_floor.c mode sub: subscribed, nothing enabled
  cupti-cb     (not run by default) mode cb: kernel records + empty launch callbacks
  cupti-act    (not run by default) mode act: kernel + RUNTIME + DRIVER activity records
  cupti-ts     (not run by default) mode ts: kernel records stamped by a CLOCK_MONOTONIC callback
  sp-nohooks   (not run by default) sp-window with libstepprof-nomalloc.so, what `stepprof run`
               preloads when host_malloc is false (no malloc hooks at all)
With --cycle W,A the stepprof configurations record CYCLES windows instead of one (skip_first S,
then wait W, warmup 1, active A, repeat 0), and each run also gets a paired ratio that the
machine's regimes between processes cannot blur: the median step inside windows (away from their
edges) over the median step outside them (away from the warmup and the save), in one process.
Comparing that ratio between two configurations (host_malloc on and off, say) gives what the
difference costs inside a window. The cupti-* configurations cycle as well (CUPTI_FLOOR_CYCLE: the
worker turns the floor on for the warmup and recorded steps and detaches it, cuptiFinalize, for
the others), so their paired ratio is the floor's cost inside a window on the same terms.
A stepprof configuration may carry settings: sp-window+activities.runtime_api=false runs
sp-window with STEPPROF_ACTIVITIES_RUNTIME_API=false. With activities.host_malloc=true the host
allocation events per recorded step are counted (host_events column); with host_malloc_min=1 as
well, that count is every allocator call that returned or released a block.
Every step ends with torch.cuda.synchronize(); steps are timed boundary to boundary (so a
profiler's work at a step boundary counts). Measured steps: S+3 .. S+A-2 (all inside the
window, away from its edges); the save stall is the longest step among S+A-1 .. S+A+3, where
the window (step S+A, RECORD_AND_SAVE) is written, minus the run's median step. Configurations
run in rotated order in each round; ratios are medians over rounds of (config median / same
round's baseline median), and also lower quartile of run medians / the baseline's.

usage: bench.py run --build DIR --out DIR [--floor-lib SO] [--rounds 2] [--marker auto|KIND:PATTERN]
       bench.py worker --workload add|mlp --steps N [--torch-profiler OUT.json --skip S --active A]"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "gpu"))

CONFIGS = ["baseline", "sp-outside", "sp-window", "torch", "cupti-floor", "baseline-again"]
FLOOR_MODES = {"cupti-floor": "kernel", "cupti-sub": "sub", "cupti-cb": "cb", "cupti-act": "act", "cupti-ts": "ts"}
WORKLOADS = ["add", "mlp"]
EXTRA_WORKLOADS = ["hostprep"]
EXTRA_CONFIGS = ["sp-nohooks"]
ADD_KERNELS = 2000
CYCLES = 8  # --cycle: windows per run


def hostprep_step(batch=32, side=112, crop=96, words=400):
    """A data loader's work done in the training process, as in a DataLoader worker (one CPU
    thread): each sample's image is decoded from bytes, converted to float, cropped, flipped and
    normalised (tensors of 64-150 KiB: the blocks host tracking records by default), its caption
    tokenised in Python; the batch is collated, copied to the GPU, and one small training step runs
    on it. Returns step()."""
    import torch
    torch.set_num_threads(1)
    rnd = __import__("random").Random(0)
    raw = [bytes(rnd.getrandbits(8) for _ in range(3 * side * side)) for _ in range(16)]
    vocab = {f"w{i}": i for i in range(5000)}
    captions = [" ".join(f"w{rnd.randrange(6000)}" for _ in range(words)) for _ in range(16)]
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * crop * crop, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).cuda()
    emb = torch.nn.EmbeddingBag(5000, 512, mode="mean").cuda()
    opt = torch.optim.SGD(list(model.parameters()) + list(emb.parameters()), lr=1e-3)
    count = [0]

    def step():
        imgs, toks = [], []
        for j in range(batch):
            i = (count[0] * batch + j) % len(raw)
            x = torch.frombuffer(bytearray(raw[i]), dtype=torch.uint8).view(3, side, side)
            x = x.float().div_(255)
            o = (count[0] + j) % (side - crop)
            x = x[:, o:o + crop, o:o + crop]
            if (count[0] + j) % 2:
                x = x.flip(2)
            imgs.append((x - mean) / std)
            ids = [vocab.get(w, 0) for w in captions[i].split()]
            toks.append(torch.tensor(ids[:256]))
        count[0] += 1
        xb = torch.stack(imgs).cuda()
        tb = torch.nn.utils.rnn.pad_sequence(toks, batch_first=True).cuda()
        loss = (model(xb) + emb(tb)[:, :10]).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


# ---------------- worker: one process, one configuration ----------------
def worker(a):
    import torch
    if a.workload == "add":
        x = torch.zeros(1024, device="cuda")

        def step():
            for _ in range(ADD_KERNELS):
                x.add_(1.0)
    elif a.workload == "hostprep":
        step = hostprep_step()
    else:
        import mlp_train
        step = mlp_train.make_step()
    floor_set, on_steps = None, set()
    if os.environ.get("CUPTI_FLOOR_CYCLE"):  # the CUPTI floor, on in the steps stepprof would record
        import ctypes
        floor_set = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).cupti_floor_set
        skip, wait, active = (int(v) for v in os.environ["CUPTI_FLOOR_CYCLE"].split(","))
        on_steps = cycle_steps(skip, (wait, active), a.steps, warmup=True)
    prof = None
    if a.torch_profiler:
        import mlp_train
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            schedule=torch.profiler.schedule(skip_first=a.skip, wait=0, warmup=1, active=a.active, repeat=1),
            on_trace_ready=mlp_train.trace_exporter(a.torch_profiler))
        prof.start()
    t, issue = [time.perf_counter()], []
    for i in range(a.steps):
        if floor_set and floor_set(int(i in on_steps)):
            sys.exit("bench: cupti_floor_set failed (see cupti_floor's line above)")
        step()
        issue.append((time.perf_counter() - t[-1]) * 1e3)  # launches issued, GPU maybe still busy
        torch.cuda.synchronize()
        if prof:
            prof.step()
        t.append(time.perf_counter())
    if prof:
        prof.stop()
    times = [(t[i + 1] - t[i]) * 1e3 for i in range(a.steps)]
    print("BENCH " + json.dumps({"times_ms": times, "issue_ms": issue, "torch": torch.__version__,
                                 "gpu": torch.cuda.get_device_name(0)}), flush=True)
    return 0


# ---------------- orchestrator ----------------
def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STEPPROF_") and k not in ("LD_PRELOAD", "CUDA_INJECTION64_PATH")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def write_ini(path, out_dir, skip, active, marker, cycle=None):
    """One window of active steps after skip; with cycle = (W, A), windows of A steps after W
    unrecorded ones (and a warmup step), forever."""
    kind, _, pattern = marker.partition(":")
    wait, active, repeat = (cycle[0], cycle[1], 0) if cycle else (0, active, 1)
    with open(path, "w") as f:
        f.write(f"[profile]\nenabled = true\noutput = {out_dir}\n"
                f"[schedule]\nskip_first = {skip}\nwait = {wait}\nwarmup = 1\nactive = {active}\nrepeat = {repeat}\n"
                f"[marker]\nkind = {kind}\n" + (f"pattern = {pattern}\n" if pattern else ""))


def check_ini(build, path):
    r = subprocess.run([os.path.join(build, "stepprof"), "check", path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: stepprof check {path} rejected the configuration:\n{r.stdout}{r.stderr}")


def trace_stats(build, trace_dir, run_dir):
    """Size, kernels and recorded steps of the stepprof trace under trace_dir (None if none)."""
    files = [os.path.join(d, f) for d, _, fs in os.walk(trace_dir) for f in fs if f.endswith(".sptrace")]
    if not files:
        return None
    st = {"file": files[0], "bytes": sum(os.path.getsize(f) for f in files), "files": len(files)}
    js = os.path.join(run_dir, "trace.json")
    r = subprocess.run([os.path.join(build, "stepprof"), "convert", files[0], "-o", js, "--merge"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        st["error"] = f"stepprof convert failed: {(r.stdout + r.stderr).strip()[-400:]}"
        return st
    st.update(json_stats(js))
    os.remove(js)  # large and re-creatable from the .sptrace
    return st


def host_event_stats(build, trace_file, run_dir):
    """Host allocation events (allocations and releases recorded in the window: no snapshot or
    peak entries) per recorded step, and the ring's drops, from `stepprof dump` streamed."""
    events = steps = dropped = 0
    with open(os.path.join(run_dir, "dump.err"), "w") as err:
        p = subprocess.Popen([os.path.join(build, "stepprof"), "dump", trace_file], stdout=subprocess.PIPE,
                             stderr=err, text=True)
        for line in p.stdout:
            if line.startswith(("alloc ", "free ")) and " mem=host " in line and line.rstrip().endswith("flags=-"):
                events += 1
            elif line.startswith("step "):
                steps += 1
            elif line.startswith("window_end "):
                dropped += sum(int(f.split("=")[1]) for f in line.split() if f.startswith("dropped="))
    if p.wait() != 0 or not steps:
        return {"error": f"stepprof dump {trace_file} failed or holds no step (see {run_dir}/dump.err)"}
    return {"host_events_per_step": events / steps, "dropped": dropped}


def cycle_steps(skip, cycle, total, warmup=False):
    """The steps (0-based, as the worker counts them) a --cycle schedule (write_ini's: skip_first,
    wait W, warmup 1, active A, repeat 0) records, by torch.profiler's semantics
    (traceutil.schedule_action); with warmup=True the warmup steps too."""
    import traceutil as tu
    want = ("WARMUP", "RECORD") if warmup else ("RECORD",)
    return {i for i in range(total) if tu.schedule_action(i, skip_first=skip, wait=cycle[0], warmup=1,
                                                          active=cycle[1], repeat=0).startswith(want)}


def in_out(times, recorded, skip):
    """--cycle: {"in_out": median step inside windows / median step outside} in one run. Inside:
    recorded steps whose neighbours are recorded too; outside: steps after skip + 2 with no recorded
    step within two (the warmup step, the first after a save and an index off by one stay out)."""
    near = lambda i, d: any(j in recorded for j in range(i - d, i + d + 1))
    inside = [times[i] for i in range(len(times)) if all(j in recorded for j in (i - 1, i, i + 1))]
    outside = [times[i] for i in range(skip + 2, len(times) - 2) if not near(i, 2)]
    if len(inside) < 5 or len(outside) < 5:
        return {}
    return {"in_out": statistics.median(inside) / statistics.median(outside),
            "in_ms": statistics.median(inside), "out_ms": statistics.median(outside)}


def json_stats(path):
    """Kernels and recorded steps of a Chrome trace (stepprof's converted or torch's)."""
    import traceutil as tu
    try:
        tr = tu.load(path)
    except tu.TraceError as e:
        return {"error": str(e)}
    kernels = sum(1 for ops in tr.steps.values() for op in ops if op.cat == "kernel")
    return {"kernels": kernels, "steps": sorted(tr.steps), "fallback": tr.n_fallback,
            "json_bytes": os.path.getsize(path)}


def run_one(a, workload, config, rnd):
    """Runs one worker process; returns its record (times, stats, problems)."""
    tag = config if len(config) <= 40 else f"{config[:24]}-{zlib.crc32(config.encode()):08x}"  # paths < inih's line
    run_dir = os.path.join(a.out, "runs", f"{workload}-{tag}-r{rnd}")
    os.makedirs(run_dir, exist_ok=True)
    env = clean_env()
    cmd = [sys.executable, os.path.abspath(__file__), "worker", "--workload", workload, "--steps", str(a.total)]
    trace_dir = os.path.join(run_dir, "trace")
    if config.startswith("sp-"):
        ini = os.path.join(run_dir, "stepprof.ini")
        for kv in config.split("+")[1:]:
            key, _, value = kv.partition("=")
            env["STEPPROF_" + key.replace(".", "_").upper()] = value
        skip = 10**6 if config.startswith("sp-outside") else a.skip
        write_ini(ini, trace_dir, skip, a.active, a.marker, a.cycle)
        check_ini(a.build, ini)
        lib = "libstepprof-nomalloc.so" if config.startswith("sp-nohooks") else "libstepprof.so"
        env.update(LD_PRELOAD=os.path.join(a.build, lib), STEPPROF_CONFIG=ini)
    elif config == "torch":
        cmd += ["--torch-profiler", os.path.join(run_dir, "torch.json"), "--skip", str(a.skip),
                "--active", str(a.active)]
    elif config in FLOOR_MODES:
        env.update(CUDA_INJECTION64_PATH=a.floor_lib, CUPTI_FLOOR_MODE=FLOOR_MODES[config])
        if a.cycle:
            env["CUPTI_FLOOR_CYCLE"] = f"{a.skip},{a.cycle[0]},{a.cycle[1]}"
    rec = {"workload": workload, "config": config, "round": rnd, "problems": []}
    try:
        pin = (lambda: os.sched_setaffinity(0, a.cpus)) if a.cpus else None
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout, preexec_fn=pin)
        out, err, rc = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = e.stdout or "", e.stderr or "", "timeout"
        out, err = (x.decode() if isinstance(x, bytes) else x for x in (out, err))
    for name, text in (("stdout.log", out), ("stderr.log", err)):
        with open(os.path.join(run_dir, name), "w") as f:
            f.write(text)
    line = next((l for l in out.splitlines() if l.startswith("BENCH ")), None)
    if rc != 0 or not line:
        last = (err.strip().splitlines() or ["(no stderr)"])[-1]
        rec["problems"].append(f"worker exited {rc}: {last[-300:]} (see {run_dir}/stderr.log)")
        return rec
    rec.update(json.loads(line[6:]))
    t = rec["times_ms"]
    first, last = (a.skip + 2, a.total - 1) if a.cycle else (a.skip + 3, a.skip + a.active - 2)
    rec["median_ms"] = statistics.median(t[first:last + 1])
    rec["issue_median_ms"] = statistics.median(rec["issue_ms"][first:last + 1])
    if not a.cycle:
        rec["near_save_ms"] = max(t[a.skip + a.active - 1:a.skip + a.active + 4])
    if config.startswith("sp-"):
        rec["stepprof_stderr"] = [l for l in err.splitlines() if l.startswith("stepprof:")][:10]
        st = trace_stats(a.build, trace_dir, run_dir)
        rec["trace"] = st
        if env.get("STEPPROF_ACTIVITIES_HOST_MALLOC") == "true" and st:
            st.update(host_event_stats(a.build, st["file"], run_dir))
            if st.get("error"):
                rec["problems"].append(st["error"])
            elif not st["host_events_per_step"]:
                rec["problems"].append("host_malloc = true recorded no host allocation event")
        if not config.startswith("sp-outside"):
            if not st or st.get("error") or not st.get("kernels"):
                rec["problems"].append(f"window recorded nothing: {st}")
            elif len(st["steps"]) < (CYCLES * a.cycle[1] if a.cycle else a.active) - 2:
                rec["problems"].append(f"windows hold {len(st['steps'])} steps, expected "
                                       f"{CYCLES * a.cycle[1] if a.cycle else a.active}")
            elif workload == "add" and st["kernels"] != ADD_KERNELS * len(st["steps"]):
                rec["problems"].append(f"{st['kernels']} kernels in {len(st['steps'])} steps, "
                                       f"not {ADD_KERNELS} per step: boundaries off the iterations")
        elif st and st.get("kernels"):
            rec["problems"].append(f"outside-window run recorded {st['kernels']} kernels")
        if a.cycle and st and st.get("steps"):
            rec.update(in_out(t, set(st["steps"]), a.skip))
            if "in_out" not in rec:
                rec["problems"].append("too few steps inside or outside the windows for a paired ratio")
    elif config == "torch":
        js = os.path.join(run_dir, "torch.json")
        rec["trace"] = json_stats(js) if os.path.exists(js) else {"error": "no torch.json exported"}
        if os.path.exists(js) and not a.keep_traces:
            os.remove(js)  # tens of MB; its size and counts are kept
        if rec["trace"].get("error"):
            rec["problems"].append(rec["trace"]["error"])
    elif config in FLOOR_MODES and f"cupti_floor: mode {FLOOR_MODES[config]} enabled" not in err:
        rec["problems"].append("the CUPTI floor library did not load (no 'cupti_floor: mode' line)")
    elif config in FLOOR_MODES and a.cycle:
        rec.update(in_out(t, cycle_steps(a.skip, a.cycle, a.total), a.skip))
        if "in_out" not in rec:
            rec["problems"].append("too few steps inside or outside the windows for a paired ratio")
    return rec


def cpu_times():
    """(busy+idle jiffies, steal jiffies) of all CPUs from /proc/stat, or None."""
    try:
        f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(f), f[7] if len(f) > 7 else 0


def cpu_list(text):
    """'2-5,8' -> {2, 3, 4, 5, 8}"""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def fmt(value, spec):
    return "" if value is None else spec.format(value)


def quartile1(values):
    """Lower quartile (inclusive method), the value itself for one value, None for none."""
    v = sorted(values)
    return statistics.quantiles(v, n=4, method="inclusive")[0] if len(v) > 1 else (v[0] if v else None)


def summarise(a, records):
    """Markdown table and per-(workload, config) summary dicts. Besides the median of per-round
    ratios, the ratio of lower quartiles of run medians: on a machine whose runs land in a fast or a
    slow regime, it compares the undisturbed runs."""
    rows, summary = [], []
    for wl in a.workloads:
        # every recorded step must hold what torch.profiler records per step (same program)
        ref = next((r["trace"]["kernels"] / len(r["trace"]["steps"]) for r in records
                    if r["workload"] == wl and r["config"] == "torch" and (r.get("trace") or {}).get("steps")), None)
        for r in records:
            st = r.get("trace") or {}
            if (ref and r["workload"] == wl and r["config"].startswith(("sp-window", "sp-nohooks")) and st.get("steps")
                    and st.get("kernels") and st["kernels"] / len(st["steps"]) != ref):
                r["problems"].append(f"{st['kernels'] / len(st['steps']):.1f} kernels per step, "
                                     f"torch.profiler {ref:.1f}: boundaries off the iterations")
        base = {r["round"]: r["median_ms"] for r in records
                if r["workload"] == wl and r["config"] == "baseline" and "median_ms" in r}
        for cfg in a.configs:
            recs = [r for r in records if r["workload"] == wl and r["config"] == cfg]
            good = [r for r in recs if "median_ms" in r]
            meds = [r["median_ms"] for r in good]
            ratios = [r["median_ms"] / base[r["round"]] for r in good if r["round"] in base]
            q_base, q_cfg = quartile1(base.values()), quartile1(meds)
            stalls = [r["near_save_ms"] - r["median_ms"] for r in good if "near_save_ms" in r]
            in_outs = [r["in_out"] for r in good if "in_out" in r]
            s = {"workload": wl, "config": cfg, "median_ms": meds,
                 "ratio": statistics.median(ratios) if ratios else None,
                 "q1_ratio": q_cfg / q_base if q_cfg and q_base else None,
                 "near_save_ms": max((r["near_save_ms"] for r in good if "near_save_ms" in r), default=None),
                 "in_out": statistics.median(in_outs) if in_outs else None, "in_outs": in_outs,
                 "stall_ms": stalls,
                 "problems": [p for r in recs for p in r["problems"]]}
            tr = next((r["trace"] for r in good if r.get("trace") and r["trace"].get("kernels")), None)
            if tr:
                size = tr.get("bytes", tr.get("json_bytes"))
                s.update(kernels=tr["kernels"], trace_bytes=size, bytes_per_kernel=size / tr["kernels"],
                         steps=f"{tr['steps'][0]}-{tr['steps'][-1]}" if tr["steps"] else "")
            hosts = [r["trace"]["host_events_per_step"] for r in good if "host_events_per_step" in (r.get("trace") or {})]
            if hosts:
                s["host_events_per_step"] = statistics.median(hosts)
                s["host_dropped"] = sum(r["trace"].get("dropped", 0) for r in good if r.get("trace"))
            summary.append(s)
            save = f"{statistics.median(stalls):.2f}, {max(stalls):.2f}" if stalls else ""
            rows.append(f"| {wl} | {cfg} | {', '.join(f'{m:.2f}' for m in meds) or 'FAILED'} | "
                        f"{fmt(s['ratio'], '{:.3f}x')} | {fmt(s['q1_ratio'], '{:.3f}x')} | {save} | "
                        f"{fmt(s['in_out'], '{:.3f}x')}{' (' + ', '.join(f'{x:.3f}' for x in in_outs) + ')' if in_outs else ''} | "
                        f"{s.get('steps', '')} | "
                        f"{fmt(s.get('kernels'), '{}')} | {fmt(s.get('bytes_per_kernel'), '{:.1f}')} | "
                        f"{fmt(s.get('host_events_per_step'), '{:.0f}')}{fmt(s.get('host_dropped') or None, ' ({} dropped)')} | "
                        f"{'; '.join(s['problems'])[:200]} |")
    return rows, summary


def orchestrate(a):
    a.total = a.skip + 1 + a.active + 6
    if a.cycle:
        if a.cycle[0] < 5 or a.cycle[1] < 4 or "torch" in a.configs:
            sys.exit("bench: --cycle W,A wants W >= 5, A >= 4, and no torch configuration")
        a.total = a.skip + CYCLES * (a.cycle[0] + 1 + a.cycle[1]) + 2
    elif a.active < 25:
        sys.exit("bench: --active must be >= 25 (>= 21 measured steps inside the window)")
    if set(FLOOR_MODES) & set(a.configs) and not (a.floor_lib and os.path.exists(a.floor_lib)):
        sys.exit(f"bench: --floor-lib {a.floor_lib!r} missing (bench/run.sh builds it)")
    os.makedirs(a.out, exist_ok=True)
    records, cpu0 = [], cpu_times()
    for rnd in range(a.rounds):
        order = a.configs[rnd % len(a.configs):] + a.configs[:rnd % len(a.configs)]
        for wl in a.workloads:
            for cfg in order:
                t0 = time.time()
                rec = run_one(a, wl, cfg, rnd)
                records.append(rec)
                if cfg == "baseline" and "median_ms" not in rec:
                    sys.exit(f"bench: the baseline run fails, stopping: {rec['problems']}")
                med = (f"{rec['median_ms']:.2f} ms (issue {rec['issue_median_ms']:.2f})"
                       if "median_ms" in rec else "FAILED")
                print(f"round {rnd} {wl:4s} {cfg:12s} {med:>12s}  ({time.time() - t0:.0f} s)"
                      + (f"  problems: {rec['problems']}" if rec["problems"] else ""), flush=True)
    rows, summary = summarise(a, records)
    cpu1 = cpu_times()
    steal = (f"{100 * (cpu1[1] - cpu0[1]) / max(cpu1[0] - cpu0[0], 1):.1f}%"
             if cpu0 and cpu1 else "unknown")
    gpu = next((r.get("gpu") for r in records if r.get("gpu")), "?")
    torch_v = next((r.get("torch") for r in records if r.get("torch")), "?")
    md = [f"# stepprof benchmark ({time.strftime('%Y-%m-%d %H:%M')})", "",
          f"GPU {gpu}, torch {torch_v}, host {platform.node()}; {a.rounds} rounds; marker {a.marker}; "
          + (f"{CYCLES} windows: skip_first={a.skip}, then wait={a.cycle[0]} warmup=1 active={a.cycle[1]} repeat=0; "
             f"median of steps {a.skip + 2}..{a.total - 1} " if a.cycle else
             f"window skip_first={a.skip} warmup=1 active={a.active}; median of steps {a.skip + 3}..{a.skip + a.active - 2} ")
          + f"per run; add = {ADD_KERNELS} add_ kernels per step, mlp = tests/gpu/mlp_train.py step; "
          f"workers pinned to CPUs {sorted(a.cpus) if a.cpus else 'none'}; CPU time stolen by the hypervisor "
          f"during the bench: {steal}.", "",
          "| workload | config | ms/step per round | vs baseline (median of per-round ratios) "
          "| vs baseline (lower quartiles) | save stall ms (median, max over runs) "
          "| inside / outside windows, paired (median; per round) | steps recorded "
          "| kernels recorded | bytes/kernel on disk | host events/step | problems |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|", *rows, "",
          "save stall: the longest of the five steps around the window's end minus the run's median step.",
          "bytes/kernel: stepprof = .sptrace bytes / kernels recorded; torch = Chrome JSON bytes / kernels.",
          "host events/step: host allocations and releases recorded per step (median over runs), with "
          "activities.host_malloc=true; with host_malloc_min=1 too, every allocator call's."]
    text = "\n".join(md) + "\n"
    print("\n" + text)
    with open(os.path.join(a.out, "bench.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "bench.json"), "w") as f:
        json.dump({"settings": {k: sorted(v) if isinstance(v, set) else v for k, v in vars(a).items()}, "summary": summary,
                   "runs": records}, f, indent=1)
    failed = [s for s in summary if s["problems"] or s["ratio"] is None]
    print(f"bench: {len(summary) - len(failed)} configurations ok, {len(failed)} with problems; "
          f"raw data in {os.path.join(a.out, 'bench.json')}")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--build", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--floor-lib")
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("--marker", default="auto", help="auto, or KIND:PATTERN e.g. api:cudaDeviceSynchronize*")
    r.add_argument("--skip", type=int, default=8)
    r.add_argument("--active", type=int, default=30)
    r.add_argument("--workloads", type=lambda s: s.split(","), default=WORKLOADS)
    r.add_argument("--configs", type=lambda s: s.split(","), default=CONFIGS)
    r.add_argument("--timeout", type=int, default=240, help="seconds per worker process")
    r.add_argument("--cpus", type=cpu_list, default=None,
                   help="pin every worker to these CPUs, e.g. 2-5 (less noise from migrations)")
    r.add_argument("--keep-traces", action="store_true", help="keep torch.profiler's JSON exports")
    r.add_argument("--cycle", type=lambda v: tuple(int(x) for x in v.split(",")), default=None,
                   help=f"W,A: {CYCLES} windows of A steps after W unrecorded ones; adds a paired in/out ratio")
    w = sub.add_parser("worker")
    w.add_argument("--workload", choices=WORKLOADS + EXTRA_WORKLOADS, required=True)
    w.add_argument("--steps", type=int, required=True)
    w.add_argument("--torch-profiler")
    w.add_argument("--skip", type=int, default=8)
    w.add_argument("--active", type=int, default=30)
    a = p.parse_args()
    if a.cmd == "worker":
        return worker(a)
    a.build = os.path.abspath(a.build)
    a.out = os.path.abspath(a.out)
    bad = ([c for c in a.configs if c.split("+")[0] not in CONFIGS + EXTRA_CONFIGS and c not in FLOOR_MODES]
           + [w for w in a.workloads if w not in WORKLOADS + EXTRA_WORKLOADS])
    if bad:
        sys.exit(f"bench: unknown configuration or workload {bad}")
    if "baseline" not in a.configs:
        a.configs = ["baseline"] + a.configs
    return orchestrate(a)


if __name__ == "__main__":
    sys.exit(main())
