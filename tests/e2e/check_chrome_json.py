#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# check_chrome_json.py - validates a Chrome Trace Event JSON file written by `stepprof convert`
# (plain or .gz): the object form, the fields each phase needs, every flow start "s" matched by
# an end "f" (and the reverse) with both ends inside a slice of their track (launch flows "ac2g",
# cross-rank NCCL flows "nccl"), a name for every process and thread track, one ProfilerStep#N per
# step and process. Optional expectations on the command
# line (--nested: slices of a track never partly overlap). --perfetto: Perfetto's import rules, in
# integer nanoseconds as Perfetto reads them (each flow id has exactly one start and one end, slices
# of a track nest, one name per process and per track). --kineto: the layout torch.profiler writes
# and HTA/TensorBoard read (metadata before traceEvents, the first '"rank": N' is the rank, GPU pid =
# device, CPU pid = OS pid, "stream" only on GPU work and syncs, External id on GPU work).
# Exits 1 with one line per problem, else prints a one-line summary.
import argparse
import collections
import gzip
import json
import re
import sys

EPS = 0.0005  # microseconds: timestamps carry 3 decimals
META = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.load(f)


def raw_head(path, n=1 << 16):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read(n).decode("utf-8", "replace")


def ns(us):
    """A timestamp in us as Perfetto takes it: integer ns."""
    return int(round(us * 1000))


GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
# cli/export_chrome.c: a slice that would partly overlap one on its track (CUPTI's timestamps of
# back-to-back kernels on one stream can overlap by a few ns) goes to that track's overlap lanes
OVER_TID_BASE, LANES = 3000000000, 16


def on_stream_track(tid, stream):
    """tid is the stream's own track, or one of its overlap lanes."""
    return isinstance(stream, int) and (tid == stream or
                                        OVER_TID_BASE + stream * LANES <= tid < OVER_TID_BASE + (stream + 1) * LANES)


