#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ops_state.py PROGRAM.py [ARGS...] - runs PROGRAM.py as python would (runpy, __main__) and after
every optimizer step prints "OPSTATE n profiler=P pre=A fwd=B always=C" (torch's profiler state on
this thread, and how many global module hooks are registered): what stepprof's [activities] ops
leaves on after its window (tools/ops_after.sh)."""
import os
import runpy
import sys

import torch
import torch.nn.modules.module as tm
import torch.optim.optimizer as topt

n = [0]


def post(opt, args, kwargs):
    n[0] += 1
    print(f"OPSTATE {n[0]} profiler={int(torch.autograd._profiler_enabled())} "
          f"pre={len(tm._global_forward_pre_hooks)} fwd={len(tm._global_forward_hooks)} "
          f"always={len(getattr(tm, '_global_forward_hooks_always_called', {}))}", flush=True)


topt.register_optimizer_step_post_hook(post)
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
runpy.run_path(sys.argv[0], run_name="__main__")
