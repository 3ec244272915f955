# SPDX-License-Identifier: MIT
# torch.autograd.profiler's NVTX emission as torch 2.x has it, for tests/e2e/pyops.sh (what
# emit_nvtx(record_shapes=True) turns on): _enable_profiler(ProfilerConfig(ProfilerState.NVTX,
# True, ...), set()) turns on, for the calling thread only, an NVTX range per operator and
# record_function, "NAME[, seq = N], op_id = N[, sizes = [[...], ...]]" (pushed through
# libfakenvtx, FAKE_NVTX: its path, as libtorch_cuda pushes them); _disable_profiler() turns it off.
# As torch's: a second enable on a thread raises; a range begun under the emission runs its end
# callback even after the emission was turned off, and then torch's end callback fails (torch logs
# "Exception in RecordFunction callback"): counted in `violations` (the test wants none). A
# thread the backward pass runs on inherits the emission (torch's ThreadLocalState).
# Knobs: STANDIN_ENABLE_RAISES=1 (_enable_profiler raises).
import ctypes
import os
import threading

_is_profiler_enabled = False
_tls = threading.local()
log = []  # (what, thread name, the program's iteration): enable, disable
violations = []  # ranges that ended after the emission went off (torch would log a warning)
emitted = [0]  # ranges emitted
iteration = [-1]  # the program's iteration (set by it), for the log
_op_id = [0]
_nvtx = ctypes.CDLL(os.environ["FAKE_NVTX"]) if os.environ.get("FAKE_NVTX") else None
if _nvtx is not None:
    _nvtx.fake_nvtx_push.argtypes = [ctypes.c_char_p]


class ProfilerState:
    Disabled = "Disabled"
    NVTX = "NVTX"
    KINETO = "KINETO"


class _ExperimentalConfig:
    pass


class ProfilerConfig:
    def __init__(self, state, report_input_shapes, profile_memory, with_stack, with_flops, with_modules,
                 experimental_config):
        self.state = state
        self.report_input_shapes = report_input_shapes


class KinetoStepTracker:
    _step_dict = {}

    @classmethod
    def init_step_count(cls, requester):
        cls._step_dict[requester] = 0


def _run_on_profiler_start():
    global _is_profiler_enabled
    _is_profiler_enabled = True


def _run_on_profiler_stop():
    global _is_profiler_enabled
    _is_profiler_enabled = False


def _state():
    return getattr(_tls, "state", None)


def _enable_profiler(config, activities, scopes=None):
    if os.environ.get("STANDIN_ENABLE_RAISES"):
        raise RuntimeError("stand-in torch refuses the profiler")
    if _state() is not None:
        raise RuntimeError("Profiler is already enabled on this thread")
    if config.state != ProfilerState.NVTX or not isinstance(activities, set):
        raise RuntimeError("stand-in torch: not emit_nvtx's configuration")
    _tls.state = config
    log.append(("enable", threading.current_thread().name, iteration[0]))


def _disable_profiler():
    if _state() is None:
        raise RuntimeError("Can't disable Kineto profiler when it's not running")
    _tls.state = None
    log.append(("disable", threading.current_thread().name, iteration[0]))
    return object()


def _dims(sizes):
    return "[" + ", ".join("[" + ", ".join(str(d) for d in s) + "]" for s in sizes) + "]"


class record_function:
    """A RecordFunction: whether the emission's callbacks run is decided at its start."""

    def __init__(self, name, seq=-1, sizes=None):
        self.name, self.seq, self.sizes, self.on = name, seq, sizes, False

    def __enter__(self):
        st = _state()
        self.on = st is not None
        if self.on:
            _op_id[0] += 1
            msg = self.name + (", seq = %d" % self.seq if self.seq >= 0 else "") + ", op_id = %d" % _op_id[0]
            if st.report_input_shapes and self.sizes is not None:
                msg += ", sizes = " + _dims(self.sizes)
            emitted[0] += 1
            if _nvtx is not None:
                _nvtx.fake_nvtx_push(msg.encode())
        return self

    def __exit__(self, *exc):
        if self.on:
            if _nvtx is not None:
                _nvtx.fake_nvtx_pop()
            if _state() is None:
                violations.append((self.name, iteration[0]))
        return False


def backward(nodes):
    """Runs nodes [(name, seq, fn)] as autograd's thread would: each in an evaluate_function range
    and its node's range, on a thread that inherits the caller's emission."""
    st = _state()

    def run():
        _tls.state = st
        for name, seq, fn in nodes:
            with record_function("autograd::engine::evaluate_function: " + name):
                with record_function(name, seq):
                    fn()

    t = threading.Thread(target=run, name="autograd")
    t.start()
    t.join()
