#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_memory.py - checks the device memory stepprof recorded for one GPU of one process
(`stepprof dump` text of a trace with one window) against torch's own numbers
(mlp_train.py / train_ddp.py --memory-json: max_memory_reserved and the caching allocator's
segments):
  1. the trace has a PEAK record for the device (flags=peak, or addr=0x0 size=0), and no
     ALLOC/FREE/SNAPSHOT record of the window shows more live bytes than it;
  2. stepprof is consistent with itself: the SNAPSHOT allocations add up to their live level,
     and replaying the window's allocations and frees over them ends at the last record's level;
  3. torch's part: the allocations whose address is one of torch's segments reach, at their
     highest, max_memory_reserved within --tol (default 1%), and every torch segment is known
     to stepprof;
  4. the peak stepprof reports (the PEAK record), less the bytes of other libraries' allocations
     (NCCL buffers, ...: not torch segments, listed) live at the window's highest level, equals
     max_memory_reserved within --tol. Without segments nothing is subtracted.
Exit 0 pass, 1 fail; the last line is a summary.

usage: check_memory.py DUMP.txt (--memory-json TORCH_MEM.json | --reserved BYTES)
                       [--device D] [--tol 0.01]"""
import argparse
import collections
import json
import sys

import dumputil as du

MB = 2**20


def mem_flags(r):
    """'peak', 'snapshot' or '' for an alloc/free record. Dumps without a flags= field: a PEAK
    record has addr 0 and size 0; a SNAPSHOT is told apart by the caller (by time)."""
    if r.has("flags"):
        f = set(r.text("flags").split(","))
        return "peak" if "peak" in f else "snapshot" if "snapshot" in f else ""
    return "peak" if r.kind == "alloc" and r.int("addr") == 0 and r.int("size") == 0 else ""


def key_of(r):
    """Allocations and frees match by address; VMM handles have their own key space."""
    return (r.text("mem") == "vmm", r.int("addr"))


def analyse(d, device):
    """Splits the device's memory records of the (single) window; returns a dict of findings."""
    wins = d.windows()
    if len(wins) != 1:
        raise du.DumpError(f"{d.path}: {len(wins)} windows; check_memory wants exactly one (repeat = 1)")
    t0 = wins[0][0]
    dev = str(device)
    peaks, snaps, events = [], [], []
    for r in d.of("alloc", "free"):
        if r.text("dev") != dev or r.text("mem") in ("host", "pinned"):
            continue
        fl = mem_flags(r)
        if fl == "peak":
            peaks.append(r)
        elif fl == "snapshot" or (not r.has("flags") and r.kind == "alloc" and r.start < t0):
            snaps.append(r)
        else:
            events.append(r)
    events.sort(key=lambda r: (r.start, r.line))
    return {"peaks": peaks, "snaps": snaps, "events": events, "t0": t0}


