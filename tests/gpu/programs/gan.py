#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gan.py [--iters 60] - a DCGAN training loop as in PyTorch's examples (32x32 images, random
"real" data): per iteration the discriminator steps on real and generated images (backward,
optimizer D), then the generator steps through the discriminator (backward, optimizer G): two
optimizers and two backward passes. Losses read with .item() every 10 iterations.
Truth: cuGetErrorName at the start of every iteration (one D step + one G step)."""
import argparse
import sys

import common
import torch
import torch.nn.functional as F
from torch import nn


def generator(nz):
    return nn.Sequential(
        nn.ConvTranspose2d(nz, 256, 4, 1, 0, bias=False), nn.BatchNorm2d(256), nn.ReLU(True),
        nn.ConvTranspose2d(256, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.ReLU(True),
        nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(True),
        nn.ConvTranspose2d(64, 3, 4, 2, 1, bias=False), nn.Tanh())


def discriminator():
    return nn.Sequential(
        nn.Conv2d(3, 64, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(64, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.LeakyReLU(0.2, True),
        nn.Conv2d(128, 256, 4, 2, 1, bias=False), nn.BatchNorm2d(256), nn.LeakyReLU(0.2, True),
        nn.Conv2d(256, 1, 4, 1, 0, bias=False), nn.Flatten())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--batch", type=int, default=128)
    a = p.parse_args()
    torch.manual_seed(0)
    nz = 100
    G, D = generator(nz).cuda(), discriminator().cuda()
    optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optD = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    reals = [torch.rand(a.batch, 3, 32, 32, device="cuda") * 2 - 1 for _ in range(8)]
    ones = torch.ones(a.batch, 1, device="cuda")
    zeros = torch.zeros(a.batch, 1, device="cuda")
    it = common.Iterations("gan", a.iters)
    for i in range(a.iters):
        it.mark()
        real = reals[i % len(reals)]
        # discriminator: real vs generated (detached)
        D.zero_grad(set_to_none=True)
        fake = G(torch.randn(a.batch, nz, 1, 1, device="cuda"))
        lossD = F.binary_cross_entropy_with_logits(D(real), ones) + \
            F.binary_cross_entropy_with_logits(D(fake.detach()), zeros)
        lossD.backward()
        optD.step()
        # generator: fool the discriminator
        G.zero_grad(set_to_none=True)
        lossG = F.binary_cross_entropy_with_logits(D(fake), ones)
        lossG.backward()
        optG.step()
        if (i + 1) % 10 == 0:
            print(f"iter {i + 1} lossD {lossD.item():.4f} lossG {lossG.item():.4f}", flush=True)
    torch.cuda.synchronize()
    return it.done()


if __name__ == "__main__":
    sys.exit(main())
