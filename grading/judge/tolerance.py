"""Closeness against a float64 oracle, with one tolerance table for the whole repository.

A result passes when, element by element,

    |actual - expected| <= atol * scale + rtol * |expected|

where `scale` is the magnitude of the expected output (its largest absolute value, unless the
caller passes another). Tying `atol` to the output's own size means a tiny output gets a tiny
tolerance: returning zeros, or something off by a constant factor, never passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Tolerance:
    rtol: float  # relative to each expected element
    atol: float  # relative to the output's scale (its largest |expected|)


# About a few units in the last place of each dtype after float32 accumulation.
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(rtol=1e-9, atol=1e-10),
    torch.float32: Tolerance(rtol=2e-5, atol=2e-6),
    torch.float16: Tolerance(rtol=2e-3, atol=1e-3),
    torch.bfloat16: Tolerance(rtol=1.6e-2, atol=8e-3),
}


def tolerance_for(dtype: torch.dtype) -> Tolerance:
    try:
        return TOLERANCES[dtype]
    except KeyError:
        raise ValueError(f"no tolerance for dtype {dtype}; known: {list(TOLERANCES)}") from None


def _describe(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}, dtype {t.dtype}"


def assert_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    scale: float | None = None,
    name: str = "output",
    hint: str = "",
) -> None:
    """Check `actual` against the float64 oracle `expected` with the tolerance of `dtype`.

    `dtype` defaults to `actual.dtype` (the precision the computation was asked to run in).
    On failure the message says where the worst element is, what was expected there, what came
    out, how many elements are off, the tolerance used, and `hint` (what this usually means).
    """
    __tracebackhide__ = True
    if not isinstance(actual, torch.Tensor):
        raise AssertionError(f"{name}: expected a torch.Tensor, got {type(actual).__name__}")
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(
            f"{name}: wrong shape: expected {tuple(expected.shape)}, got {tuple(actual.shape)}"
            + (f"\nhint: {hint}" if hint else "")
        )
    tol = tolerance_for(dtype or actual.dtype)
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    if e.numel() == 0:
        return
    if scale is None:
        scale = float(e.abs().max())
    bound = tol.atol * max(scale, torch.finfo(torch.float64).tiny) + tol.rtol * e.abs()
    err = (a - e).abs()
    bad = ~(err <= bound)  # NaN counts as bad
    if not bool(bad.any()):
        return
    excess = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err - bound)
    worst = int(excess.flatten().argmax())
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), e.shape))
    rel = err / e.abs().clamp_min(torch.finfo(torch.float64).tiny)
    lines = [
        f"{name} is not close to the float64 oracle ({int(bad.sum())} of {e.numel()} elements off)",
        f"  actual:   {_describe(actual)};  expected: {_describe(expected)}",
        f"  worst at index {where}: expected {e.flatten()[worst].item():.6g}, "
        f"got {a.flatten()[worst].item():.6g}",
        f"  max abs error {float(err.nan_to_num(float('inf')).max()):.3g}, "
        f"max rel error {float(rel.nan_to_num(float('inf')).max()):.3g}",
        f"  allowed: {tol.atol:g} x scale {scale:.4g} + {tol.rtol:g} x |expected| "
        f"(dtype {dtype or actual.dtype})",
    ]
    if torch.isnan(a).any():
        lines.append("  the output holds NaN: often exp() of an unshifted score, or 0/0")
    else:
        lines += _precision_note(float((err / bound.clamp_min(1e-300)).max()), dtype or a.dtype)
    if hint:
        lines.append(f"hint: {hint}")
    raise AssertionError("\n".join(lines))


# An error at most this many times the allowed one is rounding, not a wrong formula: a wrong
# formula (a missing key, a wrong scale) misses by orders of magnitude more.
PRECISION_RATIO = 64


def _precision_note(ratio: float, dtype: torch.dtype) -> list[str]:
    """A line saying the failure is one of precision, when the error is that small."""
    if ratio > PRECISION_RATIO:
        return []
    return [
        f"  precision: the worst error is only {ratio:.3g} x the allowed one, too small for a "
        "wrong formula: precision was lost on the way (an exp, softmax or sum run in "
        f"{str(dtype).replace('torch.', '')} or lower instead of float32, or a value rounded "
        "to a lower precision early)"
    ]


def max_abs_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Largest |actual - expected|, computed in float64 (NaN counts as infinite)."""
    err = actual.detach().to("cpu", torch.float64) - expected.detach().to("cpu", torch.float64)
    return float(err.abs().nan_to_num(float("inf")).max()) if err.numel() else 0.0


# Rounding a correct computation may accumulate, in units of its accumulation dtype's last
# place (eps): a chain of a few hundred dependent float32 roundings (two transformer layers, a
# softmax over thousands of keys) stays well inside 128 of them, relative to the output's scale.
# Measured on the KV-cache kata's float32 logits: up to 7e-6 of the scale, 56 eps; an error
# from a real bug (a key at the wrong position, a sum in float16) is orders of magnitude larger.
ACCUMULATED_EPS = 128


def error_floor(dtype: torch.dtype, scale: float) -> float:
    """The error below which a result is never blamed, whatever the baseline's luck.

    The dtype's own tolerance (its rounding of the output) plus what rounding in the
    accumulation dtype (float32 for float32 and the half types, float64 for float64) adds up to
    over a long computation, both times the output's scale.
    """
    accumulate = torch.promote_types(dtype, torch.float32)
    eps = torch.finfo(accumulate).eps
    return (tolerance_for(dtype).atol + ACCUMULATED_EPS * eps) * max(scale, 1e-30)


def assert_error_within(
    actual: torch.Tensor,
    expected: torch.Tensor,
    baseline: torch.Tensor,
    *,
    factor: float = 2.0,
    floor: float | None = None,
    name: str = "output",
    hint: str = "",
) -> None:
    """FlashAttention's rule: error vs the oracle at most `factor` x a baseline's error + floor.

    `baseline` is a trusted computation in the same low precision (for example PyTorch's own
    attention run in float16). The baseline's own error is partly luck: in float32 it can be
    tiny for one example and ten times larger for the next, so `floor` (by default
    `error_floor(actual.dtype, scale)`) keeps a correct result from failing when the baseline
    happened to round well.
    """
    __tracebackhide__ = True
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(
            f"{name}: wrong shape: expected {tuple(expected.shape)}, got {tuple(actual.shape)}"
        )
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    if floor is None:
        floor = error_floor(actual.dtype, scale)
    ours = max_abs_error(actual, expected)
    theirs = max_abs_error(baseline, expected)
    if ours <= factor * theirs + floor:
        return
    allowed = factor * theirs + floor
    lines = [
        f"{name}: max abs error {ours:.3g} vs the float64 oracle is more than {factor:g} x the "
        f"baseline's {theirs:.3g} + floor {floor:.3g}",
        f"  actual: {_describe(actual)}; output scale {scale:.4g}",
        *_precision_note(ours / allowed, actual.dtype),
    ]
    raise AssertionError("\n".join(lines) + (f"\nhint: {hint}" if hint else ""))
