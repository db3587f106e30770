"""What this kata's tests share: the cases they draw and the slow, dense, obviously right answers.

Every oracle here builds the full N x N picture in float64, which is exactly what a solution must
not do; they are for checking, not for copying.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from grading.devices import float_dtypes
from grading.judge.attention import AttentionCase, below_mask_powers, causal_mask
from grading.judge.oracles import attention_oracle
from grading.judge.strategies import gqa_heads, lengths, seeds
from grading.model import apply_rope, rope_tables

DTYPES = float_dtypes()  # float32, float16 and bfloat16: the reference runs on the CPU
# None is the default 1 / sqrt(D); 0.0 makes every visible key weigh the same (and catches
# `sm_scale or default`); a negative scale turns the softmax upside down.
SM_SCALES = [None, 0.0, 0.3, -1.5]


@st.composite
def cases(
    draw,
    *,
    max_len: int = 40,
    same_length: bool = False,
    block: int | None = None,
    even_d: bool = False,
) -> AttentionCase:
    """Batches of 1-2, MHA/GQA/MQA heads, lengths that break code, head dims including 1."""
    H, Hkv = draw(gqa_heads(2, 3))
    Nq = draw(lengths(max_len, block=block))
    D = draw(st.sampled_from([2, 4, 16] if even_d else [1, 4, 16]))
    return AttentionCase(
        B=draw(st.integers(1, 2)),
        H=H,
        Hkv=Hkv,
        Nq=Nq,
        Nk=Nq if same_length else draw(lengths(max_len, block=block)),
        D=D,
        Dv=draw(st.sampled_from([D, 3])),
        sm_scale=draw(st.sampled_from(SM_SCALES)),
        dtype=draw(st.sampled_from(DTYPES)),
        seed=draw(seeds()),
    )


@st.composite
def below_mask_cases(draw, *, max_len: int = 24) -> tuple[AttentionCase, int]:
    """(case, power) for grading.judge.attention.scores_below_any_mask: D = 16, the default
    sm_scale, and a power the case's dtype holds."""
    H, Hkv = draw(gqa_heads(2, 3))
    case = AttentionCase(
        B=draw(st.integers(1, 2)),
        H=H,
        Hkv=Hkv,
        Nq=draw(lengths(max_len)),
        Nk=draw(lengths(max_len)),
        D=16,
        dtype=draw(st.sampled_from(DTYPES)),
        seed=draw(seeds()),
    )
    return case, draw(st.sampled_from(below_mask_powers(case.dtype)))


def band_mask(Nq: int, Nk: int, window: int) -> torch.Tensor:
    """bool (Nq, Nk): query i at position p = i + Nk - Nq sees keys p - window < j <= p."""
    too_old = causal_mask(Nq + window, Nk)[:Nq]  # row i: keys j <= p - window
    return causal_mask(Nq, Nk) & ~too_old


def long_band_oracle(q, k, v, window: int, *, chunk: int = 128) -> torch.Tensor:
    """float64 sliding-window attention (band_mask's rule) for sequences too long for one N x N
    mask: each chunk of queries is scored against only the keys its windows can reach."""
    Nq, Nk = q.shape[2], k.shape[2]
    outs = []
    for start in range(0, Nq, chunk):
        stop = min(start + chunk, Nq)
        p = torch.arange(start, stop)[:, None] + Nk - Nq  # the positions of these queries
        lo, hi = min(max(start + Nk - Nq - window + 1, 0), Nk), min(max(stop + Nk - Nq, 0), Nk)
        j = torch.arange(lo, hi)[None, :]
        mask = (j <= p) & (j > p - window)  # (stop - start, hi - lo)
        outs.append(
            attention_oracle(q[:, :, start:stop], k[:, :, lo:hi], v[:, :, lo:hi], mask=mask)
        )
    return torch.cat(outs, dim=2)


def token_mask(block_mask: torch.Tensor, block_size: int, N: int) -> torch.Tensor:
    """bool (N, N): the block mask spelled out token by token (the last block may be partial)."""
    dense = block_mask.repeat_interleave(block_size, 0).repeat_interleave(block_size, 1)
    return dense[:N, :N]


def linear_attention_oracle(q, k, v, *, causal: bool) -> torch.Tensor:
    """The quadratic form of linear attention in float64: (phi(Q) phi(K)ᵀ ∘ mask) V / row sums."""
    q, k, v = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    A = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)  # (B, H, Nq, Nk), all > 0
    if causal:
        A = A * causal_mask(q.shape[2], k.shape[2])
    z = A.sum(dim=-1, keepdim=True)
    return torch.where(z > 0, (A @ v) / z.clamp_min(1e-300), 0.0)  # no key seen -> zeros


def rope_at_positions(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """x (B, h, N, D) rotated in float64 to absolute positions 0 .. N - 1 (grading.model's RoPE)."""
    cos, sin = rope_tables(x.shape[-1], x.shape[2], base, torch.float64)
    return apply_rope(x.detach().to("cpu", torch.float64), cos, sin)


def extreme_tensors(case: AttentionCase):
    """q, k, v of `case` whose scores reach thousands, yet are exact in float32 and float16.

    q holds multiples of 16 up to ±128 and k small integers, so every product and sum is an
    integer that float32 represents exactly: exp() of an unshifted score overflows to inf, while a
    softmax that subtracts the row maximum stays exact. Use with sm_scale a power of two.
    """
    gen = torch.Generator().manual_seed(case.seed)
    q = torch.randint(-8, 9, (case.B, case.H, case.Nq, case.D), generator=gen) * 16.0
    k = torch.randint(-8, 9, (case.B, case.Hkv, case.Nk, case.D), generator=gen).double()
    v = torch.randn(case.B, case.Hkv, case.Nk, case.value_dim, generator=gen, dtype=torch.float64)
    return q.to(case.dtype), k.to(case.dtype), v.to(case.dtype)


def strided_like_a_model(x: torch.Tensor, pad: int) -> torch.Tensor:
    """x (B, h, N, d) as a non-contiguous view: stored (B, N, h, d + pad) and then transposed,
    as q, k and v are after splitting a fused projection. Different pads give k and v different
    strides."""
    B, h, N, d = x.shape
    storage = torch.zeros(B, N, h, d + pad, dtype=x.dtype, device=x.device)
    storage[..., :d] = x.transpose(1, 2)
    return storage[..., :d].transpose(1, 2)
