#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""noise_probe.py - where a launch-bound loop's step-time swings come from on the GPU machine.
Runs the add loop (2000 tiny add_ kernels, one synchronize per step) and prints per step: the
wall time, the time to issue the launches, the time spent in the synchronize, the GPU time from
the first kernel to the last (CUDA events), and this thread's CPU time. Usage:
python3 noise_probe.py STEPS > steps.txt (pair with `nvidia-smi --query-gpu=... -lms 100`)."""
import sys
import time

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    x = torch.zeros(1024, device="cuda")
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    print("step t_s wall_ms issue_ms sync_ms gpu_ms cpu_ms")
    for i in range(steps):
        t0, c0 = time.perf_counter(), time.thread_time()
        e0.record()
        for _ in range(2000):
            x.add_(1.0)
        e1.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2, c2 = time.perf_counter(), time.thread_time()
        print(f"{i} {t2:.3f} {(t2 - t0) * 1e3:.3f} {(t1 - t0) * 1e3:.3f} {(t2 - t1) * 1e3:.3f} "
              f"{e0.elapsed_time(e1):.3f} {(c2 - c0) * 1e3:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
