#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""hf_trainer.py [--steps 60] - transformers.Trainer training a small GPT-2 built from GPT2Config
(random weights, random tokens: nothing downloaded), as a user writes it: gradient accumulation 2,
evaluation every 20 optimizer steps, bf16, DataLoader workers 2, logging every 5 steps,
report_to none, no saving. One epoch covers every step.
Truth: a TrainerCallback's on_step_begin, which the Trainer calls at the first micro-batch of each
optimizer update (`step % gradient_accumulation_steps == 0` in its inner loop); it marks only when
state.global_step has moved since its last mark, so a Trainer that called it per micro-batch would
still give one mark per update. Prints train_runtime and train_samples_per_second from the
Trainer's own metrics (the bench's end-to-end figures) and global_step."""
import argparse
import dataclasses
import sys
import tempfile

import common
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, vocab, (n, seq), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        x = self.ids[i]
        return {"input_ids": x, "labels": x.clone()}


class Truth(TrainerCallback):
    def __init__(self, it):
        self.it, self.last, self.calls = it, None, 0

    def on_step_begin(self, args, state, control, **kwargs):
        self.calls += 1
        if state.global_step != self.last:
            self.last = state.global_step
            self.it.mark()


def training_args(out, a):
    want = dict(output_dir=out, max_steps=a.steps, per_device_train_batch_size=a.batch,
                per_device_eval_batch_size=a.batch, gradient_accumulation_steps=a.accum,
                eval_strategy="steps", eval_steps=a.eval_steps, logging_strategy="steps", logging_steps=5,
                bf16=True, dataloader_num_workers=2, report_to="none", save_strategy="no", disable_tqdm=True,
                learning_rate=3e-4, seed=0)
    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    if "eval_strategy" not in fields and "evaluation_strategy" in fields:
        want["evaluation_strategy"] = want.pop("eval_strategy")
    for k in [k for k in want if k not in fields]:
        common.api_note(f"TrainingArguments({k}=...)", KeyError("not a field in this transformers; left out"))
        want.pop(k)
    return TrainingArguments(**want)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--eval-steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    a = p.parse_args()
    torch.manual_seed(0)
    vocab = 4096
    cfg = GPT2Config(vocab_size=vocab, n_positions=a.seq, n_embd=256, n_layer=4, n_head=4,
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    train = Tokens(a.steps * a.accum * a.batch + 4 * a.batch, a.seq, vocab, 1)
    evals = Tokens(4 * a.batch, a.seq, vocab, 2)
    it = common.Iterations("hf_trainer", a.steps)
    cb = Truth(it)
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(model=model, args=training_args(out, a), train_dataset=train, eval_dataset=evals,
                          callbacks=[cb])
        res = trainer.train()
    m = res.metrics
    print(f"hf_trainer metrics train_runtime={m.get('train_runtime')} "
          f"train_samples_per_second={m.get('train_samples_per_second')} "
          f"train_steps_per_second={m.get('train_steps_per_second')} train_loss={m.get('train_loss')}", flush=True)
    return it.done(global_step=trainer.state.global_step, on_step_begin_calls=cb.calls,
                   train_runtime=m.get("train_runtime"))


if __name__ == "__main__":
    sys.exit(main())
