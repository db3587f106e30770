"""What the FlashAttention tests draw, and how they judge an output.

Cases are `grading.judge.attention.AttentionCase`s (sizes, flags, dtype, input scale, seed);
Hypothesis draws them and prints them when a test fails. The judge is FlashAttention's own rule: the
error against a float64 oracle may be at most twice the error of PyTorch's attention run in the same
dtype, plus a small floor.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from grading.devices import default_device
from grading.judge.attention import AttentionCase, below_mask_powers, causal_mask
from grading.judge.errors import BadCall
from grading.judge.oracles import attention_oracle, attention_scores
from grading.judge.strategies import gqa_heads, lengths, seeds
from grading.judge.tolerance import assert_error_within, max_abs_error

# Standard deviation of q and k. At 8 the scores reach several hundred: exp() of an unshifted
# score overflows float32 (beyond 88) and exp2() of it too (beyond 128).
INPUT_SCALES = [0.5, 1.0, 3.0, 8.0]
# Scores of a few units. With scores in the hundreds, float32 rounding inside q·k alone moves a
# score by ~1e-5, which shifts near-tied softmax weights by more than float32's tolerance however
# the sum is ordered (PyTorch's own result is off as much, or by luck much less). So float32
# cases, and properties comparing two summation orders, keep to these scales; large scores and
# exp overflow are drawn in float16 and bfloat16, whose kernels still compute scores and
# exponentials in float32.
MODERATE_SCALES = [0.5, 1.0]
# None is the default 1 / sqrt(D); 0.0 makes every weight equal (and is not "no scale"); a
# negative scale is a scale like any other (the largest weight goes to the most opposed key), not
# a sign that one was left out.
SM_SCALES = [None, 0.0, 0.05, 0.3, 1.0, 2.0, -0.3, -1.0]
# Long enough that a running sum kept in float16 (whose spacing is 1 above 1024 and 4 above
# 4096) visibly stops growing; short enough for Triton's interpreter (one query block).
LONG_NK = 4096


# The kernel's tile on the CPU (16 x 16 in the reference): a causal key range that ends one key
# early or late shows only when its end falls on a block boundary, which depends on Nk - Nq.
CPU_TILE = 16


def causal_offsets(block: int) -> list[int]:
    """Offsets Nk - Nq for causal cases: each side of 0 and of one and two blocks of `block`
    keys and of CPU_TILE keys (residues 0, 1 and -1 modulo the block), more queries than keys
    too. `causal_offset_sweep` tries every residue."""
    centres = {0, block, 2 * block, -block, CPU_TILE, 2 * CPU_TILE, -CPU_TILE}
    return sorted({c + r for c in centres for r in (-1, 0, 1)})


def input_scales(dtype: torch.dtype, scales: list[float]) -> list[float]:
    """The input scales a case of this dtype may draw (see MODERATE_SCALES)."""
    return [s for s in scales if s in MODERATE_SCALES] if dtype == torch.float32 else scales


@st.composite
def attention_cases(
    draw,
    *,
    max_len: int,
    block: int,
    head_dims: tuple[int, ...],
    dtypes: list[torch.dtype],
    max_kv_heads: int = 2,
    max_group: int = 3,
    causal: bool | None = None,
    scales: list[float] = INPUT_SCALES,
    sm_scales: list[float | None] = SM_SCALES,
) -> AttentionCase:
    """Cases around the block size `block`: lengths 1, primes, block ± 1, Nq != Nk, GQA.

    Half the causal cases take Nk = Nq + an offset of `causal_offsets(block)`, so that the
    causal diagonal meets block boundaries in every way. `scales` are the standard deviations of
    q and k to draw from; properties that compare two computations with each other (not with
    the oracle) keep to well-conditioned inputs.
    """
    H, Hkv = draw(gqa_heads(max_kv_heads, max_group))
    dtype = draw(st.sampled_from(dtypes))
    causal = draw(st.booleans()) if causal is None else causal
    Nq = draw(lengths(max_len, block=block))
    if causal and draw(st.booleans()):
        offsets = [n for n in causal_offsets(block) if 1 <= Nq + n <= max_len]  # 0 always fits
        Nk = Nq + draw(st.sampled_from(offsets))
    else:
        Nk = draw(lengths(max_len, block=block))
    return AttentionCase(
        B=draw(st.integers(1, 2)),
        H=H,
        Hkv=Hkv,
        Nq=Nq,
        Nk=Nk,
        D=draw(st.sampled_from(head_dims)),
        causal=causal,
        sm_scale=draw(st.sampled_from(sm_scales)),
        dtype=dtype,
        scale=draw(st.sampled_from(input_scales(dtype, scales))),
        seed=draw(seeds()),
    )


def effective_scale(sm_scale: float | None, D: int) -> float:
    return 1.0 / math.sqrt(D) if sm_scale is None else sm_scale


def scores_far_below_zero(case: AttentionCase, offset: float = -200.0):
    """q, k, v of `case` shifted so that every score sits near `offset` (spread of a few tens).

    All of exp(score) then underflow to 0 in float32: only an implementation that subtracts the
    running max sees any weight at all.
    """
    q, k, v = (t.double() for t in case.tensors(torch.device("cpu")))  # (B, H, N, D)
    u = torch.ones(case.D, dtype=torch.float64) / math.sqrt(case.D)  # a unit direction
    a = 10.0
    c = offset / (a * effective_scale(case.sm_scale, case.D))
    q, k = q + c * u, k + a * u  # q·k ≈ q0·k0 + a·q0·u + c·u·k0 + a·c
    return tuple(t.to(device=default_device(), dtype=case.dtype) for t in (q, k, v))


def near_tied_scores(case: AttentionCase, offset: float):
    """q, k, v of `case` shifted so that every score sits near `offset`, within a few units of
    each other (about the spread of the unshifted scores).

    With `offset` in the hundreds or more, scores rounded to float16 or bfloat16 (q @ kᵀ taken
    in the input dtype) move by 0.1 or more, so the near-tied weights move by as much: only
    scores computed in float32 stay within the tolerance. The case's sm_scale must not be 0.
    """
    q, k, v = (t.double() for t in case.tensors(torch.device("cpu")))  # (B, H, N, D)
    u = torch.ones(case.D, dtype=torch.float64) / math.sqrt(case.D)  # a unit direction
    q, k = q - (q @ u)[..., None] * u, k - (k @ u)[..., None] * u  # both orthogonal to u now
    a = 10.0
    c = offset / (a * effective_scale(case.sm_scale, case.D))
    q, k = q + c * u, k + a * u  # q·k = q0·k0 + a·c exactly: a constant plus the old spread
    return tuple(t.to(device=default_device(), dtype=case.dtype) for t in (q, k, v))


def causal_offset_sweep() -> list[int]:
    """Nk - Nq for every residue modulo CPU_TILE, and more queries than keys."""
    return [-CPU_TILE - 1, -CPU_TILE, -1, *range(CPU_TILE), CPU_TILE, CPU_TILE + 1]


@st.composite
def below_mask_cases(draw, *, max_len: int, block: int, dtypes: list[torch.dtype]):
    """(case, power): a case with D = 16 and the default sm_scale (so 1/4, a power of two), and a
    power its dtype can hold, for scores_below_any_mask."""
    dtype = draw(st.sampled_from(dtypes))
    H, Hkv = draw(gqa_heads(2, 3))
    case = AttentionCase(
        B=draw(st.integers(1, 2)),
        H=H,
        Hkv=Hkv,
        Nq=draw(lengths(max_len, block=block)),
        Nk=draw(lengths(max_len, block=block)),
        D=16,
        causal=draw(st.booleans()),
        dtype=dtype,
        seed=draw(seeds()),
    )
    power = draw(st.sampled_from(below_mask_powers(dtype)))
    return case, power


def strided(q, k, v):
    """The same values in three different non-contiguous layouts.

    q is a view of (B, Nq, H, 2D) memory (every other element along D), k of (B, Nk, Hkv, D)
    memory (as a projection writes it) and v of (B, Hkv, D, Nk) memory (transposed): k and v have
    different strides, and none of them is contiguous.
    """
    wide = torch.zeros((*q.shape[:3], 2 * q.shape[3]), dtype=q.dtype, device=q.device)
    wide = wide.transpose(1, 2).contiguous().transpose(1, 2)  # (B, H, Nq, 2D), laid out BNH2D
    wide[..., ::2] = q
    q_view = wide[..., ::2]
    k_view = k.transpose(1, 2).contiguous().transpose(1, 2)
    v_view = v.transpose(2, 3).contiguous().transpose(2, 3)
    return q_view, k_view, v_view


def torch_attention(q, k, v, *, causal: bool = False, sm_scale: float | None = None):
    """PyTorch's scaled_dot_product_attention in q's dtype, with the kata's conventions."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)  # (B, H, Nk, D)
    v = v.repeat_interleave(group, dim=1)
    mask = causal_mask(q.shape[2], k.shape[2], q.device) if causal else None  # bottom-right
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=sm_scale)
    return out.nan_to_num(0.0)  # PyTorch gives NaN where a query sees no key; the kata gives 0


