"""What this kata's tests share: the cases they draw and the slow, dense, obviously right answers.

Every oracle here builds the full N x N picture in float64, which is exactly what a solution must
not do; they are for checking, not for copying.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from grading.devices import float_dtypes
from grading.model import apply_rope, rope_tables
from grading.strategies import gqa_heads, lengths, randn, seeds

DTYPES = float_dtypes()  # float32, float16 and bfloat16: the reference runs on the CPU


@dataclass(frozen=True)
class Case:
    """The shapes of one attention call; `tensors()` builds q, k, v from the seed."""

    B: int
    H: int
    Hkv: int
    Nq: int
    Nk: int
    D: int
    Dv: int
    dtype: torch.dtype
    seed: int

    def tensors(self, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q = randn((self.B, self.H, self.Nq, self.D), seed=self.seed, dtype=self.dtype, scale=scale)
        k = randn(
            (self.B, self.Hkv, self.Nk, self.D), seed=self.seed + 1, dtype=self.dtype, scale=scale
        )
        v = randn((self.B, self.Hkv, self.Nk, self.Dv), seed=self.seed + 2, dtype=self.dtype)
        return q, k, v


@st.composite
def cases(
    draw,
    *,
    max_len: int = 40,
    same_length: bool = False,
    block: int | None = None,
    even_d: bool = False,
) -> Case:
    """Batches of 1-2, MHA/GQA/MQA heads, lengths that break code, head dims including 1."""
    B = draw(st.integers(1, 2))
    H, Hkv = draw(gqa_heads(2, 3))
    Nq = draw(lengths(max_len, block=block))
    Nk = Nq if same_length else draw(lengths(max_len, block=block))
    D = draw(st.sampled_from([2, 4, 16] if even_d else [1, 4, 16]))
    Dv = draw(st.sampled_from([D, 3]))
    return Case(B, H, Hkv, Nq, Nk, D, Dv, draw(st.sampled_from(DTYPES)), draw(seeds()))


def band_mask(Nq: int, Nk: int, window: int) -> torch.Tensor:
    """bool (Nq, Nk): query i at position p = i + Nk - Nq sees keys p - window < j <= p."""
    p = torch.arange(Nq)[:, None] + (Nk - Nq)
    j = torch.arange(Nk)[None, :]
    return (j <= p) & (j > p - window)


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
        Nq, Nk = q.shape[2], k.shape[2]
        A = A * (torch.arange(Nk)[None, :] <= torch.arange(Nq)[:, None] + (Nk - Nq))
    z = A.sum(dim=-1, keepdim=True)
    return torch.where(z > 0, (A @ v) / z.clamp_min(1e-300), 0.0)  # no key seen -> zeros


def rope_at_positions(x: torch.Tensor) -> torch.Tensor:
    """x (B, h, N, D) rotated in float64 to absolute positions 0 .. N - 1 (grading.model's RoPE)."""
    cos, sin = rope_tables(x.shape[-1], x.shape[2], 10000.0, torch.float64)
    return apply_rope(x.detach().to("cpu", torch.float64), cos, sin)
