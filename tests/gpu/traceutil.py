#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""traceutil.py - reads a Chrome trace JSON written by `stepprof convert` or by torch.profiler's
export_chrome_trace (plain or .gz) and attributes every GPU op (kernel, memcpy, memset) to a
ProfilerStep#N span: op -> args.correlation -> the cuda_runtime/cuda_driver call with the same
correlation -> the step span holding that call's start. Only an op without a usable correlation
falls back to its GPU start time (counted in Trace.n_fallback). Never writes anything.

CLI:  traceutil.py summary TRACE.json [--pid P]
      traceutil.py count TRACE.json GLOB     (prints the per-step count of matching ops; exit 1
                                              unless it is the same in every step)"""
import bisect
import collections
import fnmatch
import gzip
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
API_CATS = ("cuda_runtime", "cuda_driver")
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
COPY_DIR_RE = re.compile(r"(?<![a-z])(HtoD|DtoH|DtoD|HtoH|PtoP|HtoA|AtoH|AtoA|AtoD|DtoA)(?![a-z])", re.I)
API_SUFFIX_RE = re.compile(r"(_v\d+)?(_ptsz|_ptds)?$")


class TraceError(Exception):
    """The file cannot be read or does not have the shape the checks need."""


@dataclass
class Op:
    label: str           # kernel name (demangled), "memcpy HtoD", "memset"...
    cat: str             # kernel, gpu_memcpy, gpu_memset
    ts: float            # GPU start, us
    dur: float           # us
    corr: int            # correlation id, -1 if none
    launch_ts: float     # start of the launching API call (GPU start for a fallback op)
    launchers: list      # base names of the API calls with this correlation ("cudaLaunchKernel")
    args: dict = field(repr=False, default_factory=dict)
    fallback: bool = False  # attributed by GPU time: no launching call was found


@dataclass
class Trace:
    path: str
    pid: object                      # the process whose step spans were used
    spans: dict                      # step -> (start us, end us)
    steps: dict                      # step -> [Op] ordered by GPU start
    n_gpu_ops: int = 0               # GPU ops in the file
    n_fallback: int = 0              # ops attributed by GPU time (missing correlation)
    n_outside: int = 0               # ops whose launch lies in no step span
    n_api: int = 0                   # API events with a correlation

    def multiset(self, step):
        return collections.Counter(op.label for op in self.steps[step])

    def launch_order(self, step):
        """The step's op labels in launch order (ties, e.g. graph kernels, by GPU start)."""
        return [op.label for op in sorted(self.steps[step], key=lambda o: (o.launch_ts, o.ts, o.corr))]


def api_base(name):
    """cudaLaunchKernel_v7000 -> cudaLaunchKernel; __cudaLaunchKernel -> cudaLaunchKernel."""
    return API_SUFFIX_RE.sub("", name.lstrip("_"), count=1)


def _read_events(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, EOFError) as e:
        raise TraceError(f"{path}: cannot read as Chrome trace JSON: {e}") from e
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents list")
    return events


def _demangler(names):
    """Maps every _Z... name to its c++filt demangling (identity if c++filt is missing)."""
    mangled = sorted({n for n in names if n.startswith("_Z")})
    if not mangled or not shutil.which("c++filt"):
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(mangled) + "\n", capture_output=True,
                         text=True, check=False).stdout.splitlines()
    return dict(zip(mangled, out)) if len(out) == len(mangled) else {}


def _label(ev, demangled):
    cat, name = ev.get("cat", ""), ev.get("name", "")
    if cat == "kernel":
        return demangled.get(name, name)
    if cat == "gpu_memset":
        return "memset"
    args = ev.get("args") or {}
    m = COPY_DIR_RE.search(name + " " + " ".join(str(v) for v in args.values()))
    if not m:
        return "memcpy"
    d = m.group(1)
    return "memcpy " + d[0].upper() + "to" + d[-1].upper()


