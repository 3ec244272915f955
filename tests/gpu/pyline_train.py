#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pyline_train.py - a small PyTorch training loop whose GPU work comes from distinctive source
lines, for tests/gpu/pystacks.sh: each kernel-launching line of interest sits in a function of
its own (torch.profiler's stacks name a function by the line it starts on, stepprof's by the line
that runs: one line per function makes both comparable), two large blocks are allocated at known
lines before training (BIG_A, BIG_B), and every step ends with torch.cuda.synchronize().

  --steps N               steps (default 12)
  --torch-profiler OUT    run under torch.profiler(with_stack=True), recording steps
                          [skip, skip + active) (skip = --skip, warmup 1), and write the kernel
                          time per innermost user frame as JSON to OUT
  --skip S --active A     the recorded steps (defaults 6, 4), same as stepprof's schedule
Prints "pyline ok steps=N" at the end."""
import argparse
import json
import os
import re
import sys
import time

import torch

WIDTH, BATCH = 2048, 512
LIB = ("/site-packages/", "/dist-packages/", "/lib/python3", "/torch/")  # stepprof's rule


def big_blocks():
    a = torch.empty(768 << 20, dtype=torch.uint8, device="cuda")  # BIG_A
    b = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")  # BIG_B
    return a, b


def project_in(x, w):
    return x @ w  # L_PROJ_IN


def activate(h):
    return torch.nn.functional.gelu(h)  # L_GELU


def normalise(norm, h):
    return norm(h)  # L_NORM


def mix(h, w):
    return torch.tanh(h @ w) * h  # L_MIX


def gate(h):
    return h * torch.sigmoid(h)  # L_GATE


def head(lin, h):
    return lin(h)  # L_HEAD


def loss_of(out, y):
    return torch.nn.functional.mse_loss(out, y)  # L_LOSS


def regulariser(params):
    return sum((p * p).sum() for p in params) * 1e-6  # L_REG


def clip(params):
    return torch.nn.utils.clip_grad_norm_(params, 1.0)  # L_CLIP


def update(opt):
    opt.step()  # L_OPT


def scale_batch(x):
    return (x - x.mean(dim=0)) / (x.std(dim=0) + 1e-5)  # L_SCALE


def build():
    torch.manual_seed(0)
    w_in = torch.nn.Parameter(torch.randn(WIDTH, WIDTH, device="cuda") * 0.02)
    w_mix = torch.nn.Parameter(torch.randn(WIDTH, WIDTH, device="cuda") * 0.02)
    norm = torch.nn.LayerNorm(WIDTH).cuda()
    lin = torch.nn.Linear(WIDTH, WIDTH).cuda()
    params = [w_in, w_mix, *norm.parameters(), *lin.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    x = torch.randn(BATCH, WIDTH, device="cuda")
    y = torch.randn(BATCH, WIDTH, device="cuda")

    def step():
        h = project_in(scale_batch(x), w_in)
        h = normalise(norm, activate(h))
        h = gate(mix(h, w_mix))
        loss = loss_of(head(lin, h), y) + regulariser(params)
        loss.backward()
        clip(params)
        update(opt)
        opt.zero_grad(set_to_none=True)

    return step


def resolve(f, cache={}):
    """torch.profiler trims sys.path prefixes from file names ("torch/nn/modules/linear.py",
    "pyline_train.py"): the absolute path again, through sys.path, so stepprof's rule applies."""
    if os.path.isabs(f) or f.startswith("<"):
        return f
    if f not in cache:
        cache[f] = next((os.path.abspath(os.path.join(p or os.getcwd(), f)) for p in sys.path
                         if os.path.exists(os.path.join(p or os.getcwd(), f))), f)
    return cache[f]


def user_frame(stack):
    """The innermost frame of the program's own code in a torch.profiler stack (entries
    "FILE(LINE): FUNC"), as (file, line, func), or None."""
    entries = [m.groups() for m in (re.match(r"^(.*)\((\d+)\): (.*)$", s) for s in stack) if m]
    if entries and entries[0][2] == "<module>":  # outermost first: innermost first instead
        entries.reverse()
    for f, line, func in entries:
        f = resolve(f)
        if not f.startswith("<frozen") and not f.startswith("torch/") and not any(p in f for p in LIB):
            return f, int(line), func
    return None


def torch_lines(prof):
    """Kernel time (ns) and count per innermost user frame of the op that launched it."""
    rows = {}
    for evt in prof.events():
        kernels = getattr(evt, "kernels", None) or []
        if not kernels:
            continue
        uf = user_frame(evt.stack or [])
        key = f"{uf[0]}|{uf[2]}|{uf[1]}" if uf else "(none)"
        r = rows.setdefault(key, {"ns": 0, "kernels": 0})
        for k in kernels:
            r["ns"] += int(round(k.duration * 1000))  # us
            r["kernels"] += 1
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--torch-profiler")
    p.add_argument("--skip", type=int, default=6)
    p.add_argument("--active", type=int, default=4)
    a = p.parse_args()
    keep = big_blocks()
    step = build()
    prof = None
    if a.torch_profiler:
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            schedule=torch.profiler.schedule(skip_first=a.skip - 1, wait=0, warmup=1, active=a.active, repeat=1),
            with_stack=True)
        prof.start()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        if prof:
            prof.step()
    if prof:
        prof.stop()
        rows = torch_lines(prof)
        with open(a.torch_profiler, "w") as f:
            json.dump({"rows": rows, "torch": torch.__version__}, f, indent=1)
        print(f"torch.profiler: {sum(r['kernels'] for r in rows.values())} kernels in {len(rows)} rows", flush=True)
    del keep
    print(f"pyline ok steps={a.steps} median_ms={sorted(times)[len(times) // 2]:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
