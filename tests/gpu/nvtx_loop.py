#!/usr/bin/env python3
"""A loop whose iterations are NVTX ranges named "train_step" (torch.cuda.nvtx), three elementwise
kernels each, for the nvtx marker test of tests/gpu/run.sh. Prints "nvtx ok N"."""
import sys
import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
x = torch.ones(1 << 16, device="cuda")
for _ in range(steps):
    torch.cuda.nvtx.range_push("train_step")
    x = x * 2.0
    x = x + 1.0
    x = x.sqrt()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
print(f"nvtx ok {steps}")
