#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compare_torch.py - checks stepprof's converted trace against torch.profiler's Chrome export of
the same program and schedule. Per recorded step the GPU op names and counts must be equal
(a diff table is printed otherwise), each kernel name's median duration must agree within --tol
(or within --abs-floor-us for tiny kernels, where run-to-run jitter dominates), and the total kernel
time within --tol. A kernel whose median differs more, while the GPU sat idle before it over
--ctx-gap-us longer in one trace than in the other (median), is shown as `ctx`, not failed: a tiny
kernel started on an idle GPU runs longer (torch.profiler against itself: 1.07 for a 2 us kernel
after 9 us idle, docs/GPU-TESTS.md), an effect of the host's pace, not of the records.
Steps are paired by number when both traces recorded the same numbers, else in order (a
marker elsewhere in the iteration shifts numbering, not content). Exit 0 pass, 1 fail.

usage: compare_torch.py STEPPROF.json TORCH.json [--tol 0.05] [--abs-floor-us 0.5]
                        [--ctx-gap-us 5] [--strict-steps]"""
import argparse
import collections
import statistics
import sys

import traceutil as tu


def pair_steps(sp, th, strict):
    """[(stepprof step, torch step)], or None (and a message) if they cannot be paired."""
    a, b = sorted(sp.steps), sorted(th.steps)
    if a == b:
        return list(zip(a, b))
    msg = f"recorded step numbers differ: stepprof {a} torch {b}"
    if strict or len(a) != len(b):
        print(f"FAIL: {msg}")
        return None
    print(f"note: {msg}; pairing them in order")
    return list(zip(a, b))


def compare_counts(sp, th, pairs):
    ok = True
    for s, t in pairs:
        ms, mt = sp.multiset(s), th.multiset(t)
        rows = tu.counter_diff_table(ms, mt, "stepprof", "torch")
        if rows:
            ok = False
            print(f"FAIL: step {s} (stepprof) vs {t} (torch): {sum(ms.values())} vs {sum(mt.values())} ops")
            print("\n".join(rows))
        else:
            print(f"step {s} vs {t}: {sum(ms.values())} ops, {len(ms)} names, equal")
    return ok


def compare_durations(sp, th, pairs, tol, floor_us, ctx_us):
    d_sp, d_th = collections.defaultdict(list), collections.defaultdict(list)
    g_sp, g_th = tu.idle_before(sp), tu.idle_before(th)
    for s, t in pairs:
        for op in sp.steps[s]:
            if op.cat == "kernel":
                d_sp[op.label].append(op.dur)
        for op in th.steps[t]:
            if op.cat == "kernel":
                d_th[op.label].append(op.dur)
    names = sorted(set(d_sp) & set(d_th), key=lambda n: -statistics.median(d_th[n]) * len(d_th[n]))
    ok, worst, n_ctx = True, (1.0, ""), 0
    print(f"{'n':>5} {'stepprof us':>12} {'torch us':>10} {'ratio':>7}  verdict  kernel")
    for name in names:
        ms, mt = statistics.median(d_sp[name]), statistics.median(d_th[name])
        ratio = ms / mt if mt > 0 else float("inf") if ms > 0 else 1.0
        within = abs(ratio - 1) <= tol
        verdict = "ok" if within else "ok(abs)" if abs(ms - mt) <= floor_us else "FAIL"
        idle = ""
        if verdict == "FAIL" and g_sp.get(name) and g_th.get(name):
            i_sp, i_th = statistics.median(g_sp[name]), statistics.median(g_th[name])
            idle = f"  (GPU idle before it: stepprof {i_sp:.1f} us, torch {i_th:.1f} us)"
            if abs(i_sp - i_th) > ctx_us:
                verdict, n_ctx = "ctx", n_ctx + 1
        ok &= verdict != "FAIL"
        if abs(ratio - 1) > abs(worst[0] - 1):
            worst = (ratio, name)
        print(f"{len(d_sp[name]):>5} {ms:>12.3f} {mt:>10.3f} {ratio:>7.3f}  {verdict:<7}  {tu.short(name, 90)}{idle}")
    tot_sp = sum(sum(v) for v in d_sp.values())
    tot_th = sum(sum(v) for v in d_th.values())
    total_ratio = tot_sp / tot_th if tot_th else float("nan")
    if not abs(total_ratio - 1) <= tol:
        ok = False
        print(f"FAIL: total kernel time differs: stepprof {tot_sp:.1f} us, torch {tot_th:.1f} us")
    return ok, worst, total_ratio, len(names), n_ctx


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stepprof_json")
    p.add_argument("torch_json")
    p.add_argument("--tol", type=float, default=0.05, help="relative tolerance of median durations")
    p.add_argument("--abs-floor-us", type=float, default=0.5,
                   help="a median differing by at most this many us passes whatever the ratio")
    p.add_argument("--ctx-gap-us", type=float, default=5.0,
                   help="a kernel differing while the GPU idled before it this much longer in one trace is `ctx`")
    p.add_argument("--strict-steps", action="store_true", help="step numbers must be equal")
    a = p.parse_args()
    try:
        sp, th = tu.load(a.stepprof_json), tu.load(a.torch_json)
    except tu.TraceError as e:
        print(f"FAIL: {e}")
        print("compare_torch: FAIL (unreadable trace)")
        return 1
    print("stepprof:", tu.describe(sp))
    print("torch:   ", tu.describe(th))
    pairs = pair_steps(sp, th, a.strict_steps)
    if not pairs:
        print("compare_torch: FAIL (steps)")
        return 1
    counts_ok = compare_counts(sp, th, pairs)
    dur_ok, worst, total_ratio, n_names, n_ctx = compare_durations(sp, th, pairs, a.tol, a.abs_floor_us, a.ctx_gap_us)
    ops = sum(len(sp.steps[s]) for s, _ in pairs)
    verdict = "PASS" if counts_ok and dur_ok else "FAIL"
    print(f"compare_torch: {verdict} steps={len(pairs)} ops={ops} kernel_names={n_names} "
          f"counts={'equal' if counts_ok else 'DIFFER'} total_time_ratio={total_ratio:.3f} "
          f"worst_ratio={worst[0]:.3f} ({tu.short(worst[1], 60)}) ctx={n_ctx}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
