# SPDX-License-Identifier: MIT
from .optimizer import Optimizer  # noqa: F401
from .optimizer import SGD, Adam  # noqa: F401
