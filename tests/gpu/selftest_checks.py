#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""selftest_checks.py - host-side test of the GPU suite's checkers (no GPU, no torch): builds
synthetic Chrome traces shaped like `stepprof convert` and torch.profiler output, good ones and
broken ones, and requires check_workload, check_autosteps and compare_torch to pass the good
and fail each broken one. Also checks traceutil's schedule against tests/data/schedule_torch.txt
when that table exists. Prints one line per case and "selftest: N passed, N failed"."""
import copy
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import traceutil as tu  # noqa: E402

EXPECT = {
    "iterations": 40,
    "per_iteration": {"step_marker": 1, "k_a": 1, "k_b": 1, "k_drv": 1, "k_ex": 1, "g_k1": 1,
                      "g_k2": 1, "g_k3": 1, "memcpy HtoD": 1, "memset": 1},
    "marker_kernel": "step_marker",
    "launchers": {"k_a": "cudaLaunchKernel", "k_b": "cudaLaunchKernel", "step_marker": "cudaLaunchKernel",
                  "k_drv": "cuLaunchKernel", "k_ex": "cudaLaunchKernelExC", "g_k1": "cudaGraphLaunch",
                  "g_k2": "cudaGraphLaunch", "g_k3": "cudaGraphLaunch", "memcpy HtoD": "cudaMemcpyAsync",
                  "memset": "cudaMemsetAsync"},
    "graph_kernels": ["g_k1", "g_k2", "g_k3"],
    "stream_order": [["step_marker", "k_a", "k_drv", "memset"], ["k_b", "k_ex", "memcpy HtoD"],
                     ["g_k1", "g_k2", "g_k3"]],
}
# one iteration as launched: (API name, cat, [(GPU op name, GPU cat, stream)])
ITERATION = [
    ("cudaLaunchKernel_v7000", "cuda_runtime", [("step_marker", "kernel", 1)]),
    ("cudaLaunchKernel_v7000", "cuda_runtime", [("k_a", "kernel", 1)]),
    ("cudaLaunchKernel_v7000", "cuda_runtime", [("k_b", "kernel", 2)]),
    ("cuLaunchKernel", "cuda_driver", [("k_drv", "kernel", 1)]),
    ("cudaLaunchKernelExC_v11060", "cuda_runtime", [("k_ex", "kernel", 2)]),
    ("cudaMemcpyAsync_v3020", "cuda_runtime", [("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 2)]),
    ("cudaMemsetAsync_v3020", "cuda_runtime", [("Memset (Device)", "gpu_memset", 1)]),
    ("cudaGraphLaunch_v10000", "cuda_runtime", [("g_k1", "kernel", 3), ("g_k2", "kernel", 3),
                                                 ("g_k3", "kernel", 3)]),
    ("cudaStreamSynchronize_v3020", "cuda_runtime", []),
    ("cudaDeviceSynchronize_v3020", "cuda_runtime", []),
]


class Builder:
    """Emits a Chrome trace: CPU events on pid 100, GPU events on pid 0, times in us."""

    def __init__(self):
        self.ev, self.corr, self.t = [], 1000, 1000.0

    def api(self, name, cat, ops, dur_of=lambda n: 2.0, drop_corr=False):
        self.corr += 1
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": 7, "ts": self.t,
                        "dur": 1.0, "args": {"correlation": self.corr}})
        gpu_t = self.t + 5.0
        for name_, gcat, stream in ops:
            args = {} if drop_corr else {"correlation": self.corr}
            self.ev.append({"ph": "X", "cat": gcat, "name": name_, "pid": 0, "tid": stream,
                            "ts": gpu_t, "dur": dur_of(name_), "args": args})
            gpu_t += dur_of(name_) + 0.5
        self.t += 3.0

    def step(self, n, body):
        start = self.t
        self.t += 1.0
        body()
        self.t += 1.0
        self.ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 100,
                        "tid": 7, "ts": start, "dur": self.t - start,
                        "args": {"step": n, "action": "RECORD"}})
        self.t += 1.0

    def write(self, path):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "wt") as f:
            json.dump({"traceEvents": self.ev}, f)


def workload_trace(path, steps=(13, 14, 15), mutate=None):
    """A workload trace; mutate(step, iteration list) may change one step's launches."""
    b = Builder()
    for n in steps:
        it = copy.deepcopy(ITERATION)
        if mutate:
            it = mutate(n, it)
        b.step(n, lambda: [b.api(*x) for x in it])
    b.write(path)


MLP_KERNELS = ["ampere_sgemm_128x64_tn", "void at::native::vectorized_elementwise_kernel<4, relu>",
               "void at::native::reduce_kernel<512, 1>", "ampere_sgemm_64x64_nn",
               "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<adam>"]


def mlp_trace(path, steps=(7, 8, 9), scale=1.0, extra=None, mangle=False, shift=0):
    """An MLP-like trace: each step launches MLP_KERNELS in order (rotated by shift)."""
    b = Builder()
    durs = {k: 10.0 + 7 * i for i, k in enumerate(MLP_KERNELS)}
    names = MLP_KERNELS[shift:] + MLP_KERNELS[:shift]
    for n in steps:
        def body():
            for k in names + (extra or []):
                label = "_Z3fooi" if mangle and k == MLP_KERNELS[2] else k
                b.api("cudaLaunchKernel_v7000", "cuda_runtime", [(label, "kernel", 7)],
                      dur_of=lambda _n, k=k: durs.get(k, 5.0) * scale)
        b.step(n, body)
    b.write(path)


