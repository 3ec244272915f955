#!/usr/bin/env python3
"""A two-phase PyTorch program for tests/gpu/phases.sh: an inference call interleaved with training,
as an RL framework does. A warm-up round outside any marker, then ROUNDS rounds of
  - one inference call: NVTX range "generate" (a forward pass under no_grad), then a synchronize;
  - MICRO training micro-batches: NVTX range "train_mb" each (forward + backward; the last one also
    runs the optimizer step and zero_grad), then a synchronize.
SGD without momentum: every optimizer step launches the same kernels (no lazy state).
With --truth (run without stepprof): counts the GPU kernels of one inference call, one micro-batch
and one last micro-batch with torch.profiler (the Chrome trace's "kernel" events) and prints
"truth generate N", "truth train_mb N", "truth train_last N". Otherwise prints "phases ok R M"."""
import argparse, json, os, tempfile
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=4)
ap.add_argument("--micro", type=int, default=6)
ap.add_argument("--truth", action="store_true")
a = ap.parse_args()

torch.manual_seed(0)
dev = "cuda"
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)  # no momentum: no optimizer state created lazily
x = torch.randn(64, 256, device=dev)
y = torch.randn(64, 256, device=dev)
nvtx = torch.cuda.nvtx


def infer(mark):
    if mark:
        nvtx.range_push("generate")
    with torch.no_grad():
        model(x).sum()
    if mark:
        nvtx.range_pop()
    torch.cuda.synchronize()


def micro_batch(mark, last):
    if mark:
        nvtx.range_push("train_mb")
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    if last:
        opt.step()
        opt.zero_grad(set_to_none=False)
    if mark:
        nvtx.range_pop()
    torch.cuda.synchronize()


# warm-up outside any marker (cuBLAS handles, allocator, autograd): the later calls are alike
infer(False)
for m in range(2):
    micro_batch(False, m == 1)

if a.truth:
    from torch.profiler import ProfilerActivity, profile

    def kernels(fn):
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
            fn()
            torch.cuda.synchronize()
        path = os.path.join(tempfile.mkdtemp(), "t.json")
        p.export_chrome_trace(path)
        return sum(1 for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel")

    print("truth generate", kernels(lambda: infer(False)))
    print("truth train_mb", kernels(lambda: micro_batch(False, False)))
    print("truth train_last", kernels(lambda: micro_batch(False, True)))
else:
    for r in range(a.rounds):
        infer(True)
        for m in range(a.micro):
            micro_batch(True, m == a.micro - 1)
    print(f"phases ok {a.rounds} {a.micro}")
