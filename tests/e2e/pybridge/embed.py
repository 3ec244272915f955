# SPDX-License-Identifier: MIT
# embed.py - run by tests/e2e/pyembed (CPython embedded in a C program that goes on living after
# Py_FinalizeEx), with libstepprof preloaded and the default configuration: torch is never
# imported, so stepprof's Python bridge polls all along. The script initialises "CUDA", waits for
# the bridge's first poll (its atexit callback appears: the atexit module is imported here, as
# torch's logging imports it), lets the next poll begin, and ends: the interpreter finalises while
# that poll waits (STEPPROF_TEST_PYBRIDGE_DELAY_US) between its check and the GIL.
import atexit
import ctypes
import time

ctypes.CDLL(None).InitializeInjection()
n0 = atexit._ncallbacks()
t0 = time.time()
while atexit._ncallbacks() == n0 and time.time() - t0 < 5:
    time.sleep(0.01)
print("embed: the bridge registered its atexit callback:", atexit._ncallbacks() > n0, flush=True)
time.sleep(0.25)  # the next poll has begun (every 100 ms) and waits
print("embed: done", flush=True)
