"""What the counters of `grading.judge.observe` refuse while a call runs, since no counter
would see the work that follows:

- work taken off the books: `.numpy()`, `__array__` (what NumPy calls to read a tensor), DLPack
  export, and `.tolist()` (of a tensor or its storage, or reading a storage number by number) of
  more than `TOLIST_LIMIT` elements in one call, in one piece or in many, fail with
  `OffTheBooks` (the counters themselves see `.item()` and bit-casting);
- work in other threads or processes: starting a thread or a process fails at once, also while
  an implementation is imported (`no_threads_or_processes`).

The libraries' own code (printing a tensor, Triton's interpreter and compiler) may still do all
of it: `called_from_library`. The real functions are taken when this module is imported, before
any implementation is.
"""

from __future__ import annotations

import _thread
import importlib.util
import os
import sys
import threading
from contextlib import contextmanager

import torch

from grading.judge.records import Observation

# No more floating-point elements than this may be turned into Python lists in one call of an
# implementation, in one piece or in many: the arithmetic that follows would run where no counter
# sees it. Token ids and other integer tensors (the batching and speculative-decoding katas read
# them) are not limited, nor are `.item()` calls, except in a call whose guard counts integers
# too (`observing(integers=True)`: positions a function computes with are numbers, not ids).
TOLIST_LIMIT = 256


class OffTheBooks(AssertionError):
    """The implementation moved tensor data out of PyTorch, where no cost counter sees it."""


def _package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None else None
    return os.path.dirname(origin) + os.sep if origin else None


# The libraries whose own code may read tensors into NumPy or start threads (printing a tensor,
# Triton's interpreter and compiler), found by the files their code lives in.
_LIBRARIES = tuple(d for d in map(_package_dir, ("torch", "triton", "numpy")) if d)
# The frames PyTorch puts between a call into the dispatcher and a dispatch mode (the compiler's
# guard around a mode's handler), where no one asks for anything.
DISPATCH = tuple(_LIBRARIES[0] + sub for sub in ("_dynamo" + os.sep, "_compile.py"))


def called_from_library(depth: int = 2) -> bool:
    """True when the caller `depth` frames up is PyTorch, Triton or NumPy itself (printing a
    tensor, Triton's interpreter and compiler), not the implementation: its code lives in the
    library's files and runs in the namespace of the library module loaded from that file (a
    module name alone can be forged by `exec`)."""
    return library_frame(sys._getframe(depth))


def library_frame(frame) -> bool:
    path = frame.f_code.co_filename
    if not path.startswith(_LIBRARIES):
        return False
    module = sys.modules.get(frame.f_globals.get("__name__", ""))
    return module is not None and vars(module) is frame.f_globals and module.__file__ == path


def off_the_books_patches(real: dict, seen: Observation, integers: bool) -> dict:
    """Replacements for the tensor methods that hand data out of PyTorch, for one call."""

    def numpy(self, *args, **kwargs):
        if not called_from_library():
            raise OffTheBooks(
                f"off the books: the implementation called .numpy() on a tensor of shape "
                f"{tuple(self.shape)}; work done in NumPy is invisible to the cost counters. "
                "Compute with PyTorch operations"
            )
        return real["numpy"](self, *args, **kwargs)

    def array(self, *args, **kwargs):
        if not called_from_library():
            raise OffTheBooks(
                f"off the books: the implementation handed a tensor of shape {tuple(self.shape)} "
                "to NumPy (np.asarray, np.array or a NumPy function); work done in NumPy is "
                "invisible to the cost counters. Compute with PyTorch operations"
            )
        return real["__array__"](self, *args, **kwargs)

    def tolist(self):
        converted = seen.from_floats.get(id(self)) is self
        numbers = self.is_floating_point() or self.is_complex() or converted or integers
        if numbers and not called_from_library():
            what = "converted from floating-point values, " if converted else ""
            what = f".tolist() of a {self.dtype} tensor {what}of {self.numel()} elements"
            listed(seen, self.numel(), what, "integer or floating-point" if integers else None)
        return real["tolist"](self)

    def storage_tolist(self):
        if not called_from_library():
            listed(seen, self.nbytes(), f".tolist() of a tensor's storage ({self.nbytes()} bytes)")
        return real["storage_tolist"](self)

    def storage_iter(self):
        # bytes(storage), list(storage) and for-loops read a storage through __iter__
        if not called_from_library():
            what = f"the {len(self)} numbers of a tensor's storage (bytes(), list() or a loop)"
            listed(seen, len(self), what)
        typed = isinstance(self, torch.storage.TypedStorage)
        return real["TypedStorage_iter" if typed else "UntypedStorage_iter"](self)

    def storage_item(self, index):
        # storage[i] reads one number (a byte of an untyped storage) into Python
        if not called_from_library():
            count = len(range(*index.indices(len(self)))) if isinstance(index, slice) else 1
            listed(seen, count, "a tensor's storage, number by number (storage[i])")
        typed = isinstance(self, torch.storage.TypedStorage)
        return real["TypedStorage_getitem" if typed else "UntypedStorage_getitem"](self, index)

    def dlpack(self, *args, **kwargs):
        if not called_from_library():
            raise OffTheBooks(
                f"off the books: the implementation exported a tensor of shape "
                f"{tuple(self.shape)} through DLPack (np.from_dlpack, say); work done outside "
                "PyTorch is invisible to the cost counters. Compute with PyTorch operations"
            )
        return real["__dlpack__"](self, *args, **kwargs)

    def to_dlpack(tensor, *args, **kwargs):
        if not called_from_library():
            raise OffTheBooks(
                f"off the books: the implementation exported a tensor of shape "
                f"{tuple(tensor.shape)} through DLPack (to_dlpack); work done outside PyTorch is "
                "invisible to the cost counters. Compute with PyTorch operations"
            )
        return real["to_dlpack"](tensor, *args, **kwargs)

    # torch._C.TensorBase's own methods cannot be replaced (a built-in type); calling them
    # directly is refused by grading/judge/source_check.py instead.
    return [
        (
            torch.Tensor,
            {"numpy": numpy, "tolist": tolist, "__array__": array, "__dlpack__": dlpack},
        ),
        (torch.storage._StorageBase, {"tolist": storage_tolist, "__iter__": storage_iter}),
        (
            torch.storage.TypedStorage,
            {"tolist": storage_tolist, "__iter__": storage_iter, "__getitem__": storage_item},
        ),
        (torch.storage.UntypedStorage, {"__getitem__": storage_item}),
        (torch._C, {name: to_dlpack for name in _DLPACK_EXPORTS}),
        (torch.utils.dlpack, {"to_dlpack": to_dlpack}),
        (torch, {"to_dlpack": to_dlpack}),
    ]


