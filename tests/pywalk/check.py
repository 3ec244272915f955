# SPDX-License-Identifier: MIT
"""check.py LIB - run by tests/e2e/pystack.sh under each CPython found: loads the test library
LIB (tests/pywalk/pywalk.c) and checks the Python frames stepprof reads at a call into C, with
the GIL released (ctypes.CDLL, as PyTorch's operators release it) and held (ctypes.PyDLL), on
the main thread and another, in python-only and merged (native + Python) stacks. Prints
"pywalk ok VERSION" or raises."""
import ctypes
import os
import sys
import threading

LIB = sys.argv[1]
NOGIL = ctypes.CDLL(LIB)
GIL = ctypes.PyDLL(LIB)
ME = os.path.abspath(__file__)


def capture(lib, what):
    buf = ctypes.create_string_buffer(1 << 16)
    n = lib.pywalk_capture(buf, len(buf), what)  # CAPTURE
    assert n > 0, f"no stack (mode {what})"
    return [line.split(" ", 1) for line in buf.value.decode().splitlines()]


def py_frames(frames):
    out = []
    for kind, text in frames:
        if kind == "py":
            path, func, line = text.rsplit(":", 2)
            out.append((path, func, int(line)))
    return out


def leaf(lib, what):
    return capture(lib, what)  # LEAF


def middle(lib, what):
    return leaf(lib, what)  # MIDDLE


def via_c(lib, what):
    # sorted() calls the key function from C: a new _PyEval_EvalFrameDefault call
    got = []
    sorted([0], key=lambda _: got.append(middle(lib, what)))  # VIA_C
    return got[0]


def gen(lib, what):
    yield middle(lib, what)  # GEN


def via_next(lib, what):
    # builtin next() from C: a new eval call for the generator
    return next(gen(lib, what))  # NEXT


def via_for(lib, what):
    # FOR_ITER: from 3.12 the generator runs in the caller's eval call
    for frames in gen(lib, what):  # FOR
        return frames


def ñandú(lib, what):
    return middle(lib, what)  # UNICODE


def line_of(tag):
    with open(ME, encoding="utf-8") as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith("# " + tag):
                return i
    raise AssertionError(tag)


def check_python_only(lib, caller, expect_top):
    got = py_frames(caller(lib, 2))
    top = [(f, ln) for _, f, ln in got[:len(expect_top)]]
    assert top == expect_top, f"python frames {got[:6]} want {expect_top}"
    assert all(p == ME for p, _, _ in got[:len(expect_top)]), got
    assert got[-1][1] == "<module>", got
    return got


def check_merged(lib, caller, expect_top):
    frames, only = caller(lib, 3), py_frames(caller(lib, 2))  # both from this line
    py = py_frames(frames)
    assert [(f, ln) for _, f, ln in py] == [(f, ln) for _, f, ln in only], (py, only)
    names = [t for k, t in frames if k == "c"]
    # every eval call stood for Python frames, so none is left in the merged stack
    assert "_PyEval_EvalFrameDefault" not in names, frames
    # the call into C (ctypes' ffi call) is inner to the innermost Python frame
    first_py = next(i for i, (k, _) in enumerate(frames) if k == "py")
    assert any(k == "c" for k, _ in frames[:first_py]), frames[:first_py + 1]
    return frames


def main():
    v = "%d.%d" % sys.version_info[:2]
    ln = line_of
    for lib in (NOGIL, GIL):
        check_python_only(lib, middle, [("capture", ln("CAPTURE")), ("leaf", ln("LEAF")), ("middle", ln("MIDDLE"))])
        check_python_only(lib, ñandú, [("capture", ln("CAPTURE")), ("leaf", ln("LEAF")), ("middle", ln("MIDDLE")), ("ñandú", ln("UNICODE"))])
        got = check_python_only(lib, via_c, [("capture", ln("CAPTURE")), ("leaf", ln("LEAF")), ("middle", ln("MIDDLE"))])
        assert ("via_c", ln("VIA_C")) in [(f, l) for _, f, l in got], got
        assert any(f.endswith("<lambda>") for _, f, _ in got), got
        check_merged(lib, middle, [])
        for caller, tag, fn in ((via_next, "NEXT", "via_next"), (via_for, "FOR", "via_for")):
            got = check_python_only(lib, caller, [("capture", ln("CAPTURE")), ("leaf", ln("LEAF")),
                                                  ("middle", ln("MIDDLE")), ("gen", ln("GEN")), (fn, ln(tag))])
            check_merged(lib, caller, [])
        frames = check_merged(lib, via_c, [])
        # the lambda's eval call and via_c's are apart: native frames (sorted's) stand between
        kinds = [(k, t.rsplit(":", 2)[1] if k == "py" else t) for k, t in frames]
        i = next(i for i, (k, t) in enumerate(kinds) if k == "py" and t.endswith("<lambda>"))
        j = next(i for i, (k, t) in enumerate(kinds) if k == "py" and t == "via_c")
        assert any(k == "c" for k, _ in kinds[i + 1:j]), kinds[i:j + 1]
    # another thread: its own frames, not the main thread's
    res = {}

    def worker():
        res["frames"] = py_frames(middle(NOGIL, 2))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    funcs = [f for _, f, _ in res["frames"]]
    qual = sys.version_info >= (3, 11)  # 3.10 code objects have no co_qualname: the plain name then
    want = ["main.<locals>.worker", "Thread.run"] if qual else ["worker", "run"]
    assert funcs[:5] == ["capture", "leaf", "middle"] + want, funcs
    assert "main" not in funcs, funcs
    # native only: no Python frame
    assert not py_frames(middle(NOGIL, 1))
    print("pywalk ok", v)


main()
