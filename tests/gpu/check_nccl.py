#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_nccl.py - checks the NCCL records of a multi-rank stepprof run (one `stepprof dump`
text per rank, tests/gpu/run-ddp.sh makes them):
  1. every rank recorded the same step numbers (--steps N: exactly N of them);
  2. the NCCL calls (GroupStart/GroupEnd aside) that start inside the recorded steps pair up
     across ranks by (comm, seq): the same keys on every rank, each with the same op (Send
     and Recv count as one), count, dtype and redop, in the same step; each communicator's seqs have no gap; comm_size equals
     the world size and comm_rank the rank for the world communicator;
  3. every NCCL kernel launched inside a recorded step (kernel -> the API call with its
     correlation) carries the correlation of an NCCL call of that rank;
  4. with --json (stepprof convert --merge of each rank) and --torch (torch.profiler's export of
     each rank, same script and schedule): per recorded step the NCCL kernel count, and the whole
     multiset of GPU op names, equal torch's (steps paired by number, else in order).
Give --dump, --json and --torch once per rank, in the same rank order. Exit 0 pass, 1 fail.

usage: check_nccl.py --dump R0.txt --dump R1.txt [--json R0.json --json R1.json]
                     [--torch T0.json --torch T1.json] [--steps N]"""
import argparse
import collections
import fnmatch
import sys

import dumputil as du
import traceutil as tu

GROUP_OPS = ("GroupStart", "GroupEnd")
P2P_OPS = ("Send", "Recv")  # a send on one rank meets a recv on the other
NCCL_KERNEL = "*nccl*"


def is_nccl_kernel(name):
    return fnmatch.fnmatch(name.lower(), NCCL_KERNEL)


def nccl_calls(d, steps):
    """The rank's NCCL calls (GroupStart/End aside) by (comm, seq), each with its step; calls
    outside every recorded step are counted, not returned."""
    calls, outside = {}, 0
    for r in d.of("nccl"):
        if r.text("op") in GROUP_OPS:
            continue
        n = du.step_of(steps, r.start)
        if n is None:
            outside += 1
            continue
        key = (r.int("comm"), r.int("seq"))
        if key in calls:
            raise du.DumpError(f"{d.path}: (comm 0x{key[0]:016x}, seq {key[1]}) recorded twice "
                               f"(lines {calls[key]['line']} and {r.line})")
        rank, size = r.pair("rank")
        op = r.text("op")
        calls[key] = {"op": "Send/Recv" if op in P2P_OPS else op, "count": r.int("count"), "dtype": r.int("dtype"),
                      "redop": r.int("redop"), "step": n, "rank": rank, "size": size, "line": r.line,
                      "corr": r.int("corr"), "name": r.text("name")}
    return calls, outside


def check_pairing(dumps, calls, problems):
    world = len(dumps)
    base_rank, base = dumps[0].rank, calls[0]
    for d, c in zip(dumps[1:], calls[1:]):
        only_a, only_b = sorted(set(base) - set(c)), sorted(set(c) - set(base))
        for keys, who in ((only_a, f"rank {base_rank} only"), (only_b, f"rank {d.rank} only")):
            if keys:
                problems.append(f"{len(keys)} NCCL calls on {who}: "
                                + ", ".join(f"(0x{k[0]:016x}, seq {k[1]})" for k in keys[:8]))
        for key in sorted(set(base) & set(c)):
            a, b = base[key], c[key]
            diff = [f"{f} {a[f]} vs {b[f]}" for f in ("op", "count", "dtype", "redop", "step") if a[f] != b[f]]
            if diff:
                problems.append(f"(comm 0x{key[0]:016x}, seq {key[1]}): rank {base_rank} line {a['line']} vs "
                                f"rank {d.rank} line {b['line']}: " + ", ".join(diff))
    for d, c in zip(dumps, calls):
        by_comm = collections.defaultdict(list)
        for (comm, seq), v in c.items():
            by_comm[comm].append(seq)
            if not (0 <= v["rank"] < v["size"]):
                problems.append(f"rank {d.rank} line {v['line']}: comm rank {v['rank']}/{v['size']} is not a rank")
            elif v["size"] == world and v["rank"] != d.rank:
                problems.append(f"rank {d.rank} line {v['line']}: world communicator says rank {v['rank']}")
        for comm, seqs in sorted(by_comm.items()):
            seqs.sort()
            gaps = sorted(set(range(seqs[0], seqs[-1] + 1)) - set(seqs))
            print(f"rank {d.rank}: comm 0x{comm:016x}: {len(seqs)} calls, seq {seqs[0]}..{seqs[-1]}"
                  + (f", missing {gaps[:10]}" if gaps else ""))
            if gaps:
                problems.append(f"rank {d.rank}: comm 0x{comm:016x} seq gaps {gaps[:10]} (calls not recorded)")
        if not any(v["size"] == world for v in c.values()):
            problems.append(f"rank {d.rank}: no NCCL call on a communicator of size {world}")


def check_kernel_links(d, steps, problems):
    """Every NCCL kernel launched in a recorded step names an NCCL call by its correlation."""
    api_start = {}
    for r in d.of("api"):
        c = r.int("corr", 0)
        if c and (c not in api_start or r.start < api_start[c]):
            api_start[c] = r.start
    call_by_corr = {}
    for r in d.of("nccl"):
        if r.int("corr", 0):
            call_by_corr.setdefault(r.int("corr"), r)
    linked, outside, unlinked, no_launch = collections.Counter(), 0, [], []
    for k in d.of("kernel"):
        if not is_nccl_kernel(k.text("name")):
            continue
        c = k.int("corr", 0)
        if c not in api_start:
            no_launch.append(k)
            continue
        if du.step_of(steps, api_start[c]) is None:
            outside += 1
            continue
        call = call_by_corr.get(c)
        if call is None:
            unlinked.append(k)
        else:
            linked[call.text("op")] += 1
    print(f"rank {d.rank}: NCCL kernels in recorded steps linked to calls: {dict(linked)}; "
          f"{outside} launched outside them")
    if not linked and not unlinked:
        problems.append(f"rank {d.rank}: no NCCL kernel in the recorded steps")
    for k in unlinked[:5]:
        problems.append(f"rank {d.rank} line {k.line}: NCCL kernel corr={k.int('corr', 0)} "
                        f"{tu.short(k.text('name'), 80)} has no NCCL call with that correlation")
    if len(unlinked) > 5:
        problems.append(f"rank {d.rank}: {len(unlinked)} NCCL kernels without an NCCL call in all")
    for k in no_launch[:5]:
        problems.append(f"rank {d.rank} line {k.line}: NCCL kernel corr={k.int('corr', 0)} has no launching "
                        "API call in the trace")
    uncorrelated = [v for v in d.of("nccl") if v.text("op") not in GROUP_OPS and not v.int("corr", 0)
                    and du.step_of(steps, v.start) is not None]
    if uncorrelated:
        print(f"rank {d.rank}: note: {len(uncorrelated)} NCCL calls carry no kernel correlation "
              "(their kernel is launched by a later call, e.g. ncclGroupEnd)")


def pair_steps(a, b):
    a, b = sorted(a), sorted(b)
    if a == b:
        return list(zip(a, b))
    if len(a) != len(b):
        return None
    print(f"note: step numbers differ (stepprof {a}, torch {b}); pairing them in order")
    return list(zip(a, b))


def check_vs_torch(rank, sp_json, torch_json, problems):
    try:
        sp, th = tu.load(sp_json), tu.load(torch_json)
    except tu.TraceError as e:
        problems.append(f"rank {rank}: {e}")
        return
    print(f"rank {rank} stepprof: {tu.describe(sp)}")
    print(f"rank {rank} torch:    {tu.describe(th)}")
    pairs = pair_steps(sp.steps, th.steps)
    if pairs is None:
        problems.append(f"rank {rank}: stepprof recorded steps {sorted(sp.steps)}, torch {sorted(th.steps)}")
        return
    for s, t in pairs:
        ms, mt = sp.multiset(s), th.multiset(t)
        ns = sum(c for label, c in ms.items() if is_nccl_kernel(label))
        nt = sum(c for label, c in mt.items() if is_nccl_kernel(label))
        rows = tu.counter_diff_table(ms, mt, "stepprof", "torch")
        print(f"rank {rank} step {s} vs torch {t}: NCCL kernels {ns} vs {nt}; {sum(ms.values())} vs "
              f"{sum(mt.values())} GPU ops{'' if rows else ', names and counts equal'}")
        if ns != nt:
            problems.append(f"rank {rank} step {s}: {ns} NCCL kernels, torch.profiler {nt} (step {t})")
        if ns == 0:
            problems.append(f"rank {rank} step {s}: no NCCL kernel at all")
        if rows:
            problems.append(f"rank {rank} step {s} vs torch step {t}: GPU op names/counts differ\n"
                            + "\n".join(rows))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dump", action="append", required=True, help="`stepprof dump` text of one rank")
    p.add_argument("--json", action="append", default=[], help="`stepprof convert --merge` of one rank")
    p.add_argument("--torch", action="append", default=[], help="torch.profiler JSON of one rank")
    p.add_argument("--steps", type=int, help="recorded steps expected on every rank")
    a = p.parse_args()
    if len(a.dump) < 2 or (a.json and len(a.json) != len(a.dump)) or len(a.torch) != len(a.json):
        p.error("give --dump for 2+ ranks, and --json and --torch as often as --dump (or neither)")
    problems, calls = [], []
    try:
        dumps = [du.load(f) for f in a.dump]
        steps = [d.steps() for d in dumps]
        for d, s in zip(dumps, steps):
            print(f"{d.path}: rank {d.rank} of {d.header.get('world_size')}, {len(d.of('nccl'))} NCCL records, "
                  f"{sum(1 for k in d.of('kernel') if is_nccl_kernel(k.text('name')))} NCCL kernels, "
                  f"steps {sorted(s)}, comms {sorted({r.text('comm') for r in d.of('comm')})}")
        ranks = [d.rank for d in dumps]
        if sorted(ranks) != list(range(len(dumps))):
            problems.append(f"the dumps are of ranks {ranks}, expected 0..{len(dumps) - 1} once each")
        if any(s.keys() != steps[0].keys() for s in steps):
            problems.append("ranks recorded different steps: "
                            + "; ".join(f"rank {d.rank}: {sorted(s)}" for d, s in zip(dumps, steps)))
        if a.steps is not None and len(steps[0]) != a.steps:
            problems.append(f"rank {ranks[0]} recorded {len(steps[0])} steps, expected {a.steps}")
        for d, s in zip(dumps, steps):
            c, outside = nccl_calls(d, s)
            print(f"rank {d.rank}: {len(c)} NCCL calls in recorded steps ({collections.Counter(v['op'] for v in c.values())}), "
                  f"{outside} outside them")
            if not c:
                problems.append(f"rank {d.rank}: no NCCL call in the recorded steps")
            calls.append(c)
        check_pairing(dumps, calls, problems)
        for d, s in zip(dumps, steps):
            check_kernel_links(d, s, problems)
    except du.DumpError as e:
        problems.append(str(e))
    for rank, (js, th) in enumerate(zip(a.json, a.torch)):
        check_vs_torch(rank, js, th, problems)
    for msg in problems:
        print(f"FAIL: {msg}")
    print(f"check_nccl: {'PASS' if not problems else 'FAIL'} ranks={len(a.dump)} "
          f"nccl_calls={'/'.join(str(len(c)) for c in calls)} "
          f"problems={len(problems)}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