def _num(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def _recorded_span(e):
    """False for a step span whose args name a schedule action other than RECORD*: a producer may
    mark steps it did not record; such spans hold no ops and are not recorded steps."""
    action = next((v for k, v in (e.get("args") or {}).items() if "action" in k.lower()), None)
    return action is None or str(action).upper().startswith("RECORD")


def load(path, pid=None):
    """Reads path and attributes its GPU ops to steps. pid picks the process whose ProfilerStep
    spans and API calls count when several processes have step spans. Raises TraceError if the
    file is unreadable, has no step span, or spans of several processes and no pid."""
    events = [e for e in _read_events(path) if isinstance(e, dict) and e.get("ph") == "X"]
    spans_by_pid = collections.defaultdict(dict)
    for e in events:
        m = STEP_RE.match(str(e.get("name", "")))
        if not m or str(e.get("cat", "")).startswith("gpu_") or not _recorded_span(e):
            continue
        n, start = int(m.group(1)), float(e["ts"])
        spans = spans_by_pid[e.get("pid")]
        if n in spans:
            raise TraceError(f"{path}: ProfilerStep#{n} appears twice (pid {e.get('pid')})")
        spans[n] = (start, start + float(e.get("dur", 0)))
    api_pid = pid  # API calls are filtered by process only when one was named
    if pid is None:
        if len(spans_by_pid) > 1:
            raise TraceError(f"{path}: step spans in several processes {sorted(map(str, spans_by_pid))}:"
                             " pass a pid")
        pid = next(iter(spans_by_pid), None)
    spans = spans_by_pid.get(pid, {})
    if not spans:
        raise TraceError(f"{path}: no ProfilerStep#N span" + (f" for pid {pid}" if pid is not None else ""))

    order = sorted(spans, key=lambda n: spans[n][0])
    starts = [spans[n][0] for n in order]

    def step_at(t):
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t < spans[order[i]][1]:
            return order[i]
        return None

    apis = collections.defaultdict(list)
    for e in events:
        if e.get("cat") in API_CATS and (api_pid is None or e.get("pid") == api_pid):
            corr = _num((e.get("args") or {}).get("correlation"))
            if corr > 0:
                apis[corr].append(e)
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    demangled = _demangler(e.get("name", "") for e in gpu if e.get("cat") == "kernel")
    tr = Trace(path=path, pid=pid, spans=spans, steps={n: [] for n in spans},
               n_gpu_ops=len(gpu), n_api=sum(len(v) for v in apis.values()))
    for e in gpu:
        args = e.get("args") or {}
        corr = _num(args.get("correlation"))
        calls = sorted(apis.get(corr, ()), key=lambda a: float(a["ts"]))
        ts = float(e["ts"])
        if calls:
            launch_ts, fallback = float(calls[0]["ts"]), False
        else:
            launch_ts, fallback = ts, True
            tr.n_fallback += 1
        step = step_at(launch_ts)
        if step is None:
            tr.n_outside += 1
            continue
        tr.steps[step].append(Op(label=_label(e, demangled), cat=e["cat"], ts=ts,
                                 dur=float(e.get("dur", 0)), corr=corr, launch_ts=launch_ts,
                                 launchers=[api_base(str(a.get("name", ""))) for a in calls],
                                 args=args, fallback=fallback))
    for ops in tr.steps.values():
        ops.sort(key=lambda o: (o.ts, o.corr))
    return tr


def idle_before(tr):
    """{kernel label: [us the GPU was idle before each instance]}: its start minus the latest end of
    the ops before it in its step (the first op of a step has none)."""
    gaps = collections.defaultdict(list)
    for ops in tr.steps.values():
        prev_end = None
        for op in ops:
            if op.cat == "kernel" and prev_end is not None:
                gaps[op.label].append(op.ts - prev_end)
            prev_end = op.ts + op.dur if prev_end is None else max(prev_end, op.ts + op.dur)
    return gaps


def schedule_action(step, skip_first=0, wait=0, warmup=0, active=1, repeat=0, skip_first_wait=0):
    """torch.profiler.schedule(...)(step) of torch 2.11: NONE, WARMUP, RECORD or RECORD_AND_SAVE."""
    if step < skip_first:
        return "NONE"
    step -= skip_first
    if skip_first_wait:
        step += wait
    cycle = wait + warmup + active
    if repeat > 0 and step / cycle >= repeat:
        return "NONE"
    mod = step % cycle
    if mod < wait:
        return "NONE"
    if mod < wait + warmup:
        return "WARMUP"
    return "RECORD" if mod < cycle - 1 else "RECORD_AND_SAVE"


def recorded_steps(upto, **sched):
    """Step numbers below upto that the schedule records."""
    return [s for s in range(upto) if schedule_action(s, **sched).startswith("RECORD")]


def parse_schedule(text):
    """'skip_first,wait,warmup,active,repeat' -> dict for schedule_action."""
    keys = ("skip_first", "wait", "warmup", "active", "repeat")
    vals = [int(v) for v in text.split(",")]
    if len(vals) != len(keys):
        raise ValueError(f"schedule needs 5 numbers {','.join(keys)}, got {text!r}")
    return dict(zip(keys, vals))


def short(name, width=100):
    return name if len(name) <= width else name[:width - 3] + "..."


def counter_diff_table(a, b, name_a, name_b):
    """Rows for labels whose counts differ, as printable lines (empty if a == b)."""
    rows = [f"    {'count ' + name_a:>14} {'count ' + name_b:>14}  op"]
    for label in sorted(set(a) | set(b)):
        if a[label] != b[label]:
            rows.append(f"    {a[label]:>14} {b[label]:>14}  {short(label)}")
    return rows if len(rows) > 1 else []


def describe(tr):
    """One line saying what was loaded, for logs."""
    steps = sorted(tr.steps)
    return (f"{tr.path}: pid {tr.pid}, {len(steps)} steps {steps[:12]}{' ...' if len(steps) > 12 else ''}, "
            f"{tr.n_gpu_ops} GPU ops, {tr.n_api} API calls with correlation, "
            f"{tr.n_fallback} attributed by GPU time, {tr.n_outside} outside every step")


def main(argv):
    if len(argv) < 3 or argv[1] not in ("summary", "count"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        pid = None
        if "--pid" in argv:
            i = argv.index("--pid")
            pid = int(argv[i + 1])
            del argv[i:i + 2]
        tr = load(argv[2], pid)
    except (TraceError, ValueError, IndexError) as e:
        print(f"traceutil: {e}", file=sys.stderr)
        return 1
    if argv[1] == "summary":
        print(describe(tr))
        for n in sorted(tr.steps):
            ms = tr.multiset(n)
            print(f"step {n}: {sum(ms.values())} ops, {len(ms)} distinct")
            for label, c in sorted(ms.items()):
                print(f"    {c:5d}  {short(label)}")
        return 0
    pattern = argv[3] if len(argv) > 3 else "*"
    counts = {n: sum(fnmatch.fnmatchcase(op.label, pattern) for op in tr.steps[n]) for n in sorted(tr.steps)}
    if len(set(counts.values())) != 1:
        print(f"traceutil: per-step count of {pattern!r} varies: {counts}", file=sys.stderr)
        return 1
    print(next(iter(counts.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
