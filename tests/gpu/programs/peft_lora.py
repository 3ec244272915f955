#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""peft_lora.py [--steps 60] - LoRA fine-tuning with peft of a small causal LM built from a config
(transformers LlamaConfig: 4 layers, hidden 512; random weights, random tokens): get_peft_model
with LoraConfig(r=16, q/k/v/o projections), a plain loop with bf16 autocast, AdamW over the
trainable parameters, clip_grad_norm_, a linear warm-up schedule, loss.item() every 10 steps.
Truth: cuGetErrorName at the start of every step."""
import argparse
import sys

import common
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    a = p.parse_args()
    torch.manual_seed(0)
    vocab = 8192
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=a.seq,
                      bos_token_id=0, eos_token_id=0, pad_token_id=0)
    base = LlamaForCausalLM(cfg)
    lcfg = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                      task_type="CAUSAL_LM")
    model = get_peft_model(base, lcfg).cuda()
    try:
        model.print_trainable_parameters()
    except AttributeError as e:
        common.api_note("print_trainable_parameters", e)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
    data = [torch.randint(1, vocab, (a.batch, a.seq), device="cuda") for _ in range(8)]
    model.train()
    it = common.Iterations("peft_lora", a.steps)
    for step in range(a.steps):
        it.mark()
        x = data[step % len(data)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if (step + 1) % 10 == 0:
            print(f"step {step + 1} loss {loss.item():.4f}", flush=True)
    torch.cuda.synchronize()
    return it.done()


if __name__ == "__main__":
    sys.exit(main())
