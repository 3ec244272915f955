# SPDX-License-Identifier: MIT
# bridge_train.py [--iters N] [--cost N] - a small real torch training loop for
# tests/gpu/bridge_smoke.sh: an MLP in fp16 autocast with a GradScaler and two optimizers (Adam on
# the first layers, SGD on the last), one iteration inside the function train_step, an NVTX range
# "iter" around each iteration (the truth to compare with; stepprof records it as a marker only
# when asked). Prints "ITER i MS" per iteration. --cost N: after initialising CUDA, times N
# optimizer steps of an SGD on a small CPU tensor, in 5 blocks, and prints "COST ns_per_step V"
# (the median block): what torch's global post hook (stepprof's, when preloaded) adds per step.
# --probe: after initialising CUDA, waits for the bridge (1.5 s) and prints one "PROBE" line of
# what the program sees of it: whether torch's global post hooks hold one, GradScaler.update's
# wrapper and its signature, type hints and pickling against the original, and the
# sys.monitoring tool ids 3 and 4 (free for the program under the default configuration).
# --compile-opt N: N steps of an SGD whose step() is torch.compile'd (fullgraph=False), then
# "COMPILE ok GRAPH_BREAKS" (dynamo's graph-break count) or "COMPILE failed: ...".
import argparse
import statistics
import sys
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--iters", type=int, default=40)
ap.add_argument("--cost", type=int, default=0)
ap.add_argument("--probe", action="store_true")
ap.add_argument("--compile-opt", type=int, default=0)
a = ap.parse_args()

if a.probe:
    import inspect
    import pickle
    import typing

    import torch.optim.optimizer as topt

    torch.zeros(1, device="cuda")
    time.sleep(1.5)
    upd = torch.amp.GradScaler.update
    raw = getattr(upd, "__wrapped__", upd)
    try:
        hints = typing.get_type_hints(upd) == typing.get_type_hints(raw)
    except Exception as e:  # torch's own annotations may not resolve: the same for both
        hints = "raises %s" % type(e).__name__
    mon = getattr(sys, "monitoring", None)
    tools = [mon.get_tool(t) for t in (3, 4)] if mon else "no sys.monitoring"
    s = torch.amp.GradScaler("cuda")
    print("PROBE hooks=%d scaler_wrapped=%s signature_same=%s hints_same=%s pickled_scaler=%s tools=%s" % (
        len(topt._global_optimizer_post_hooks), upd is not raw, inspect.signature(upd) == inspect.signature(raw),
        hints, type(pickle.loads(pickle.dumps(s))).__name__, tools), flush=True)
    sys.exit(0)

if a.compile_opt:
    torch.zeros(1, device="cuda")
    time.sleep(1.5)
    import torch._dynamo.utils as du

    w = torch.nn.Parameter(torch.randn(1024, device="cuda"))
    opt = torch.optim.SGD([w], lr=0.01)
    step = torch.compile(opt.step, fullgraph=False)
    try:
        for i in range(a.compile_opt):
            w.grad = torch.ones_like(w)
            step()
        torch.cuda.synchronize()
        print("COMPILE ok %d" % sum(du.counters["graph_break"].values()), flush=True)
    except Exception as e:
        print("COMPILE failed: %s: %s" % (type(e).__name__, str(e)[:200]), flush=True)
    sys.exit(0)

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
