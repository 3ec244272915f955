# SPDX-License-Identifier: MIT
# embed.py - run by tests/e2e/pyembed (CPython embedded in a C program that goes on living after
# Py_FinalizeEx), with libstepprof preloaded and the default configuration. EMBED_MODE says what:
#  atexit (default): torch is never imported, so stepprof's Python bridge polls all along. The
#    script initialises "CUDA", waits for the bridge's first poll (its atexit callback appears: the
#    atexit module is imported here, as torch's logging imports it), lets the next poll begin, and
#    ends: the interpreter finalises while that poll waits (STEPPROF_TEST_PYBRIDGE_DELAY_US)
#    between its check and the GIL.
#  noexit: the same without the atexit module (a plain script imports neither atexit nor
#    threading): nothing Python-level tells the bridge that the interpreter ends.
#  late: "CUDA" was initialised before Py_Initialize (PYEMBED_CUDA_FIRST): the stand-in torch is
#    imported and the optimizer hook must go in all the same.
#  twice: PYEMBED_TWICE and PYEMBED_CUDA_FIRST; round 1 lets the bridge poll, round 2 (a second
#    interpreter, right after the first one's end) imports the stand-in torch: the bridge polls
#    the first interpreter only, and nothing of the first one is used in the second. (Round 1
#    imports no ctypes: CPython 3.12.1 itself crashes in a second interpreter after ctypes.)
import os
import sys
import time

mode = os.environ.get("EMBED_MODE", "atexit")
first = len(sys.argv) < 2 or sys.argv[1] == "1"
if mode in ("atexit", "noexit"):
    import ctypes

    ctypes.CDLL(None).InitializeInjection()
if mode == "atexit":
    import atexit

    n0 = atexit._ncallbacks()
    t0 = time.time()
    while atexit._ncallbacks() == n0 and time.time() - t0 < 5:
        time.sleep(0.01)
    print("embed: the bridge registered its atexit callback:", atexit._ncallbacks() > n0, flush=True)
    time.sleep(0.25)  # the next poll has begun (every 100 ms) and waits
elif mode == "noexit" or (mode == "twice" and first):
    time.sleep(0.35)  # polls come and go (every 100 ms); the next one waits in the test delay
    print("embed: atexit, threading imported:", "atexit" in sys.modules, "threading" in sys.modules, flush=True)
else:
    import torch.optim.optimizer as topt

    t0 = time.time()
    while not topt._global_optimizer_post_hooks and time.time() - t0 < (3 if mode == "late" else 0.6):
        time.sleep(0.01)
    print("embed: round", sys.argv[1] if len(sys.argv) > 1 else 1, "optimizer hook in:",
          bool(topt._global_optimizer_post_hooks), flush=True)
print("embed: done", flush=True)
