"""What the counters of `grading.judge.observe` know of each PyTorch operator.

`FORMULAS`: the FLOP formulas by operator, copied once, before any implementation is imported:
`torch.utils.flop_counter`'s, plus those PyTorch lacks (its CPU attention kernel, and F.bilinear's
and F.embedding_bag's, which it counts as zero). `operator_info`: an operator's name, formula,
whether it only asks for sizes, decomposes, is a view, and which arguments it writes into (the
counters keep each answer in their table, `grading.judge.observe._INFO`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.utils.flop_counter import flop_registry, shape_wrapper


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


@dataclass(frozen=True)
class OpInfo:
    name: str  # the operator's name without overload, e.g. "mm"
    formula: object  # its FLOP formula, or None
    on_shapes: object  # the same formula taking shapes (faster), when it has that form
    metadata: bool  # asks for sizes or strides: no work
    decomposes: bool  # no formula, but a decomposition into operators that may have one
    view: bool  # allocates nothing
    writes: tuple[tuple[int, str], ...]  # (position, name) of each argument it writes into
    op: object  # the operator itself (the judge checks this entry against it)


def operator_info(func) -> OpInfo:
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
    return OpInfo(
        packet.__name__,
        formula,
        on_shapes,
        func in _METADATA_OPS,
        decomposes,
        func.is_view,
        writes,
        func,
    )
