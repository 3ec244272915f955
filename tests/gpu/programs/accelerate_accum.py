#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""accelerate_accum.py [--steps 45] - a HuggingFace accelerate loop as its docs show:
Accelerator(gradient_accumulation_steps=4, mixed_precision="bf16"), model, optimizer, DataLoader
and scheduler through accelerator.prepare, and per batch `with accelerator.accumulate(model):`
forward, accelerator.backward, clip_grad_norm_ (on the synchronising micro-step), optimizer.step,
scheduler.step, optimizer.zero_grad (the prepared optimizer steps only when gradients sync).
Evaluation (4 batches, loss read with .item()) after every 15th optimizer step. The model is a
residual MLP classifier on random features.
Truth: cuGetErrorName before the first micro-batch of each update: the loop marks when the
previous batch ended an update (accelerator.sync_gradients), and before the first batch."""
import argparse
import sys

import common
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=45)
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--eval-every", type=int, default=15)
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    torch.manual_seed(0)
    acc = Accelerator(gradient_accumulation_steps=a.accum, mixed_precision="bf16")
    d = 512
    model = nn.Sequential(nn.Linear(256, d), *[Block(d) for _ in range(6)], nn.LayerNorm(d), nn.Linear(d, 100))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    # in micro-batches: the prepared scheduler counts the accumulating ones too (adjust_scheduler)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=a.steps * a.accum)
    g = torch.Generator().manual_seed(1)
    n = a.steps * a.accum * a.batch  # one epoch is exactly the run: the last batch ends an update
    ds = torch.utils.data.TensorDataset(torch.randn(n, 256, generator=g), torch.randint(0, 100, (n,), generator=g))
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, drop_last=True)
    model, opt, dl, sched = acc.prepare(model, opt, dl, sched)
    evals = [(torch.randn(a.batch, 256, device=acc.device), torch.randint(0, 100, (a.batch,), device=acc.device))
             for _ in range(4)]

    def evaluate():
        model.eval()
        with torch.no_grad():
            tot = sum(F.cross_entropy(model(x), y) for x, y in evals)
        model.train()
        return tot.item() / len(evals)

    it = common.Iterations("accelerate_accum", a.steps)
    update_begins, step = True, 0
    for x, y in dl:
        if update_begins:
            it.mark()
            update_begins = False
        with acc.accumulate(model):
            loss = F.cross_entropy(model(x), y)
            acc.backward(loss)
            if acc.sync_gradients:
                acc.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
        if acc.sync_gradients:
            update_begins = True
            step += 1
            if step % a.eval_every == 0:
                print(f"step {step}: eval loss {evaluate():.4f}", flush=True)
    torch.cuda.synchronize()
    return it.done(updates=step)


if __name__ == "__main__":
    sys.exit(main())
