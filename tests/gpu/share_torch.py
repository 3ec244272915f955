#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""share_torch.py - a training loop that runs torch.profiler (CPU + CUDA) for a few steps in the
middle, for tests/gpu/share.sh: the same program with and without stepprof preloaded must give
torch.profiler the same number of CUDA events. A small MLP (4 x Linear(1024) + ReLU, Adam
foreach); every step ends with torch.cuda.synchronize() (stepprof's api marker
cudaDeviceSynchronize). torch.profiler covers steps --prof-from .. --prof-from + --prof-steps - 1
in one `with` block, exported as Chrome JSON to --json. Prints one line
"share counts {json}" with the events of the export by category (kernel, cuda_runtime,
cuda_driver, gpu_memcpy, gpu_memset) and kernels per profiled step, then "share ok"."""
import argparse
import json
import sys

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--prof-from", type=int, default=12)
    p.add_argument("--prof-steps", type=int, default=4)
    p.add_argument("--json", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    mods = []
    for _ in range(4):
        mods += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(64, 1024, device="cuda")
    y = torch.randn(64, 1024, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        torch.cuda.synchronize()

    prof = None
    for i in range(a.steps):
        if i == a.prof_from:
            prof = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
            prof.__enter__()
        step()
        if prof is not None and i == a.prof_from + a.prof_steps - 1:
            prof.__exit__(None, None, None)
            prof.export_chrome_trace(a.json)
    with open(a.json) as f:
        events = json.load(f)["traceEvents"]
    counts = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset"):
            counts[e["cat"]] = counts.get(e["cat"], 0) + 1
    counts["kernels_per_step"] = counts.get("kernel", 0) / a.prof_steps
    print("share counts " + json.dumps(counts, sort_keys=True), flush=True)
    print("share ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
