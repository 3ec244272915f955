# SPDX-License-Identifier: MIT
# torch.cuda.memory's allocator history as torch 2.x has it, for tests/e2e/pymem.sh:
# _record_memory_history(enabled, context, stacks, max_entries, ...) turns it on ("all") or off
# (None); _snapshot() returns a dict with 'segments' (each with its blocks) and 'device_traces'.
# Every call is logged in `log` with the program's iteration (`iteration[0]`, set by the program)
# and the thread. live[0]: the bytes the program says it holds (one active block of that size).
# Knobs: STANDIN_MEMORY_RAISES=N  the N-th call of _record_memory_history raises RuntimeError;
# STANDIN_SNAPSHOT_RAISES=1  _snapshot raises RuntimeError.
# With the history on, 'device_traces' holds a window of known levels (trace() below), in unix-epoch
# microseconds between the history's start and the snapshot, as torch's time_us; STANDIN_TRACE=cut:
# the ring is full (max_entries entries) and starts late; STANDIN_TRACE=hostile: malformed entries too.
import os
import pickle  # noqa: F401  (torch.cuda.memory imports it: stepprof finds it in sys.modules)
import sys
import threading
import time

log = []
iteration = [-1]
live = [0]
state = {"enabled": None, "calls": 0, "on_us": 0, "max_entries": 0}
MIB = 1 << 20


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                           clear_history=False, compile_context=False, global_record_annotations=False,
                           skip_actions=None):
    state["calls"] += 1
    if os.environ.get("STANDIN_MEMORY_RAISES") == str(state["calls"]):
        raise RuntimeError("stand-in torch: the allocator refuses its history")
    log.append(("record", iteration[0], threading.current_thread().name, enabled, context, stacks, max_entries))
    state["enabled"] = enabled
    state["on_us"], state["max_entries"] = time.time_ns() // 1000, max_entries


def trace(frames):
    """The window's entries: allocated starts at 4096 (a block from before the history, freed in
    it), peaks at 4096 + live + 5 MiB at the 5th entry (3 MiB at model.py:7, 2 x 1 MiB at
    model.py:9, the live block at train.py:42), ends at live; reserved 2 MiB, 10 MiB at most."""
    big = [{"filename": "/x/torch/nn/functional.py", "line": 1, "name": "linear"},
           {"filename": "model.py", "line": 7, "name": "big"}]
    act = [{"filename": "model.py", "line": 9, "name": "act"}]
    es = [("alloc", 1 << 20, live[0], frames), ("segment_alloc", 64 * MIB, 8 * MIB, []),
          ("alloc", 64 * MIB, 3 * MIB - 100, big), ("alloc", 67 * MIB, MIB, act), ("alloc", 68 * MIB, MIB, act),
          ("free_requested", 64 * MIB, 3 * MIB - 100, big), ("free_completed", 64 * MIB, 3 * MIB - 100, big),
          ("free_requested", 67 * MIB, MIB, act), ("free_requested", 68 * MIB, MIB, act),
          ("free_requested", 5 * MIB, 4000, act), ("segment_free", 64 * MIB, 8 * MIB, []),
          ("snapshot", 0, 0, []), ("oom", 0, 0, [])]
    mode = os.environ.get("STANDIN_TRACE", "")
    if mode == "cut":
        es = es[:1] + [("alloc" if i % 2 == 0 else "free_requested", 80 * MIB, 4096, act)
                       for i in range(state["max_entries"] - 1)]
    t0, t1 = state["on_us"], time.time_ns() // 1000
    first = t0 + (t1 - t0) // 3 if mode == "cut" else t0 + 50
    step = max(1, (t1 - 50 - first) // len(es))
    out = [{"action": a, "addr": ad, "size": z, "stream": 0, "frames": f, "time_us": first + i * step,
            "iteration": iteration[0]} for i, (a, ad, z, f) in enumerate(es)]
    if mode == "hostile":
        odd = [{"filename": "evil\nfile" * 3000, "line": 10 ** 30, "name": None}, 7]
        out[1:1] = [None, {"action": "alloc", "addr": [1], "size": 1, "time_us": first}, {"action": 5},
                    {"action": "alloc", "addr": 1, "size": 2 ** 70, "time_us": first},
                    {"action": "alloc", "addr": 2, "size": -5, "time_us": first},
                    {"action": "alloc", "addr": 3, "size": 1, "time_us": "x"},
                    {"action": "alloc", "addr": 90 * MIB, "size": 512, "time_us": first + 1, "frames": odd},
                    {"action": "free_requested", "addr": 90 * MIB, "size": 512, "time_us": t1 - 10, "frames": "s"}]
    return out


def _snapshot(device=None):
    log.append(("snapshot", iteration[0], threading.current_thread().name, state["enabled"]))
    if os.environ.get("STANDIN_SNAPSHOT_RAISES"):
        raise RuntimeError("stand-in torch: no snapshot")
    frames = [{"filename": "train.py", "line": 42, "name": "forward"}]
    block = {"address": 1 << 20, "size": live[0], "requested_size": live[0], "state": "active_allocated",
             "frames": frames}
    seg = {"device": 0, "address": 1 << 20, "total_size": 2 << 20, "allocated_size": live[0],
           "active_size": live[0], "requested_size": live[0], "stream": 0, "segment_type": "large",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
           "blocks": [block, {"address": (1 << 20) + live[0], "size": (2 << 20) - live[0], "state": "inactive"}]}
    return {"segments": [seg], "device_traces": [trace(frames) if state["enabled"] else []], "allocator_settings": {}}
