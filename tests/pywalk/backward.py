# SPDX-License-Identifier: MIT
"""backward.py LIB - run by tests/e2e/pystack.sh under each CPython found: a thread that runs no
Python (as PyTorch's autograd threads, which launch the backward kernels) gets the Python frames of
the thread blocked in backward(), after the mark SP_FRAME_BACKWARD. Stand-ins for torch: files
torch/autograd/graph.py (_engine_run_backward) and torch/autograd/__init__.py (backward) written to
a temporary folder and loaded by path (nothing named torch is imported). The main thread waits in a
C call with the GIL released (ctypes.CDLL), as the autograd engine's run_backward does. Then a
thread captures over and over while the main thread enters and leaves the stand-in's C call and
recurses to varying depths (its frames change under the reader): no crash, no wrong frame. Prints
"backward ok VERSION" or raises."""
import ctypes
import importlib.util
import os
import sys
import tempfile
import time

LIB = ctypes.CDLL(sys.argv[1])
ME = os.path.abspath(__file__)

GRAPH = '''import ctypes


def _engine_run_backward(lib, what, with_tstate):
    buf = ctypes.create_string_buffer(1 << 16)
    n = lib.pywalk_capture_thread(buf, len(buf), what, with_tstate)  # ENGINE
    return n, buf.value.decode()
'''

AUTOGRAD = '''def backward(engine, lib, what, with_tstate):
    return engine(lib, what, with_tstate)  # AUTOGRAD
'''


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def line_of(text, tag, start=1):
    for i, line in enumerate(text.splitlines(), start):
        if line.rstrip().endswith("# " + tag):
            return i
    raise AssertionError(tag)


def frames(text):
    return [line.split(" ", 1) for line in text.splitlines()]


def stand_ins(root):
    d = os.path.join(root, "torch", "autograd")
    os.makedirs(d)
    for name, text in (("graph.py", GRAPH), ("__init__.py", AUTOGRAD)):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return load(os.path.join(d, "graph.py"), "stub_graph"), load(os.path.join(d, "__init__.py"), "stub_autograd")


def loss_backward(graph, autograd, what, with_tstate):
    return autograd.backward(graph._engine_run_backward, LIB, what, with_tstate)  # LOSS_BACKWARD


def check_borrowed(graph, autograd, what, with_tstate):
    n, text = loss_backward(graph, autograd, what, with_tstate)
    got = frames(text)
    assert n > 0, f"no stack (what {what}, thread state {with_tstate})"
    kinds = [k for k, _ in got]
    assert kinds.count("mark") == 1, got
    m = kinds.index("mark")
    assert all(k == "c" for k in kinds[:m]), got  # the thread's own (native) frames only
    py = [t.rsplit(":", 2) for k, t in got[m + 1:] if k == "py"]
    assert len(py) == len(got) - m - 1, got  # only Python frames after the mark
    want = [("graph.py", "_engine_run_backward", line_of(GRAPH, "ENGINE")),
            ("__init__.py", "backward", line_of(AUTOGRAD, "AUTOGRAD")),
            (os.path.basename(ME), "loss_backward", line_of(open(ME).read(), "LOSS_BACKWARD"))]
    top = [(os.path.basename(p), f, int(ln)) for p, f, ln in py[:3]]
    assert top == want, (top, want)
    assert py[0][0].endswith("/torch/autograd/graph.py"), py[0]
    assert py[-1][1] == "<module>", py[-1]
    if what == 2:
        assert m == 0, got
    else:  # native frames of the thread (an allocation's site frames with 0x100) before the mark
        assert m > 0 and (what & 1 or m <= 12), got


def check_not_borrowed():
    # the main thread in a C call that is not backward(): a thread without Python gets nothing
    buf = ctypes.create_string_buffer(1 << 16)
    n = LIB.pywalk_capture_thread(buf, len(buf), 2, 0)
    assert n == -1 and not buf.value, buf.value
    n = LIB.pywalk_capture_thread(buf, len(buf), 3, 1)
    assert n > 0 and "mark" not in buf.value.decode() and "py " not in buf.value.decode(), buf.value


def main():
    with tempfile.TemporaryDirectory() as root:
        graph, autograd = stand_ins(root)
        # a first capture on this thread, as the forward pass's launches do: the walker trusts its layout
        buf = ctypes.create_string_buffer(1 << 16)
        assert LIB.pywalk_capture(buf, len(buf), 2) > 0
        for with_tstate in (0, 1):
            for what in (2, 3, 2 | 0x100):
                check_borrowed(graph, autograd, what, with_tstate)
        check_not_borrowed()
        captures, borrowed = hammer(graph)
    print("backward ok", "%d.%d" % sys.version_info[:2], f"(hammer: {borrowed} of {captures} captures borrowed)")


def hammer(graph):
    # frames that change under the reader: the main thread enters and leaves a C call from a
    # function named as autograd's entry, in the stand-in's file, at depths from 0 to 299 (stack
    # chunks of the interpreter come and go) while another thread captures over and over
    code = compile("def _engine_run_backward(lib, us):\n    lib.pywalk_sleep_us(us)\n",
                   graph.__file__, "exec")
    ns = {}
    exec(code, ns)
    engine = ns["_engine_run_backward"]

    def deep(k):
        if k:
            return deep(k - 1)
        engine(LIB, 20)

    # a loaded machine may give no walk that stayed in place in one second: up to five tries
    for attempt in range(5):
        assert LIB.pywalk_hammer_start() == 0
        end, i = time.monotonic() + 1.0, 0
        while time.monotonic() < end:
            deep(i % 300)
            sum(range(i % 50))
            i += 1
        c = (ctypes.c_long * 3)()
        LIB.pywalk_hammer_stop(c)
        captures, borrowed, wrong = c
        if borrowed:
            break
    assert captures > 100 and borrowed > 0 and wrong == 0, (captures, borrowed, wrong)
    return captures, borrowed


main()
