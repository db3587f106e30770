"""The counters every call into an implementation runs under, in every test.

`observing()` watches one call and fills an `Observation`:

- the FLOPs of matrix products and attention (`torch.utils.flop_counter`'s formulas, plus the one
  PyTorch lacks for its CPU attention kernel), and beside them the elementwise products, which
  those formulas count as zero;
- the largest tensor any PyTorch op produced (views excluded, since they allocate nothing);
- the names of the PyTorch operators that ran, so a kata can forbid some (fused attention, say);
- the Triton kernels launched, with their grids and, under Triton's interpreter, how many
  elements each program loaded;
- the work of every operator: the elements it reads plus the elements it writes (with the FLOPs
  of the products above, `Observation.work`), so elementwise arithmetic and reductions cost
  something too;
- work taken off the books: `.numpy()`, `__array__` (what NumPy calls to read a tensor), DLPack
  export, bit-casting floating-point data to integers, and `.tolist()` of more than
  `TOLIST_LIMIT` floating-point elements in one call (in one piece or in many, `.item()` by
  `.item()` too, also once converted to integers; integer ones too where the guard says they
  are numbers to compute with, not token ids) fail at once, since no counter sees what happens
  to the numbers afterwards;
- writes into the call's own arguments: every operator that writes into memory one of the
  `watched` tensors owns is recorded, so a write undone before the call returns shows too;
- work in other threads or processes, where no counter is on: starting a thread or a process
  fails at once.

The same counters run whether a test measures cost or only checks a result, so an
implementation cannot tell the two apart.
"""

from __future__ import annotations

import _thread
import importlib
import importlib.util
import math
import os
import sys
import threading
import weakref
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry, shape_wrapper

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
_DISPATCH = tuple(_LIBRARIES[0] + sub for sub in ("_dynamo" + os.sep, "_compile.py"))


