#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""wgan.py [--rounds 40] [--critic 5] - WGAN-GP (Gulrajani et al.): per round the critic steps 5
times (each with a gradient penalty: torch.autograd.grad with create_graph, then backward, Adam),
then the generator steps once: six optimizer steps of two optimizers per round, in the cycle
C C C C C G. MLPs on 784-wide random "real" samples; losses read with .item() every 10 rounds.
Truth: cuGetErrorName at the start of every round (one generator + critic round)."""
import argparse
import sys

import common
import torch
from torch import nn


def mlp(i, o, out_act=None):
    layers = [nn.Linear(i, 512), nn.LeakyReLU(0.2), nn.Linear(512, 512), nn.LeakyReLU(0.2), nn.Linear(512, o)]
    return nn.Sequential(*layers, *([out_act] if out_act else []))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--critic", type=int, default=5)
    p.add_argument("--batch", type=int, default=128)
    a = p.parse_args()
    torch.manual_seed(0)
    nz, dim, lam = 64, 784, 10.0
    G, C = mlp(nz, dim, nn.Tanh()).cuda(), mlp(dim, 1).cuda()
    optG = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.5, 0.9))
    optC = torch.optim.Adam(C.parameters(), lr=1e-4, betas=(0.5, 0.9))
    reals = [torch.rand(a.batch, dim, device="cuda") * 2 - 1 for _ in range(16)]
    it = common.Iterations("wgan", a.rounds)
    k = 0
    for r in range(a.rounds):
        it.mark()
        for _ in range(a.critic):
            real = reals[k % len(reals)]
            k += 1
            with torch.no_grad():
                fake = G(torch.randn(a.batch, nz, device="cuda"))
            eps = torch.rand(a.batch, 1, device="cuda")
            mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
            grad, = torch.autograd.grad(C(mix).sum(), mix, create_graph=True)
            gp = ((grad.norm(2, dim=1) - 1) ** 2).mean()
            lossC = C(fake).mean() - C(real).mean() + lam * gp
            optC.zero_grad(set_to_none=True)
            lossC.backward()
            optC.step()
        lossG = -C(G(torch.randn(a.batch, nz, device="cuda"))).mean()
        optG.zero_grad(set_to_none=True)
        lossG.backward()
        optG.step()
        if (r + 1) % 10 == 0:
            print(f"round {r + 1} lossC {lossC.item():.4f} lossG {lossG.item():.4f}", flush=True)
    torch.cuda.synchronize()
    return it.done()


if __name__ == "__main__":
    sys.exit(main())
