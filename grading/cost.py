"""Deterministic cost counters that work on the CPU.

Speed is part of correctness in these katas, but wall-clock time on a shared 2-core machine is
noise. These counters measure the work itself, the same on every run:

- `count_flops`: floating-point operations of matrix products and attention, as counted by
  `torch.utils.flop_counter` (elementwise ops count zero there);
- `largest_tensor`: the biggest tensor any PyTorch op produced during a call (views excluded,
  since they allocate nothing);
- `count_multiplies`: every multiplication, including the elementwise, matrix-vector and dot
  products the FLOP counter scores as zero;
- `held_bytes`: the bytes an object (a cache, say) keeps in tensors;
- `CountingModel`: wraps a model and records every forward call and how many tokens it was fed.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode


def _cpu_attention_flops(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    """Scores (2·Nq·Nk·D) plus weighted sum (2·Nq·Nk·Dv) for every batch and head."""
    *lead, n_q, d = query_shape
    n_k, d_v = key_shape[-2], value_shape[-1]
    return 2 * math.prod(lead) * n_q * n_k * (d + d_v)


def _extra_formulas() -> dict:
    """FLOP formulas PyTorch lacks: its CPU kernel for scaled_dot_product_attention counts zero,
    which would let a dense solution hide its N² work behind one call."""
    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    return {} if op is None else {op: _cpu_attention_flops}


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run `fn(*args, **kwargs)` and return (its result, the FLOPs it spent)."""
    with FlopCounterMode(display=False, custom_mapping=_extra_formulas()) as counter:
        result = fn(*args, **kwargs)
    return result, int(counter.get_total_flops())


@dataclass
class TensorRecord:
    numel: int = 0
    nbytes: int = 0
    shape: tuple[int, ...] = ()
    op: str = ""

    def __str__(self) -> str:
        return f"{self.numel} elements, shape {self.shape}, made by {self.op or 'nothing'}"


class _LargestTensorMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.largest = TensorRecord()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.numel() > self.largest.numel:
                    self.largest = TensorRecord(
                        t.numel(), t.numel() * t.element_size(), tuple(t.shape), str(func)
                    )
        return out


def largest_tensor(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, TensorRecord]:
    """Run `fn` and return (its result, the largest tensor a PyTorch op produced meanwhile).

    Work done inside a Triton kernel is invisible here; only PyTorch ops are seen.
    """
    with _LargestTensorMode() as mode:
        result = fn(*args, **kwargs)
    return result, mode.largest


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


@dataclass
class ModelCall:
    tokens: int  # ids.shape[1]: how many positions this call fed
    batch: int
    cache_len: int | None  # cache.seq_len before the call, None without a cache


@dataclass
class CountingModel:
    """A model wrapper that records each forward call; everything else passes through."""

    model: Any
    calls: list[ModelCall] = field(default_factory=list)

    def __call__(self, ids: torch.Tensor, cache: Any = None) -> torch.Tensor:
        cache_len = None if cache is None else int(cache.seq_len)
        self.calls.append(ModelCall(int(ids.shape[1]), int(ids.shape[0]), cache_len))
        return self.model(ids, cache=cache)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    @property
    def tokens_fed(self) -> list[int]:
        return [c.tokens for c in self.calls]


# Elementwise ops counted one multiply per output element (a division is a multiply too).
_ELEMENTWISE_MULTIPLIES = (
    "mul",
    "mul_",
    "div",
    "div_",
    "addcmul",
    "addcmul_",
    "addcdiv",
    "addcdiv_",
)


class _MultiplyMode(TorchDispatchMode):
    """Counts the multiplications that torch.utils.flop_counter scores as zero."""

    def __init__(self) -> None:
        super().__init__()
        self.multiplies = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in ("mv", "addmv"):
            matrix = args[1] if name == "addmv" else args[0]
            self.multiplies += matrix.numel()  # (m, n) x (n,): m·n multiplies
        elif name in ("dot", "vdot"):
            self.multiplies += args[0].numel()
        elif name in _ELEMENTWISE_MULTIPLIES:
            self.multiplies += sum(
                t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor)
            )
        return out


def count_multiplies(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run `fn` and return (its result, the multiplications it performed).

    Matrix products count FLOPs / 2; elementwise products and quotients (`a * b`, broadcast or
    not), matrix-vector and dot products count one per multiply. The FLOP counter alone scores those
    as zero, so an "every expert on every token" computed by broadcasting hides from it; it does
    not hide from this count.
    """
    with (
        _MultiplyMode() as mode,
        FlopCounterMode(display=False, custom_mapping=_extra_formulas()) as counter,
    ):
        result = fn(*args, **kwargs)
    return result, mode.multiplies + int(counter.get_total_flops()) // 2
