#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ops_torchprof.py --first A --last B --out JSON -- PROGRAM.py [ARGS...] - torch.profiler's view of
the steps A..B of an unmodified training program, for tests/gpu/ops_check.sh to put beside
`stepprof report --by op`. Runs PROGRAM.py as `python3 PROGRAM.py ARGS` would (runpy, its folder
first on sys.path, __main__) inside torch.profiler.profile(schedule=schedule(wait=A-1, warmup=1,
active=B-A+1)), a step being one optimizer step as stepprof's `kind = optimizer` counts them: the
profiler steps from torch's global optimizer step post hook, so step 0 is the start to the first
optimizer step. Writes JSON: {"first", "last", "steps_seen", "device_rows", "ops": [{"name",
"count", "self_device_us", "device_us"}], "device": [{"name", "count", "self_device_us"}]} from
key_averages(): "ops" its CPU-side rows (operators, record_function ranges) but ProfilerStep#N;
device_rows counts the rows left out of "ops" (kernels, copies and GPU-side annotations, which
key_averages lists as rows of their own), "device" lists them. Exits with the program's
exit status."""
import argparse
import json
import os
import runpy
import sys

import torch
import torch.optim.optimizer as topt
from torch.profiler import ProfilerActivity, profile, schedule


def device_times(e):
    """(self, total) device time of a key_averages row in us, by the names torch 2.x gives them."""
    self_t = getattr(e, "self_device_time_total", None)
    if self_t is None:
        self_t = getattr(e, "self_cuda_time_total", 0)
    tot = getattr(e, "device_time_total", None)
    if tot is None:
        tot = getattr(e, "cuda_time_total", 0)
    return float(self_t), float(tot)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--first", type=int, required=True)
    p.add_argument("--last", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("program", nargs=argparse.REMAINDER)
    a = p.parse_args()
    prog = [x for x in a.program if x != "--"]
    if a.first < 1 or a.last < a.first or not prog:
        p.error("--first >= 1, --last >= --first and a program are needed")
    steps = [0]
    result = {"first": a.first, "last": a.last, "steps_seen": 0, "device_rows": 0, "ops": [], "device": []}

    def ready(prof):
        for e in prof.key_averages():
            # CPU-side ops only: GPU kernels, copies and GPU-side annotations are rows of key_averages
            # too (their own time as self device time), stepprof's table has no such rows
            if e.key.startswith("ProfilerStep#") or not str(getattr(e, "device_type", "CPU")).endswith("CPU"):
                result["device_rows"] += 1
                if not e.key.startswith("ProfilerStep#"):  # kept to tell which kernel a self time gap is in
                    result["device"].append({"name": e.key, "count": int(e.count),
                                             "self_device_us": device_times(e)[0]})
                continue
            s, t = device_times(e)
            result["ops"].append({"name": e.key, "count": int(e.count), "self_device_us": s, "device_us": t})
        result["steps_seen"] = a.last - a.first + 1

    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                   schedule=schedule(wait=a.first - 1, warmup=1, active=a.last - a.first + 1, repeat=1),
                   on_trace_ready=ready)

    def on_step(*args, **kwargs):
        steps[0] += 1
        prof.step()

    rc = 0
    sys.argv = prog
    sys.path.insert(0, os.path.dirname(os.path.abspath(prog[0])))
    with prof:
        handle = topt.register_optimizer_step_post_hook(on_step)
        try:
            runpy.run_path(prog[0], run_name="__main__")
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            handle.remove()
    result["optimizer_steps"] = steps[0]
    with open(a.out, "w") as f:
        json.dump(result, f)
    print(f"ops_torchprof: {steps[0]} optimizer steps, {len(result['ops'])} ops in steps {a.first}-{a.last}",
          flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
