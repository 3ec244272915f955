#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""drift.py TRACE.json... - per recorded step of each trace (stepprof's or torch.profiler's Chrome
JSON): the step's CPU span, the GPU span of its ops (first start to last end), their summed
durations, and the lag of the last GPU end after the step's CPU end. A GPU clock read at the wrong
rate shows as GPU spans and busy time off by the same factor, and a lag that drifts from step to
step; a GPU that really ran faster shows as busy time shorter with spans that still match."""
import statistics
import sys

import traceutil as tu


def main(paths):
    for p in paths:
        try:
            tr = tu.load(p)
        except tu.TraceError as e:
            print(f"{p}: {e}")
            continue
        print(f"== {p}: {tu.describe(tr)}")
        for s in sorted(tr.steps):
            ops = [o for o in tr.steps[s] if o.cat == "kernel"]
            if not ops:
                continue
            c0, c1 = tr.spans[s]
            g0, g1 = min(o.ts for o in ops), max(o.ts + o.dur for o in ops)
            busy = sum(o.dur for o in ops)
            q = statistics.median(o.ts - o.launch_ts for o in ops if not o.fallback) if ops else 0
            print(f"step {s}: kernels {len(ops)} cpu {c1 - c0:9.1f} us gpu {g1 - g0:9.1f} us "
                  f"(gpu/cpu {(g1 - g0) / (c1 - c0):.3f}) busy {busy:9.1f} us lag_end {g1 - c1:8.1f} us "
                  f"first_start-step_start {g0 - c0:8.1f} us median(start-launch) {q:7.1f} us")


if __name__ == "__main__":
    main(sys.argv[1:])
