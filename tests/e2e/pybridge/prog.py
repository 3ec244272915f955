# SPDX-License-Identifier: MIT
# prog.py SCENARIO ITERS - a "PyTorch training program" for tests/e2e/pybridge.sh, run with
# libstepprof preloaded, the stand-in CUPTI (FAKE_CUPTI: its path) and the stand-in torch of this
# folder on PYTHONPATH. It initialises "CUDA" (InitializeInjection, as cuInit would), imports the
# stand-in torch, waits until stepprof's Python bridge has installed its watches (WAIT: optimizer,
# scaler, call; none to start at once), then runs ITERS iterations. Every kernel launch is a fake
# one through the stand-in CUPTI (a record when stepprof collects): names say what they are
# (fwd_fake, bwd_fake, adam_fake...), so that steps can be checked by their kernels.
# Scenarios: one (one optimizer: 3 fwd, 3 bwd, 1 optimizer kernel), gan (two optimizers: 3 + 5),
# wgan (a critic stepped 5 times per generator step: 18), accum (4 micro-batches, one step: 17),
# scaler (a GradScaler; iterations in SKIP skip their optimizer step: 7, or 6 skipped), eval (one,
# with an evaluation pass of 30 forward kernels before iteration 12), fn (one, inside the
# function train_step), method (one, inside Trainer.training_step), rl (generate: 10 forward
# kernels, then rl_train: 2 micro-batches and an optimizer step, 5), fork (one; a child forked
# after iteration 3 steps 20 times and exits), notorch (launches only, torch never imported),
# static (one, inside the staticmethod Trainer.static_step), lazy (one, inside lazymod.lazy_step
# of a module imported with importlib's LazyLoader, loaded by the program half a second later),
# tools (one; the program takes sys.monitoring tool ids 3 and 4 once the bridge's watches are in),
# captured (3 warm-up iterations with an optimizer step, one whose step runs "inside a CUDA graph
# capture" (torch.cuda.is_current_stream_capturing() true), then iterations of 5 launches and a
# cudaDeviceSynchronize with no optimizer step: a training step captured into a graph and replayed),
# rollout (an RL loop: 40 generated tokens of 5 launches and a cudaDeviceSynchronize each, then 2
# micro-batches and an optimizer step: 205 kernels an iteration; the optimizer made before the loop),
# leak (ITERS optimizer steps, GradScaler updates and calls of `marked` that launch nothing, then
# the change in the reference counts of None, the optimizer and the scaler, and in the memory
# tracemalloc sees: stepprof's callables must hold no reference and allocate nothing per event).
# With FAKE_CUDA (the stand-in libcuda's path) the launches go through its cuLaunchKernel as
# cuGetProcAddress hands it out (stepprof's launch trampoline), as a CUDA runtime makes them. At the
# end it prints how many launches stepprof's callbacks saw, and whether torch was imported.
# STEP_MS: milliseconds of sleep at each iteration's end (2). FAKERT (the stand-in libcudart's path):
# a CUDA graph is created before the loop and replayed at each iteration's start through the dynamic
# linker (stepprof's cudaGraphLaunch hook first), as torch's CUDAGraph.replay() does.
import ctypes
import os
import sys
import time

scenario, iters = sys.argv[1], int(sys.argv[2])
cupti = ctypes.CDLL(os.environ["FAKE_CUPTI"])
cupti.fake_cupti_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint]
corr = [1000]
seen = [0]
kernels = {}  # name -> its buffer: with the stand-in driver a CUfunction is its name


def launch(name):
    corr[0] += 1
    seen[0] += cupti.fake_cupti_launch(name.encode(), corr[0])


def driver_launches(path):
    c = ctypes
    gpa_t = c.CFUNCTYPE(c.c_int, c.c_char_p, c.POINTER(c.c_void_p), c.c_int, c.c_uint64, c.POINTER(c.c_int))
    drv = c.CDLL(path)
    p, lk, st = c.c_void_p(), c.c_void_p(), c.c_int()
    gpa = gpa_t(c.cast(drv.cuGetProcAddress_v2, c.c_void_p).value)
    gpa(b"cuGetProcAddress", c.byref(p), 12000, 0, c.byref(st))
    gpa_t(p.value)(b"cuLaunchKernel", c.byref(lk), 12000, 0, c.byref(st))
    u = c.c_uint
    lk_fn = c.CFUNCTYPE(c.c_int, c.c_void_p, u, u, u, u, u, u, u, c.c_void_p, c.c_void_p, c.c_void_p)(lk.value)

    def via_driver(name):
        b = kernels.setdefault(name, c.create_string_buffer(name.encode()))
        lk_fn(c.addressof(b), 1, 1, 1, 1, 1, 1, 0, None, None, None)

    return via_driver


