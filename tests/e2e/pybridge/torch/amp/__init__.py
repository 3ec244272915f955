# SPDX-License-Identifier: MIT
from .grad_scaler import GradScaler  # noqa: F401
