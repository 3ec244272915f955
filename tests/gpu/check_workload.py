#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_workload.py - checks stepprof's converted trace of tests/gpu/workload against the
expectation file the workload wrote (--expect): every recorded step holds exactly one
iteration's GPU ops (graph kernels one by one, the cuLaunchKernel and cudaLaunchKernelExC
launches, the memcpy and the memset), each launched by the expected API call, ops of one stream
in launch order, the three graph kernels from one cudaGraphLaunch, and no op attributed by time
alone. With --schedule the recorded step numbers must be the ones torch's schedule records.
Exit 0 pass, 1 fail; the last line is a summary.

usage: check_workload.py TRACE.json EXPECT.json [--schedule SKIP,WAIT,WARMUP,ACTIVE,REPEAT]
                         [--allow-fallback]"""
import argparse
import collections
import json
import sys

import traceutil as tu


def check_step(n, ops, exp, problems):
    """Appends a message to problems for each way step n differs from one iteration."""
    got = collections.Counter(op.label for op in ops)
    want = collections.Counter(exp["per_iteration"])
    rows = tu.counter_diff_table(got, want, "trace", "expected")
    if rows:
        problems.append(f"step {n}: ops differ from one iteration\n" + "\n".join(rows))
        return
    by_label = {op.label: op for op in ops}
    for label, api in exp["launchers"].items():
        if api not in by_label[label].launchers:
            problems.append(f"step {n}: {label} launched by {by_label[label].launchers or 'nothing'}, "
                            f"expected {api}")
    for chain in exp["stream_order"]:
        starts = [by_label[label].ts for label in chain]
        if starts != sorted(starts):
            problems.append(f"step {n}: one stream's ops out of order: "
                            + ", ".join(f"{l}@{t:.3f}" for l, t in zip(chain, starts)))
    corrs = {by_label[label].corr for label in exp["graph_kernels"]}
    if exp["graph_kernels"] and (len(corrs) != 1 or min(corrs) <= 0):  # --no-graph: none
        problems.append(f"step {n}: graph kernels carry correlations {sorted(corrs)}, expected one "
                        "(their cudaGraphLaunch)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace_json")
    p.add_argument("expect_json")
    p.add_argument("--schedule", help="skip_first,wait,warmup,active,repeat the run used")
    p.add_argument("--allow-fallback", action="store_true",
                   help="accept ops attributed by GPU time (no launching API call in the trace)")
    a = p.parse_args()
    try:
        with open(a.expect_json) as f:
            exp = json.load(f)
        tr = tu.load(a.trace_json)
    except (OSError, ValueError, tu.TraceError) as e:
        print(f"FAIL: {e}\ncheck_workload: FAIL (unreadable input)")
        return 1
    print(tu.describe(tr))
    problems = []
    steps = sorted(tr.steps)
    if a.schedule:
        # the last iterations may hold a partial step, whatever the marker kind
        want = tu.recorded_steps(exp["iterations"] - 2, **tu.parse_schedule(a.schedule))
        if steps != want:
            problems.append(f"recorded steps {steps}, schedule {a.schedule} records {want}")
    if tr.n_fallback and not a.allow_fallback:
        problems.append(f"{tr.n_fallback} GPU ops have no launching API call in the trace "
                        "(correlation missing): attributed by GPU time")
    for n in steps:
        check_step(n, tr.steps[n], exp, problems)
    graph_args = sorted({k for n in steps for op in tr.steps[n] if op.label in exp["graph_kernels"]
                         for k in op.args if "graph" in k.lower()})
    ex_launch = sorted({str(op.args.get("launch type")) for n in steps for op in tr.steps[n] if op.label == "k_ex"})
    print(f"graph kernel args: {graph_args or 'none naming a graph'}; k_ex launch type: {ex_launch}")
    for msg in problems:
        print("FAIL:", msg)
    per_step = sum(exp["per_iteration"].values())
    verdict = "FAIL" if problems else "PASS"
    print(f"check_workload: {verdict} steps={len(steps)} ops/step={per_step} problems={len(problems)} "
          f"fallback={tr.n_fallback} outside={tr.n_outside}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
