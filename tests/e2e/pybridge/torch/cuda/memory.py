# SPDX-License-Identifier: MIT
# torch.cuda.memory's allocator history as torch 2.x has it, for tests/e2e/pymem.sh:
# _record_memory_history(enabled, context, stacks, max_entries, ...) turns it on ("all") or off
# (None); _snapshot() returns a dict with 'segments' (each with its blocks) and 'device_traces'.
# Every call is logged in `log` with the program's iteration (`iteration[0]`, set by the program)
# and the thread. live[0]: the bytes the program says it holds (one active block of that size).
# Knobs: STANDIN_MEMORY_RAISES=N  the N-th call of _record_memory_history raises RuntimeError;
# STANDIN_SNAPSHOT_RAISES=1  _snapshot raises RuntimeError.
import os
import pickle  # noqa: F401  (torch.cuda.memory imports it: stepprof finds it in sys.modules)
import sys
import threading

log = []
iteration = [-1]
live = [0]
state = {"enabled": None, "calls": 0}


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                           clear_history=False, compile_context=False, global_record_annotations=False,
                           skip_actions=None):
    state["calls"] += 1
    if os.environ.get("STANDIN_MEMORY_RAISES") == str(state["calls"]):
        raise RuntimeError("stand-in torch: the allocator refuses its history")
    log.append(("record", iteration[0], threading.current_thread().name, enabled, context, stacks, max_entries))
    state["enabled"] = enabled


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
    trace = [{"action": "alloc", "addr": 1 << 20, "size": live[0], "stream": 0, "frames": frames,
              "iteration": iteration[0]}]
    return {"segments": [seg], "device_traces": [trace if state["enabled"] else []], "allocator_settings": {}}
