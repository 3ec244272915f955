#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# check_hta.py - loads a directory of `stepprof convert` files (one per rank) with Holistic Trace
# Analysis (HTA, ../shared/tools/hta) as its users do, and checks that
#  - HTA finds exactly the ranks written (--ranks);
#  - its temporal breakdown, GPU kernel breakdown, comm/comp overlap and idle time breakdown run
#    and give a row for every rank;
#  - per rank and kernel name, HTA's GPU kernel breakdown equals `stepprof report`'s kernel table
#    (when every kernel of the window was launched inside a step: HTA keeps only those);
#  - per rank and step, HTA's kernel time and kernel count (kernels grouped by HTA's "iteration",
#    which follows the launching call into its ProfilerStep#N) equal `stepprof report --json`'s
#    per-step kernel_ns and kernels (--report, one per rank), to the nanosecond with HTA's rounding
#    of timestamps to whole microseconds off (HTA_DISABLE_NS_ROUNDING=1, set here), and within
#    2 us per kernel with it on (HTA rounds ts up and the end down to whole us).
# HTA drops the last ProfilerStep of each trace unless include_last_profiler_step=True (torch's
# last step is usually cut short; stepprof's are whole): both are checked.
# Runs on Debian's python3 (pandas, numpy, yaml, plotly, ijson, psutil, networkx).
# usage: check_hta.py DIR --ranks 0,1 --report R0.json --report R1.json [--hta PATH]
import argparse
import io
import os
import sys
import json
import contextlib
import logging


def per_step(ta, rank):
    """{step: (kernel us, kernels)} of rank as HTA sees it."""
    df = ta.t.get_trace(rank)
    names = ta.t.symbol_table.get_sym_table()
    cats = df["cat"].map(lambda i: names[i])
    k = df[(cats == "kernel") & (df["iteration"] >= 0)]
    g = k.groupby("iteration")["dur"]
    return {int(i): (float(s), int(n)) for (i, s), n in zip(g.sum().items(), g.count().values)}


def load(TraceAnalysis, d, last):
    with contextlib.redirect_stdout(io.StringIO()):
        return TraceAnalysis(trace_dir=d, include_last_profiler_step=last)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--ranks", required=True)
    ap.add_argument("--report", action="append", default=[])
    ap.add_argument("--hta", default=os.path.join(os.path.dirname(__file__), "../../../shared/tools/hta"))
    a = ap.parse_args()
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    sys.path.insert(0, a.hta)
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis
    from hta.configs.env_options import HTAEnvOptions

    problems = []
    want = sorted(int(r) for r in a.ranks.split(","))
    ta = load(TraceAnalysis, a.dir, True)
    got = ta.t.get_ranks()
    if got != want:
        problems.append(f"HTA found ranks {got}, expected {want}")
    with contextlib.redirect_stdout(io.StringIO()):
        tb = ta.get_temporal_breakdown(visualize=False)
        kb, kernels = ta.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=1 << 30)
        ov = ta.get_comm_comp_overlap(visualize=False)
        idle = ta.get_idle_time_breakdown(ranks=got, visualize=False)[0]
    for name, df in (("temporal breakdown", tb), ("kernel breakdown", kernels), ("comm/comp overlap", ov),
                     ("idle time breakdown", idle)):
        if sorted(set(int(r) for r in df["rank"])) != want:
            problems.append(f"{name}: ranks {sorted(set(df['rank']))}, expected {want}")
    if kb.empty or kb["sum"].sum() <= 0:
        problems.append("kernel breakdown: no kernel time")

    reports, totals = {}, {}
    for path in a.report:
        d = json.load(open(path))
        rank = max(d["rank"], 0)  # HTA takes a trace without rank for rank 0
        reports[rank] = {s["number"]: (s["kernel_ns"], s["kernels"]) for s in d["steps"]}
        totals[rank] = d["kernels"]
    # HTA's kernel breakdown per name: stepprof report's kernel table, where every kernel of the
    # window was launched inside a step (HTA keeps only those); else at most the table's
    for rank, rows in sorted(totals.items()):
        in_steps = sum(ns for ns, _ in reports[rank].values()) == sum(k["total_ns"] for k in rows)
        hta = kernels[(kernels["rank"] == rank) & (kernels["kernel_type"] != "MEMORY")]
        hta = dict(zip(hta["name"], hta["sum (us)"]))
        for k in rows:
            us = hta.pop(k["name"], hta.pop(k["raw_name"], 0.0))
            if abs(us * 1000 - k["total_ns"]) > k["calls"] if in_steps else us * 1000 > k["total_ns"] + k["calls"]:
                problems.append(f"rank {rank}: HTA's kernel breakdown has {us * 1000:.0f} ns of {k['name'][:60]!r}, "
                                f"stepprof report {k['total_ns']} ns")
        for name, us in hta.items():
            problems.append(f"rank {rank}: HTA's kernel breakdown has {name[:60]!r} ({us} us), stepprof report not")
    for rank, steps in sorted(reports.items()):
        hta = per_step(ta, rank)
        if sorted(hta) != sorted(n for n, (_, k) in steps.items() if k):
            problems.append(f"rank {rank}: HTA's steps with kernels {sorted(hta)}, stepprof's "
                            f"{sorted(n for n, (_, k) in steps.items() if k)}")
        for n, (us, count) in sorted(hta.items()):
            ns, k = steps.get(n, (0, 0))
            if count != k or abs(us * 1000 - ns) > 1:
                problems.append(f"rank {rank} step {n}: HTA {count} kernels {us * 1000:.0f} ns, "
                                f"stepprof report {k} kernels {ns} ns")
    # HTA's defaults: the last step of each trace dropped, timestamps rounded to whole us
    HTAEnvOptions.instance().set_disable_ns_rounding(False)
    ta2 = load(TraceAnalysis, a.dir, False)
    for rank, steps in sorted(reports.items()):
        hta = per_step(ta2, rank)
        with_kernels = sorted(n for n, (_, k) in steps.items() if k)
        if sorted(hta) != with_kernels[:-1]:
            problems.append(f"rank {rank}: with HTA's defaults, steps {sorted(hta)}, expected {with_kernels[:-1]}")
        for n, (us, count) in sorted(hta.items()):
            ns, k = steps[n]
            if count != k or abs(us * 1000 - ns) > 2000 * k:  # ts rounded up, end down: < 2 us each
                problems.append(f"rank {rank} step {n} (rounded): HTA {count} kernels {us:.0f} us, stepprof {k} "
                                f"kernels {ns / 1000:.3f} us")
    for p in problems:
        print(f"check_hta: {a.dir}: {p}", file=sys.stderr)
    if not problems:
        n = sum(len(v) for v in reports.values())
        print(f"check_hta: {a.dir}: ok, ranks {got}, kernel breakdown and {n} steps equal stepprof report's, "
              f"comm/comp overlap {list(ov['comp_comm_overlap_pctg'])}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
