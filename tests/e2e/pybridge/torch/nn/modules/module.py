# SPDX-License-Identifier: MIT
# torch.nn.modules.module's global forward hooks as torch 2.x has them: every Module call runs the
# global pre hooks (module, args), the forward, then the global forward hooks (module, args,
# output); a hook registered with always_call=True also runs when the forward raised. Modules name
# their children by attribute (named_modules).
from collections import OrderedDict

_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_always_called = OrderedDict()
_next_id = [0]


class RemovableHandle:
    def __init__(self, *dicts):
        self.dicts, self.id = dicts, _next_id[0]
        _next_id[0] += 1

    def remove(self):
        for d in self.dicts:
            d.pop(self.id, None)


def register_module_forward_pre_hook(hook):
    h = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[h.id] = hook
    return h


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    h = RemovableHandle(_global_forward_hooks, _global_forward_hooks_always_called)
    _global_forward_hooks[h.id] = hook
    if always_call:
        _global_forward_hooks_always_called[h.id] = True
    return h


class Module:
    def __init__(self):
        object.__setattr__(self, "_modules", OrderedDict())

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name)

    def __call__(self, *args):
        for hook in tuple(_global_forward_pre_hooks.values()):
            hook(self, args)
        try:
            out = self.forward(*args)
        except BaseException:
            for hid, hook in tuple(_global_forward_hooks.items()):
                if hid in _global_forward_hooks_always_called:
                    hook(self, args, None)
            raise
        for hook in tuple(_global_forward_hooks.values()):
            hook(self, args, out)
        return out