if os.environ.get("IMPORT_FIRST") and scenario != "notorch":
    import torch  # noqa: F401  (before CUDA initialises, as most programs do)
ctypes.CDLL(None).InitializeInjection()
if os.environ.get("FAKE_CUDA"):
    launch = driver_launches(os.environ["FAKE_CUDA"])
if scenario == "notorch":
    for i in range(iters):
        for k in range(5):
            launch("fwd_fake")
        time.sleep(0.002)
    print("prog: torch imported:", "torch" in sys.modules)
    print("prog: done")
    sys.exit(int(os.environ.get("EXIT_CODE", "0")))

for attempt in range(2):
    try:
        import torch
        break
    except ImportError as e:
        print("prog: import failed:", e, flush=True)
from torch.amp import GradScaler  # noqa: E402
import torch.optim.optimizer as topt  # noqa: E402

# MADE_EARLY: the loop's optimizer is made before the bridge watches Optimizer.__init__ (and no other)
early = torch.optim.Adam(launch, "adam_fake") if os.environ.get("MADE_EARLY") else None


def watched(fn):
    if getattr(fn, "__wrapped__", None) is not None:
        return True
    mon = getattr(sys, "monitoring", None)
    code = getattr(fn, "__code__", None)
    return bool(mon and code and any(mon.get_tool(t) and mon.get_local_events(t, code) for t in (3, 4)))


def train_step(opt: object) -> None:
    """one training iteration"""
    for k in range(3):
        launch("fwd_fake")
    for k in range(3):
        launch("bwd_fake")
    opt.step()


def marked(i):
    """a python marker's function in the leak scenario"""
    return i


def generate(n):
    """an RL loop's rollout: forward passes only"""
    for k in range(n):
        launch("gen_fwd_fake")


def rl_train(opt):
    """an RL loop's training step: 2 micro-batches, one optimizer step"""
    for mb in range(2):
        launch("fwd_fake")
        launch("bwd_fake")
    opt.step()


class Trainer:
    def __init__(self, opt):
        self.opt = opt

    def training_step(self, n):
        train_step(self.opt)
        return n

    @staticmethod
    def static_step(opt):
        train_step(opt)


if scenario == "lazy":
    import importlib.util
    import threading

    spec = importlib.util.find_spec("lazymod")
    spec.loader = importlib.util.LazyLoader(spec.loader)
    sys.modules["lazymod"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["lazymod"])
    time.sleep(0.5)  # the bridge polls meanwhile, its marker on lazymod.lazy_step waiting
    print("prog: lazymod still lazy after the polls:", type(sys.modules["lazymod"]).__name__ == "_LazyModule")
    lazymod = sys.modules["lazymod"]
    print("prog: lazymod loaded on the main thread:", lazymod.loaded_on == threading.get_ident())  # loads it
    lazymod.launch = launch


def wait(what):
    t0 = time.time()
    while time.time() - t0 < 10:
        ok = {
            "optimizer": lambda: bool(topt._global_optimizer_post_hooks),
            "scaler": lambda: watched(GradScaler.update),
            "fn": lambda: watched(sys.modules["__main__"].train_step),
            "method": lambda: watched(Trainer.training_step),
            "static": lambda: watched(Trainer.__dict__["static_step"].__func__) or watched(Trainer.static_step),
            "lazy": lambda: watched(sys.modules["lazymod"].lazy_step),
            "marked": lambda: watched(sys.modules["__main__"].marked),
            "rl": lambda: watched(sys.modules["__main__"].generate) and watched(sys.modules["__main__"].rl_train),
            "made": lambda: watched(topt.Optimizer.__init__),
        }[what]()
        if ok:
            return
        time.sleep(0.01)
    print(f"prog: {what} never watched", flush=True)


for w in filter(None, os.environ.get("WAIT", "optimizer").split(",")):
    wait(w)

if scenario == "fn":
    import typing

    print("prog: type hints of train_step:", typing.get_type_hints(sys.modules["__main__"].train_step))
if scenario == "tools":
    mon = getattr(sys, "monitoring", None)
    if mon:
        mon.use_tool_id(4, "prog-4")
        mon.use_tool_id(3, "prog-3")
    print("prog: sys.monitoring tool ids 3 and 4 taken by the program:", bool(mon))
