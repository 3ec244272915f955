#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""graphs_train.py - corpus: a whole training step (forward, backward, Adam(capturable)) captured
once in a CUDA graph with torch.cuda.graph and replayed every iteration; new data is copied into
the static input first; the loss is read (a host sync) only every 25 iterations, as a logger does."""
import sys

import torch

import truth

ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4, capturable=True)
sx = torch.randn(128, 512, device="cuda")
sy = torch.randn(128, 512, device="cuda")
data = [(torch.randn(128, 512, device="cuda"), torch.randn(128, 512, device="cuda")) for _ in range(8)]

s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):          # warm-up on a side stream, as the docs require
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(sx), sy).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(g):
    sloss = torch.nn.functional.mse_loss(model(sx), sy)
    sloss.backward()
    opt.step()
for i in range(ITERS):
    truth.mark()
    x, y = data[i % len(data)]
    sx.copy_(x)
    sy.copy_(y)
    g.replay()
    if i % 25 == 0:
        print(f"iter {i} loss {sloss.item():.4f}")
torch.cuda.synchronize()
print(f"graphs_train ok iters={ITERS}")
