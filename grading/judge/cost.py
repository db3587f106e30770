"""Deterministic cost counters that work on the CPU.

Speed is part of correctness in these katas, but wall-clock time on a shared 2-core machine is
noise. These counters measure the work itself, the same on every run:

- `count_flops`: floating-point operations of matrix products and attention, as counted by
  `torch.utils.flop_counter`'s formulas (elementwise ops count zero there);
- `largest_tensor`: the biggest tensor any PyTorch op produced during a call (views excluded,
  since they allocate nothing);
- `elements_written`: the elements all PyTorch ops produced together during a call: the work
  that elementwise products and sums do, which FLOP counting scores as zero;
- `count_multiplies`: every multiplication, including the elementwise, matrix-vector and dot
  products the FLOP counter scores as zero;
- `held_bytes`: the bytes an object (a cache, say) keeps in tensors;
- `model.calls`: the shared model (`grading.model`) logs every forward call itself.

Every call the tests make into an implementation already runs under these counters
(`grading.judge.guards`); for such a call `count_flops` and `largest_tensor` read what the always-on
counters saw, so a measured call looks exactly like any other. A module-level function is then
called again with fresh values of the same shapes, so that an answer remembered from earlier
work shows (see `measure`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import torch

from grading.judge.guards import GuardFailure
from grading.judge.observe import Observation, TensorRecord, observing
from grading.judge.tolerance import tolerance_for
from grading.model import ModelCall, TinyLlama

__all__ = [
    "ModelCall",
    "TensorRecord",
    "count_flops",
    "count_multiplies",
    "elements_written",
    "held_bytes",
    "largest_tensor",
    "measure",
    "CountingModel",
]


def _fresh(value: Any, gen: torch.Generator) -> Any:
    """`value` with every floating-point tensor's elements scaled by factors in [0.5, 1.5]:
    new numbers of the same shape, dtype, layout and signs (zeros and infinities stay)."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        factor = torch.rand(value.shape, generator=gen, dtype=torch.float64) + 0.5
        fresh = torch.empty_like(value)  # keeps the strides of a dense layout
        fresh.copy_((value.detach().cpu().double() * factor).to(value.dtype))
        return fresh.requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(_fresh(v, gen) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: _fresh(v, gen) for k, v in value.items()}
    return value


def _model_log(models: list[TinyLlama], since: list[int]) -> list[tuple]:
    pairs = zip(models, since, strict=True)
    return [(c.tokens, c.batch, c.cache_len) for m, n in pairs for c in m.calls[n:]]


def _float_leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() and value.numel() > 1 else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _float_leaves(v)]
    return []


def _aliased(a: Any, b: Any) -> bool:
    """Some tensor of one result shares its memory with a tensor of the other."""
    first = {t.untyped_storage().data_ptr() for t in _float_leaves(a) if t.numel()}
    return any(t.untyped_storage().data_ptr() in first for t in _float_leaves(b))


def _same_result(a: Any, b: Any) -> bool:
    """Both results hold floating-point tensors, and they are identical, bit for bit."""
    first, second = _float_leaves(a), _float_leaves(b)
    return (
        bool(first)
        and len(first) == len(second)
        and all(
            x.shape == y.shape and torch.equal(x, y) for x, y in zip(first, second, strict=True)
        )
    )


