#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""pyline_train.py - a small PyTorch training loop whose GPU work comes from distinctive source
lines, for tests/gpu/pystacks.sh: each kernel-launching line of interest sits in a function of
its own (torch.profiler's python_function events name a frame by the line its function starts
on in some versions and by the line running in others, stepprof by the line running: one line per
function makes both comparable per (file, function)), two large blocks are allocated at known
lines before training (BIG_A, BIG_B), and every step ends with torch.cuda.synchronize().

  --steps N               steps (default 12)
  --torch-profiler OUT    run under torch.profiler(with_stack=True), recording steps
                          [skip, skip + active) (skip = --skip, warmup 1), and write the kernel
                          time per innermost user frame as JSON to OUT: "rows" from the Chrome
                          trace (torch_trace_lines.py), "key_averages" from
                          key_averages(group_by_stack_n) as a cross-check
  --torch-trace T.json.gz the Chrome trace, gzipped (default: OUT's name + .trace.json.gz)
  --torch-table T.tsv     the extraction's table, one line per kernel (default: none)
  --skip S --active A     the recorded steps (defaults 6, 4), same as stepprof's schedule
Prints "pyline ok steps=N" at the end."""
import argparse
import gzip
import json
import os
import sys
import time

import torch

import torch_trace_lines as ttl

WIDTH, BATCH = 2048, 512


def big_blocks():
    a = torch.empty(768 << 20, dtype=torch.uint8, device="cuda")  # BIG_A
    b = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")  # BIG_B
    return a, b


def project_in(x, w):
    return x @ w  # L_PROJ_IN


def activate(h):
    return torch.nn.functional.gelu(h)  # L_GELU


def normalise(norm, h):
    return norm(h)  # L_NORM


def mix(h, w):
    return torch.tanh(h @ w) * h  # L_MIX


def gate(h):
    return h * torch.sigmoid(h)  # L_GATE


def head(lin, h):
    return lin(h)  # L_HEAD


def loss_of(out, y):
    return torch.nn.functional.mse_loss(out, y)  # L_LOSS


def regulariser(params):
    return sum((p * p).sum() for p in params) * 1e-6  # L_REG


def clip(params):
    return torch.nn.utils.clip_grad_norm_(params, 1.0)  # L_CLIP


def update(opt):
    opt.step()  # L_OPT


def scale_batch(x):
    return (x - x.mean(dim=0)) / (x.std(dim=0) + 1e-5)  # L_SCALE


def build():
    torch.manual_seed(0)
    w_in = torch.nn.Parameter(torch.randn(WIDTH, WIDTH, device="cuda") * 0.02)
    w_mix = torch.nn.Parameter(torch.randn(WIDTH, WIDTH, device="cuda") * 0.02)
    norm = torch.nn.LayerNorm(WIDTH).cuda()
    lin = torch.nn.Linear(WIDTH, WIDTH).cuda()
    params = [w_in, w_mix, *norm.parameters(), *lin.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    x = torch.randn(BATCH, WIDTH, device="cuda")
    y = torch.randn(BATCH, WIDTH, device="cuda")

    def step():
        h = project_in(scale_batch(x), w_in)
        h = normalise(norm, activate(h))
        h = gate(mix(h, w_mix))
        loss = loss_of(head(lin, h), y) + regulariser(params)
        loss.backward()
        clip(params)
        update(opt)
        opt.zero_grad(set_to_none=True)

    return step


def export_trace(prof, path):
    """The recorded window's Chrome trace, gzipped to PATH (torch_trace_lines.py reads it). A trace
    over 15 MiB gzipped keeps only the events the extraction reads (the device tool brings back
    16 MiB a file)."""
    raw = path + ".tmp.json"
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f:
        data = f.read()
    os.unlink(raw)
    packed = gzip.compress(data, 6)
    if len(packed) > 15 << 20:
        doc = json.loads(data)
        keep = ("python_function", "cuda_runtime", "cuda_driver", "cpu_op", "kernel")
        doc["traceEvents"] = [e for e in doc.get("traceEvents", []) if e.get("cat") in keep]
        packed = gzip.compress(json.dumps(doc).encode(), 6)
    with open(path, "wb") as f:
        f.write(packed)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--torch-profiler")
    p.add_argument("--torch-trace")
    p.add_argument("--torch-table")
    p.add_argument("--skip", type=int, default=6)
    p.add_argument("--active", type=int, default=4)
    a = p.parse_args()
    keep = big_blocks()
    step = build()
    prof = None
    if a.torch_profiler:
        trace = a.torch_trace or a.torch_profiler + ".trace.json.gz"
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            schedule=torch.profiler.schedule(skip_first=a.skip - 1, wait=0, warmup=1, active=a.active, repeat=1),
            on_trace_ready=lambda p: export_trace(p, trace),
            with_stack=True)
        prof.start()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        if prof:
            prof.step()
    if prof:
        prof.stop()
        resolve = ttl.make_resolve(sys.path)
        rows, table, summary = ttl.extract(ttl.load(trace), resolve)
        ka, ka_why = ttl.key_average_rows(prof, resolve)
        if a.torch_table:
            ttl.write_table(a.torch_table, table)
        with open(a.torch_profiler, "w") as f:
            json.dump({"rows": rows, "summary": summary, "key_averages": ka, "key_averages_note": ka_why,
                       "torch": torch.__version__}, f, indent=1)
        print(f"torch.profiler: {sum(r['kernels'] for r in rows.values())} kernels in {len(rows)} rows; "
              f"{json.dumps(summary)}", flush=True)
    del keep
    print(f"pyline ok steps={a.steps} median_ms={sorted(times)[len(times) // 2]:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
