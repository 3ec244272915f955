#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""datadep.py - corpus, negative case: a data-dependent loop (mixture-of-experts-like routing)
where each iteration launches a random number of kernels of random kinds and sizes, then reads a
value (a host sync). No launch sequence repeats: automatic detection must NOT lock on a period
(it must say it is unsure and suggest a marker)."""
import random
import sys

import torch

import truth

ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
random.seed(1234)
torch.manual_seed(0)
experts = [torch.randn(256, 256, device="cuda") for _ in range(8)]
x = torch.randn(64, 256, device="cuda")
for i in range(ITERS):
    truth.mark()
    h = x
    for _ in range(random.randint(1, 12)):
        k = random.randrange(8)
        op = random.random()
        if op < 0.4:
            h = torch.relu(h @ experts[k])
        elif op < 0.6:
            h = torch.tanh(h) * 0.5
        elif op < 0.8:
            h = h + experts[k][: h.shape[0], :]
        else:
            h = torch.softmax(h, dim=-1)
    if random.random() < 0.3:
        h = h.cumsum(0)
    v = float(h.float().norm())       # host sync, value decides nothing but ends the iteration
    x = torch.nn.functional.normalize(h, dim=-1).detach()
print(f"datadep ok iters={ITERS}")
