#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nanogpt_run.py NANOGPT_DIR [train.py overrides...] - corpus: karpathy/nanoGPT's train.py run
unchanged (fetched, not committed: .thirdparty/nanoGPT holds train.py, model.py, configurator.py)
on synthetic data (random uint16 tokens, vocab 512, written to NANOGPT_DIR/data/synth), with the
truth marked by a global optimizer step pre-hook (one optimizer step = one training step, whatever
the gradient accumulation). Only two compatibility shims, no change to the loop:
torch.cuda.amp.GradScaler falls back to torch.amp.GradScaler("cuda") where torch removed it."""
import os
import pickle
import runpy
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truth  # noqa: E402

ng = os.path.abspath(sys.argv[1])
d = os.path.join(ng, "data", "synth")
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(0)
for split, n in (("train", 2_000_000), ("val", 200_000)):
    p = os.path.join(d, f"{split}.bin")
    if not os.path.exists(p):
        rng.integers(0, 512, n, dtype=np.uint16).tofile(p)
with open(os.path.join(d, "meta.pkl"), "wb") as f:
    pickle.dump({"vocab_size": 512}, f)
if not hasattr(torch.cuda.amp, "GradScaler"):
    torch.cuda.amp.GradScaler = lambda **kw: torch.amp.GradScaler("cuda", **kw)
from torch.optim.optimizer import register_optimizer_step_pre_hook  # noqa: E402

register_optimizer_step_pre_hook(lambda opt, args, kwargs: truth.mark())
os.chdir(ng)
sys.path.insert(0, ng)  # train.py imports model.py from its own folder
sys.argv = ["train.py", "--dataset=synth", "--out_dir=/tmp/nanogpt-out", "--always_save_checkpoint=False",
            "--n_layer=4", "--n_head=4", "--n_embd=256", "--block_size=128", "--batch_size=16",
            "--warmup_iters=10", "--lr_decay_iters=1000", "--dropout=0.0"] + sys.argv[2:]
runpy.run_path("train.py", run_name="__main__")
