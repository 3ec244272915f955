# SPDX-License-Identifier: MIT
# A stand-in for the `torch` package (tests/e2e/pybridge.sh): plain Python modules with torch's
# names, enough for stepprof's Python bridge (torch.optim.optimizer's global post hooks,
# torch.amp.grad_scaler.GradScaler.update). Knobs (environment): see optim/optimizer.py.
from . import optim  # noqa: F401
from . import amp  # noqa: F401
