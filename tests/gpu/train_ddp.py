#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""train_ddp.py - an unmodified-style DistributedDataParallel training loop for the 2-GPU suite
(tests/gpu/run-ddp.sh): one process per GPU under torchrun, NCCL backend, the MLP of
mlp_train.py (--layers x (Linear(width) + ReLU), MSE, Adam(foreach), fp32, a fixed batch per
rank). Each iteration ends with torch.cuda.synchronize(), as in mlp_train.py; there is no other
device synchronisation in the script, so an api marker on cudaDeviceSynchronize* numbers steps
as the loop does. Prints per rank "rank R pid P ppid Q" first and
"ddp ok rank=R steps=N max_reserved_bytes=B" (torch.cuda.max_memory_reserved) last.

  --torch-profiler OUT_DIR   run the same loop under torch.profiler (CPU+CUDA) with the schedule
                             --skip-first/--wait/--warmup/--active/--repeat; each rank exports
                             OUT_DIR/rank{R}.json (further windows rank{R}.1.json, ...)
  --memory-json PATH         write torch's reserved bytes and segments (see mlp_train.py) to PATH,
                             "{rank}" in PATH replaced by the rank
  --hide-rank-env            take RANK, LOCAL_RANK and WORLD_SIZE out of the environment before
                             CUDA starts (passing them to init_process_group instead), as a
                             launcher that sets no rank variable would: stepprof then learns the
                             rank from the NCCL communicator
  --stall-rank R --stall-ms MS   rank R sleeps MS ms on the host before each step (what a slow
                             data loader does): the straggler with cause "host"
  --batch-rank R --rank-batch N  rank R trains on N rows instead of --batch (more compute on one
                             rank): the straggler with cause "compute"
  --skew-rank R --skew-ns NS rank R sets STEPPROF_TEST_CLOCK_OFFSET_NS=NS before CUDA starts: its
                             wall-clock anchors look NS off, as on a host with a skewed clock

usage: torchrun --standalone --nproc_per_node 2 train_ddp.py [--steps N] [options]"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlp_train  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mlp_train.add_loop_args(p, 20, 8, "OUT_DIR")
    p.add_argument("--hide-rank-env", action="store_true")
    p.add_argument("--stall-rank", type=int, default=-1)
    p.add_argument("--stall-ms", type=float, default=0.0)
    p.add_argument("--batch-rank", type=int, default=-1)
    p.add_argument("--rank-batch", type=int, default=0)
    p.add_argument("--skew-rank", type=int, default=-1)
    p.add_argument("--skew-ns", type=int, default=0)
    return p.parse_args(argv)


def make_step(local_rank, rank, layers, width, batch):
    """mlp_train's step with the model in DDP on cuda:local_rank and this rank's fixed batch."""
    torch.manual_seed(0)  # equal initial weights (DDP broadcasts rank 0's anyway)
    g = torch.Generator(device="cuda").manual_seed(1 + rank)
    return mlp_train.make_step(layers, width, batch, wrap=lambda m: DDP(m, device_ids=[local_rank]), generator=g)


def make_profiler(args, rank):
    if not args.torch_profiler:
        return None
    os.makedirs(args.torch_profiler, exist_ok=True)
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
        schedule=torch.profiler.schedule(skip_first=args.skip_first, wait=args.wait, warmup=args.warmup,
                                         active=args.active, repeat=args.repeat),
        on_trace_ready=mlp_train.trace_exporter(os.path.join(args.torch_profiler, f"rank{rank}.json")))


def main():
    args = parse_args()
    try:
        rank, local, world = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    except (KeyError, ValueError):
        print("train_ddp: RANK, LOCAL_RANK and WORLD_SIZE must be set: run it under torchrun", file=sys.stderr)
        return 2
    if rank == args.skew_rank:  # read by stepprof at its first clock anchor, after CUDA starts
        os.environ["STEPPROF_TEST_CLOCK_OFFSET_NS"] = str(args.skew_ns)
    if args.hide_rank_env:
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
            os.environ.pop(k, None)
    print(f"rank {rank} pid {os.getpid()} ppid {os.getppid()}", flush=True)
    if torch.cuda.device_count() <= local:
        print(f"train_ddp: rank {rank} needs cuda:{local}, {torch.cuda.device_count()} GPUs visible",
              file=sys.stderr)
        return 1
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local), rank=rank, world_size=world)
    batch = args.rank_batch if rank == args.batch_rank and args.rank_batch > 0 else args.batch
    stall = args.stall_ms / 1e3 if rank == args.stall_rank else 0.0
    step = make_step(local, rank, args.layers, args.width, batch)
    prof = make_profiler(args, rank)
    if prof:
        prof.start()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        if stall:
            time.sleep(stall)  # a slow data loader: the GPU idles while the host waits
        step()
        torch.cuda.synchronize()
        if prof:
            prof.step()
    if prof:
        prof.stop()
    elapsed = time.perf_counter() - t0
    peak = torch.cuda.max_memory_reserved(local)
    if args.memory_json:
        mlp_train.write_memory_json(args.memory_json.replace("{rank}", str(rank)), local, rank=rank,
                                    world_size=world)
    dist.destroy_process_group()
    print(f"ddp ok rank={rank} steps={args.steps} max_reserved_bytes={peak} "
          f"ms_per_step={elapsed * 1e3 / max(args.steps, 1):.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
