#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gradscaler_resnet.py [--iters 80] [--inf-every K] - a hand-written AMP loop: torchvision resnet18
(weights=None), fp16 autocast + torch.amp.GradScaler, channels_last, SGD with momentum, batches
copied from pinned host memory each iteration, evaluation (4 batches, accuracy read with .item())
after every 25th iteration.
--inf-every K: every K-th iteration's loss is multiplied by inf, so its gradients overflow and
GradScaler skips the optimizer step (scaler.update still runs): those iterations launch no
optimizer kernels. The loss is then multiplied by a factor tensor (1 or inf) in every iteration,
so the other iterations keep one kernel count. Truth: cuGetErrorName at the start of every
iteration, skipped or not. The optimizer's own step post hook counts the steps taken (printed as
optimizer_steps: iterations minus forced overflows when GradScaler skipped them)."""
import argparse
import sys

import common
import torch
import torch.nn.functional as F
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=80)
    p.add_argument("--inf-every", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=100).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    steps_taken = [0]
    opt.register_step_post_hook(lambda o, args, kwargs: steps_taken.__setitem__(0, steps_taken[0] + 1))
    scaler = torch.amp.GradScaler("cuda")
    data = [(torch.randn(a.batch, 3, 64, 64).pin_memory(), torch.randint(0, 100, (a.batch,)).pin_memory())
            for _ in range(8)]
    evals = [(torch.randn(a.batch, 3, 64, 64, device="cuda").to(memory_format=torch.channels_last),
              torch.randint(0, 100, (a.batch,), device="cuda")) for _ in range(4)]
    one = torch.ones((), device="cuda")
    inf = torch.full((), float("inf"), device="cuda")
    it = common.Iterations("gradscaler_resnet" + ("_inf" if a.inf_every else ""), a.iters)
    forced = 0

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
            for x, y in evals:
                correct += int((model(x).argmax(-1) == y).sum().item())
        model.train()
        return correct / (len(evals) * a.batch)

    for i in range(a.iters):
        it.mark()
        x, y = data[i % len(data)]
        x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
        y = y.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        if a.inf_every:
            bad = (i + 1) % a.inf_every == 0
            forced += bad
            loss = loss * (inf if bad else one)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if (i + 1) % a.eval_every == 0:
            print(f"iter {i + 1} eval accuracy {evaluate():.3f} scale {scaler.get_scale():.0f}", flush=True)
    torch.cuda.synchronize()
    return it.done(optimizer_steps=steps_taken[0], forced_overflows=forced)


if __name__ == "__main__":
    sys.exit(main())
