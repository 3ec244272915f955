#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""trigger_train.py - a training loop that runs until told to stop, for tests/gpu/trigger.sh
(`stepprof trigger` from outside): the MLP of mlp_train.py (DDP over NCCL when started by torchrun
with WORLD_SIZE > 1), each iteration ending with torch.cuda.synchronize() (the api marker
cudaDeviceSynchronize numbers the steps). Under DDP the ranks agree each step whether to stop
through a gloo (CPU) all-reduce, which launches no GPU kernel. Writes READY (with "{rank}" replaced) once --ready-after
steps ran, stops at --steps steps, when the file --stop exists, or after --seconds. Prints
"trigger_train ok rank=R steps=N" last.

usage: [torchrun --standalone --nproc_per_node 2] trigger_train.py [--steps N] [--stop FILE]
       [--ready FILE] [--ready-after N] [--seconds S] [--layers L] [--width W]"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlp_train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0: no limit)")
    ap.add_argument("--stop", default="", help="stop once this file exists")
    ap.add_argument("--ready", default="", help="file written after --ready-after steps")
    ap.add_argument("--ready-after", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=2048)
    a = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    wrap = cpu = None
    if world > 1:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl")
        cpu = dist.new_group(backend="gloo")
        wrap = lambda m: DDP(m, device_ids=[local])  # noqa: E731
    g = torch.Generator(device="cuda")
    g.manual_seed(1234 + rank)
    step = mlp_train.make_step(layers=a.layers, width=a.width, batch=64, wrap=wrap, generator=g)
    t0 = time.monotonic()
    n = 0
    while True:
        step()
        torch.cuda.synchronize()
        n += 1
        if a.ready and n == a.ready_after:
            with open(a.ready.replace("{rank}", str(rank)), "w") as f:
                f.write(f"{os.getpid()}\n")
        stop = (a.steps and n >= a.steps) or (a.stop and os.path.exists(a.stop)) or time.monotonic() - t0 > a.seconds
        if cpu is not None:
            import torch.distributed as dist
            flag = torch.tensor([1 if stop else 0])
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=cpu)
            stop = bool(flag.item())
        if stop:
            break
    if world > 1:
        import torch.distributed as dist
        dist.barrier()
        dist.destroy_process_group()
    print(f"trigger_train ok rank={rank} steps={n}", flush=True)


if __name__ == "__main__":
    main()