def _precision_note(out, expected, q, k, v, *, causal: bool, sm_scale: float | None) -> str:
    """A line saying whether the error looks like lost precision rather than wrong logic."""
    if out.dtype == torch.float32:
        half = torch_attention(q.half(), k.half(), v.half(), causal=causal, sm_scale=sm_scale)
        half_error = max_abs_error(half, expected)
        if max_abs_error(out, expected) <= 4 * half_error:
            return (
                "\nprecision: this float32 result is only as accurate as float16 arithmetic "
                f"(PyTorch in float16 is off by {half_error:.3g}): some product or sum runs in "
                "float16 or bfloat16; accumulate in float32 (in Triton, tl.dot with "
                "input_precision='ieee' for float32 inputs)"
            )
        return ""
    top = float(attention_scores(q, k, causal=causal, sm_scale=sm_scale).abs().nan_to_num(0).max())
    if top > 50:
        return (
            f"\nprecision: scores here reach {top:.0f}. If smaller inputs pass, this is a "
            f"precision failure: in {out.dtype} such scores are rounded by up to 0.25, so compute "
            "q·kᵀ, exp and every sum in float32, and subtract the running max before exp"
        )
    return ""


def check_attention(out, q, k, v, *, causal: bool, sm_scale: float | None, hint: str) -> None:
    """Judge `out` against the float64 oracle with FlashAttention's rule (see module docstring)."""
    __tracebackhide__ = True
    assert isinstance(out, torch.Tensor), f"expected a tensor, got {type(out).__name__}"
    assert out.dtype == q.dtype, (
        f"the output must have q's dtype {q.dtype}, got {out.dtype}: accumulate in float32, "
        "then cast the result back"
    )
    assert out.device == q.device, f"the output must be on q's device {q.device}, got {out.device}"
    expected = attention_oracle(q, k, v, causal=causal, sm_scale=sm_scale)
    baseline = torch_attention(q, k, v, causal=causal, sm_scale=sm_scale)
    try:
        assert_error_within(out, expected, baseline, hint=hint)
    except AssertionError as failure:
        if tuple(out.shape) != tuple(expected.shape) or torch.isnan(out).any():
            raise
        note = _precision_note(out, expected, q, k, v, causal=causal, sm_scale=sm_scale)
        raise AssertionError(f"{failure}{note}") from None


