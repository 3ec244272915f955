#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""selftest_ddp_checks.py - host-side test of check_nccl.py, check_memory.py and check_stacks.py
(no GPU, no torch): writes synthetic `stepprof dump` texts of a 2-rank run (in cmd_dump.c's line
format), the matching Chrome traces of stepprof and torch.profiler and torch's memory files,
good ones and broken ones, and requires each checker to pass the good and fail every broken
one. Prints one line per case and "selftest: N passed, N failed"."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = (10, 11, 12)
COMM = 0x1234ABCD5678EF00
MB = 2**20
LIB = (0x7F0000000000, 0x7F0000400000, "/usr/lib/libtorch_cuda.so")


def header(rank, features="kernels,runtime_api,driver_api,nccl,device_memory,stacks"):
    return ["version: 1", "min_version: 1", "header_size: 376", f"features: 0x3f3 {features}",
            f"pid: {1000 + rank}", f"rank: {rank}", "world_size: 2", f"local_rank: {rank}",
            "anchor_mono_ns: 0", "anchor_real_ns: 0", "host: selftest", "command: python train_ddp.py"]


def make_dump(rank, *, drop_seq=None, count_of=None, comm=COMM, unlink=False, steps=STEPS, flags=True,
              peak_scale=1.0, live_skew=0, no_stack=False, stack_late=False, no_modules=False,
              pc_outside=False, unique_stacks=False):
    """One rank's dump. Device memory: torch segments 0xA0.. (600 MiB before the window, one
    64 MiB segment made in step 10), NCCL buffers (vmm, 40 MiB) made before the window."""
    L = header(rank)
    t, corr = 1000, 100
    L.append(f"device dev={rank} start=1 name=\"GPU\" sm=132 cc=9.0 memory=85899345920")
    if not no_modules:
        L.append(f"module start=2 name=\"{LIB[2]}\" range=0x{LIB[0]:x}-0x{LIB[1]:x} offset=0x0")
    L.append(f"comm tid=7 dev={rank} start=3 dur=0 event=init name=- comm=0x{comm:016x} rank={rank}/2")
    fl = lambda f: f" flags={f}" if flags else ""  # noqa: E731
    snaps = [(0xA0000000, 400 * MB, "device"), (0xB0000000, 200 * MB, "device"), (0x5, 40 * MB, "vmm")]
    total = sum(s for _, s, _ in snaps)
    for addr, size, kind in snaps:
        L.append(f"alloc tid=7 dev={rank} start=5 dur=0 stream=0 corr=0 mem={kind} name=- addr=0x{addr:x} "
                 f"size={size} live={total} stack=0{fl('snapshot')}")
    live = total
    L.append(f"window_begin start={t} id=0 steps={steps[0]}..{steps[-1]}")
    seq, stack_ids, next_stack = 40, {}, 1
    for n in steps:
        s0 = t
        for i in range(3):
            corr += 1
            site = (i, n) if unique_stacks else i
            stack_line = None
            if site not in stack_ids:  # frames depend on i only: equal frames, one id unless broken
                stack_ids[site] = next_stack
                pc = 0x1000 if pc_outside else LIB[0] + 0x100 * (i + 1)
                stack_line = f"stack id={next_stack} pcs=0x{pc:x},0x{LIB[0] + 0x50:x}"
                next_stack += 1
            if stack_line and not stack_late:
                L.append(stack_line)
            L.append(f"api tid=7 dev=- start={t} dur=5 corr={corr} domain=runtime name=\"cudaLaunchKernel\" "
                     f"cbid=211 status=0 stream=0 stack={0 if no_stack else stack_ids[site]}")
            L.append(f"kernel dev={rank} stream=7 ctx=1 start={t + 10} dur=20 corr={corr} name=\"gemm_{i}\" "
                     "grid=1,1,1 block=1,1,1 regs=1 smem=0+0 launch=normal graph=0/0")
            if stack_line and stack_late:
                L.append(stack_line)
            t += 40
        if n == steps[0]:
            live += 64 * MB
            L.append(f"alloc tid=7 dev={rank} start={t} dur=3 stream=0 corr=0 mem=device name=- addr=0xC0000000 "
                     f"size={64 * MB} live={live + live_skew} stack=0{fl('-')}")
            L.append(f"alloc tid=7 dev={rank} start={t + 1} dur=1 stream=0 corr=0 mem=device name=- addr=0xD0000000 "
                     f"size={MB} live={live + MB + live_skew} stack=0{fl('-')}")
            L.append(f"free tid=7 dev={rank} start={t + 2} dur=1 stream=0 corr=0 mem=device name=- addr=0xD0000000 "
                     f"size={MB} live={live + live_skew} stack=0{fl('-')}")
            t += 10
        for j in range(2):
            corr += 1
            seq += 1
            if seq == drop_seq:
                t += 50
                continue
            count = count_of.get(seq, 1 << 20) if count_of else 1 << 20
            L.append(f"nccl tid=8 dev={rank} start={t} dur=30 stream=9 corr={0 if unlink else corr} op=AllReduce "
                     f"name=\"ncclAllReduce\" count={count} bytes={count * 4} comm=0x{comm:016x} seq={seq} peer=-1 "
                     f"rank={rank}/2 dtype=7 redop=0 group=0 stack=0")
            L.append(f"api tid=8 dev=- start={t + 5} dur=5 corr={corr} domain=driver name=\"cuLaunchKernelEx\" "
                     f"cbid=652 status=0 stream=9 stack={0 if no_stack else 1}")
            L.append(f"kernel dev={rank} stream=9 ctx=1 start={t + 20} dur=100 corr={corr} "
                     f"name=\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\" grid=1,1,1 block=1,1,1 regs=1 smem=0+0 "
                     "launch=normal graph=0/0")
            t += 50
        L.append(f"step tid=7 dev=- start={s0} dur={t - s0} number={n} action=RECORD name=-")
        t += 1
    peak_line = (f"alloc tid=0 dev={rank} start={t} dur=0 stream=0 corr=0 mem=device name=- addr=0x0 size=0 "
                 f"live={int((live + MB) * peak_scale)} stack=0{fl('peak')}")
    L += [peak_line, f"window_end start={t} id=0 steps={steps[0]}..{steps[-1]} bytes=1 dropped=0 capped=0"]
    return "\n".join(L) + "\n"