def _cpu_attention_flops(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    """Scores (2·Nq·Nk·D) plus weighted sum (2·Nq·Nk·Dv) for every batch and head."""
    *lead, n_q, d = query_shape
    n_k, d_v = key_shape[-2], value_shape[-1]
    return 2 * math.prod(lead) * n_q * n_k * (d + d_v)


def _trilinear_flops(shape1, shape2, shape3, expand1, expand2, expand3, *args, **kwargs) -> int:
    """F.bilinear's kernel: three operands, each given size-1 dimensions at its `expand` places,
    multiplied over the broadcast of their shapes and summed: two FLOPs per point of it (PyTorch
    counts it as zero, so a matrix product written as a bilinear form would cost nothing)."""

    def full(shape, expand):
        sizes = iter(shape)
        return [1 if d in expand else next(sizes) for d in range(len(shape) + len(expand))]

    shapes = (full(shape1, expand1), full(shape2, expand2), full(shape3, expand3))
    return 2 * math.prod(max(sizes) for sizes in zip(*shapes, strict=True))


def _embedding_bag_flops(weight_shape, indices_shape, *args, **kwargs) -> int:
    """F.embedding_bag's kernel: every index gathers a row of `weight`, multiplies it by its
    per-sample weight and adds it to its bag: two FLOPs per element gathered (PyTorch counts it
    as zero, so a matrix product written as weighted bags would cost nothing)."""
    return 2 * math.prod(indices_shape) * weight_shape[-1]


def _formulas() -> dict:
    """FLOP formulas by operator, copied once: PyTorch's own, plus those it lacks: its CPU
    attention kernel, F.bilinear's and F.embedding_bag's (which it counts as zero, letting a
    dense solution hide its work behind one call)."""
    formulas = dict(flop_registry)
    for name, formula in (
        ("_scaled_dot_product_flash_attention_for_cpu", _cpu_attention_flops),
        ("_trilinear", _trilinear_flops),
        ("_embedding_bag", _embedding_bag_flops),
        ("_embedding_bag_forward_only", _embedding_bag_flops),
    ):
        op = getattr(torch.ops.aten, name, None)
        if op is not None:
            formulas[op] = shape_wrapper(formula)
    return formulas


FORMULAS = _formulas()  # taken before any implementation is imported
_SHAPE_WRAPPER_CODE = shape_wrapper(len).__code__
_METADATA_OPS = {
    getattr(torch.ops.aten, name).default
    for name in ("is_contiguous", "size", "stride", "storage_offset", "numel", "dim", "sym_size")
    if hasattr(torch.ops.aten, name)
}


@dataclass
class TensorRecord:
    numel: int = 0
    nbytes: int = 0
    shape: tuple[int, ...] = ()
    op: str = ""

    def __str__(self) -> str:
        return f"{self.numel} elements, shape {self.shape}, made by {self.op or 'nothing'}"


@dataclass
class Launch:
    """One Triton kernel launch. `loads` counts the elements each program read (interpreter)."""

    kernel: str
    grid: tuple[int, int, int]
    loads: dict[tuple[int, int, int], int] = field(default_factory=lambda: defaultdict(int))

    @property
    def programs(self) -> int:
        return math.prod(self.grid)

    @property
    def most_loaded_by_one_program(self) -> int:
        return max(self.loads.values(), default=0)


@dataclass
class Observation:
    """What one call did, as the counters saw it."""

    flops: int = 0
    largest: TensorRecord = field(default_factory=TensorRecord)
    multiplies: int = 0  # elementwise products (mul and friends): FLOPs count them as zero
    written: int = 0  # elements every (non-view) op produced, summed: elementwise work too
    read: int = 0  # elements every (non-view) op was given, summed: what reductions do
    ops: set[str] = field(default_factory=set)  # operator names, e.g. "mm", "softmax"
    launches: list[Launch] = field(default_factory=list)
    listed: int = 0  # elements of numbers turned into Python lists (.tolist())
    # Integer tensors whose values were converted from floating-point ones (x.long(), and what is
    # computed from those): their .tolist() counts as floating-point elements. By id, since a
    # tensor's == is elementwise; the value is the tensor itself, held weakly.
    from_floats: weakref.WeakValueDictionary = field(default_factory=weakref.WeakValueDictionary)
    # (argument, operator) for every write into memory a watched argument owns
    inputs_written: list[tuple[str, str]] = field(default_factory=list)

    @property
    def kernel_loads(self) -> int:
        """Elements every program of every Triton kernel loaded (counted under the interpreter,
        the CPU's way to run kernels; 0 on a GPU)."""
        return sum(sum(launch.loads.values()) for launch in self.launches)

    @property
    def work(self) -> int:
        """All the arithmetic PyTorch did: FLOPs of products, plus every element each operator
        read and wrote (a broadcast product summed away costs its full size here)."""
        return self.flops + self.read + self.written


class _Counters(TorchDispatchMode):
    """FLOPs, the largest tensor and the operator names, in one pass over each PyTorch op."""

    def __init__(self, seen: Observation, watched: dict[int, str], integers: bool = False) -> None:
        super().__init__()
        self.seen = seen
        self.watched = watched  # storage address -> the argument that owns it
        self.integers = integers  # integer tensors are numbers to compute with (positions)
        self.paused = 0  # > 0 while a Triton kernel runs: its host copies are not the solution's

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # nothing here is compiled: spare every op the wrapper that disables it

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        info = _INFO.get(id(func)) or _op_info(func)
        if info.metadata:
            return func(*args, **kwargs)
        if info.decomposes and not self.paused:
            with self:  # as FlopCounterMode does: count what an unknown op decomposes into
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        try:
            out = func(*args, **kwargs)
        except Exception as exc:  # the solution's own error: its traceback ends in its code
            __tracebackhide__ = True
            raise exc.with_traceback(None) from exc.__cause__
        if self.paused:
            return out
        if func is _ITEM:
            self._note_item(args[0])
        if func is _BITCAST and args[0].is_floating_point() and not out.is_floating_point():
            raise OffTheBooks(
                f"off the books: the implementation bit-cast a {args[0].dtype} tensor of shape "
                f"{tuple(args[0].shape)} to {out.dtype}; integers made of floating-point bits "
                "carry the numbers out of sight of the cost counters. Compute with PyTorch "
                "operations on the floating-point values"
            )
        seen = self.seen
        if info.name in _CASTS or seen.from_floats:
            _mark_from_floats(seen, info.name, args, out)
        seen.ops.add(info.name)
        if info.writes and self.watched:
            self._note_writes(info, args, kwargs)
        if info.name in _PRODUCTS and isinstance(out, torch.Tensor):
            seen.multiplies += out.numel()
        elif info.name in _VECTOR_PRODUCTS:
            seen.multiplies += args[_VECTOR_PRODUCTS[info.name]].numel()
        if info.on_shapes is not None:
            shapes = {k: _shapes(v) for k, v in kwargs.items()}
            seen.flops += int(info.on_shapes(*_shapes(args), out_shape=_shapes(out), **shapes))
        elif info.formula is not None:
            seen.flops += int(info.formula(*args, **kwargs, out_val=out))
        if not info.view:
            seen.read += _elements(args) + (_elements(kwargs.values()) if kwargs else 0)
            for t in (out,) if isinstance(out, torch.Tensor) else tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    seen.written += t.numel()
                # An in-place op (index_put_, copy_ into a preallocated cache) returns the whole
                # tensor it wrote into, which the op that allocated it has already counted.
                inplace = info.name.endswith("_")
                if isinstance(t, torch.Tensor) and not inplace and t.numel() > seen.largest.numel:
                    seen.largest = TensorRecord(
                        t.numel(), t.numel() * t.element_size(), tuple(t.shape), str(func)
                    )
        return out

    def _note_item(self, t: torch.Tensor) -> None:
        """`.item()`, `float(t)`, `int(t)`: one number into Python, counted toward the limit like
        an element of `.tolist()` (a loop over `.item()` is a `.tolist()` in many pieces)."""
        frame = sys._getframe(2)  # who asked: past this mode, the first frame of its own
        while frame.f_back is not None and frame.f_code.co_filename.startswith(_DISPATCH):
            frame = frame.f_back
        if _library_frame(frame):  # PyTorch itself: iterating a storage, printing a tensor
            return
        converted = self.seen.from_floats.get(id(t)) is t
        if (
            t.is_floating_point()
            or t.is_complex()
            or converted
            or (self.integers and t.dtype != torch.bool)
        ):
            kind = "integer or floating-point" if self.integers else None
            _listed(self.seen, 1, f".item() of {t.dtype} numbers, one by one", kind)

    def _note_writes(self, info: _OpInfo, args: tuple, kwargs: dict) -> None:
        """Record the watched arguments whose memory the operator wrote into."""
        for position, name in info.writes:
            if name in kwargs:
                target = kwargs[name]  # out=, say
            else:
                target = args[position] if position < len(args) else None
            for t in target if isinstance(target, (list, tuple)) else [target]:
                if isinstance(t, torch.Tensor) and storage_address(t) in self.watched:
                    self.seen.inputs_written.append((self.watched[storage_address(t)], info.name))


def storage_address(t: torch.Tensor) -> int:
    """Where the memory of `t` (and of every view of it) starts; 0 when it owns none."""
    try:
        return t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() else 0
    except (RuntimeError, NotImplementedError):  # a tensor without storage (sparse, say)
        return 0


@dataclass(frozen=True)
class _OpInfo:
    name: str  # the operator's name without overload, e.g. "mm"
    formula: object  # its FLOP formula, or None
    on_shapes: object  # the same formula taking shapes (faster), when it has that form
    metadata: bool  # asks for sizes or strides: no work
    decomposes: bool  # no formula, but a decomposition into operators that may have one
    view: bool  # allocates nothing
    writes: tuple[tuple[int, str], ...]  # (position, name) of each argument it writes into
    op: object  # the operator itself (the judge checks this entry against it)


# Elementwise products: every expert applied to every token by broadcasting is one of these,
# scored zero by the FLOP formulas.
_PRODUCTS = frozenset({"mul", "mul_", "addcmul", "addcmul_", "div", "div_", "addcdiv", "addcdiv_"})
# Products the FLOP formulas also score as zero, counted by their inputs: (m, n) x (n,) is m·n,
# and a product reduction (torch.prod, torch.cumprod) of n elements is n.
_VECTOR_PRODUCTS = {"mv": 0, "addmv": 1, "dot": 0, "vdot": 0, "prod": 0, "cumprod": 0}
_INFO: dict[int, _OpInfo] = {}  # by id(operator): an operator's own hash is slow Python
_BITCAST = torch.ops.aten.view.dtype
_ITEM = torch.ops.aten._local_scalar_dense.default  # .item(), float(t), int(t), bool(t)
# Operators that turn floating-point values into integer ones (x.long(), x.to(torch.int32), and
# copying floats into an integer tensor).
_CASTS = frozenset({"_to_copy", "copy_", "copy"})


def _mark_from_floats(seen: Observation, name: str, args: tuple, out) -> None:
    """Remember the integer tensors `out` holds when they carry floating-point values: a cast's
    output, or anything computed from such a tensor (views and slices included)."""
    inputs = [a for a in tree_leaves(args) if isinstance(a, torch.Tensor)]
    source = any(seen.from_floats.get(id(a)) is a for a in inputs) or (
        name in _CASTS and any(a.is_floating_point() for a in inputs)
    )
    if not source:
        return
    for t in (out,) if isinstance(out, torch.Tensor) else tree_leaves(out):
        if isinstance(t, torch.Tensor) and not t.is_floating_point() and t.dtype != torch.bool:
            seen.from_floats[id(t)] = t


def _elements(args) -> int:
    """Elements of the tensors among an operator's arguments (also in a list, as cat takes)."""
    total = 0
    for a in args:
        if isinstance(a, torch.Tensor):
            total += a.numel()
        elif isinstance(a, (list, tuple)):
            total += sum(t.numel() for t in a if isinstance(t, torch.Tensor))
    return total


def _shapes(x):
    """Tensors replaced by their shapes, in what a FLOP formula takes (as flop_counter does)."""
    if isinstance(x, torch.Tensor):
        return x.shape
    if isinstance(x, (list, tuple)):
        return type(x)(_shapes(v) for v in x) if type(x) in (list, tuple) else x
    return x


def _op_info(func) -> _OpInfo:
    """What the counters need to know of an operator, worked out once and kept in _INFO."""
    info = _INFO[id(func)] = operator_info(func)
    return info


def operator_info(func) -> _OpInfo:
    packet = func._overloadpacket
    formula = FORMULAS.get(packet)
    on_shapes = None
    if getattr(formula, "__code__", None) is _SHAPE_WRAPPER_CODE:
        on_shapes = formula.__wrapped__  # the formula on shapes, without a pytree walk per op
    decomposes = formula is None and torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), torch._C.DispatchKey.CompositeImplicitAutograd
    )
    writes = tuple(
        (position, argument.name)
        for position, argument in enumerate(func._schema.arguments)
        if argument.alias_info is not None and argument.alias_info.is_write
    )
    return _OpInfo(
        packet.__name__,
        formula,
        on_shapes,
        func in _METADATA_OPS,
        decomposes,
        func.is_view,
        writes,
        func,
    )


