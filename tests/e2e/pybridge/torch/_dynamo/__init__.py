# SPDX-License-Identifier: MIT
from . import utils  # noqa: F401
