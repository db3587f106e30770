"""What the FlashAttention tests draw, and how they judge an output.

An `AttentionCase` is everything needed to rebuild one attention problem (sizes, flags, dtype,
input scale, seed); Hypothesis draws cases and prints them when a test fails. The judge is
FlashAttention's own rule: the error against a float64 oracle may be at most twice the error of
PyTorch's attention run in the same dtype, plus a small floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from grading.devices import default_device
from grading.oracles import attention_oracle
from grading.strategies import gqa_heads, lengths, randn, seeds
from grading.tolerance import assert_error_within

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


def input_scales(dtype: torch.dtype, scales: list[float]) -> list[float]:
    """The input scales a case of this dtype may draw (see MODERATE_SCALES)."""
    return [s for s in scales if s in MODERATE_SCALES] if dtype == torch.float32 else scales


@dataclass(frozen=True)
class AttentionCase:
    B: int
    H: int
    Hkv: int
    Nq: int
    Nk: int
    D: int
    causal: bool
    sm_scale: float | None
    dtype: torch.dtype
    scale: float  # standard deviation of q and k
    seed: int

    def tensors(self, device: torch.device | None = None):
        """q (B, H, Nq, D), k and v (B, Hkv, Nk, D), drawn on the CPU from the seed."""
        device = device or default_device()
        q = randn(
            (self.B, self.H, self.Nq, self.D),
            seed=self.seed,
            dtype=self.dtype,
            scale=self.scale,
            device=device,
        )
        k = randn(
            (self.B, self.Hkv, self.Nk, self.D),
            seed=self.seed + 1,
            dtype=self.dtype,
            scale=self.scale,
            device=device,
        )
        v = randn(
            (self.B, self.Hkv, self.Nk, self.D), seed=self.seed + 2, dtype=self.dtype, device=device
        )
        return q, k, v

    @property
    def options(self) -> dict:
        return dict(causal=self.causal, sm_scale=self.sm_scale)


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
) -> AttentionCase:
    """Cases around the block size `block`: lengths 1, primes, block ± 1, Nq != Nk, GQA.

    `scales` are the standard deviations of q and k to draw from; properties that compare two
    computations with each other (not with the oracle) keep to well-conditioned inputs.
    """
    H, Hkv = draw(gqa_heads(max_kv_heads, max_group))
    dtype = draw(st.sampled_from(dtypes))
    return AttentionCase(
        B=draw(st.integers(1, 2)),
        H=H,
        Hkv=Hkv,
        Nq=draw(lengths(max_len, block=block)),
        Nk=draw(lengths(max_len, block=block)),
        D=draw(st.sampled_from(head_dims)),
        causal=draw(st.booleans()) if causal is None else causal,
        sm_scale=draw(st.one_of(st.none(), st.sampled_from([0.05, 0.3, 1.0, 2.0]))),
        dtype=dtype,
        scale=draw(st.sampled_from(input_scales(dtype, scales))),
        seed=draw(seeds()),
    )


def torch_attention(q, k, v, *, causal: bool = False, sm_scale: float | None = None):
    """PyTorch's scaled_dot_product_attention in q's dtype, with the kata's conventions."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)  # (B, H, Nk, D)
    v = v.repeat_interleave(group, dim=1)
    Nq, Nk = q.shape[2], k.shape[2]
    mask = None
    if causal:  # PyTorch's is_causal aligns top-left; the kata aligns bottom-right
        rows = torch.arange(Nq, device=q.device)[:, None]
        mask = torch.arange(Nk, device=q.device)[None, :] <= rows + (Nk - Nq)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=sm_scale)
    return out.nan_to_num(0.0)  # PyTorch gives NaN where a query sees no key; the kata gives 0


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
    assert_error_within(out, expected, baseline, hint=hint)


def shape_errors(q, k, v) -> list[tuple[str, tuple]]:
    """Inputs that must be refused with a ValueError, built from one valid (q, k, v)."""
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    return [
        ("q without a batch dim", (q[0], k, v)),
        ("k and v of different lengths", (q, k, v[:, :, : Nk - 1])),
        ("k with another head dim", (q, k[..., : D // 2], v[..., : D // 2])),
        (
            "different batch sizes",
            (q, k[:1].expand(B + 1, -1, -1, -1), v[:1].expand(B + 1, -1, -1, -1)),
        ),  # fmt: skip
        (
            "H not a multiple of Hkv",
            (
                q[:, :1].expand(B, 3, Nq, D),
                k[:, :1].expand(B, 2, Nk, D),
                v[:, :1].expand(B, 2, Nk, D),
            ),
        ),  # fmt: skip
        ("v in another dtype", (q, k, v.double())),
    ]
