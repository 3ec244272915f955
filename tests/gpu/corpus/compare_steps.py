#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compare_steps.py NAME AUTO.json MARKER.json - for record.sh check: the steps recorded with the
default configuration (automatic detection) against those recorded with the program's truth as an
explicit marker (`stepprof report --json` of each). PASS when both recorded steps and the kernels
per step agree step for step (the same sequence of counts, as the same schedule records the same
iterations); for the data-dependent program (NAME starting with "datadep") PASS when automatic
detection recorded nothing (it must not lock on a loop that does not repeat)."""
import json
import sys


def steps(path):
    try:
        with open(path) as f:
            return [(s["number"], s["kernels"]) for s in json.load(f).get("steps", [])]
    except (OSError, ValueError, KeyError):
        return []


name, a, m = sys.argv[1], steps(sys.argv[2]), steps(sys.argv[3])
ka, km = [k for _, k in a], [k for _, k in m]
if name.startswith("datadep"):
    ok = not a
else:
    ok = bool(a) and ka == km
print(f"{'PASS' if ok else 'FAIL'} corpus-{name}: auto steps {a} marker steps {m}")
