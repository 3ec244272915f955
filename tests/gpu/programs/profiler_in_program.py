#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""profiler_in_program.py --json OUT [--steps 12] [--skip-first 0] - a training loop that runs
torch.profiler itself, as users do (a team's profiling block, HF's or Lightning's profiler):
torch.profiler.profile(CPU + CUDA, schedule(skip_first, wait 2, warmup 2, active 5, repeat 1),
on_trace_ready exporting Chrome JSON to OUT) with prof.step() after every step of a small MLP
(4 x Linear(1024) + GELU, batches copied from pinned host memory, AdamW), 12 steps by default.
--skip-first 8 --steps 30 puts the profiler's active steps (12-16) over stepprof's default window.
Prints "kineto counts {json}": the export's events by category (kernel, cuda_runtime, cuda_driver,
gpu_memcpy, gpu_memset) and how many FunctionEvents prof.events() held with a CUDA device.
Truth: cuGetErrorName at the start of every step."""
import argparse
import json
import sys

import common
import torch
import torch.nn.functional as F
from torch import nn

CATS = ("kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json", required=True)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--skip-first", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(1024, 1024), nn.GELU()]
    model = nn.Sequential(*layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    host = [(torch.randn(256, 1024).pin_memory(), torch.randn(256, 1024).pin_memory()) for _ in range(4)]
    written = []

    def ready(prof):
        prof.export_chrome_trace(a.json)
        written.append(a.json)

    sched = torch.profiler.schedule(skip_first=a.skip_first, wait=2, warmup=2, active=5, repeat=1)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    it = common.Iterations("profiler_in_program", a.steps)
    with torch.profiler.profile(activities=acts, schedule=sched, on_trace_ready=ready) as prof:
        for i in range(a.steps):
            it.mark()
            x, y = (t.cuda(non_blocking=True) for t in host[i % len(host)])
            loss = F.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            prof.step()
    counts = {c: 0 for c in CATS}
    if written:
        with open(a.json) as f:
            for e in json.load(f).get("traceEvents", []):
                if e.get("ph") == "X" and e.get("cat") in counts:
                    counts[e["cat"]] += 1
    else:
        print("profiler_in_program: the profiler never called on_trace_ready", flush=True)
    try:
        counts["events_cuda"] = sum(1 for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA"))
    except Exception as e:  # noqa: BLE001 (the count is informative only)
        common.api_note("prof.events()", e)
    print("kineto counts " + json.dumps(counts, sort_keys=True), flush=True)
    return it.done(kernels=counts["kernel"])


if __name__ == "__main__":
    sys.exit(main())
