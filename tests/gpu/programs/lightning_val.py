#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lightning_val.py [--steps 80] [--accum 1] - a LightningModule (small CNN on random 32x32 images)
trained by Lightning's Trainer as its docs show: sanity validation (2 batches), validation every 25
training batches (5 batches each, self.log of the loss), precision bf16-mixed, AdamW with a
per-step cosine schedule, DataLoader workers 2, no logger, checkpoint, progress bar or summary.
Truth: a Callback's on_train_batch_start, marked only when trainer.global_step (Lightning's count
of optimizer steps) has moved since the last mark: one mark per optimizer step also with
--accum N (accumulate_grad_batches), where N batches make one step."""
import argparse
import sys

import common
import torch
import torch.nn.functional as F
from torch import nn

try:
    import lightning.pytorch as pl
except ImportError as e:  # the older package name
    common.api_note("import lightning.pytorch", e)
    import pytorch_lightning as pl


class Net(pl.LightningModule):
    def __init__(self, total):
        super().__init__()
        self.total = total
        self.model = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.model(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.model(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=0.05)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=self.total)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class Truth(pl.Callback):
    def __init__(self, it):
        self.it, self.last = it, None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step != self.last:
            self.last = trainer.global_step
            self.it.mark()


def loader(n, batch, seed, shuffle):
    g = torch.Generator().manual_seed(seed)
    ds = torch.utils.data.TensorDataset(torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g))
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=shuffle, num_workers=2, drop_last=True,
                                       persistent_workers=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    a = p.parse_args()
    torch.manual_seed(0)
    batches = a.steps * a.accum
    train = loader((batches + 8) * a.batch, a.batch, 1, True)
    val = loader(5 * a.batch, a.batch, 2, False)
    it = common.Iterations("lightning_val", a.steps)
    trainer = pl.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=a.steps,
                         val_check_interval=25, limit_val_batches=5, num_sanity_val_steps=2,
                         accumulate_grad_batches=a.accum, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[Truth(it)])
    trainer.fit(Net(a.steps), train, val)
    print(f"lightning_val metrics {dict((k, float(v)) for k, v in trainer.callback_metrics.items())}", flush=True)
    return it.done(global_step=trainer.global_step)


if __name__ == "__main__":
    sys.exit(main())