def chrome(steps, nccl_per_step=2, extra_nccl_step=None):
    """A Chrome trace shaped like stepprof's convert or torch's export of the same steps."""
    ev, t, corr = [], 1000.0, 1
    for n in steps:
        s0 = t
        kernels = [f"gemm_{i}" for i in range(3)] + ["ncclDevKernel_AllReduce_Sum_f32_RING_LL"] * (
            nccl_per_step + (n == extra_nccl_step))
        for name in kernels:
            corr += 1
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 7,
                       "ts": t, "dur": 1.0, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 2, "tid": 9, "ts": t + 2, "dur": 3.0,
                       "args": {"correlation": corr}})
            t += 5
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 7,
                   "ts": s0, "dur": t - s0 + 1})
        t += 2
    return {"traceEvents": ev}


def memory_json(rank, reserved_scale=1.0):
    # torch's three segments; the dump's 1 MiB 0xD0000000 and the vmm buffer are someone else's
    segs = [[0xA0000000, 400 * MB], [0xB0000000, 200 * MB], [0xC0000000, 64 * MB]]
    peak = int(664 * MB * reserved_scale)
    return {"device": rank, "max_reserved_bytes": peak, "reserved_bytes": peak, "segments": segs}


class Cases:
    def __init__(self, tmp):
        self.tmp, self.n, self.passed, self.failed = tmp, 0, 0, []

    def write(self, name, text):
        self.n += 1
        path = os.path.join(self.tmp, f"{self.n}-{name}")
        with open(path, "w") as f:
            f.write(text if isinstance(text, str) else json.dumps(text))
        return path

    def expect(self, what, want_pass, script, *args):
        r = subprocess.run([sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True)
        ok = (r.returncode == 0) == want_pass and r.returncode in (0, 1)
        verdict = "ok  " if ok else "BAD "
        last = (r.stdout.strip().splitlines() or ["(no output)"])[-1]
        print(f"{verdict} {what}: expected {'pass' if want_pass else 'fail'}, got exit {r.returncode}: {last}")
        if ok:
            self.passed += 1
        else:
            self.failed.append(what)
            print("    " + (r.stdout + r.stderr).strip().replace("\n", "\n    ")[-3000:])


def nccl_cases(c):
    good = [c.write(f"r{r}.txt", make_dump(r)) for r in (0, 1)]
    sp = [c.write(f"sp{r}.json", chrome(STEPS)) for r in (0, 1)]
    th = [c.write(f"th{r}.json", chrome(STEPS)) for r in (0, 1)]
    args = lambda d, s=sp, t=th: ["--dump", d[0], "--dump", d[1], "--json", s[0], "--json", s[1],  # noqa: E731
                                  "--torch", t[0], "--torch", t[1], "--steps", "3"]
    c.expect("nccl: good 2-rank run", True, "check_nccl.py", *args(good))
    c.expect("nccl: torch steps numbered differently (paired in order)", True, "check_nccl.py",
             *args(good, t=[c.write("th.json", chrome((13, 14, 15)))] * 2))
    broken = {
        "rank 1 misses a call (seq gap)": dict(drop_seq=44),
        "rank 1 count differs": dict(count_of={45: 7}),
        "rank 1 communicator hash differs": dict(comm=COMM + 1),
        "rank 1 NCCL kernel not linked to a call": dict(unlink=True),
        "rank 1 recorded other steps": dict(steps=(11, 12, 13)),
    }
    for what, kw in broken.items():
        bad = [good[0], c.write("bad.txt", make_dump(1, **kw))]
        c.expect(f"nccl: {what}", False, "check_nccl.py", *args(bad))
    c.expect("nccl: torch saw one more NCCL kernel in a step", False, "check_nccl.py",
             *args(good, t=[th[0], c.write("th.json", chrome(STEPS, extra_nccl_step=11))]))
    c.expect("nccl: --steps 4 but 3 recorded", False, "check_nccl.py", *args(good)[:-1], "4")


def memory_cases(c):
    good, mem = c.write("m0.txt", make_dump(0)), c.write("mem0.json", memory_json(0))
    c.expect("memory: good (NCCL buffers subtracted by address)", True, "check_memory.py", good,
             "--memory-json", mem)
    c.expect("memory: good, dump without flags= (older format)", True, "check_memory.py",
             c.write("m.txt", make_dump(0, flags=False)), "--memory-json", mem)
    c.expect("memory: --reserved only: NCCL buffers make the raw peak differ", False, "check_memory.py",
             good, "--reserved", str(664 * MB), "--device", "0")
    c.expect("memory: --reserved equal to the raw peak", True, "check_memory.py",
             good, "--reserved", str(705 * MB), "--device", "0")
    c.expect("memory: PEAK 5% high", False, "check_memory.py",
             c.write("m.txt", make_dump(0, peak_scale=1.05)), "--memory-json", mem)
    c.expect("memory: torch reserved 5% more than stepprof saw", False, "check_memory.py", good,
             "--memory-json", c.write("mem.json", memory_json(0, reserved_scale=1.05)))
    c.expect("memory: live counter disagrees with the records", False, "check_memory.py",
             c.write("m.txt", make_dump(0, live_skew=4096)), "--memory-json", mem)
    c.expect("memory: wrong device", False, "check_memory.py", good, "--memory-json", mem, "--device", "1")


def stack_cases(c):
    c.expect("stacks: good", True, "check_stacks.py", c.write("s.txt", make_dump(0)))
    broken = {
        "launch without a stack id": dict(no_stack=True),
        "stack line after its first use": dict(stack_late=True),
        "no MODULE record": dict(no_modules=True),
        "frames outside every module": dict(pc_outside=True),
        "equal frames under several ids (not interned)": dict(unique_stacks=True),
    }
    for what, kw in broken.items():
        c.expect(f"stacks: {what}", False, "check_stacks.py", c.write("s.txt", make_dump(0, **kw)))


def main():
    with tempfile.TemporaryDirectory(prefix="sp-ddp-selftest-") as tmp:
        c = Cases(tmp)
        nccl_cases(c)
        memory_cases(c)
        stack_cases(c)
    if c.failed:
        print("failed: " + "; ".join(c.failed))
    print(f"selftest: {c.passed} passed, {len(c.failed)} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
