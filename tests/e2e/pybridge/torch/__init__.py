# SPDX-License-Identifier: MIT
# A stand-in for the `torch` package (tests/e2e/pybridge.sh): plain Python modules with torch's
# names, enough for stepprof's Python bridge (torch.optim.optimizer's global post hooks,
# torch.amp.grad_scaler.GradScaler.update; torch.autograd.profiler's NVTX emission and
# torch.nn.modules.module's global hooks for its operators and modules; torch.cuda.memory's
# allocator history and snapshot, torch._C's out-of-memory observers). Knobs (environment): see
# optim/optimizer.py and autograd/profiler.py.
from . import _C  # noqa: F401
from . import autograd  # noqa: F401
from . import nn  # noqa: F401
from . import optim  # noqa: F401
from . import amp  # noqa: F401
from . import cuda  # noqa: F401
