#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""share_sched.py - programs for tests/gpu/share_default.sh.

--mode prof: a training loop (4 x Linear(1024) + ReLU, Adam foreach, torch.cuda.synchronize() at
each step's end, each step inside an NVTX range "step") that runs torch.profiler itself, as users
do: its own schedule wait 2, warmup 2, active 5 (repeat 1) from the first step, prof.step() after
each step, the export written by on_trace_ready. Prints one line
"share counts {json}" with the export's events by category (kernel, cuda_runtime, cuda_driver,
gpu_memcpy, gpu_memset) and kernels per active step, then "share ok".

--mode add: a launch-bound loop, 2000 tiny add_ kernels a step and a torch.cuda.synchronize();
prints "STEP i MS" per step (the step's wall time) and "share ok"."""
import argparse
import json
import sys
import time

import torch


def prof_mode(a):
    torch.manual_seed(0)
    mods = []
    for _ in range(4):
        mods += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(64, 1024, device="cuda")
    y = torch.randn(64, 1024, device="cuda")
    exported = []

    def ready(p):
        p.export_chrome_trace(a.json)
        exported.append(a.json)

    act = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    sched = torch.profiler.schedule(wait=2, warmup=2, active=5, repeat=1)
    with torch.profiler.profile(activities=act, schedule=sched, on_trace_ready=ready) as prof:
        for _ in range(a.steps):
            torch.cuda.nvtx.range_push("step")
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            prof.step()
    if not exported:
        print("share: torch.profiler exported nothing", flush=True)
        return 1
    with open(a.json) as f:
        events = json.load(f)["traceEvents"]
    counts = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset"):
            counts[e["cat"]] = counts.get(e["cat"], 0) + 1
    counts["kernels_per_step"] = counts.get("kernel", 0) / 5
    print("share counts " + json.dumps(counts, sort_keys=True), flush=True)
    return 0


def add_mode(a):
    x = torch.zeros(1024, device="cuda")
    torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(a.steps):
        for _ in range(2000):
            x.add_(1.0)
        torch.cuda.synchronize()
        now = time.perf_counter()
        print(f"STEP {i} {(now - t) * 1e3:.4f}", flush=True)
        t = now
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["prof", "add"], required=True)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--json", default="/tmp/share_sched.json")
    a = p.parse_args()
    rc = prof_mode(a) if a.mode == "prof" else add_mode(a)
    if rc == 0:
        print("share ok", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
