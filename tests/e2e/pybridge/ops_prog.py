# SPDX-License-Identifier: MIT
# ops_prog.py SCENARIO ITERS - a "PyTorch training program" with modules and operators, for
# tests/e2e/pyops.sh, run with libstepprof preloaded, the stand-in CUPTI (FAKE_CUPTI), the NVTX
# caller (FAKE_NVTX: libfakenvtx.so, as libtorch_cuda calls NVTX) and the stand-in torch of this
# folder on PYTHONPATH. It initialises "CUDA", imports torch, waits for stepprof's optimizer hook,
# then runs ITERS iterations of: Net's forward (modules Net.fc1 and Net.blocks.0/1 (Linear:
# aten::linear -> t, addmm), Net.conv (Conv2d: conv2d -> convolution -> cudnn_convolution), an
# activation module made anew each call (no attribute names it)), a loss outside modules, a
# backward pass on autograd's thread (AddmmBackward0 nodes for the three linears by their sequence
# numbers, ConvolutionBackward0), and an optimizer step (its foreach op inside torch's
# Optimizer.step range, the post hooks inside it too). Every kernel goes through the stand-in CUPTI.
# Scenarios: train; profiler (the program made a torch.profiler.profile before: KinetoStepTracker);
# compiled (torch.compile ran: torch._dynamo's frame counter); raising (a forward raises inside
# Net.conv at iteration 12, caught by the program); early (the NVTX library is called once before
# stepprof is initialised, so NVTX holds no injection and the emission reaches nothing). At the end it prints what the stand-in saw:
# the emission's enables and disables (thread, iteration), ranges ended after the emission went off
# (torch would warn), module hooks left, the profiler flag.
import ctypes
import os
import sys
import time

scenario, iters = sys.argv[1], int(sys.argv[2])
cupti = ctypes.CDLL(os.environ["FAKE_CUPTI"])
cupti.fake_cupti_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint]
corr = [5000]


def launch(name):
    corr[0] += 1
    cupti.fake_cupti_launch(name.encode(), corr[0])


if scenario == "early":  # NVTX used before stepprof names itself NVTX's injection: no tool for good
    nvtx = ctypes.CDLL(os.environ["FAKE_NVTX"])
    nvtx.fake_nvtx_push(b"early")
    nvtx.fake_nvtx_pop()
ctypes.CDLL(None).InitializeInjection()
import torch  # noqa: E402
import torch.optim.optimizer as topt  # noqa: E402
from torch.autograd import profiler as prof  # noqa: E402
from torch.nn.modules import module as nnm  # noqa: E402

seq = [0]  # torch's sequence number: each op that records an autograd node takes the next one


def op(name, sizes=None, kernel=None, inner=()):
    """an operator: its range (with the sequence number its node will get), inner ops, a kernel"""
    s = seq[0]
    with prof.record_function(name, s, sizes):
        for i in inner:
            i()
        if kernel:
            launch(kernel)
    return s


class Linear(nnm.Module):
    def __init__(self, i, o):
        super().__init__()
        self.i, self.o = i, o

    def forward(self, x):
        b, i, o = 32, self.i, self.o
        s = op("aten::linear", [[b, i], [o, i], [o]],
               inner=(lambda: op("aten::t", [[o, i]]),
                      lambda: op("aten::addmm", [[o], [b, i], [i, o], [], []], "gemm_fake")))
        seq[0] += 1
        x.append(("AddmmBackward0", s, "gemm_bwd_fake"))
        return x


class Conv2d(nnm.Module):
    def __init__(self):
        super().__init__()
        self.stride, self.padding, self.dilation, self.groups = (1, 1), (1, 1), (1, 1), 1

    def forward(self, x):
        if scenario == "raising" and prof.iteration[0] == 12:
            raise ValueError("a forward that raises")
        s = op("aten::conv2d", [[8, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],
               inner=(lambda: op("aten::convolution", inner=(lambda: op("aten::cudnn_convolution", kernel="conv_fake"),)),))
        seq[0] += 1
        x.append(("ConvolutionBackward0", s, "conv_bwd_fake"))
        return x


class Act(nnm.Module):
    def forward(self, x):
        op("aten::relu", [[32, 64]], "relu_fake")
        return x


class Net(nnm.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(64, 128)
        self.conv = Conv2d()
        self.blocks = nnm.Module()
        self.blocks.b0 = Linear(128, 128)
        self.blocks.b1 = Linear(128, 64)

    def forward(self, x):
        x = self.fc1(x)
        try:
            x = self.conv(x)
        except ValueError:
            pass
        x = self.blocks.b0(x)
        x = Act()(x)  # a module no attribute names
        return self.blocks.b1(x)


if scenario == "profiler":
    prof.KinetoStepTracker.init_step_count("ProfilerStep")  # what torch.profiler.profile() does
if scenario == "compiled":
    import torch._dynamo.utils  # noqa: E402

    torch._dynamo.utils.counters["frames"]["ok"] += 1  # what torch.compile's first frame does

t0 = time.time()
while not topt._global_optimizer_post_hooks and time.time() - t0 < 10:
    time.sleep(0.01)


class Opt(torch.optim.Optimizer):
    def step(self, closure=None):
        op("aten::_foreach_add_", [[128, 64], [128], [16, 3, 3, 3]], "foreach_fake")


model, opt = Net(), Opt(launch, "unused")
for it in range(iters):
    prof.iteration[0] = it
    nodes = model([])
    op("aten::mse_loss", [[32, 64], [32, 64]], "loss_fake")
    prof.backward([(n, s, (lambda k=k: op("aten::mm", [[32, 128], [128, 64]], k))) for n, s, k in reversed(nodes)])
    opt.step()
    time.sleep(0.002)
print("prog: emission", " ".join("%s:%s:%d" % e for e in prof.log))
print("prog: ranges ended after the emission went off:", len(prof.violations), prof.violations[:3])
print("prog: module hooks left:", len(nnm._global_forward_pre_hooks) + len(nnm._global_forward_hooks))
print("prog: profiler flag:", prof._is_profiler_enabled)
print("prog: ranges emitted:", prof.emitted[0])
print("prog: module hooks ever installed:", nnm._next_id[0])
print("prog: nvtx injection:", os.environ.get("NVTX_INJECTION64_PATH", "unset"))
print("prog: done", flush=True)
