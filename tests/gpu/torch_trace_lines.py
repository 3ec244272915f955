#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch_trace_lines.py - kernel time per innermost frame of the program's own code, read from a
torch.profiler(with_stack=True) Chrome trace (export_chrome_trace; .json or .json.gz). No torch
needed: tests/gpu/pyline_train.py calls it in the profiled process, tests/e2e/gpu_pystacks_check.sh
on a synthetic trace.

  torch_trace_lines.py TRACE [-o ROWS.json] [--table TABLE.tsv] [--path DIR ...]

How a kernel finds its Python frame (the trace as torch 2.x writes it):
  - a kernel (cat "kernel") names its launch by args "correlation": the cuda_runtime or cuda_driver
    event with the same correlation (cudaLaunchKernel, cuLaunchKernel, ...) on the launching
    thread; failing that, the CPU op (cat "cpu_op") with the kernel's args "External id";
  - the Python frames at that moment are the python_function spans of the same pid and tid that
    contain the launch's timestamp, innermost first (torch nests them in time; "nn.Module: X_0"
    and "<built-in method ...>" spans are not frames and are passed over);
  - the frame kept is the innermost one of the program's own code, stepprof's rule: not under
    site-packages/, dist-packages/, lib/python3*, torch/ (torch trims sys.path prefixes, so
    "torch/nn/..." too), <frozen ...>. None: the "(none)" row (the autograd engine's backward,
    a launch with no Python thread around it).
A frame's line is whatever torch wrote (the function's first line in some versions, the line
running in others): rows keep it, comparisons should use (file, function).

Rows: {"FILE|FUNC|LINE" or "(none)": {"ns", "kernels"}}; the table: one line per kernel (how its
launch was found, the innermost span, the user frame) to debug a disagreement."""
import bisect
import gzip
import json
import os
import re
import sys

LIB = ("/site-packages/", "/dist-packages/", "/lib/python3", "/torch/")  # stepprof's rule
FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def load(path):
    """The trace's event list. Raises on an unreadable file (the caller reports it)."""
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8", errors="replace") as f:
        doc = json.load(f)
    return doc.get("traceEvents", []) if isinstance(doc, dict) else doc


def make_resolve(search):
    """A function giving a torch file name its absolute path again through the directories
    SEARCH (torch.profiler trims sys.path prefixes: "torch/nn/modules/linear.py",
    "pyline_train.py"), or the name as it is when no directory holds it."""
    cache = {}

    def resolve(f):
        if os.path.isabs(f) or f.startswith("<"):
            return f
        if f not in cache:
            cache[f] = next((os.path.abspath(os.path.join(p or os.getcwd(), f)) for p in search
                             if os.path.exists(os.path.join(p or os.getcwd(), f))), f)
        return cache[f]

    return resolve


def is_user(path):
    return not path.startswith("<") and not path.startswith("torch/") and not any(p in path for p in LIB)


def user_frame(names, resolve):
    """The innermost frame of the program's own code among NAMES ("FILE(LINE): FUNC" strings,
    innermost first; other names are skipped) as (file, line, func), or None."""
    for n in names:
        m = FRAME.match(n)
        if not m:
            continue
        f = resolve(m.group(1))
        if is_user(f):
            return f, int(m.group(2)), m.group(3)
    return None


class Spans:
    """The python_function spans of one thread, to ask which contain a time. Spans of one thread
    nest (a call returns before its caller): each span's parent is found once, so a question
    walks one chain instead of every span."""

    def __init__(self, spans):
        self.spans = sorted(spans, key=lambda s: (s[0], -s[1]))  # (start, end, name): outer first
        self.starts = [s[0] for s in self.spans]
        self.parent, open_ = [], []
        for i, (start, _, _) in enumerate(self.spans):
            while open_ and self.spans[open_[-1]][1] < start:
                open_.pop()
            self.parent.append(open_[-1] if open_ else -1)
            open_.append(i)

    def at(self, t):
        """Names of the spans containing T, innermost first."""
        i = bisect.bisect_right(self.starts, t) - 1
        out = []
        while i >= 0:
            if self.spans[i][1] >= t:  # checked on every span: a clock step may break the nesting
                out.append(self.spans[i][2])
            i = self.parent[i]
        return out


