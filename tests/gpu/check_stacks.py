#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_stacks.py - checks the call stacks of a trace recorded with [activities] stacks = true
(`stepprof dump` text):
  1. the window has MODULE records (path and a non-empty executable range);
  2. every recorded kernel launch call (cudaLaunchKernel*, cuLaunchKernel*, ...Cooperative...)
     carries a stack id (stack=N, N > 0);
  3. every stack id an api/nccl/alloc/free record names is printed as a `stack id=N pcs=...`
     line before its first use, with at least one frame;
  4. the innermost frame of every launch stack, and at least --min-in-modules (0.9) of all
     frames, lie inside a MODULE range (so the CLI can symbolise them);
  5. stacks are interned: no two ids have the same frames, and there are fewer distinct ids
     than launch calls (the same call site in every step shares one id).
Exit 0 pass, 1 fail; the last line is a summary.

usage: check_stacks.py DUMP.txt [--min-in-modules 0.9]"""
import argparse
import bisect
import collections
import re
import sys

import dumputil as du

STACK_KINDS = ("api", "nccl", "alloc", "free")
LAUNCH_RE = re.compile(r"^cu(da)?Launch(Cooperative)?Kernel")  # the calls stepprof takes stacks of


def module_index(d, problems):
    """Sorted [(lo, hi, path)] of the MODULE records."""
    mods = []
    for r in d.of("module"):
        lo, _, hi = r.text("range").partition("-")
        try:
            lo, hi = int(lo, 16), int(hi, 16)
        except ValueError:
            problems.append(f"line {r.line}: module range {r.text('range')!r} is not LO-HI")
            continue
        if hi <= lo or not r.text("name").startswith("/"):
            problems.append(f"line {r.line}: module {r.text('name')!r} range 0x{lo:x}-0x{hi:x} is not usable")
        mods.append((lo, hi, r.text("name")))
    return sorted(set(mods))


def in_modules(mods, los, pc):
    i = bisect.bisect_right(los, pc) - 1
    return i >= 0 and mods[i][0] <= pc < mods[i][1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dump")
    p.add_argument("--min-in-modules", type=float, default=0.9)
    a = p.parse_args()
    problems = []
    try:
        d = du.load(a.dump)
        if "stacks" not in d.features():  # information: the records below are what counts
            print(f"note: the header's features {sorted(d.features())} do not name stacks")
        mods = module_index(d, problems)
        los = [m[0] for m in mods]
        print(f"{d.path}: {len(mods)} modules, e.g. "
              + ", ".join(m[2].rsplit("/", 1)[-1] for m in mods[:6]))
        if not mods:
            problems.append("no MODULE record")
        stacks, used_before_def, empty = {}, [], set()
        launches, no_stack = [], []
        for r in d.recs:
            if r.kind == "stack":
                pcs = r.text("pcs")
                frames = [] if pcs == "-" else [int(x, 16) for x in pcs.split(",") if x]
                stacks[r.int("id")] = frames
                if not frames:
                    empty.add(r.int("id"))
            elif r.kind in STACK_KINDS:
                sid = r.int("stack", 0)
                if sid and sid not in stacks:
                    used_before_def.append(r)
                if r.kind == "api" and LAUNCH_RE.match(r.text("name")):
                    launches.append(r)
                    if not sid:
                        no_stack.append(r)
        print(f"{len(stacks)} stack records ({len(empty)} empty); {len(launches)} launch calls, "
              f"{len(launches) - len(no_stack)} with a stack id, "
              f"{len({r.int('stack', 0) for r in launches} - {0})} distinct ids")
        by_name = collections.Counter(r.text("name") for r in launches)
        print("launch calls: " + ", ".join(f"{n} x{c}" for n, c in by_name.most_common(6)))
        if not launches:
            problems.append("no launch API call in the trace")
        for r in no_stack[:5]:
            problems.append(f"line {r.line}: {r.text('name')} has no stack id")
        if len(no_stack) > 5:
            problems.append(f"{len(no_stack)} launch calls without a stack id in all")
        for r in used_before_def[:5]:
            problems.append(f"line {r.line}: {r.kind} names stack {r.int('stack')} before any `stack id=` line")
        launch_ids = {r.int("stack", 0) for r in launches} - {0}
        for sid in sorted(launch_ids & empty)[:5]:
            problems.append(f"launch stack {sid} has no frames")
        dup = collections.defaultdict(list)
        for sid, f in stacks.items():
            if f:
                dup[tuple(f)].append(sid)
        for ids in [ids for ids in dup.values() if len(ids) > 1][:5]:
            problems.append(f"stack ids {sorted(ids)} have the same frames: not interned")
        if launches and len(launch_ids) >= len(launches):
            problems.append(f"{len(launch_ids)} distinct stack ids for {len(launches)} launch calls: not interned")
        inner_out = [sid for sid in launch_ids if stacks.get(sid) and not in_modules(mods, los, stacks[sid][0])]
        frames = [pc for f in stacks.values() for pc in f]
        inside = sum(in_modules(mods, los, pc) for pc in frames)
        share = inside / len(frames) if frames else 0.0
        print(f"frames inside a module: {inside} of {len(frames)} ({share:.3f}); launch stacks whose innermost "
              f"frame is outside every module: {len(inner_out)}")
        for sid in inner_out[:5]:
            problems.append(f"stack {sid}: innermost frame 0x{stacks[sid][0]:x} lies in no module")
        if share < a.min_in_modules:
            problems.append(f"only {share:.3f} of the frames lie in a module (wanted >= {a.min_in_modules})")
    except du.DumpError as e:
        problems.append(str(e))
    for msg in problems:
        print(f"FAIL: {msg}")
    print(f"check_stacks: {'PASS' if not problems else 'FAIL'} problems={len(problems)}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