if scenario == "leak":
    import gc
    import tracemalloc

    quiet_opt, quiet_scaler, fn = torch.optim.Adam(lambda k: None, "-"), GradScaler(lambda k: None), sys.modules["__main__"].marked

    def leak_loop(n):
        for i in range(n):
            quiet_opt.step()
            quiet_scaler.update()
            fn(i)

    def counts():
        gc.collect()
        return (sys.getrefcount(None), sys.getrefcount(quiet_opt), sys.getrefcount(quiet_scaler),
                tracemalloc.get_traced_memory()[0])

    leak_loop(1000)
    tracemalloc.start()
    c0 = counts()
    leak_loop(iters)
    c1 = counts()
    tracemalloc.stop()
    print("prog: leak: after %d iterations: None %+d, optimizer %+d, scaler %+d references; %+d bytes traced"
          % ((iters,) + tuple(b - a for a, b in zip(c0, c1))), flush=True)
    iters = 0
skip = {int(x) for x in filter(None, os.environ.get("SKIP", "").split(","))}
replay = None
if os.environ.get("FAKERT"):
    ctypes.CDLL(os.environ["FAKERT"], mode=ctypes.RTLD_GLOBAL)
    rt = ctypes.CDLL(None)  # stepprof's hooks first, as for libtorch
    rt.cudaGraphCreate(ctypes.byref(ctypes.c_void_p()), 0)
    replay = rt.cudaGraphLaunch
opt = early or torch.optim.Adam(launch, "adam_fake")
opt_g = None if early else torch.optim.Adam(launch, "adam_g_fake")
scaler = GradScaler(launch)
trainer = Trainer(opt)
for it in range(iters):
    if replay:
        replay(None, None)
    if scenario in ("one", "fork", "tools"):
        train_step(opt)
    elif scenario == "static":
        Trainer.static_step(opt)
    elif scenario == "lazy":
        sys.modules["lazymod"].lazy_step(opt)
    elif scenario == "fn":
        sys.modules["__main__"].train_step(opt)
    elif scenario == "method":
        trainer.training_step(it)
    elif scenario == "rl":
        sys.modules["__main__"].generate(10)
        sys.modules["__main__"].rl_train(opt)
    elif scenario == "eval":
        if it == 12:
            for k in range(30):
                launch("eval_fwd_fake")
        train_step(opt)
    elif scenario in ("gan", "wgan"):
        for d in range(5 if scenario == "wgan" else 1):
            launch("fwd_fake")
            launch("bwd_fake")
            opt.step()
        for k in range(2 if scenario == "gan" else 1):
            launch("fwd_fake")
            launch("bwd_fake")
        opt_g.step()
    elif scenario == "accum":
        for mb in range(4):
            launch("fwd_fake")
            launch("fwd_fake")
            launch("bwd_fake")
            launch("bwd_fake")
        opt.step()
    elif scenario == "rollout":
        for tok in range(40):
            for k in range(5):
                launch("gen_fwd_fake")
            corr[0] += 1
            cupti.fake_cupti_fire(2, 165, 0, corr[0])  # cudaDeviceSynchronize (a sampled token read)
            cupti.fake_cupti_fire(2, 165, 1, corr[0])
            time.sleep(0.0005)
        rl_train(opt)
    elif scenario == "captured":
        if it < 4:
            torch.cuda.capturing = it == 3
            launch("fwd_fake")
            opt.step()
            torch.cuda.capturing = False
        else:
            for k in range(5):
                launch("graph_k%d_fake" % k)
            corr[0] += 1
            cupti.fake_cupti_fire(2, 165, 0, corr[0])  # cudaDeviceSynchronize (runtime API), entry and exit
            cupti.fake_cupti_fire(2, 165, 1, corr[0])
    elif scenario == "scaler":
        for k in range(2):
            launch("fwd_fake")
            launch("bwd_fake")
        scaler.step(opt, skip=it in skip)
        scaler.update()
    time.sleep(float(os.environ.get("STEP_MS", "2")) / 1000)
    if scenario == "fork" and it == 3:
        pid = os.fork()
        if pid == 0:
            for k in range(20):
                train_step(opt)
            os._exit(0)
        print("prog: child status", os.waitpid(pid, 0)[1])
print("prog: registered_while_importing =", topt.registered_while_importing)
if scenario == "captured":
    print("prog: capture checks", torch.cuda.checks)
print("prog: stepprof's callbacks saw", seen[0], "launches")
print("prog: done", flush=True)
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
