# SPDX-License-Identifier: MIT
# torch.cuda as stepprof's Python bridge sees it: its memory module (the caching allocator's
# history and snapshot), imported by `import torch` as torch's is, unless STANDIN_NO_CUDA_MEMORY=1.
import os

capturing = False  # prog.py's "captured" scenario sets it around a step "inside a graph capture"
checks = 0  # calls of is_current_stream_capturing (STANDIN_CUDA_UNINIT=1: CUDA never initialised)


def is_initialized():
    return not os.environ.get("STANDIN_CUDA_UNINIT")


def is_current_stream_capturing():
    global checks
    checks += 1
    return capturing

if not os.environ.get("STANDIN_NO_CUDA_MEMORY"):
    from . import memory  # noqa: F401
