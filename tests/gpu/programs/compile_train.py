#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compile_train.py [--iters 60] - training with torch.compile in its default mode (Inductor, no
CUDA graphs): a residual MLP block stack compiled with torch.compile(model), fused AdamW (not
compiled), TF32 matmuls (set_float32_matmul_precision("high")), bf16 autocast, loss read with
.item() every 10 iterations. The first iteration compiles forward and backward.
Truth: cuGetErrorName at the start of every iteration."""
import argparse
import sys

import common
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--batch", type=int, default=256)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("high")
    d = 1024
    model = nn.Sequential(*[Block(d) for _ in range(4)], nn.LayerNorm(d), nn.Linear(d, 10)).cuda()
    cmodel = torch.compile(model)
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    except (RuntimeError, TypeError) as e:
        common.api_note("AdamW(fused=True)", e)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [(torch.randn(a.batch, d, device="cuda"), torch.randint(0, 10, (a.batch,), device="cuda")) for _ in range(8)]
    it = common.Iterations("compile_train", a.iters)
    for i in range(a.iters):
        it.mark()
        x, y = data[i % len(data)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(cmodel(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (i + 1) % 10 == 0:
            print(f"iter {i + 1} loss {loss.item():.4f}", flush=True)
    torch.cuda.synchronize()
    return it.done()


if __name__ == "__main__":
    sys.exit(main())