def _called_from_library(depth: int = 2) -> bool:
    """True when the caller `depth` frames up is PyTorch, Triton or NumPy itself (printing a
    tensor, Triton's interpreter and compiler), not the implementation: its code lives in the
    library's files and runs in the namespace of the library module loaded from that file (a
    module name alone can be forged by `exec`)."""
    return _library_frame(sys._getframe(depth))


def _library_frame(frame) -> bool:
    path = frame.f_code.co_filename
    if not path.startswith(_LIBRARIES):
        return False
    module = sys.modules.get(frame.f_globals.get("__name__", ""))
    return module is not None and vars(module) is frame.f_globals and module.__file__ == path


def _off_the_books_patches(real: dict, seen: Observation, integers: bool) -> dict:
    """Replacements for the tensor methods that hand data out of PyTorch, for one call."""

    def numpy(self, *args, **kwargs):
        if not _called_from_library():
            raise OffTheBooks(
                f"off the books: the implementation called .numpy() on a tensor of shape "
                f"{tuple(self.shape)}; work done in NumPy is invisible to the cost counters. "
                "Compute with PyTorch operations"
            )
        return real["numpy"](self, *args, **kwargs)

    def array(self, *args, **kwargs):
        if not _called_from_library():
            raise OffTheBooks(
                f"off the books: the implementation handed a tensor of shape {tuple(self.shape)} "
                "to NumPy (np.asarray, np.array or a NumPy function); work done in NumPy is "
                "invisible to the cost counters. Compute with PyTorch operations"
            )
        return real["__array__"](self, *args, **kwargs)

    def tolist(self):
        converted = seen.from_floats.get(id(self)) is self
        numbers = self.is_floating_point() or self.is_complex() or converted or integers
        if numbers and not _called_from_library():
            what = "converted from floating-point values, " if converted else ""
            what = f".tolist() of a {self.dtype} tensor {what}of {self.numel()} elements"
            _listed(seen, self.numel(), what, "integer or floating-point" if integers else None)
        return real["tolist"](self)

    def storage_tolist(self):
        if not _called_from_library():
            _listed(seen, self.nbytes(), f".tolist() of a tensor's storage ({self.nbytes()} bytes)")
        return real["storage_tolist"](self)

    def storage_iter(self):
        # bytes(storage), list(storage) and for-loops read a storage through __iter__
        if not _called_from_library():
            what = f"the {len(self)} numbers of a tensor's storage (bytes(), list() or a loop)"
            _listed(seen, len(self), what)
        typed = isinstance(self, torch.storage.TypedStorage)
        return real["TypedStorage_iter" if typed else "UntypedStorage_iter"](self)

    def storage_item(self, index):
        # storage[i] reads one number (a byte of an untyped storage) into Python
        if not _called_from_library():
            count = len(range(*index.indices(len(self)))) if isinstance(index, slice) else 1
            _listed(seen, count, "a tensor's storage, number by number (storage[i])")
        typed = isinstance(self, torch.storage.TypedStorage)
        return real["TypedStorage_getitem" if typed else "UntypedStorage_getitem"](self, index)

    def dlpack(self, *args, **kwargs):
        if not _called_from_library():
            raise OffTheBooks(
                f"off the books: the implementation exported a tensor of shape "
                f"{tuple(self.shape)} through DLPack (np.from_dlpack, say); work done outside "
                "PyTorch is invisible to the cost counters. Compute with PyTorch operations"
            )
        return real["__dlpack__"](self, *args, **kwargs)

    def to_dlpack(tensor, *args, **kwargs):
        if not _called_from_library():
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


