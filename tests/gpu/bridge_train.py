# SPDX-License-Identifier: MIT
# bridge_train.py [--iters N] [--cost N] - a small real torch training loop for
# tests/gpu/bridge_smoke.sh: an MLP in fp16 autocast with a GradScaler and two optimizers (Adam on
# the first layers, SGD on the last), one iteration inside the function train_step, an NVTX range
# "iter" around each iteration (the truth to compare with; stepprof records it as a marker only
# when asked). Prints "ITER i MS" per iteration. --cost N: after initialising CUDA, times N
# optimizer steps of an SGD on a small CPU tensor, in 5 blocks, and prints "COST ns_per_step V"
# (the median block): what torch's global post hook (stepprof's, when preloaded) adds per step.
import argparse
import statistics
import sys
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--iters", type=int, default=40)
ap.add_argument("--cost", type=int, default=0)
a = ap.parse_args()

if a.cost:
    torch.zeros(1, device="cuda")  # CUDA initialises: stepprof (if preloaded) starts its bridge
    time.sleep(1.5)  # the bridge's hook goes in (it polls every 100 ms)
    w = torch.zeros(16, requires_grad=True)
    w.grad = torch.ones(16)
    opt = torch.optim.SGD([w], lr=0.0)
    for i in range(2000):  # warm
        opt.step()
    blocks = []
    for b in range(5):
        t = time.perf_counter_ns()
        for i in range(a.cost // 5):
            opt.step()
        blocks.append((time.perf_counter_ns() - t) / (a.cost // 5))
    print("COST ns_per_step %.1f" % statistics.median(blocks))
    sys.exit(0)

torch.manual_seed(0)
dev = "cuda"
body = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU())
head = torch.nn.Linear(1024, 10)
body.to(dev)
head.to(dev)
opt_a = torch.optim.Adam(body.parameters(), lr=1e-3)
opt_b = torch.optim.SGD(head.parameters(), lr=1e-2, momentum=0.9)
scaler = torch.amp.GradScaler("cuda")
x = torch.randn(256, 512, device=dev)
y = torch.randint(0, 10, (256,), device=dev)


def train_step():
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(head(body(x)), y)
    scaler.scale(loss).backward()
    scaler.step(opt_a)
    scaler.step(opt_b)
    scaler.update()
    opt_a.zero_grad(set_to_none=True)
    opt_b.zero_grad(set_to_none=True)


for i in range(a.iters):
    t = time.perf_counter()
    torch.cuda.nvtx.range_push("iter")
    train_step()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print("ITER %d %.3f" % (i, (time.perf_counter() - t) * 1000), flush=True)
