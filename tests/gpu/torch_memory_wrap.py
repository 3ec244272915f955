#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_memory_wrap.py PROGRAM [ARGS...] - runs PROGRAM unmodified (runpy, as __main__) after
registering torch's global optimizer post hook that prints, after every optimizer step,
"TMEM <n> <time.time()> <torch.cuda.memory_allocated()>" (tests/gpu/torch_memory.sh compares it
with stepprof's PyTorch memory snapshots; test-only). Registered before stepprof's Python bridge
installs its own hook (the bridge polls after torch is imported), so it runs first at each step."""
import runpy
import sys
import time

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

n = [0]


def hook(opt, args, kwargs):
    n[0] += 1
    print(f"TMEM {n[0]} {time.time():.6f} {torch.cuda.memory_allocated()}", flush=True)


register_optimizer_step_post_hook(hook)
prog = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, __import__("os").path.dirname(prog))
runpy.run_path(prog, run_name="__main__")
