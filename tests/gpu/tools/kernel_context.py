#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""kernel_context.py - for each kernel name, beside its median duration, what the GPU was doing
around it in each trace: the idle gap before it (GPU start minus the end of the op before it in its
step) and the queue lead (GPU start minus the start of its launching call: near 0 when the program
is launch-bound and the kernel starts on an idle GPU). Reads any number of Chrome traces (stepprof's
converted ones, torch.profiler's). Tells an observer effect (one profiler's host cost changes how
the GPU runs a kernel) from a measurement error. Prints the LIMIT names whose durations differ most.

usage: kernel_context.py TRACE.json... [--limit 12]"""
import argparse
import collections
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import traceutil as tu  # noqa: E402


def per_name(tr):
    rows = collections.defaultdict(lambda: ([], [], []))
    for ops in tr.steps.values():
        for op in ops:
            if op.cat == "kernel":
                d, _, lead = rows[op.label]
                d.append(op.dur)
                if not op.fallback:
                    lead.append(op.ts - op.launch_ts)
    for name, gaps in tu.idle_before(tr).items():
        rows[name][1].extend(gaps)
    return rows


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+")
    p.add_argument("--limit", type=int, default=12)
    a = p.parse_args()
    tables = []
    for path in a.traces:
        try:
            tables.append(per_name(tu.load(path)))
        except tu.TraceError as e:
            print(f"kernel_context: {e}")
            return 1
    names = set(tables[0]).intersection(*tables[1:])

    def spread(n):
        ms = [med(t[n][0]) for t in tables]
        return max(ms) / min(ms) if min(ms) > 0 else 1.0
    for i, path in enumerate(a.traces):
        print(f"[{i}] {path}")
    for n in sorted(names, key=spread, reverse=True)[:a.limit]:
        print(f"{tu.short(n, 100)}  (max/min median {spread(n):.3f})")
        for i, t in enumerate(tables):
            d, gap, lead = t[n]
            print(f"  [{i}] n={len(d):<4} dur {med(d):8.3f} us [{min(d):.3f}-{max(d):.3f}]"
                  f"  gap before {med(gap):9.3f} us  queue lead {med(lead):10.3f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
