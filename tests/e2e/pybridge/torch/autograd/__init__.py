# SPDX-License-Identifier: MIT
# torch.autograd as stepprof's Python bridge sees it: its profiler module (the NVTX emission of
# operators, thread-local as torch's) and a backward pass run on another thread that inherits the
# emission as torch's autograd threads inherit the caller's thread-local state.
from . import profiler  # noqa: F401
from .profiler import backward  # noqa: F401