def num(v, default=0.0):
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def extract(events, resolve):
    """(rows, table, summary) from a trace's events; see the module comment."""
    py, launch, ops, kernels = {}, {}, {}, []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, args = e.get("cat", ""), e.get("args") or {}
        ts, dur = num(e.get("ts")), num(e.get("dur"))
        where = (e.get("pid"), e.get("tid"))
        if cat == "python_function":
            py.setdefault(where, []).append((ts, ts + dur, str(e.get("name", ""))))
        elif cat in LAUNCH_CATS and "correlation" in args:
            launch.setdefault(args["correlation"], (where, ts, e.get("name", ""), cat))
        elif cat == "cpu_op" and "External id" in args:
            ops.setdefault(args["External id"], (where, ts, e.get("name", ""), cat))
        elif cat == "kernel":
            kernels.append(e)
    spans = {w: Spans(s) for w, s in py.items()}
    rows, table = {}, []
    how_count = {}
    for k in kernels:
        args = k.get("args") or {}
        cands = [launch.get(args.get("correlation")), ops.get(args.get("External id"))]
        cands = [c for c in cands if c]
        how, names = "no launch event", []
        for where, ts, name, cat in cands:
            names = spans[where].at(ts) if where in spans else []
            if names:
                how = f"{cat} {name}"
                break
        if cands and not names:
            how = "no Python span around {} {} (pid {} tid {})".format(cands[0][3], cands[0][2], *cands[0][0])
        uf = user_frame(names, resolve)
        key = f"{uf[0]}|{uf[2]}|{uf[1]}" if uf else "(none)"
        ns = int(round(num(k.get("dur")) * 1000))
        r = rows.setdefault(key, {"ns": 0, "kernels": 0})
        r["ns"] += ns
        r["kernels"] += 1
        kind = how.split(" ")[0] if names else ("no launch event" if not cands else "no Python span")
        how_count[kind] = how_count.get(kind, 0) + 1
        table.append((num(k.get("ts")), ns, args.get("correlation", ""), how, names[0] if names else "",
                      len(names), key, str(k.get("name", ""))[:80]))
    table.sort()
    summary = {"kernels": len(kernels), "python_spans": sum(len(s) for s in py.values()),
               "python_threads": len(py), "launch_events": len(launch), "found": how_count}
    return rows, table, summary


def write_table(path, table):
    with open(path, "w") as f:
        f.write("ts_us\tns\tcorrelation\tlaunch\tinnermost_span\tdepth\tuser_frame\tkernel\n")
        for t in table:
            f.write("\t".join(str(x).replace("\t", " ") for x in (f"{t[0]:.3f}",) + t[1:]) + "\n")


def key_average_rows(prof, resolve, depth=64):
    """The cross-check: kernel time per user frame from prof.key_averages(group_by_stack_n=DEPTH)
    (CPU entries only: a kernel's own entry would count its time twice). Returns (rows, why):
    rows None and a reason when this torch has no stacks or no device times there."""
    try:
        avgs = prof.key_averages(group_by_stack_n=depth)
    except Exception as e:  # noqa: BLE001 - an API change is a reason, not a crash
        return None, f"key_averages failed: {e}"
    rows, with_stack = {}, 0
    for a in avgs:
        dev = str(getattr(a, "device_type", "CPU"))
        if not dev.endswith("CPU"):
            continue
        us = getattr(a, "self_device_time_total", None)
        if us is None:
            us = getattr(a, "self_cuda_time_total", 0)
        if not us:
            continue
        stack = list(getattr(a, "stack", None) or [])
        with_stack += bool(stack)
        uf = user_frame(stack, resolve)
        key = f"{uf[0]}|{uf[2]}|{uf[1]}" if uf else "(none)"
        r = rows.setdefault(key, {"ns": 0, "ops": 0})
        r["ns"] += int(round(us * 1000))
        r["ops"] += int(getattr(a, "count", 0))
    if not rows:
        return None, "no CPU entry with device time"
    if not with_stack:
        return rows, "no entry with device time has a stack"
    return rows, ""


def main():
    a = sys.argv[1:]
    if not a or a[0].startswith("-"):
        sys.exit(__doc__)
    trace, out, table_path, search = a[0], None, None, []
    i = 1
    while i < len(a):
        if a[i] in ("-o", "--table", "--path") and i + 1 < len(a):
            if a[i] == "-o":
                out = a[i + 1]
            elif a[i] == "--table":
                table_path = a[i + 1]
            else:
                search.append(a[i + 1])
            i += 2
        else:
            sys.exit(f"torch_trace_lines.py: unknown argument {a[i]!r}")
    rows, table, summary = extract(load(trace), make_resolve(search))
    doc = {"rows": rows, "summary": summary}
    if out:
        with open(out, "w") as f:
            json.dump(doc, f, indent=1)
    else:
        json.dump(doc, sys.stdout, indent=1)
    if table_path:
        write_table(table_path, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
