# SPDX-License-Identifier: MIT
# mem_prog.py ITERS - a "PyTorch training program" for tests/e2e/pymem.sh, run with libstepprof
# preloaded, the stand-in CUPTI (FAKE_CUPTI) and the stand-in torch of this folder on PYTHONPATH.
# It initialises "CUDA", imports torch, waits for stepprof's optimizer hook, then runs ITERS
# iterations of a forward and backward kernel and an optimizer step, telling the stand-in
# torch.cuda.memory the iteration and the bytes it holds (1000 + iteration). At the end it prints
# the stand-in allocator's log: `prog: memory CALL:ITERATION:THREAD:ARGS...` a call.
# OOM_AT=I,J,...: at those iterations an allocation runs out of memory (the stand-in torch._C calls
# the observers, then raises OutOfMemoryError, which the program catches: `prog: oom I`).
import ctypes
import os
import sys
import time

iters = int(sys.argv[1])
cupti = ctypes.CDLL(os.environ["FAKE_CUPTI"])
cupti.fake_cupti_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint]
corr = [3000]


def launch(name):
    corr[0] += 1
    cupti.fake_cupti_launch(name.encode(), corr[0])


ctypes.CDLL(None).InitializeInjection()
import torch  # noqa: E402
import torch.optim.optimizer as topt  # noqa: E402

mem = sys.modules.get("torch.cuda.memory")
t0 = time.time()
while not topt._global_optimizer_post_hooks and time.time() - t0 < 10:
    time.sleep(0.01)
opt = torch.optim.SGD(launch, "sgd_fake")
for it in range(iters):
    if mem:
        mem.iteration[0], mem.live[0] = it, 1000 + it
    if str(it) in os.environ.get("OOM_AT", "").split(","):
        try:
            torch._C.out_of_memory(1 << 40)
        except torch._C.OutOfMemoryError:
            print("prog: oom %d" % it, flush=True)
    launch("fwd_fake")
    launch("bwd_fake")
    opt.step()
    time.sleep(0.002)
for call in mem.log if mem else []:
    print("prog: memory " + ":".join(str(x) for x in call))
print("prog: done", flush=True)
