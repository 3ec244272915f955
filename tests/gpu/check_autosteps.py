#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_autosteps.py - checks that the step boundaries stepprof found (marker kind=auto, or any
other) fall on real iteration boundaries: every recorded step holds the same ops in the same
launch order, and that order starts where an iteration starts.
  --workload EXPECT.json  tests/gpu/workload: one step_marker per step, launched first, and the
                          step's ops are exactly one iteration's (the expectation file)
  --mlp                   tests/gpu/mlp_train.py: every step holds optimizer kernels
                          (multi_tensor_apply); with --reference TORCH.json the GPU op order (one
                          stream) must equal a torch.profiler step's (ProfilerStep = one iteration)
--steps N requires exactly N recorded steps (else at least 2). Exit 0 pass, 1 fail.

usage: check_autosteps.py TRACE.json (--workload EXPECT.json | --mlp) [--reference TORCH.json]
                          [--steps N]"""
import argparse
import collections
import difflib
import fnmatch
import json
import sys

import traceutil as tu

OPTIMIZER_GLOB = "*multi_tensor_apply*"


def seq_diff(a, b, name_a, name_b, limit=40):
    """A unified diff of two op sequences, at most limit lines."""
    lines = list(difflib.unified_diff([tu.short(x) for x in a], [tu.short(x) for x in b],
                                      name_a, name_b, lineterm="", n=2))
    return "\n".join("    " + l for l in lines[:limit]) + ("\n    ..." if len(lines) > limit else "")


def gpu_order(tr, step):
    return [op.label for op in tr.steps[step]]


def check_same_order(tr, steps, problems):
    """Every step's launch order equals the first step's."""
    first = tr.launch_order(steps[0])
    for n in steps[1:]:
        seq = tr.launch_order(n)
        if seq != first:
            problems.append(f"step {n} differs from step {steps[0]} (launch order):\n"
                            + seq_diff(first, seq, f"step {steps[0]}", f"step {n}"))


def check_workload(tr, steps, exp, problems):
    marker = exp["marker_kernel"]
    want = collections.Counter(exp["per_iteration"])
    for n in steps:
        seq = tr.launch_order(n)
        if seq.count(marker) != 1:
            problems.append(f"step {n}: {seq.count(marker)} x {marker}, expected exactly 1")
        elif seq[0] != marker:
            problems.append(f"step {n}: starts with {seq[0]}, not {marker}: the boundary is inside "
                            f"an iteration (order: {', '.join(seq)})")
        rows = tu.counter_diff_table(tr.multiset(n), want, "trace", "expected")
        if rows:
            problems.append(f"step {n}: ops differ from one iteration\n" + "\n".join(rows))


def check_mlp(tr, steps, ref_path, problems):
    for n in steps:
        k = sum(fnmatch.fnmatchcase(label, OPTIMIZER_GLOB) for label in tr.launch_order(n))
        if k == 0:
            problems.append(f"step {n}: no optimizer kernel ({OPTIMIZER_GLOB})")
    if not ref_path:
        return
    ref = tu.load(ref_path)
    print("reference:", tu.describe(ref))
    # the MLP runs on one stream: GPU start order is launch order, whether or not torch's
    # trace holds the launching call of every kernel
    rsteps = sorted(ref.steps)
    want = gpu_order(ref, rsteps[0])
    for r in rsteps[1:]:
        if gpu_order(ref, r) != want:
            problems.append(f"reference {ref_path}: torch step {r} differs from step {rsteps[0]}: "
                            "the reference is not in steady state")
    seq = gpu_order(tr, steps[0])
    if seq != want:
        problems.append(f"step {steps[0]} is not one iteration as torch.profiler records it "
                        f"(GPU order, {len(seq)} vs {len(want)} ops):\n"
                        + seq_diff(want, seq, f"torch step {rsteps[0]}", f"stepprof step {steps[0]}"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace_json")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--workload", metavar="EXPECT.json")
    g.add_argument("--mlp", action="store_true")
    p.add_argument("--reference", metavar="TORCH.json")
    p.add_argument("--steps", type=int)
    a = p.parse_args()
    problems, tr = [], None
    try:
        tr = tu.load(a.trace_json)
        print(tu.describe(tr))
        steps = sorted(tr.steps)
        if a.steps is not None and len(steps) != a.steps:
            problems.append(f"{len(steps)} recorded steps {steps}, expected {a.steps}")
        elif len(steps) < 2:
            problems.append(f"only {len(steps)} recorded step: nothing to compare")
        if tr.n_fallback:
            problems.append(f"{tr.n_fallback} GPU ops have no launching API call (attributed by time)")
        if steps:
            check_same_order(tr, steps, problems)
            if a.workload:
                with open(a.workload) as f:
                    check_workload(tr, steps, json.load(f), problems)
            else:
                check_mlp(tr, steps, a.reference, problems)
    except (OSError, ValueError, tu.TraceError) as e:
        problems.append(str(e))
    for msg in problems:
        print("FAIL:", msg)
    verdict = "FAIL" if problems else "PASS"
    print(f"check_autosteps: {verdict} steps={len(tr.steps) if tr else 0} problems={len(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
