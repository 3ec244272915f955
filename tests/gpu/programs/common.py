# SPDX-License-Identifier: MIT
"""common.py - what every program of the unseen-program suite shares (tests/gpu/programs/run.sh):
the truth and the lines run.sh reads. The truth is tests/gpu/corpus/truth.py: cuGetErrorName
through ctypes at the start of every true iteration (one optimizer update; one generator+critic
round for the GANs), never a detector token. Iterations.mark() calls it and prints the previous
iteration's host time as "STEP i ms" (mark to mark: what the bench classes by stepprof's windows);
Iterations.done() prints the closing line "PROG name ok iterations=N expected=M loop_s=S ..."
(run.sh: PASS only with iterations == expected). Nothing here touches the GPU itself."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))
import truth  # noqa: E402  (tests/gpu/corpus/truth.py)

# offline everywhere: models come from configs, data is synthetic
for _k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class Iterations:
    """Counts true iterations and times them on the host, mark to mark."""

    def __init__(self, name, expected):
        self.name, self.expected = name, expected
        self.marks, self.prev, self.first = 0, None, None
        self.step_lines = os.environ.get("PROG_STEP_LINES", "1") != "0"

    def mark(self):
        """The start of a true iteration: the truth call, then the previous iteration's time."""
        truth.mark()
        now = time.perf_counter()
        if self.prev is not None and self.step_lines:
            print(f"STEP {self.marks - 1} {(now - self.prev) * 1e3:.3f}", flush=True)
        if self.first is None:
            self.first = now
        self.prev = now
        self.marks += 1

    def done(self, **extra):
        """Prints the closing line; returns the exit status (0: as many iterations as expected)."""
        loop = time.perf_counter() - self.first if self.first is not None else 0.0
        more = "".join(f" {k}={v}" for k, v in extra.items())
        ok = self.marks == self.expected
        print(f"PROG {self.name} {'ok' if ok else 'WRONG'} iterations={self.marks} expected={self.expected} "
              f"loop_s={loop:.2f}{more}", flush=True)
        return 0 if ok else 3


def api_note(what, err):
    """One line saying an API was missing or refused and which fallback the program took."""
    print(f"API-FALLBACK {what}: {type(err).__name__}: {str(err)[:200]}", flush=True)
