# SPDX-License-Identifier: MIT
from . import module  # noqa: F401
