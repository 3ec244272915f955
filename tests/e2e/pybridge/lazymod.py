# SPDX-License-Identifier: MIT
# lazymod.py - a module that tests/e2e/pybridge/prog.py imports with importlib's LazyLoader: its
# body runs when the program first touches it, and records on which thread (stepprof's Python
# bridge must never be the one that loads it). Its body sleeps before it defines lazy_step: CPython
# 3.10/3.11 run it as a plain, finished module, and the bridge polls meanwhile. `launch` is set by
# the program.
import threading
import time

loaded_on = threading.get_ident()
launch = None
time.sleep(0.3)


def lazy_step(opt):
    """one training iteration"""
    for k in range(3):
        launch("fwd_fake")
    for k in range(3):
        launch("bwd_fake")
    opt.step()