def run(script, *args):
    r = subprocess.run([sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def schedule_table_cases():
    """(ok, message) for every line of tests/data/schedule_torch.txt, or nothing if absent."""
    table = os.path.join(HERE, "..", "data", "schedule_torch.txt")
    if not os.path.exists(table):
        return []
    bad = 0
    lines = [l for l in open(table) if l.strip() and not l.startswith("#")]
    for line in lines:
        head, acts = line.split(":", 1)
        kv = dict(re.findall(r"(\w+)=(\d+)", head))
        sched = {k: int(kv[k]) for k in ("skip_first", "wait", "warmup", "active", "repeat")}
        sched["skip_first_wait"] = int(kv["skip_first_wait"])
        got = [tu.schedule_action(s, **sched) for s in range(int(kv["steps"]))]
        bad += got != acts.split()
    return [(bad == 0, f"traceutil.schedule_action matches {len(lines)} torch schedules ({bad} differ)")]


def main():
    d = tempfile.mkdtemp(prefix="stepprof-selftest-")
    exp = os.path.join(d, "expect.json")
    with open(exp, "w") as f:
        json.dump(EXPECT, f)
    p = lambda name: os.path.join(d, name)  # noqa: E731

    def drop_label(label):
        return lambda n, it: [(a, c, [o for o in ops if o[0] != label] if n == 14 else ops) for a, c, ops in it]

    def relaunch(label, api, cat):
        return lambda n, it: [(api, cat, ops) if any(o[0] == label for o in ops) else (a, c, ops)
                              for a, c, ops in it]

    workload_trace(p("good.json"))
    workload_trace(p("good.json.gz"))
    workload_trace(p("missing.json"), mutate=drop_label("g_k2"))
    workload_trace(p("drvlaunch.json"), mutate=relaunch("k_drv", "cudaLaunchKernel_v7000", "cuda_runtime"))
    workload_trace(p("shifted.json"), mutate=lambda n, it: it[1:] + it[:1])
    workload_trace(p("gaps.json"), steps=(13, 14, 16))
    b = Builder()
    for n in (13, 14, 15):
        b.step(n, lambda: [b.api(*x, drop_corr=(x[0].startswith("cuLaunch"))) for x in ITERATION])
    b.write(p("nocorr.json"))

    mlp_trace(p("torch.json"))
    mlp_trace(p("sp_same.json"), scale=1.02)
    mlp_trace(p("sp_slow.json"), scale=1.2)
    mlp_trace(p("sp_extra.json"), extra=["void extra_kernel"])
    mlp_trace(p("sp_rotated.json"), steps=(3, 4, 5), shift=2)
    demangled = subprocess.run(["c++filt", "_Z3fooi"], capture_output=True, text=True).stdout.strip() \
        if tu.shutil.which("c++filt") else ""
    mlp_trace(p("sp_mangled.json"), mangle=True)

    sched = "13,0,0,3,1"  # records steps 13, 14, 15
    cases = [
        ("check_workload good", 0, run("check_workload.py", p("good.json"), exp, "--schedule", sched)),
        ("check_workload .gz", 0, run("check_workload.py", p("good.json.gz"), exp)),
        ("check_workload missing graph kernel", 1, run("check_workload.py", p("missing.json"), exp)),
        ("check_workload driver launch seen as runtime", 1, run("check_workload.py", p("drvlaunch.json"), exp)),
        ("check_workload wrong step numbers", 1, run("check_workload.py", p("gaps.json"), exp, "--schedule", sched)),
        ("check_workload missing correlation", 1, run("check_workload.py", p("nocorr.json"), exp)),
        ("check_autosteps workload good", 0, run("check_autosteps.py", p("good.json"), "--workload", exp, "--steps", "3")),
        ("check_autosteps boundary inside iteration", 1, run("check_autosteps.py", p("shifted.json"), "--workload", exp)),
        ("check_autosteps step count", 1, run("check_autosteps.py", p("good.json"), "--workload", exp, "--steps", "4")),
        ("check_autosteps mlp vs reference", 0, run("check_autosteps.py", p("sp_same.json"), "--mlp", "--reference", p("torch.json"))),
        ("check_autosteps mlp rotated vs reference", 1, run("check_autosteps.py", p("sp_rotated.json"), "--mlp", "--reference", p("torch.json"))),
        ("compare_torch same", 0, run("compare_torch.py", p("sp_same.json"), p("torch.json"))),
        ("compare_torch rotated, renumbered", 0, run("compare_torch.py", p("sp_rotated.json"), p("torch.json"))),
        ("compare_torch renumbered --strict-steps", 1, run("compare_torch.py", p("sp_rotated.json"), p("torch.json"), "--strict-steps")),
        ("compare_torch 20% slower", 1, run("compare_torch.py", p("sp_slow.json"), p("torch.json"))),
        ("compare_torch extra kernel", 1, run("compare_torch.py", p("sp_extra.json"), p("torch.json"))),
    ]
    if demangled and demangled != "_Z3fooi":
        MLP_KERNELS[2] = demangled
        mlp_trace(p("torch_dm.json"))
        cases.append(("compare_torch mangled vs demangled", 0,
                      run("compare_torch.py", p("sp_mangled.json"), p("torch_dm.json"))))
    passed = failed = 0
    for name, want, (rc, out) in cases:
        ok = rc == want
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'PASS' if ok else 'FAIL'}: {name} (exit {rc}, want {want})")
        if not ok:
            print("    " + out.replace("\n", "\n    "))
    for ok, msg in schedule_table_cases():
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'PASS' if ok else 'FAIL'}: {msg}")
    if failed:
        print(f"selftest: {passed} passed, {failed} failed (files kept in {d})")
        return 1
    tu.shutil.rmtree(d)
    print(f"selftest: {passed} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
