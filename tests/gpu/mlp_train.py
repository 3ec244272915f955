#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mlp_train.py - an unmodified-style PyTorch training loop for the GPU suite and the benchmark:
an MLP of --layers x (Linear(width) + ReLU), MSE loss, Adam(foreach), fp32, fixed input batch.
Each iteration ends with torch.cuda.synchronize() (the step time is measured boundary to
boundary). Prints "pid N ppid M" first and "mlp ok steps=... median_ms=... max_reserved_mb=..." last.

  --torch-profiler OUT.json   run the same loop under torch.profiler (CPU+CUDA) with the
                              schedule given by --skip-first/--wait/--warmup/--active/--repeat;
                              each window is exported as Chrome JSON (OUT.json, then OUT.1.json...)
  --torch-profiler-coexist    start torch.profiler anyway (next to stepprof, which owns CUPTI):
                              the loop must still finish and exit 0
  --memory-json OUT.json      at the end, write torch's exact reserved bytes (peak and current)
                              and the caching allocator's segments (address, size) as JSON, for
                              check_memory.py; also prints "mlp memory max_reserved_bytes=B"
Steps default to $MLP_STEPS or 30."""
import argparse
import json
import os
import statistics
import sys
import time

import torch


def make_step(layers=8, width=4096, batch=64, wrap=None, generator=None):
    """Builds the model (passed through wrap if given, e.g. into DDP), optimiser and a fixed batch
    (drawn from generator if given) on the current CUDA device; returns step() doing one training
    step."""
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods).cuda()
    if wrap:
        model = wrap(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(batch, width, device="cuda", generator=generator)
    y = torch.randn(batch, width, device="cuda", generator=generator)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()

    return step


def trace_exporter(path):
    """on_trace_ready handler: window k goes to path (k = 0) or path with .k before .json."""
    count = [0]

    def export(prof):
        k = count[0]
        out = path if k == 0 else path.replace(".json", f".{k}.json", 1)
        prof.export_chrome_trace(out)
        count[0] += 1
        print(f"torch.profiler: window {k} (step {prof.step_num}) exported to {out}", flush=True)

    return export


def write_memory_json(path, device, **extra):
    """Writes torch's exact reserved bytes of device (peak and now) and the caching allocator's
    segments as JSON to path; returns the peak. The segments let check_memory.py tell torch's
    device allocations from other libraries' (NCCL buffers, ...) by address."""
    segs = [[s["address"], s["total_size"]] for s in torch.cuda.memory_snapshot()
            if s.get("device", device) == device]
    peak = torch.cuda.max_memory_reserved(device)
    info = {"device": device, "max_reserved_bytes": peak, "reserved_bytes": torch.cuda.memory_reserved(device),
            "segments": segs, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "torch": torch.__version__, **extra}
    with open(path, "w") as f:
        json.dump(info, f)
    return peak


def make_profiler(args):
    """The torch.profiler for --torch-profiler / --torch-profiler-coexist, or None."""
    if not (args.torch_profiler or args.torch_profiler_coexist):
        return None
    sched = torch.profiler.schedule(skip_first=args.skip_first, wait=args.wait, warmup=args.warmup,
                                    active=args.active, repeat=args.repeat)
    if args.torch_profiler:
        ready = trace_exporter(args.torch_profiler)
    else:
        def ready(prof):
            n = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
            print(f"torch.profiler (coexist): window at step {prof.step_num} holds {n} CUDA events",
                  flush=True)
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
        schedule=sched, on_trace_ready=ready)


def add_loop_args(p, steps, skip_first, profiler_out):
    """The options this script and train_ddp.py share: loop length, model size, torch.profiler's
    output (metavar profiler_out) and schedule, the memory file."""
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--torch-profiler", metavar=profiler_out)
    p.add_argument("--memory-json", metavar="OUT.json")
    p.add_argument("--skip-first", type=int, default=skip_first)
    p.add_argument("--wait", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--repeat", type=int, default=1)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_loop_args(p, int(os.environ.get("MLP_STEPS", "30")), 5, "OUT.json")
    p.add_argument("--torch-profiler-coexist", action="store_true")
    return p.parse_args(argv)


def main():
    args = parse_args()
    print(f"pid {os.getpid()} ppid {os.getppid()}", flush=True)
    if not torch.cuda.is_available():
        print("mlp_train: CUDA is not available", file=sys.stderr)
        return 1
    step = make_step(args.layers, args.width, args.batch)
    prof = make_profiler(args)
    if prof:
        prof.start()
    times = []
    t_prev = time.perf_counter()
    for _ in range(args.steps):
        step()
        torch.cuda.synchronize()
        if prof:
            prof.step()
        t = time.perf_counter()
        times.append((t - t_prev) * 1e3)
        t_prev = t
    if prof:
        prof.stop()
    reserved = torch.cuda.max_memory_reserved() / 2**20
    print(f"mlp ok steps={args.steps} median_ms={statistics.median(times):.3f} "
          f"max_reserved_mb={reserved:.0f}", flush=True)
    if args.memory_json:
        peak = write_memory_json(args.memory_json, torch.cuda.current_device())
        print(f"mlp memory max_reserved_bytes={peak}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
