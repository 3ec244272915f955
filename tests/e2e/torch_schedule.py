#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_schedule.py - torch.profiler.schedule transcribed to plain Python (torch is not
available on the build machine), for the recipe checks of tests/e2e/recipes.sh.

Source: pytorch/pytorch, torch/profiler/profiler.py, def schedule(*, wait, warmup, active,
repeat=0, skip_first=0, skip_first_wait=0) and its inner schedule_fn (torch 2.5 .. 2.11; the
same logic in each). This transcription is itself checked against tests/data/schedule_torch.txt,
the table computed with real torch 2.11 on the GPU machine (tests/gpu/gen_schedule_tables.py):
`torch_schedule.py --self-test FILE`.

Usage: torch_schedule.py "schedule(wait=5, warmup=1, active=3, repeat=2, skip_first=10)" STEPS
prints "STEP ACTION" lines for steps 0..STEPS-1 (the format of `stepprof schedule`)."""
import re
import sys


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """Returns the step -> action function, as torch does (torch warns when warmup == 0)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("Invalid profiler schedule arguments")

    def action(step):
        if step < 0:
            raise ValueError("step must be non-negative")
        if step < skip_first:
            return "NONE"
        step -= skip_first
        if skip_first_wait != 0:        # the first cycle starts at its warmup
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step / cycle >= repeat:   # true division, as in Python's torch
            return "NONE"
        pos = step % cycle
        if pos < wait:
            return "NONE"
        if pos < wait + warmup:
            return "WARMUP"
        return "RECORD" if pos < cycle - 1 else "RECORD_AND_SAVE"

    return action


def parse_call(text):
    """'schedule(wait=5, warmup=1, ...)' -> dict of int keyword arguments (nothing else accepted)."""
    m = re.fullmatch(r"\s*schedule\((.*)\)\s*", text)
    if not m:
        raise ValueError(f"not a schedule(...) call: {text!r}")
    args = {}
    for part in filter(None, (p.strip() for p in m.group(1).split(","))):
        k, _, v = part.partition("=")
        if k.strip() not in ("wait", "warmup", "active", "repeat", "skip_first", "skip_first_wait"):
            raise ValueError(f"unknown schedule argument {k!r}")
        args[k.strip()] = int(v)
    return args


def self_test(path):
    """Every line of the real-torch table must match; returns the number of lines checked."""
    n = 0
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            head, _, acts = line.partition(": ")
            kv = dict(p.split("=") for p in head.split())
            steps = int(kv.pop("steps"))
            fn = schedule(**{k: int(v) for k, v in kv.items()})
            got = " ".join(fn(s) for s in range(steps))
            if got != acts.strip():
                sys.exit(f"transcription differs from torch for {head}:\n  torch: {acts.strip()}\n  ours:  {got}")
            n += 1
    return n


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--self-test":
        print(f"torch_schedule.py matches real torch on {self_test(sys.argv[2])} parameter sets")
    elif len(sys.argv) == 3:
        fn = schedule(**parse_call(sys.argv[1]))
        for s in range(int(sys.argv[2])):
            print(s, fn(s))
    else:
        sys.exit(__doc__)
