# SPDX-License-Identifier: MIT
# torch.optim.optimizer's global step hooks as torch 2.x has them: register_optimizer_step_post_hook
# returns a handle; every Optimizer subclass's step() calls the global post hooks with
# (optimizer, args, kwargs) after it returns. Knobs for the tests:
#   STANDIN_SLOW_IMPORT=S   this module sleeps S seconds halfway through its import (partly
#                           initialised: the hook function exists, the module is not done)
#   STANDIN_IMPORT_RAISES=1 its first import raises ImportError at the end
#   STANDIN_REGISTER_RAISES=1  register_optimizer_step_post_hook raises RuntimeError
#   STANDIN_BAD_HOOK_CALL=1 post hooks are called without arguments
#   STANDIN_KW_HOOK_CALL=1  post hooks are called with keyword arguments only
import os
import sys
import time
from collections import OrderedDict

_global_optimizer_post_hooks = OrderedDict()
_bad_hook_call = bool(os.environ.get("STANDIN_BAD_HOOK_CALL"))
_kw_hook_call = bool(os.environ.get("STANDIN_KW_HOOK_CALL"))
_import_done = False
registered_while_importing = False  # the test's verdict: a hook went in before the import finished
_next_id = [0]


class RemovableHandle:
    def __init__(self, hooks):
        self.hooks = hooks
        self.id = _next_id[0]
        _next_id[0] += 1

    def remove(self):
        self.hooks.pop(self.id, None)


def register_optimizer_step_post_hook(hook):
    global registered_while_importing
    if os.environ.get("STANDIN_REGISTER_RAISES"):
        raise RuntimeError("stand-in torch refuses hooks")
    if not _import_done:
        registered_while_importing = True
    handle = RemovableHandle(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[handle.id] = hook
    return handle


if os.environ.get("STANDIN_SLOW_IMPORT"):
    time.sleep(float(os.environ["STANDIN_SLOW_IMPORT"]))

if os.environ.get("STANDIN_IMPORT_RAISES") and not getattr(sys, "_standin_raised", False):
    sys._standin_raised = True
    raise ImportError("stand-in torch: this import fails once")


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Optimizer:
    def __init__(self, launch, kernel):
        self.launch = launch  # the program's fake kernel launch
        self.kernel = kernel
        type(self).step.hooked = True  # as torch marks it (_patch_step_function)

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        inner = cls.step

        def step(self, *args, **kwargs):
            # torch's profile_hook_step: the post hooks run inside the step's record_function
            prof = sys.modules.get("torch.autograd.profiler")
            with prof.record_function("Optimizer.step#%s.step" % type(self).__name__) if prof else _nothing():
                out = inner(self, *args, **kwargs)
                for hook in list(_global_optimizer_post_hooks.values()):
                    if _bad_hook_call:
                        hook()
                    elif _kw_hook_call:
                        hook(optimizer=self, args=args, kwargs=kwargs)
                    else:
                        hook(self, args, kwargs)
            return out

        step.__wrapped__ = inner
        cls.step = step


class SGD(Optimizer):
    def step(self, closure=None):
        self.launch(self.kernel)


class Adam(Optimizer):
    def step(self, closure=None):
        self.launch(self.kernel)


_import_done = True
