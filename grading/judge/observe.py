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

Here: the counters themselves (a dispatch mode) and their table of operators, the counters of
Triton launches, the refusal of PyTorch's switches that turn the counters off
(`refuse_mode_switches`), and `observing`. Their parts: the FLOP formulas and what the counters
know of each operator (`grading.judge.operators`), what they record (`grading.judge.records`),
and what they refuse off the books or in other threads (`grading.judge.refusals`).
"""

from __future__ import annotations

import importlib
import sys
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from grading.judge.operators import OpInfo, operator_info
from grading.judge.records import Launch, Observation, TensorRecord
from grading.judge.refusals import (
    CONCURRENCY,
    DISPATCH,
    REAL_TENSOR_METHODS,
    OffTheBooks,
    called_from_library,
    library_frame,
    listed,
    off_the_books_patches,
    patched,
)


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
        while frame.f_back is not None and frame.f_code.co_filename.startswith(DISPATCH):
            frame = frame.f_back
        if library_frame(frame):  # PyTorch itself: iterating a storage, printing a tensor
            return
        converted = self.seen.from_floats.get(id(t)) is t
        if (
            t.is_floating_point()
            or t.is_complex()
            or converted
            or (self.integers and t.dtype != torch.bool)
        ):
            kind = "integer or floating-point" if self.integers else None
            listed(self.seen, 1, f".item() of {t.dtype} numbers, one by one", kind)

    def _note_writes(self, info: OpInfo, args: tuple, kwargs: dict) -> None:
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


# Elementwise products: every expert applied to every token by broadcasting is one of these,
# scored zero by the FLOP formulas.
_PRODUCTS = frozenset({"mul", "mul_", "addcmul", "addcmul_", "div", "div_", "addcdiv", "addcdiv_"})
# Products the FLOP formulas also score as zero, counted by their inputs: (m, n) x (n,) is m·n,
# and a product reduction (torch.prod, torch.cumprod) of n elements is n.
_VECTOR_PRODUCTS = {"mv": 0, "addmv": 1, "dot": 0, "vdot": 0, "prod": 0, "cumprod": 0}
_INFO: dict[int, OpInfo] = {}  # by id(operator): an operator's own hash is slow Python
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


def _op_info(func) -> OpInfo:
    """What the counters need to know of an operator, worked out once and kept in _INFO."""
    info = _INFO[id(func)] = operator_info(func)
    return info


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
        if not called_from_library() and _counting():
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
    patches = off_the_books_patches(REAL_TENSOR_METHODS, seen, integers) + CONCURRENCY
    with patched(patches + _triton_patches(seen, counters)), counters:
        yield seen