def kineto_rules(path, doc, rank, err):
    head = raw_head(path)
    if "traceEvents" not in head or any(head.find(k) < 0 or head.find(k) > head.find('"traceEvents"')
                                       for k in ('"schemaVersion"', '"deviceProperties"', '"baseTimeNanoseconds"')):
        err("schemaVersion, deviceProperties and baseTimeNanoseconds must come before traceEvents")
    m = re.search(r'"rank":\s+(\d+)', head)
    if rank is not None and (not m or int(m.group(1)) != rank or head.find('"distributedInfo"') > m.start()):
        err(f"the first '\"rank\": N' (HTA's rank) is {m and m.group(1)}, expected distributedInfo's {rank}")
    steps = sorted((e["pid"], e["tid"], e["ts"], e["dur"]) for e in doc["traceEvents"]
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    for (p0, t0, ts0, d0), (p1, t1, ts1, _) in zip(steps, steps[1:]):
        if (p0, t0) == (p1, t1) and ts0 + d0 > ts1:  # in doubles, as the TensorBoard plugin adds them
            err(f"ProfilerStep at {ts0} ends at {ts0 + d0!r}, after the next one starts ({ts1!r})")
    os_pid = (doc.get("otherData") or {}).get("pid")
    if isinstance(os_pid, int) and 0 <= os_pid < 64:
        os_pid += 0x10000000  # stepprof moves an OS pid off the device ordinals
    # an op's External id (cpu_op): GPU work and CUDA calls it launched carry it, as Kineto's do
    op_ids = {(e.get("args") or {}).get("External id") for e in doc["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "cpu_op"}
    for i, e in enumerate(doc["traceEvents"]):
        a = e.get("args") or {}
        if e.get("ph") != "X":
            continue
        where = f"event {i} ({e.get('cat')} {e.get('name')!r})"
        if e["ts"] < 0:
            err(f"{where}: ts < 0 (HTA's alignment of ranks loses every event then)")
        if e["cat"] in GPU_CATS:
            if e["pid"] != a.get("device") or not on_stream_track(e["tid"], a.get("stream")) or "External id" not in a \
                    or (a.get("correlation") != a.get("External id") and a.get("External id") not in op_ids):
                err(f"{where}: GPU work needs pid = device, tid = stream, External id = correlation or its op's")
        elif e["cat"] == "cpu_op":
            if not isinstance(a.get("External id"), int) or not isinstance(a.get("Sequence number"), int):
                err(f"{where}: cpu_op needs an integer External id and Sequence number")
        elif e["cat"] == "cuda_sync":
            if not isinstance(a.get("stream"), int) or a["stream"] == 0 or "cuda_sync_kind" not in a:
                err(f"{where}: cuda_sync needs cuda_sync_kind and a stream (-1 when none)")
        else:
            if "stream" in a:
                err(f"{where}: a CPU event carries \"stream\" (HTA takes it for GPU work)")
            if os_pid is not None and e["pid"] != os_pid:
                err(f"{where}: CPU pid {e['pid']} is not the OS pid {os_pid}")


def check(path, args):
    errors = []
    err = errors.append
    doc = load(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not the object form with a traceEvents list"]
    if doc.get("displayTimeUnit") != "ns":
        err("displayTimeUnit is not 'ns'")
    if doc.get("schemaVersion") != 1:
        err("schemaVersion is not 1")
    if not isinstance(doc.get("otherData"), dict):
        err("no otherData object")
    num = (int, float)
    slices = collections.defaultdict(list)  # (pid, tid) -> [(ts, end)]
    starts, ends = collections.Counter(), collections.Counter()
    flows, proc_named, thread_named = [], set(), set()
    used_pids, used_tracks = set(), set()
    steps, cats = [], collections.Counter()

    for i, e in enumerate(doc["traceEvents"]):
        where = f"event {i} ({e.get('ph')} {e.get('name')!r})"
        ph = e.get("ph")
        if not isinstance(e.get("pid"), int):
            err(f"{where}: no integer pid")
            continue
        if ph == "M":
            if e.get("name") not in META or not isinstance(e.get("args"), dict):
                err(f"{where}: bad metadata record")
            elif e["name"] == "process_name":
                proc_named.add(e["pid"])
            elif e["name"] == "thread_name":
                thread_named.add((e["pid"], e.get("tid")))
            continue
        if not isinstance(e.get("ts"), num):
            err(f"{where}: no numeric ts")
            continue
        used_pids.add(e["pid"])
        track = (e["pid"], e.get("tid"))
        if ph == "X":
            if not (isinstance(e.get("name"), str) and isinstance(e.get("cat"), str)
                    and isinstance(e.get("tid"), int) and isinstance(e.get("dur"), num) and e["dur"] >= 0):
                err(f"{where}: X needs name, cat, tid and dur >= 0")
                continue
            slices[track].append((e["ts"], e["ts"] + e["dur"]))
            used_tracks.add(track)
            cats[e["cat"]] += 1
            if e["name"].startswith("ProfilerStep#"):
                steps.append((e["pid"], int(e["name"][len("ProfilerStep#"):])))
        elif ph in ("s", "f"):
            if not (isinstance(e.get("id"), int) and isinstance(e.get("tid"), int)
                    and e.get("cat") in ("ac2g", "nccl", "fwdbwd") and isinstance(e.get("name"), str)):
                err(f"{where}: flow needs integer id and tid, cat ac2g, nccl or fwdbwd and a name")
                continue
            if ph == "f" and e.get("bp") != "e":
                err(f"{where}: flow end without \"bp\":\"e\"")
            (starts if ph == "s" else ends)[e["id"]] += 1
            flows.append((ph, e["id"], track, e["ts"]))
            used_tracks.add(track)
        elif ph == "i":
            if e.get("s") not in ("t", "p", "g") or not isinstance(e.get("name"), str):
                err(f"{where}: instant needs a name and s in t/p/g")
            if e.get("s") == "t":
                used_tracks.add(track)
        elif ph == "C":
            a = e.get("args")
            if not isinstance(e.get("name"), str) or not isinstance(a, dict) or not a or \
                    not all(isinstance(v, num) for v in a.values()):
                err(f"{where}: counter needs a name and numeric args")
        else:
            err(f"{where}: unexpected phase")

    for fid in starts:
        if starts[fid] != 1:
            err(f"flow {fid}: {starts[fid]} starts")
        if args.perfetto and ends[fid] != 1:
            err(f"flow {fid}: {ends[fid]} ends")
        if not ends[fid]:
            err(f"flow {fid}: start without end")
    for fid in ends:
        if not starts[fid]:
            err(f"flow {fid}: end without start")
    for ph, fid, track, ts in flows:
        if not any(s - EPS <= ts <= e + EPS for s, e in slices[track]):
            err(f"flow {ph} {fid}: no slice on track {track} encloses ts {ts}")
    for pid in sorted(used_pids - proc_named):
        err(f"pid {pid} has no process_name")
    for track in sorted(used_tracks - thread_named):
        err(f"track {track} has no thread_name")
    if args.perfetto:
        names = collections.Counter((e["name"], e["pid"], e.get("tid") if e["name"] == "thread_name" else 0)
                                    for e in doc["traceEvents"] if e.get("ph") == "M"
                                    and e.get("name") in ("process_name", "thread_name"))
        for k, n in names.items():
            if n > 1:
                err(f"{k[0]} of pid {k[1]} tid {k[2]} written {n} times")
        for track, sl in slices.items():
            stack = []
            for s, e in sorted(((ns(s), ns(e)) for s, e in sl), key=lambda x: (x[0], -x[1])):
                while stack and stack[-1] <= s:
                    stack.pop()
                if stack and e > stack[-1]:
                    err(f"track {track}: slice {s}..{e} ns overlaps the end of its parent at {stack[-1]} ns")
                    break
                stack.append(e)
    if args.kineto:
        kineto_rules(path, doc, args.rank, err)
    if args.devices:
        props = {d.get("id"): d for d in doc.get("deviceProperties", [])}
        for dev in sorted({e["pid"] for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU_CATS}):
            d = props.get(dev, {})
            if not d.get("name") or not d.get("numSms"):
                err(f"GPU {dev}: no device record in deviceProperties ({d or 'missing'})")
    if args.nested:
        for track, sl in slices.items():
            stack = []
            for s, e in sorted(sl, key=lambda x: (x[0], -x[1])):
                while stack and stack[-1] <= s + EPS:
                    stack.pop()
                if stack and e > stack[-1] + EPS:
                    err(f"track {track}: slice {s}..{e} overlaps the end of its parent at {stack[-1]}")
                stack.append(e)
    if len(steps) != len(set(steps)):
        err(f"repeated ProfilerStep: {sorted(steps)}")

    steps = [n for _, n in steps]
    if args.steps is not None:
        want = [int(s) for s in args.steps.split(",") if s]
        if sorted(steps) != sorted(want):
            err(f"steps {sorted(steps)}, expected {want}")
    for c in args.count:
        cat, n = c.split("=")
        if cats[cat] != int(n):
            err(f"{cats[cat]} X events of cat {cat}, expected {n}")
    if args.flows is not None and len(starts) != args.flows:
        err(f"{len(starts)} flows, expected {args.flows}")
    if args.windows is not None and len(doc.get("otherData", {}).get("windows", [])) != args.windows:
        err(f"otherData lists {len(doc['otherData'].get('windows', []))} windows, expected {args.windows}")
    for name in args.track:
        names = [e["args"].get("name") for e in doc["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name")]
        if name not in names:
            err(f"no track named {name!r}")
    if not errors:
        print(f"{path}: ok, {len(doc['traceEvents'])} events, steps {sorted(steps)}, {len(starts)} flows, "
              f"{dict(sorted(cats.items()))}")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("--steps", help="comma-separated step numbers expected (one ProfilerStep each)")
    ap.add_argument("--count", action="append", default=[], metavar="CAT=N", help="X events of a category")
    ap.add_argument("--flows", type=int, help="flow arrows expected")
    ap.add_argument("--windows", type=int, help="windows listed in otherData")
    ap.add_argument("--nested", action="store_true", help="slices of each track must nest (no partial overlap)")
    ap.add_argument("--perfetto", action="store_true", help="Perfetto's import rules (flows, nesting, names)")
    ap.add_argument("--kineto", action="store_true", help="torch.profiler's layout, as HTA and TensorBoard read it")
    ap.add_argument("--rank", type=int, help="with --kineto: the rank the file must declare")
    ap.add_argument("--devices", action="store_true",
                    help="every GPU with work has its device record (name, numSms) in deviceProperties")
    ap.add_argument("--track", action="append", default=[], help="a process or thread name that must exist")
    args = ap.parse_args()
    errors = check(args.file, args)
    for e in errors:
        print(f"{args.file}: {e}", file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
