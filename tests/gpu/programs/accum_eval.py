#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""accum_eval.py [--steps 60] - a plain PyTorch loop with gradient accumulation 4 and evaluation
before training and after every 10th optimizer step: a small pre-norm transformer language model
(nn.TransformerEncoderLayer, causal mask) on random tokens from a DataLoader (pinned, copied
non-blocking), AdamW, loss/4 backward per micro-batch, clip_grad_norm_, eval loss read with
.item(). Truth: cuGetErrorName at the start of each optimizer update (before its 4 micro-batches)."""
import argparse
import sys

import common
import torch
import torch.nn.functional as F
from torch import nn


class LM(nn.Module):
    def __init__(self, vocab, d, layers, seq):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, x):
        h = self.emb(x) + self.pos[: x.shape[1]]
        return self.head(self.body(h, mask=self.mask, is_causal=True))


def batches(loader):
    while True:
        yield from loader


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args()
    torch.manual_seed(0)
    vocab, seq = 2048, 128
    model = LM(vocab, 256, 4, seq).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    ds = torch.utils.data.TensorDataset(torch.randint(0, vocab, (64 * a.batch, seq + 1), generator=g))
    data = batches(torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, pin_memory=True, drop_last=True))
    evals = [torch.randint(0, vocab, (a.batch, seq + 1), device="cuda") for _ in range(4)]

    def evaluate():
        model.eval()
        with torch.no_grad():
            tot = sum(F.cross_entropy(model(t[:, :-1]).flatten(0, 1), t[:, 1:].flatten()) for t in evals)
        model.train()
        return tot.item() / len(evals)

    print(f"before training: eval loss {evaluate():.4f}", flush=True)
    it = common.Iterations("accum_eval", a.steps)
    for step in range(a.steps):
        it.mark()
        for _ in range(a.accum):
            (t,) = next(data)
            t = t.cuda(non_blocking=True)
            loss = F.cross_entropy(model(t[:, :-1]).flatten(0, 1), t[:, 1:].flatten())
            (loss / a.accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (step + 1) % a.eval_every == 0:
            print(f"step {step + 1}: eval loss {evaluate():.4f}", flush=True)
    torch.cuda.synchronize()
    return it.done()


if __name__ == "__main__":
    sys.exit(main())
