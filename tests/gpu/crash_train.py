#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""crash_train.py - a training loop that dies in step --die-at, for tests/gpu/crash.sh: the MLP of
mlp_train.py (4 x Linear(1024)), each iteration ending with torch.cuda.synchronize() (the api
marker cudaDeviceSynchronize numbers the steps) and a --sleep-ms pause. In step --die-at, after its
forward and backward passes were launched, it ends itself with --how: segv (a read at address 0
through ctypes: a real fault), abort (os.abort), term, int, kill (the signal sent to itself), or
none (runs --steps steps and exits 0). Prints "crash_train step N" before dying.

usage: crash_train.py --how HOW [--die-at N] [--steps N] [--sleep-ms MS]"""
import argparse
import ctypes
import os
import signal
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlp_train  # noqa: E402


def die(how):
    if how == "segv":
        ctypes.string_at(0)
    elif how == "abort":
        os.abort()
    else:
        os.kill(os.getpid(), {"term": signal.SIGTERM, "int": signal.SIGINT, "kill": signal.SIGKILL}[how])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--how", required=True, choices=["segv", "abort", "term", "int", "kill", "none"])
    ap.add_argument("--die-at", type=int, default=20)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--sleep-ms", type=float, default=5.0)
    a = ap.parse_args()
    step = mlp_train.make_step(layers=4, width=1024, batch=64)
    for n in range(a.steps if a.how == "none" else a.die_at + 1):
        step()
        if n == a.die_at and a.how != "none":
            print(f"crash_train step {n}", flush=True)
            die(a.how)
            time.sleep(1)  # a signal with a handler of Python's (SIGINT): it runs here
        torch.cuda.synchronize()
        time.sleep(a.sleep_ms / 1000)
    print(f"crash_train ok steps={a.steps}", flush=True)


if __name__ == "__main__":
    main()