def _listed(seen: Observation, elements: int, what: str, kind: str | None = None) -> None:
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
_REAL_TENSOR_METHODS = {
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
        if not _called_from_library():
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
_CONCURRENCY = _concurrency_patches()


# PyTorch's private switches that turn the dispatch and function modes off for a block, or take
# them off the stack: under any of them, operators run past the counters, the forbidden-call
# rules and the model log's audit. The source check refuses them by name in graded
# submissions; in a practice run they are refused here, while a call runs under the counters.
_MODE_SWITCHES = (
    (torch._C, ("_DisableTorchDispatch", "DisableTorchFunction", "DisableTorchFunctionSubclass",
                "_pop_torch_dispatch_stack", "_pop_torch_function_stack", "_unset_dispatch_mode",
                "_set_dispatch_mode", "_ExcludeDispatchKeyGuard", "_DisablePythonDispatcher")),
    ("torch.utils._python_dispatch", ("_disable_current_modes", "_pop_mode",
                                      "_pop_mode_temporarily")),
    ("torch.overrides", ("_pop_mode", "_pop_mode_temporarily")),
)  # fmt: skip


def _counting() -> bool:
    """Whether the counters of a call are on the dispatch mode stack now."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return any(isinstance(mode, _Counters) for mode in _get_current_dispatch_mode_stack())


def _refused_switch(real, name: str):
    """A stand-in for a mode switch: PyTorch itself may use it; the implementation, during a
    call under the counters, may not."""

    def switch(*args, **kwargs):
        if not _called_from_library() and _counting():
            raise OffTheBooks(
                f"counters off: the implementation called PyTorch's private {name} during a "
                "call; it turns the dispatch modes off, and the work done under it would be "
                "invisible to the cost counters and the rules. Compute with PyTorch operations, "
                "under the counters"
            )
        return real(*args, **kwargs)

    switch.__refused_switch__ = True
    return switch


def refuse_mode_switches() -> None:
    """Put the stand-ins of _MODE_SWITCHES in place for the rest of the process, before any
    implementation is imported (so a reference it takes at import is the stand-in). Idempotent."""
    for target, names in _MODE_SWITCHES:
        module = importlib.import_module(target) if isinstance(target, str) else target
        for name in names:
            real = vars(module).get(name)
            if real is not None and not getattr(real, "__refused_switch__", False):
                setattr(module, name, _refused_switch(real, f"{module.__name__}.{name}"))


@contextmanager
def _patched(patches: list):
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
    with _patched(_CONCURRENCY):
        yield


def _triton_patches(seen: Observation, counters: _Counters) -> list:
    """(target, replacements) that record every Triton launch, on a GPU or in the interpreter."""
    if "triton" not in sys.modules:
        return []
    from triton.runtime import interpreter, jit

    patches = []
    run = jit.JITFunction.run

    def counted_run(self, *args, grid, warmup, **kwargs):
        if not warmup:  # a grid given as a function of the launch's arguments is not evaluated
            g = (0, 0, 0) if callable(grid) else tuple(grid) + (1,) * (3 - len(grid))
            seen.launches.append(Launch(getattr(self.fn, "__name__", "kernel"), g))
        return run(self, *args, grid=grid, warmup=warmup, **kwargs)

    patches.append((jit.JITFunction, {"run": counted_run}))
    builder = getattr(interpreter, "interpreter_builder", None)
    if builder is None or not hasattr(type(builder), "create_masked_load"):
        return patches  # another Triton's interpreter: launches on a GPU are still counted

    executor_call = interpreter.GridExecutor.__call__
    load = type(builder).create_masked_load

    def counted_call(self, *args, **kwargs):
        launch = Launch(getattr(self.fn, "__name__", "kernel"), (0, 0, 0))
        seen.launches.append(launch)

        def counted_load(ptrs, mask, *rest):  # rest: cache and eviction hints, by version
            launch.grid = builder.grid_dim
            launch.loads[builder.grid_idx] += int(mask.data.sum())
            return load(builder, ptrs, mask, *rest)

        counters.paused += 1
        builder.create_masked_load = counted_load
        try:
            return executor_call(self, *args, **kwargs)
        finally:
            del builder.create_masked_load
            counters.paused -= 1

    patches.append((interpreter.GridExecutor, {"__call__": counted_call}))
    return patches


@contextmanager
def observing(watched: dict[int, str] | None = None, *, integers: bool = False):
    """Run the block under every counter; yields the Observation it fills.

    `watched` maps the storage address of each argument of the call (`storage_address`) to its
    name: writes into them are recorded in `inputs_written`. With `integers`, integer tensors
    count toward the `.tolist()` limit like floating-point ones.
    """
    seen = Observation()
    counters = _Counters(seen, watched or {}, integers)
    patches = _off_the_books_patches(_REAL_TENSOR_METHODS, seen, integers) + _CONCURRENCY
    with _patched(patches + _triton_patches(seen, counters)), counters:
        yield seen
