#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""warmup_growth.py - corpus: a conv-net training loop whose first iterations differ: the batch
grows for the first 6 iterations (allocator growth, new shapes), cudnn.benchmark autotunes every
new shape, and a one-off gradient check runs at iteration 3; afterwards every iteration is the
same, ending in loss.item()."""
import sys

import torch

import truth

ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 120
torch.backends.cudnn.benchmark = True
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 3, padding=1),
                          torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
for i in range(ITERS):
    truth.mark()
    bs = min(8 * (i + 1), 48)
    x = torch.randn(bs, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (bs,), device="cuda")
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    if i == 3:
        gn = sum(p.grad.norm() for p in net.parameters())
        print(f"grad norm {float(gn):.3f}")
    opt.step()
    lv = loss.item()
print(f"warmup_growth ok iters={ITERS} loss={lv:.4f}")