def replay(a, torch_addrs, problems):
    """Replays SNAPSHOT + window records; returns the levels at the window's highest point (total,
    torch's, others'), torch's highest level and the live set at the end. Checks stepprof's own
    live numbers against the replay."""
    live = {}
    for r in a["snaps"]:
        live[key_of(r)] = (r.int("size"), r.text("mem"))
    is_torch = {k: not k[0] and k[1] in torch_addrs for k in live}
    total = sum(s for s, _ in live.values())
    torch_level = sum(s for k, (s, _) in live.items() if is_torch[k])
    snap_levels = {r.int("live") for r in a["snaps"]}
    if a["snaps"]:
        if len(snap_levels) != 1 or total not in snap_levels:
            problems.append(f"SNAPSHOT records add up to {total} bytes but say live={sorted(snap_levels)}")
        print(f"snapshot at window start: {len(a['snaps'])} allocations, {total / MB:.1f} MiB")
    else:
        print("snapshot at window start: none (nothing was allocated before the window)")
    best = {"total": total, "torch": torch_level, "foreign": total - torch_level, "line": 0}
    torch_max, mismatches, unknown_frees = torch_level, 0, 0
    for r in a["events"]:
        k = key_of(r)
        if r.kind == "alloc":
            old = live.get(k)
            if old:  # the same address again without a free: replaced
                total -= old[0]
                torch_level -= old[0] if is_torch[k] else 0
            live[k] = (r.int("size"), r.text("mem"))
            is_torch[k] = not k[0] and k[1] in torch_addrs
            total += live[k][0]
            torch_level += live[k][0] if is_torch[k] else 0
        elif k in live:
            size, _ = live.pop(k)
            total -= size
            torch_level -= size if is_torch[k] else 0
        else:
            unknown_frees += 1
        mismatches += total != r.int("live")
        torch_max = max(torch_max, torch_level)
        if r.int("live") > best["total"]:
            best = {"total": r.int("live"), "torch": torch_level, "foreign": total - torch_level, "line": r.line}
    last = a["events"][-1] if a["events"] else (a["snaps"][-1] if a["snaps"] else None)
    print(f"window: {len(a['events'])} allocations/frees on the device; replayed level at the end "
          f"{total / MB:.1f} MiB, last record says {last.int('live') / MB if last else 0:.1f} MiB; "
          f"{mismatches} records whose live differs from the replay (threads racing: information)")
    if last is not None and total != last.int("live"):
        problems.append(f"replaying the records ends at {total} bytes, the last record (line {last.line}) "
                        f"says live={last.int('live')}: stepprof's counter disagrees with its records")
    if unknown_frees:
        problems.append(f"{unknown_frees} frees of allocations stepprof never listed (neither snapshot nor window)")
    best["torch_max"] = torch_max
    best["live_at_end"] = live
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dump")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--memory-json", help="written by mlp_train.py / train_ddp.py --memory-json")
    g.add_argument("--reserved", type=int, help="torch.cuda.max_memory_reserved() in bytes")
    p.add_argument("--device", type=int, help="CUDA ordinal (default: the JSON's, else 0)")
    p.add_argument("--tol", type=float, default=0.01)
    a = p.parse_args()
    problems = []
    segments, info = [], {}
    if a.memory_json:
        try:
            with open(a.memory_json) as f:
                info = json.load(f)
            reserved = int(info["max_reserved_bytes"])
            segments = [(int(s[0]), int(s[1])) for s in info.get("segments", [])]
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            print(f"FAIL: {a.memory_json}: {e}\ncheck_memory: FAIL (unreadable torch memory file)")
            return 1
    else:
        reserved = a.reserved
    device = a.device if a.device is not None else int(info.get("device", 0))
    if reserved <= 0:
        print(f"FAIL: torch reserved {reserved} bytes: nothing to compare\ncheck_memory: FAIL")
        return 1
    print(f"torch: device {device}, max_memory_reserved {reserved} ({reserved / MB:.1f} MiB)"
          + (f", reserved at the end {info['reserved_bytes']}, {len(segments)} segments "
             f"({sum(s for _, s in segments) / MB:.1f} MiB)" if info else "")
          + (f", PYTORCH_CUDA_ALLOC_CONF={info['alloc_conf']!r}" if info.get("alloc_conf") else ""))
    if info and info.get("reserved_bytes") != reserved:
        print("note: torch released segments before the end; the segment list misses them")
    try:
        d = du.load(a.dump)
        an = analyse(d, device)
    except du.DumpError as e:
        print(f"FAIL: {e}\ncheck_memory: FAIL (unreadable dump)")
        return 1
    if "device_memory" not in d.features() and d.features():
        print(f"note: the header's features {sorted(d.features())} do not name device_memory")
    if not an["peaks"]:
        problems.append(f"no PEAK record for device {device} (alloc flags=peak, or addr=0x0 size=0)")
    peak = max((r.int("live") for r in an["peaks"]), default=0)
    window_max = max((r.int("live") for r in an["snaps"] + an["events"]), default=0)
    torch_addrs = {addr for addr, _ in segments}
    best = replay(an, torch_addrs, problems)
    print(f"stepprof: PEAK {peak} ({peak / MB:.1f} MiB), highest live in the window {window_max} "
          f"({window_max / MB:.1f} MiB)")
    if window_max > peak:
        problems.append(f"a window record shows {window_max} live bytes, more than the PEAK {peak}")
    elif peak > window_max:
        print(f"note: the peak ({(peak - window_max) / MB:.1f} MiB above the window's highest level) was "
              "reached before the window; other libraries' bytes at that moment are estimated by the window's")
    foreign = 0
    if segments:
        foreign = best["foreign"]
        tmax = best["torch_max"]
        by_kind = collections.Counter()
        for (vmm, addr), (size, kind) in best["live_at_end"].items():
            if vmm or addr not in torch_addrs:
                by_kind[kind] += size
        print(f"torch's segments as stepprof saw them: highest {tmax} ({tmax / MB:.1f} MiB) "
              f"= {tmax / reserved:.4f} x max_memory_reserved")
        print(f"other allocations on the device at the window's highest level: {foreign} bytes "
              f"({foreign / MB:.1f} MiB); at the end by kind: "
              + (", ".join(f"{k} {v / MB:.1f} MiB" for k, v in sorted(by_kind.items())) or "none"))
        missing = [(addr, s) for addr, s in segments if (False, addr) not in best["live_at_end"]]
        if missing:
            problems.append(f"{len(missing)} torch segments ({sum(s for _, s in missing) / MB:.1f} MiB) are not "
                            f"live allocations in stepprof's records, e.g. 0x{missing[0][0]:x} size {missing[0][1]}")
        if abs(tmax - reserved) > a.tol * reserved:
            problems.append(f"torch's segments peak at {tmax} bytes in stepprof's records, torch says "
                            f"{reserved} ({tmax / reserved:.4f}x, tolerance {a.tol})")
    adjusted = peak - foreign
    ratio = adjusted / reserved
    print(f"stepprof peak{' less other allocations' if segments else ''}: {adjusted} ({adjusted / MB:.1f} MiB) "
          f"= {ratio:.4f} x torch's max_memory_reserved {reserved}; raw peak / reserved = {peak / reserved:.4f}")
    if abs(adjusted - reserved) > a.tol * reserved:
        problems.append(f"peak {adjusted} vs max_memory_reserved {reserved}: ratio {ratio:.4f} outside 1 +- {a.tol}")
    for msg in problems:
        print(f"FAIL: {msg}")
    print(f"check_memory: {'PASS' if not problems else 'FAIL'} device={device} peak={peak} other={foreign} "
          f"reserved={reserved} ratio={ratio:.4f} problems={len(problems)}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
