#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rl_phases.py [--iters 30] - an RL fine-tuning loop with two phases per iteration, as RLHF/GRPO
trainers run them: rollout, then training (seed 000's case). Rollout: the policy (a small GPT-2
from GPT2Config, random weights) generates 32 tokens for 32 prompts with model.generate(do_sample)
under torch.no_grad() in eval mode; a reward per sequence is computed on the GPU. Training: 8
micro-batches of 4 sequences, a REINFORCE loss (log-probabilities of the sampled tokens times the
advantage), backward per micro-batch, then clip_grad_norm_ and one AdamW step. Falls back to a
hand-written sampling loop if generate() refuses, saying so.
Truth: cuGetErrorName at the start of every iteration (rollout + training); the program also
prints how long each phase took."""
import argparse
import sys
import time

import common
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel


def sample_by_hand(policy, prompts, new):
    seq = prompts
    for _ in range(new):
        logits = policy(input_ids=seq).logits[:, -1, :].float()
        seq = torch.cat([seq, torch.multinomial(F.softmax(logits, -1), 1)], dim=1)
    return seq


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--new", type=int, default=32)
    p.add_argument("--micro", type=int, default=8)
    a = p.parse_args()
    torch.manual_seed(0)
    vocab, plen = 2048, 32
    cfg = GPT2Config(vocab_size=vocab, n_positions=plen + a.new, n_embd=256, n_layer=4, n_head=4,
                     bos_token_id=0, eos_token_id=0)
    policy = GPT2LMHeadModel(cfg).cuda()
    gc = policy.generation_config
    gc.pad_token_id, gc.eos_token_id = 0, None  # no early stop: every rollout is the same length
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-5)
    use_generate = True
    it = common.Iterations("rl_phases", a.iters)
    t_roll = t_train = 0.0
    for i in range(a.iters):
        it.mark()
        t0 = time.perf_counter()
        prompts = torch.randint(1, vocab, (a.prompts, plen), device="cuda")
        policy.eval()
        with torch.no_grad():
            if use_generate:
                try:
                    seqs = policy.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True,
                                           max_new_tokens=a.new)
                except Exception as e:  # noqa: BLE001 (any refusal: the loop goes on by hand, saying so)
                    common.api_note("GPT2LMHeadModel.generate", e)
                    use_generate = False
            if not use_generate:
                seqs = sample_by_hand(policy, prompts, a.new)
            gen = seqs[:, plen:]
            reward = (gen % 2 == 0).float().mean(1)
            adv = (reward - reward.mean()) / (reward.std() + 1e-6)
        t1 = time.perf_counter()
        policy.train()
        per = a.prompts // a.micro
        for m in range(a.micro):
            s = seqs[m * per:(m + 1) * per]
            logp = F.log_softmax(policy(input_ids=s).logits[:, plen - 1:-1, :].float(), -1)
            tok = logp.gather(-1, s[:, plen:].unsqueeze(-1)).squeeze(-1)
            loss = -(tok.sum(1) * adv[m * per:(m + 1) * per]).mean() / a.micro
            loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        t_roll += t1 - t0
        t_train += time.perf_counter() - t1
        if (i + 1) % 10 == 0:
            print(f"iter {i + 1} mean reward {reward.mean().item():.3f}", flush=True)
    torch.cuda.synchronize()
    return it.done(rollout_s=f"{t_roll:.2f}", train_s=f"{t_train:.2f}", generate="hf" if use_generate else "by-hand")


if __name__ == "__main__":
    sys.exit(main())
