#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""oom_train.py [--iters 24] [--oom-at 14] - a small MLP training loop (Adam) for
tests/gpu/torch_memory.sh: at iteration --oom-at it asks for a tensor larger than the GPU
(the line marked OOM-LINE below), catches torch.OutOfMemoryError, prints "OOM caught at
iteration I line L" and goes on. Ends with "PROG oom_train ok"."""
import argparse
import inspect

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=24)
    p.add_argument("--oom-at", type=int, default=14)
    a = p.parse_args()
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512, device="cuda")
    for i in range(a.iters):
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if i == a.oom_at:
            try:
                line = inspect.currentframe().f_lineno + 1
                huge = torch.empty(1 << 38, dtype=torch.uint8, device="cuda")  # OOM-LINE
                del huge
            except torch.OutOfMemoryError:
                print(f"OOM caught at iteration {i} line {line}", flush=True)
        opt.step()
    torch.cuda.synchronize()
    print("PROG oom_train ok", flush=True)


if __name__ == "__main__":
    main()
