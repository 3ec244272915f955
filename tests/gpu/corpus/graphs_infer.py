#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""graphs_infer.py - corpus: torch.compile(mode="reduce-overhead") inference. After warm-up each
iteration is one CUDA graph launch plus an eager op, with no host synchronisation per iteration
(the host runs ahead until the launch queue pushes back); the result is read once at the end."""
import sys

import torch

import truth

ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024),
                            torch.nn.LayerNorm(1024)).cuda().eval()
f = torch.compile(model, mode="reduce-overhead")
x = torch.randn(64, 1024, device="cuda")
acc = torch.zeros(64, 1024, device="cuda")
with torch.no_grad():
    for i in range(ITERS):
        truth.mark()
        y = f(x)
        acc.add_(y)          # eager op outside the graph
torch.cuda.synchronize()
print(f"graphs_infer ok iters={ITERS} checksum={float(acc.sum()):.3f}")
