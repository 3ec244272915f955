# SPDX-License-Identifier: MIT
# pybridge_cost.py MODE N - one process of bench/pybridge_cost.sh: times N calls of what the
# Python bridge watches, on the stand-in torch of tests/e2e/pybridge (no GPU). MODE opt: N
# optimizer steps (the stand-in's step() with its post-hook loop, launching nothing); call: N
# calls of a trivial function (a python marker's, when watched). With stepprof preloaded it
# first initialises "CUDA" (InitializeInjection) and waits until the bridge has installed its
# watch; without, nothing is watched. Prints "ns_per_call V": the median of 5 blocks of N / 5, in
# the thread's CPU time (a shared machine's scheduling left out).
import ctypes
import os
import statistics
import sys
import time

mode, n = sys.argv[1], int(sys.argv[2])
import torch  # noqa: E402  (the stand-in, on PYTHONPATH)
import torch.optim.optimizer as topt  # noqa: E402

preloaded = "libstepprof" in os.environ.get("LD_PRELOAD", "")
if preloaded:
    ctypes.CDLL(None).InitializeInjection()


def step_fn(x):
    return x


def watched():
    if mode == "opt":
        return bool(topt._global_optimizer_post_hooks)
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
blocks = []
for b in range(5):
    f = sys.modules["__main__"].step_fn  # the wrapper on 3.10/3.11 once watched
    t = time.thread_time_ns()
    if mode == "opt":
        for i in range(n // 5):
            opt.step()
    else:
        for i in range(n // 5):
            f(i)
    blocks.append((time.thread_time_ns() - t) / (n // 5))
print("ns_per_call %.1f" % statistics.median(blocks))
