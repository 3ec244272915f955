# SPDX-License-Identifier: MIT
# torch._C's out-of-memory observers as the CUDA caching allocator has them (tests/e2e/pymem.sh):
# _cuda_attach_out_of_memory_observer(fn) keeps fn for the process (no detach); out_of_memory()
# calls each with (device, bytes asked, device allocated, device free) before raising
# OutOfMemoryError, as the allocator does.
observers = []


class OutOfMemoryError(RuntimeError):
    pass


def _cuda_attach_out_of_memory_observer(fn):
    observers.append(fn)


def out_of_memory(asked):
    for fn in observers:
        fn(0, asked, 1 << 30, 1 << 20)
    raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes" % asked)
