#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ddp_train.py - corpus: DistributedDataParallel training under torchrun (NCCL, one process per
GPU), written the way a training script usually is, not for the detector: a residual MLP of a few
blocks under bf16 autocast, AdamW (foreach), gradient clipping, a cosine learning-rate schedule on
the host, batches from a pinned host dataset copied with non_blocking=True, the loss read
(loss.item()) every LOG_EVERY-th step for the log line, and an evaluation pass over EVAL_BATCHES
batches (no_grad, mean loss all-reduced across ranks, read once) before training and every
EVAL_EVERY steps. truth.mark() starts every training iteration (the truth; never a detector token).

The corpus runs LOG_EVERY 1 (the loss logged every step, as nanoGPT's log_interval = 1 does). With
LOG_EVERY 10 only every 10th iteration synchronises: automatic detection stays undecided on such a
loop today (tests/e2e/gen_tokens.c, class ddp_log10).

usage: torchrun --standalone --nproc_per_node 2 ddp_train.py [ITERS] [EVAL_EVERY] [LOG_EVERY]"""
import math
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import truth

ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
EVAL_EVERY = int(sys.argv[2]) if len(sys.argv) > 2 else 50
LOG_EVERY = int(sys.argv[3]) if len(sys.argv) > 3 else 1
EVAL_BATCHES, BATCH, DIM, CLASSES = 8, 64, 512, 100


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def main():
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, DIM), *[Block(DIM) for _ in range(4)], torch.nn.LayerNorm(DIM),
                                torch.nn.Linear(DIM, CLASSES)).to(dev)
    model = DDP(model, device_ids=[local])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    # this rank's shard of a synthetic dataset, in pinned host memory (what DataLoader(pin_memory=True) gives)
    g = torch.Generator().manual_seed(1 + rank)
    xs = torch.randn(64 * BATCH, 256, generator=g).pin_memory()
    ys = torch.randint(0, CLASSES, (64 * BATCH,), generator=g).pin_memory()
    nb = xs.shape[0] // BATCH

    def batch(i):
        s = (i % nb) * BATCH
        return xs[s:s + BATCH].to(dev, non_blocking=True), ys[s:s + BATCH].to(dev, non_blocking=True)

    def evaluate():
        model.eval()
        tot = torch.zeros((), device=dev)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for i in range(EVAL_BATCHES):
                x, y = batch(nb - 1 - i)
                tot += torch.nn.functional.cross_entropy(model(x), y).float()
        dist.all_reduce(tot)
        model.train()
        return tot.item() / (EVAL_BATCHES * world)

    lv = float("nan")
    for it in range(ITERS):
        truth.mark()
        if it % EVAL_EVERY == 0:
            ev = evaluate()
            if rank == 0:
                print(f"step {it}: eval loss {ev:.4f}")
        for pg in opt.param_groups:
            pg["lr"] = 3e-4 * 0.5 * (1 + math.cos(math.pi * it / ITERS))
        x, y = batch(it)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if it % LOG_EVERY == 0:
            lv = loss.item()
            if rank == 0:
                print(f"step {it}: loss {lv:.4f}")
    torch.cuda.synchronize()
    print(f"ddp_train ok rank={rank} iters={ITERS} loss={lv:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
