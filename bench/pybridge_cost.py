# SPDX-License-Identifier: MIT
# pybridge_cost.py MODE N - one process of bench/pybridge_cost.sh: times N calls of what the
# Python bridge watches, on the stand-in torch of tests/e2e/pybridge (no GPU). MODE opt: N
# optimizer steps (the stand-in's step() with its post-hook loop, launching nothing); scaler: N
# GradScaler.update() calls (wrapped once watched); call: N calls of a trivial function (a python
# marker's, when watched); poll: N iterations of a pure-Python loop in a program that never
# imports torch, so that the bridge polls all along (every 100 ms for its first 30 s), each poll
# taking the GIL from this thread. With stepprof preloaded it first initialises "CUDA"
# (InitializeInjection) and waits until the bridge has installed its watch (poll: 0.3 s);
# without, nothing is watched. Prints "ns_per_call V": the median of 5 blocks of N / 5, in the
# thread's CPU time (a shared machine's scheduling left out), but for poll: in wall time (a poll
# holding the GIL stops this thread without costing it CPU time).
import ctypes
import os
import statistics
import sys
import time

mode, n = sys.argv[1], int(sys.argv[2])
preloaded = "libstepprof" in os.environ.get("LD_PRELOAD", "")
if preloaded:
    ctypes.CDLL(None).InitializeInjection()
if mode == "poll":
    time.sleep(0.3 if preloaded else 0)  # the bridge's polls have begun
    blocks = []
    for b in range(5):
        t = time.perf_counter_ns()
        x = 0
        for i in range(n // 5):
            x += i
        blocks.append((time.perf_counter_ns() - t) / (n // 5))
    print("ns_per_call %.2f" % statistics.median(blocks))
    sys.exit(0)
import torch  # noqa: E402  (the stand-in, on PYTHONPATH)
import torch.optim.optimizer as topt  # noqa: E402
from torch.amp import GradScaler  # noqa: E402


def step_fn(x):
    return x


def watched():
    if mode == "opt":
        return bool(topt._global_optimizer_post_hooks)
    if mode == "scaler":
        return getattr(GradScaler.update, "__wrapped__", None) is not None
    mon = getattr(sys, "monitoring", None)
    f = sys.modules["__main__"].step_fn
    return getattr(f, "__wrapped__", None) is not None or bool(
        mon and any(mon.get_tool(t) and mon.get_local_events(t, f.__code__) for t in (3, 4)))


t0 = time.time()
while preloaded and not watched() and time.time() - t0 < 10:
    time.sleep(0.01)
if preloaded and not watched():
    sys.exit("pybridge_cost: the bridge installed nothing in 10 s")
opt = torch.optim.SGD(lambda k: None, "sgd_fake")
scaler = GradScaler(lambda k: None)
blocks = []
for b in range(5):
    f = sys.modules["__main__"].step_fn  # the wrapper on 3.10/3.11 once watched
    t = time.thread_time_ns()
    if mode == "opt":
        for i in range(n // 5):
            opt.step()
    elif mode == "scaler":
        for i in range(n // 5):
            scaler.update()
    else:
        for i in range(n // 5):
            f(i)
    blocks.append((time.thread_time_ns() - t) / (n // 5))
print("ns_per_call %.1f" % statistics.median(blocks))