def measure(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Observation]:
    """Run `fn(*args, **kwargs)`; return (its result, what the counters saw).

    A guarded function of the implementation (module level, so that calling it again changes
    nothing) is called again on fresh values of the same shapes. An answer that comes from a
    memory of earlier calls shows: the fresh call costs more than twice as much, or returns the
    very same numbers. Then it is called on those same tensors again (a memory keyed on the
    tensors themselves costs nothing there), and once more after they are changed in place but
    for their first and last elements (a memory keyed on their identity, or on those elements,
    answers with stale numbers: it must agree with a call on copies of the changed values).
    When the function is given the
    shared model, a call on the fresh values runs with every counter off instead; the model,
    which logs its own calls, must be called the same way as under the counters. Two results
    that are one tensor are reported as aliasing.
    """
    guard = getattr(fn, "__guard__", None)
    if guard is None:
        with observing() as seen:
            result = fn(*args, **kwargs)
        return result, seen
    result = fn(*args, **kwargs)
    seen = guard.last
    if getattr(fn, "__guarded_method__", True):  # a method: calling it again changes state
        return result, seen
    gen = torch.Generator().manual_seed(len(args))
    fresh_args, fresh_kwargs = _fresh(list(args), gen), _fresh(kwargs, gen)
    models = [m for m in (*args, *kwargs.values()) if isinstance(m, TinyLlama)]
    start = [len(m.calls) for m in models]
    fresh_result = fn(*fresh_args, **fresh_kwargs)
    fresh = guard.last
    inputs_changed = _float_leaves(list(args) + list(kwargs.values()))
    if fresh.flops > 2 * seen.flops + 1000 or fresh.largest.numel > 2 * seen.largest.numel + 1000:
        raise GuardFailure(
            f"answers from memory: {fn.__name__} cost {seen.flops:,} FLOPs (largest tensor "
            f"{seen.largest.numel:,} elements) on the values this test gave it, but "
            f"{fresh.flops:,} ({fresh.largest.numel:,}) on fresh values of the same shapes: the "
            "cheap answer was remembered from earlier work. Compute every answer when asked"
        )
    if _aliased(result, fresh_result):
        raise GuardFailure(
            f"aliasing: {fn.__name__} returned the same tensor (the same memory) from two calls, "
            "so the second call overwrote the first answer; return a new tensor from each call"
        )
    if inputs_changed and _same_result(result, fresh_result):
        raise GuardFailure(
            f"answers from memory: {fn.__name__} returned the very same numbers for fresh input "
            "values of the same shapes; compute every answer from the values it is given"
        )
    if inputs_changed and not models:
        _no_memory_of_the_tensors(fn, guard, fresh, fresh_result, fresh_args, fresh_kwargs, gen)
    if models:
        observed = _model_log(models, start)
        start = [len(m.calls) for m in models]
        guard.unobserved(fn, *fresh_args, **fresh_kwargs)
        unobserved = _model_log(models, start)
        if unobserved != observed:
            raise GuardFailure(
                f"always observed: {fn.__name__} calls the model differently when no counter is "
                f"on: (tokens, batch, cache length) per call {unobserved[:6]}, but "
                f"{observed[:6]} under the counters. Every call is measured the same way"
            )
    return result, seen


def _no_memory_of_the_tensors(fn, guard, fresh, fresh_result, args, kwargs, gen) -> None:
    """Call `fn` on the same tensors again, then after changing them in place: the first must
    cost what computing costs, the second must give new numbers."""
    __tracebackhide__ = True
    fn(*args, **kwargs)
    again = guard.last
    if fresh.work > 2 * again.work + 1000:
        raise GuardFailure(
            f"answers from memory: {fn.__name__} did {fresh.work:,} units of work on some tensors "
            f"but {again.work:,} when called again on the very same tensors: the answer was "
            "remembered (by the tensors' identity, say). Compute every answer when asked"
        )
    inputs = list(args) + list(kwargs.values())
    numbers = [t.clone() for t in _float_leaves(fresh_result)]  # it may share the inputs' memory
    for before, after in zip(
        _float_leaves(inputs), _float_leaves(_fresh(inputs, gen)), strict=True
    ):
        # In place: the same tensors, with new values but for the first and the last element
        # (a memory keyed on those, or on the identity, is caught below).
        first, last = (0,) * before.dim(), tuple(n - 1 for n in before.shape)
        ends = (before[first].clone(), before[last].clone())
        before.copy_(after)
        if before.numel() > 2:
            before[first], before[last] = ends
    changed = fn(*args, **kwargs)
    if _same_result(numbers, changed):
        raise GuardFailure(
            f"answers from memory: {fn.__name__} returned the very same numbers after its input "
            "tensors were changed in place; a memory keyed on a tensor's identity (id, data "
            "pointer or version) answers with stale numbers. Compute every answer from the values "
            "it is given"
        )
    expected = fn(*_copies(args), **_copies(kwargs))  # the same values in new tensors
    if not _close_results(changed, expected):
        raise GuardFailure(
            f"answers from memory: after its input tensors were changed in place (all but their "
            f"first and last elements), {fn.__name__} gave other numbers than on copies of those "
            "same values in new tensors: something kept from an earlier call and keyed on part of "
            "a tensor (its identity, data pointer, shape, first or last elements) answered. "
            "Compute every answer from the values it is given"
        )


