#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""timm_train.py [--iters 60] - the parts of timm's own train.py a user reuses: a ViT from
timm.create_model(pretrained=False) (vit_tiny_patch16_224 at 64x64), timm.optim.create_optimizer_v2
(AdamW, weight decay without bias/norm), timm.scheduler.create_scheduler_v2 (cosine, stepped per
update with step_update), LabelSmoothingCrossEntropy, bf16 autocast, and a ModelEmaV3 updated after
every optimizer step; evaluation of the EMA model every 20 iterations. Missing pieces (older timm)
fall back to torch's, saying so. Truth: cuGetErrorName at the start of every iteration."""
import argparse
import sys

import common
import timm
import torch


def make_scheduler(opt, iters):
    try:
        from timm.scheduler import create_scheduler_v2
        sched, _ = create_scheduler_v2(opt, sched="cosine", num_epochs=1, warmup_epochs=0, step_on_epochs=False,
                                       updates_per_epoch=iters)
        return lambda n: sched.step_update(num_updates=n)
    except (ImportError, TypeError, AssertionError) as e:
        common.api_note("timm create_scheduler_v2", e)
        s = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=iters)
        return lambda n: s.step()


def make_ema(model):
    try:
        from timm.utils import ModelEmaV3
        ema = ModelEmaV3(model, decay=0.998)
        return ema, lambda n: ema.update(model, step=n)
    except (ImportError, TypeError) as e:
        common.api_note("timm ModelEmaV3", e)
        from timm.utils import ModelEmaV2
        ema = ModelEmaV2(model, decay=0.998)
        return ema, lambda n: ema.update(model)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--eval-every", type=int, default=20)
    a = p.parse_args()
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=100, img_size=64,
                              drop_path_rate=0.1).cuda()
    from timm.optim import create_optimizer_v2
    opt = create_optimizer_v2(model, opt="adamw", lr=1e-3, weight_decay=0.05)
    step_sched = make_scheduler(opt, a.iters)
    ema, ema_update = make_ema(model)
    try:
        from timm.loss import LabelSmoothingCrossEntropy
        crit = LabelSmoothingCrossEntropy(smoothing=0.1)
    except ImportError as e:
        common.api_note("timm LabelSmoothingCrossEntropy", e)
        crit = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    data = [(torch.randn(a.batch, 3, 64, 64, device="cuda"), torch.randint(0, 100, (a.batch,), device="cuda"))
            for _ in range(8)]
    it = common.Iterations("timm_train", a.iters)
    for i in range(a.iters):
        it.mark()
        x, y = data[i % len(data)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = crit(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ema_update(i + 1)
        step_sched(i + 1)
        if (i + 1) % a.eval_every == 0:
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                acc = (ema.module(data[0][0]).argmax(-1) == data[0][1]).float().mean().item()
            print(f"iter {i + 1} loss {loss.item():.4f} ema accuracy {acc:.3f}", flush=True)
    torch.cuda.synchronize()
    return it.done()


if __name__ == "__main__":
    sys.exit(main())
