#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compile_infer_graphs.py [ITERS] - inference with torch.compile(mode="reduce-overhead") (CUDA
graphs through cudagraph trees): a small attention block (scaled_dot_product_attention) plus an
MLP, under torch.no_grad(), on static-shape batches; after warm-up each iteration is one CUDA
graph replay plus an eager op outside the graph (the output added into an accumulator); no host
synchronisation per iteration, the result read once at the end. 40 iterations by default (the
short run the default schedule must still fit), 300 with the argument. No optimizer: the period
detector's case. Truth: cuGetErrorName at the start of every iteration."""
import sys

import common
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        h = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(h)
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    torch.manual_seed(0)
    model = nn.Sequential(Block(512, 8), Block(512, 8)).cuda().eval()
    f = torch.compile(model, mode="reduce-overhead")
    inputs = [torch.randn(8, 128, 512, device="cuda") for _ in range(4)]
    acc = torch.zeros(8, 128, 512, device="cuda")
    it = common.Iterations("compile_infer_graphs", iters)
    with torch.no_grad():
        for i in range(iters):
            it.mark()
            y = f(inputs[i % len(inputs)])
            acc.add_(y)          # eager, outside the graph
    torch.cuda.synchronize()
    print(f"compile_infer_graphs checksum {float(acc.float().abs().sum()):.3f}", flush=True)
    return it.done()


if __name__ == "__main__":
    sys.exit(main())
