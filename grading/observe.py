"""The counters every call into an implementation runs under, in every test.

`observing()` watches one call and fills an `Observation`:

- the FLOPs of matrix products and attention (`torch.utils.flop_counter`'s formulas, plus the one
  PyTorch lacks for its CPU attention kernel), and beside them the elementwise products, which
  those formulas count as zero;
- the largest tensor any PyTorch op produced (views excluded, since they allocate nothing);
- the names of the PyTorch operators that ran, so a kata can forbid some (fused attention, say);
- the Triton kernels launched, with their grids and, under Triton's interpreter, how many
  elements each program loaded;
- work taken off the books: `.numpy()`, `__array__` (what NumPy calls to read a tensor),
  `__dlpack__` and `.tolist()` of a large floating-point tensor fail at once, since no counter
  sees what happens to the numbers afterwards.

The same counters run whether a test measures cost or only checks a result, so an
implementation cannot tell the two apart.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry, shape_wrapper

# A floating-point tensor larger than this may not be turned into a Python list inside an
# implementation: the arithmetic that follows would run where no counter sees it. Token ids and
# other integer tensors (the batching and speculative-decoding katas read them) are not limited,
# nor are `.item()` calls.
TOLIST_LIMIT = 256


class OffTheBooks(AssertionError):
    """The implementation moved tensor data out of PyTorch, where no cost counter sees it."""


def _cpu_attention_flops(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    """Scores (2·Nq·Nk·D) plus weighted sum (2·Nq·Nk·Dv) for every batch and head."""
    *lead, n_q, d = query_shape
    n_k, d_v = key_shape[-2], value_shape[-1]
    return 2 * math.prod(lead) * n_q * n_k * (d + d_v)


def _formulas() -> dict:
    """FLOP formulas by operator, copied once: PyTorch's own, plus its CPU attention kernel
    (which it counts as zero, letting a dense solution hide its N² work behind one call)."""
    formulas = dict(flop_registry)
    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if op is not None:
        formulas[op] = shape_wrapper(_cpu_attention_flops)
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
    ops: set[str] = field(default_factory=set)  # operator names, e.g. "mm", "softmax"
    launches: list[Launch] = field(default_factory=list)


class _Counters(TorchDispatchMode):
    """FLOPs, the largest tensor and the operator names, in one pass over each PyTorch op."""

    def __init__(self, seen: Observation) -> None:
        super().__init__()
        self.seen = seen
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
        seen = self.seen
        seen.ops.add(info.name)
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


@dataclass(frozen=True)
class _OpInfo:
    name: str  # the operator's name without overload, e.g. "mm"
    formula: object  # its FLOP formula, or None
    on_shapes: object  # the same formula taking shapes (faster), when it has that form
    metadata: bool  # asks for sizes or strides: no work
    decomposes: bool  # no formula, but a decomposition into operators that may have one
    view: bool  # allocates nothing


# Elementwise products: every expert applied to every token by broadcasting is one of these,
# scored zero by the FLOP formulas.
_PRODUCTS = frozenset({"mul", "mul_", "addcmul", "addcmul_", "div", "div_", "addcdiv", "addcdiv_"})
# Products the FLOP formulas also score as zero, counted by their inputs: (m, n) x (n,) is m·n.
_VECTOR_PRODUCTS = {"mv": 0, "addmv": 1, "dot": 0, "vdot": 0}
_INFO: dict[int, _OpInfo] = {}  # by id(operator): an operator's own hash is slow Python


def _shapes(x):
    """Tensors replaced by their shapes, in what a FLOP formula takes (as flop_counter does)."""
    if isinstance(x, torch.Tensor):
        return x.shape
    if isinstance(x, (list, tuple)):
        return type(x)(_shapes(v) for v in x) if type(x) in (list, tuple) else x
    return x


def _op_info(func) -> _OpInfo:
    packet = func._overloadpacket
    formula = FORMULAS.get(packet)
    on_shapes = None
    if getattr(formula, "__code__", None) is _SHAPE_WRAPPER_CODE:
        on_shapes = formula.__wrapped__  # the formula on shapes, without a pytree walk per op
    decomposes = formula is None and torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), torch._C.DispatchKey.CompositeImplicitAutograd
    )
    info = _OpInfo(
        packet.__name__, formula, on_shapes, func in _METADATA_OPS, decomposes, func.is_view
    )
    _INFO[id(func)] = info
    return info


def _called_from_library() -> bool:
    """True when the caller two frames up is PyTorch, Triton or NumPy itself (printing a tensor,
    Triton's interpreter), not the implementation."""
    name = sys._getframe(2).f_globals.get("__name__", "")
    return name.split(".")[0] in ("torch", "triton", "numpy")


def _off_the_books_patches(real: dict) -> dict:
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
        if (
            (self.is_floating_point() or self.is_complex())
            and self.numel() > TOLIST_LIMIT
            and not _called_from_library()
        ):
            raise OffTheBooks(
                f"off the books: the implementation called .tolist() on a {self.dtype} tensor of "
                f"{self.numel()} elements (more than {TOLIST_LIMIT}); arithmetic on Python lists "
                "is invisible to the cost counters. Compute with PyTorch operations"
            )
        return real["tolist"](self)

    def dlpack(self, *args, **kwargs):
        if not _called_from_library():
            raise OffTheBooks(
                f"off the books: the implementation exported a tensor of shape "
                f"{tuple(self.shape)} through DLPack (np.from_dlpack, say); work done outside "
                "PyTorch is invisible to the cost counters. Compute with PyTorch operations"
            )
        return real["__dlpack__"](self, *args, **kwargs)

    return {"numpy": numpy, "__array__": array, "tolist": tolist, "__dlpack__": dlpack}


_REAL_TENSOR_METHODS = {
    n: getattr(torch.Tensor, n) for n in ("numpy", "__array__", "tolist", "__dlpack__")
}
_GUARDED_TENSOR_METHODS = _off_the_books_patches(_REAL_TENSOR_METHODS)


@contextmanager
def _patched(target, replacements: dict):
    """Set attributes of `target` for the duration, then put the originals back."""
    saved = {name: target.__dict__[name] for name in replacements if name in target.__dict__}
    for name, value in replacements.items():
        setattr(target, name, value)
    try:
        yield
    finally:
        for name in replacements:
            if name in saved:
                setattr(target, name, saved[name])
            else:
                delattr(target, name)


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
def observing():
    """Run the block under every counter; yields the Observation it fills."""
    seen = Observation()
    counters = _Counters(seen)
    with ExitStack() as stack:
        stack.enter_context(_patched(torch.Tensor, _GUARDED_TENSOR_METHODS))
        for target, replacements in _triton_patches(seen, counters):
            stack.enter_context(_patched(target, replacements))
        stack.enter_context(counters)
        yield seen
