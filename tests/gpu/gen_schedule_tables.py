#!/usr/bin/env python3
"""Writes tests/data/schedule_torch.txt: torch.profiler.schedule's action for every step of many
parameter sets, computed with real torch (run on the GPU machine, which has torch). The host unit
test tests/unit/test_schedule.c compares sp_schedule_action against every line."""
import itertools, sys, warnings
import torch
from torch.profiler import schedule, ProfilerAction

warnings.simplefilter("ignore")
names = {ProfilerAction.NONE: "NONE", ProfilerAction.WARMUP: "WARMUP",
         ProfilerAction.RECORD: "RECORD", ProfilerAction.RECORD_AND_SAVE: "RECORD_AND_SAVE"}
out = sys.stdout if len(sys.argv) < 2 else open(sys.argv[1], "w")
print(f"# torch {torch.__version__}: torch.profiler.schedule(...)(step) for step in 0..steps-1", file=out)
cases = []
for skip_first, sfw, wait, warmup, active, repeat in itertools.product(
        [0, 1, 3], [0, 1], [0, 1, 2, 5], [0, 1, 2], [1, 2, 3], [0, 1, 2, 3]):
    cases.append((skip_first, sfw, wait, warmup, active, repeat))
cases += [(10, 0, 5, 1, 3, 2), (0, 0, 7, 2, 1, 0), (2, 1, 1, 1, 2, 2), (0, 1, 8, 2, 1, 0)]
# the schedules of docs/recipes/*.ini (their "; torch:" lines), so real torch covers them too
cases += [(0, 0, 0, 0, 1, 1), (0, 0, 5, 2, 1, 1), (10, 0, 0, 1, 1, 1), (10, 0, 1, 1, 5, 1)]
for (skip_first, sfw, wait, warmup, active, repeat) in cases:
    steps = skip_first + (wait + warmup + active) * (repeat + 1) + 3
    fn = schedule(skip_first=skip_first, skip_first_wait=sfw, wait=wait, warmup=warmup,
                  active=active, repeat=repeat)
    acts = " ".join(names[fn(s)] for s in range(steps))
    print(f"skip_first={skip_first} skip_first_wait={sfw} wait={wait} warmup={warmup} "
          f"active={active} repeat={repeat} steps={steps}: {acts}", file=out)
