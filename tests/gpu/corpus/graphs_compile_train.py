#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""graphs_compile_train.py [ITERS] - corpus: training with torch.compile(mode="reduce-overhead") on the
model (cudagraph trees: forward and backward replayed as CUDA graphs) and an eager AdamW step, as users
speed up small-batch training; new data each iteration from a fixed pool; the loss read every 25
iterations (a host sync, as a logger does). The optimizer step is not captured: its hook fires each
iteration. Prints the loss lines and "graphs_compile_train ok iters=N"."""
import sys

import torch
import torch.nn.functional as F

import truth

ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
fwd = torch.compile(model, mode="reduce-overhead")
data = [(torch.randn(128, 512, device="cuda"), torch.randn(128, 512, device="cuda")) for _ in range(8)]
for i in range(ITERS):
    truth.mark()
    x, y = data[i % len(data)]
    opt.zero_grad(set_to_none=True)
    loss = F.mse_loss(fwd(x), y)
    loss.backward()
    opt.step()
    if i % 25 == 0:
        print(f"iter {i} loss {loss.item():.4f}")
torch.cuda.synchronize()
print(f"graphs_compile_train ok iters={ITERS}")
