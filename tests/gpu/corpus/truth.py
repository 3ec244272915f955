# SPDX-License-Identifier: MIT
"""truth.py - the ground truth for the step-detection corpus: mark() calls the CUDA driver's
cuGetErrorName through ctypes at the start of every true iteration. The call does nothing to the
GPU, is never a detector token, and a recording run names it as the truth with
STEPPROF_RECORD_TRUTH=api:cuGetErrorName (docs/STEPS.md). cuDriverGetVersion, used first, is also
called by PyTorch itself outside any runtime call (nanoGPT's streams held ~18 truths per step). The programs that use it are
ordinary training/inference loops otherwise: the detector never sees this call."""
import ctypes

_cuda = ctypes.CDLL("libcuda.so.1")
_s = ctypes.c_char_p()


def mark():
    _cuda.cuGetErrorName(0, ctypes.byref(_s))