def listed(seen: Observation, elements: int, what: str, kind: str | None = None) -> None:
    """Count the elements of numbers turned into a Python list; fail past TOLIST_LIMIT."""
    seen.listed += elements
    if seen.listed > TOLIST_LIMIT:
        raise OffTheBooks(
            f"off the books: the implementation took {what} into Python, {seen.listed} "
            f"{kind or 'floating-point'} elements in this call (more than {TOLIST_LIMIT}, in one "
            "piece or in many); arithmetic on Python lists is invisible to the cost counters. "
            "Compute with PyTorch operations"
        )


_DLPACK_EXPORTS = ("_to_dlpack", "_to_dlpack_versioned")
REAL_TENSOR_METHODS = {
    "numpy": torch._C.TensorBase.numpy,
    "tolist": torch._C.TensorBase.tolist,
    "__array__": torch.Tensor.__array__,
    "__dlpack__": torch.Tensor.__dlpack__,
    "storage_tolist": torch.storage._StorageBase.tolist,
    "UntypedStorage_iter": torch.storage._StorageBase.__iter__,
    "TypedStorage_iter": torch.storage.TypedStorage.__iter__,
    "UntypedStorage_getitem": torch.storage.UntypedStorage.__getitem__,
    "TypedStorage_getitem": torch.storage.TypedStorage.__getitem__,
    "to_dlpack": torch._C._to_dlpack,
}


def _concurrency_patches() -> list:
    """(target, replacements) refusing every way to start a thread or a process."""
    return [
        (target, {name: _guarded_start(real, what) for name, real in reals.items()})
        for target, reals, what in _STARTS
    ]


def _guarded_start(real, what: str):
    """A stand-in for a way to start a thread or a process: it fails unless a library calls."""

    def refused(*args, **kwargs):
        if not called_from_library():
            raise OffTheBooks(
                f"threads and processes: the implementation started {what}; its work would run "
                "where no cost counter is on (the counters watch the calling thread only). Do "
                "the work in the call itself, with PyTorch operations (they use every core "
                "already)"
            )
        return real(*args, **kwargs)

    return refused


def _starts() -> list:
    """(module or class, {name: function}, what it starts) for every way to start a thread or a
    process: threading and concurrent.futures start threads through the first three, subprocess
    and multiprocessing processes through the last three."""
    import _posixsubprocess
    import subprocess

    table = [
        (threading.Thread, ("start",), "a thread"),
        (threading, ("_start_new_thread",), "a thread"),
        (_thread, ("start_new_thread", "start_new"), "a thread"),
        (os, ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"), "a process"),
        (_posixsubprocess, ("fork_exec",), "a process"),
        (subprocess, ("_fork_exec",), "a process"),
    ]
    return [
        (target, {n: vars(target)[n] for n in names if n in vars(target)}, what)
        for target, names, what in table
    ]


_STARTS = _starts()  # the real functions, taken before any implementation is imported
CONCURRENCY = _concurrency_patches()


@contextmanager
def patched(patches: list):
    """Set attributes ((target, {name: value}) each) for the duration, then put the originals
    back."""
    saved = []
    try:
        for target, replacements in patches:
            namespace = vars(target)
            for name, value in replacements.items():
                saved.append((target, name, namespace.get(name, _MISSING)))
                setattr(target, name, value)
        yield
    finally:
        for target, name, value in reversed(saved):
            if value is _MISSING:
                delattr(target, name)
            else:
                setattr(target, name, value)


_MISSING = object()


@contextmanager
def no_threads_or_processes():
    """Refuse starting threads and processes in the block (an implementation's import)."""
    with patched(CONCURRENCY):
        yield