def _copies(value: Any) -> Any:
    """`value` with every tensor (also in lists, tuples and dicts) replaced by a copy."""
    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        return copy.requires_grad_(value.requires_grad) if copy.is_floating_point() else copy
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(_copies(v) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: _copies(v) for k, v in value.items()}
    return value


def _close_results(a: Any, b: Any) -> bool:
    """The floating-point tensors of two results agree within their dtype's tolerance."""
    first, second = _float_leaves(a), _float_leaves(b)
    if len(first) != len(second):
        return False
    for x, y in zip(first, second, strict=True):
        if x.shape != y.shape:
            return False
        tol = tolerance_for(y.dtype)
        x, y = x.detach().double(), y.detach().double()
        scale = float(y.abs().nan_to_num(posinf=0.0, neginf=0.0).max()) if y.numel() else 0.0
        atol = tol.atol * max(scale, 1.0)
        if not torch.allclose(x, y, rtol=tol.rtol, atol=atol, equal_nan=True):
            return False
    return True


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run `fn(*args, **kwargs)` and return (its result, the FLOPs it spent)."""
    result, seen = measure(fn, *args, **kwargs)
    return result, seen.flops


def largest_tensor(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, TensorRecord]:
    """Run `fn` and return (its result, the largest tensor a PyTorch op produced meanwhile).

    Work done inside a Triton kernel is invisible here; only PyTorch ops are seen.
    """
    result, seen = measure(fn, *args, **kwargs)
    return result, seen.largest


def elements_written(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run `fn` and return (its result, the elements every PyTorch op produced, summed).

    Dense scores built by broadcasting (`(q[..., :, None, :] * k[..., None, :, :]).sum(-1)`) cost
    no FLOPs in `count_flops` but write Nq·Nk·D elements here, even one query at a time.
    """
    result, seen = measure(fn, *args, **kwargs)
    return result, seen.written


def held_bytes(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of every distinct tensor storage reachable from `obj` (through its attributes,
    lists, tuples, sets, deques and dicts): what a cache really keeps in memory."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        storage = obj.untyped_storage()
        if storage.data_ptr() in seen:
            return 0
        seen.add(storage.data_ptr())
        return storage.nbytes()
    if isinstance(obj, (list, tuple, set, frozenset, deque)):
        return sum(held_bytes(x, seen) for x in obj)
    if isinstance(obj, dict):
        return sum(held_bytes(x, seen) for x in obj.values())
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return sum(held_bytes(x, seen) for x in vars(obj).values())
    return 0


def CountingModel(model: Any) -> Any:  # noqa: N802 - the name tests already use
    """The model itself, its call log emptied: read `.calls` (and `.tokens_fed`) after.

    No wrapper: the shared model (and any test model built like it) logs its own calls in a
    `calls` list of `grading.model.ModelCall`, so an implementation sees the same object whether
    or not a test counts.
    """
    if not isinstance(getattr(model, "calls", None), list):
        raise TypeError(
            f"CountingModel needs a model that logs its own calls in a `calls` list (as the "
            f"shared grading.model.TinyLlama does), not {type(model).__name__}"
        )
    model.calls.clear()
    return model


def count_multiplies(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run `fn` and return (its result, the multiplications it performed).

    Matrix products count FLOPs / 2; elementwise products and quotients (`a * b`, broadcast or
    not), matrix-vector and dot products count one per multiply. The FLOP counter alone scores
    those as zero, so an "every expert on every token" computed by broadcasting hides from it; it
    does not hide from this count.
    """
    result, seen = measure(fn, *args, **kwargs)
    return result, seen.multiplies + seen.flops // 2