def describe(t: torch.Tensor) -> str:
    return f"{t.dtype} {list(t.shape)}".replace("torch.", "")


def bad_attention_inputs(fn: str, *, Nq: int = 5, D: int = 16) -> list[tuple[BadCall, str]]:
    """Calls `fn(q, k, v)` that must raise ValueError, each with what its message must name.

    Built from one valid q (2, 4, Nq, D), k and v (2, 2, 6, D); the regex is searched in the
    message (the argument or the size at fault).
    """
    q, k, v = AttentionCase(B=2, H=4, Hkv=2, Nq=Nq, Nk=6, D=D).tensors()
    B, H, _, _ = q.shape
    Nk = k.shape[2]
    table = [
        ("q without a batch dim", r"\bq\b", (q[0], k, v)),
        ("k without a batch dim", r"\bk\b", (q, k[0], v)),
        ("v with an extra dim", r"\bv\b", (q, k, v[None])),
        ("v shorter than k", r"\bv\b|Nk", (q, k, v[:, :, : Nk - 1])),
        ("v with another head dim than k", r"\bv\b|\bD\b|head dim", (q, k, v[..., : D // 2])),
        (
            "k with another head dim than q",
            r"\bk\b|\bD\b|head dim",
            (q, k[..., : D // 2], v[..., : D // 2]),
        ),
        ("v with fewer kv heads than k", r"\bv\b|Hkv|heads", (q, k, v[:, :1])),
        ("k and v of batch 1 for q of batch 2", r"\bk\b|\bB\b|batch", (q, k[:1], v[:1])),
        (
            "k and v of a larger batch than q",
            r"\bk\b|\bB\b|batch",
            (q, k[:1].expand(B + 1, -1, -1, -1), v[:1].expand(B + 1, -1, -1, -1)),
        ),
        ("H = 3 query heads for Hkv = 2", r"Hkv|heads", (q[:, :3], k, v)),
        ("H = 1 query head for Hkv = 2", r"Hkv|heads", (q[:, :1], k, v)),
        ("k and v in float16, q in float32", r"dtype|float", (q, k.half(), v.half())),
        ("v in float64, q and k in float32", r"dtype|float", (q, k, v.double())),
        ("integer tensors", r"dtype|float\w*|int\w*", (q.long(), k.long(), v.long())),
        ("empty q (Nq = 0)", r"\bq\b|Nq|empty", (q[:, :, :0], k, v)),
        ("empty k and v (Nk = 0)", r"\bk\b|\bv\b|Nk|empty", (q, k[:, :, :0], v[:, :, :0])),
    ]
    return [
        (BadCall(f"{fn}({', '.join(describe(t) for t in args)})", why, _caller(fn, args)), names)
        for why, names, args in table
    ]


KERNEL_HEAD_DIMS = (16, 32, 64, 128)
# Head dims the kernel refuses: every multiple of 8 up to 264 but the four (powers of two too
# small or too large, multiples of 16 that are not powers of two), and odd ones around them.
BAD_HEAD_DIMS = sorted(
    {d for d in range(8, 265, 8) if d not in KERNEL_HEAD_DIMS} | {1, 2, 4, 15, 17, 63, 100, 129}
)


def bad_head_dims(fn: str, *, Nq: int = 5) -> list[tuple[BadCall, str]]:
    """Calls `fn(q, k, v)` with each head dim of BAD_HEAD_DIMS (not 16, 32, 64 or 128)."""
    calls = []
    for D in BAD_HEAD_DIMS:
        q, k, v = AttentionCase(B=1, H=2, Hkv=1, Nq=Nq, Nk=6, D=D).tensors()
        calls.append(
            (bad_call(fn, (q, k, v), f"head dim {D}, not 16, 32, 64 or 128"), r"\bD\b|head dim")
        )
    return calls


# One size of split_kv_decode's arguments changed: which argument ("kv": k and v together), its
# dim, the size's name, and what the message must name.
_DECODE_SIZES = [
    ("q", 0, "B", r"\bq\b|\bk\b|\bB\b|batch"),
    ("q", 1, "H", r"\bq\b|\bH\b|Hkv|heads"),
    ("q", 2, "Nq", r"\bq\b|Nq|quer"),
    ("q", 3, "D", r"\bq\b|\bk\b|\bD\b|head dim"),
    ("k", 0, "B", r"\bk\b|\bv\b|\bB\b|batch"),
    ("k", 1, "Hkv", r"\bk\b|\bv\b|Hkv|heads"),
    ("k", 2, "Nk", r"\bk\b|\bv\b|Nk"),
    ("k", 3, "D", r"\bk\b|\bv\b|\bD\b|head dim"),
    ("v", 0, "B", r"\bk\b|\bv\b|\bB\b|batch"),
    ("v", 1, "Hkv", r"\bk\b|\bv\b|Hkv|heads"),
    ("v", 2, "Nk", r"\bk\b|\bv\b|Nk"),
    ("v", 3, "D", r"\bk\b|\bv\b|\bD\b|head dim"),
    ("kv", 0, "B", r"\bk\b|\bB\b|batch"),
    ("kv", 1, "Hkv", r"Hkv|heads"),  # Hkv = 1 is valid (one kv head for all), 3 is not
    ("kv", 3, "D", r"\bk\b|\bD\b|head dim"),  # any Nk of both is valid
]


def wrong_decode_shapes() -> list[tuple[BadCall, str]]:
    """split_kv_decode(q, k, v) with one shape wrong, each with what its message must name.

    From q (2, 4, 1, 16) and k, v (2, 2, 6, 16): a dim dropped or added to one argument, and
    each size of _DECODE_SIZES made 1 (which broadcasting would accept) or one more, unless that
    leaves a valid call. Nothing is broadcast: sizes that must match match exactly.
    """
    q, k, v = AttentionCase(B=2, H=4, Hkv=2, Nq=1, Nk=6, D=16).tensors()
    base = {"q": q, "k": k, "v": v}
    table = []
    for name, t in base.items():
        table.append((f"{name} without a batch dim", rf"\b{name}\b", {name: t[0]}))
        table.append((f"{name} with an extra dim", rf"\b{name}\b", {name: t[None]}))
    for names, dim, size, pattern in _DECODE_SIZES:
        now = base[names[0]].shape[dim]
        for other in sorted({1, now + 1} - {now}):
            if (names, size, other) == ("kv", "Hkv", 1):
                continue
            changed = {name: resized(base[name], dim, other) for name in names}
            what = " and ".join(names)
            table.append((f"{what} with {size}={other}, not {now}", pattern, changed))
    return [
        (bad_call("split_kv_decode", tuple((base | changed).values()), why), pattern)
        for why, pattern, changed in table
    ]


def resized(t: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """`t` with `size` entries along `dim`: its first ones, then its first ones again."""
    if size <= t.shape[dim]:
        return t.narrow(dim, 0, size)
    return torch.cat([t, t.narrow(dim, 0, size - t.shape[dim])], dim)


def _caller(fn: str, args: tuple, **kwargs):
    return lambda impl: getattr(impl, fn)(*args, **kwargs)


def bad_call(fn: str, args: tuple, why: str, **kwargs) -> BadCall:
    """One call `fn(*args, **kwargs)` that must raise ValueError, described for the report."""
    shown = [describe(t) for t in args] + [f"{key}={value!r}" for key, value in kwargs.items()]
    return BadCall(f"{fn}({', '.join(shown)})", why, _caller(fn, args, **kwargs))
