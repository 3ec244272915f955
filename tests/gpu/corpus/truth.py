# SPDX-License-Identifier: MIT
"""truth.py - the ground truth for the step-detection corpus: mark() calls the CUDA driver's
cuDriverGetVersion through ctypes at the start of every true iteration. The call does nothing to
the GPU, is never a detector token, and a recording run names it as the truth with
STEPPROF_RECORD_TRUTH=api:cuDriverGetVersion (docs/STEPS.md). The programs that use it are
ordinary training/inference loops otherwise: the detector never sees this call."""
import ctypes

_cuda = ctypes.CDLL("libcuda.so.1")
_v = ctypes.c_int(0)


def mark():
    _cuda.cuDriverGetVersion(ctypes.byref(_v))
