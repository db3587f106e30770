"""What the context-extension tests draw, and the float64 oracles they compare against.

Strategies draw the sizes and settings real models use plus the awkward ones; the oracles are
written pair by pair with Python's `math` module, in float64, from the values they are given.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

# Positions of long contexts and of single decoding steps far out: a float32 angle at 10^6 is off
# by up to 0.03 radian; int32 holds positions up to 2^31 - 1.
FAR_POSITIONS = [0, 1, 4095, 65_537, 131_071, 1_000_003, 16_777_217, 2**31 - 1]

head_dims = st.one_of(st.sampled_from([2, 4, 8, 64, 128]), st.integers(1, 80).map(lambda h: 2 * h))
ntk_head_dims = st.one_of(st.sampled_from([4, 6, 64, 128]), st.integers(2, 80).map(lambda h: 2 * h))
# Bases of real models (10^4 Llama 2, 5·10^5 Llama 3, 10^6 long-context models), small ones, and
# the edges: barely above 1 and far above 10^6.
bases = st.one_of(
    st.sampled_from([10000.0, 500000.0, 1e6, 100.0, 1.0001, 1e9]), st.floats(1.5, 1e6)
)
# Stretch factors > 1 (extending the context), and any factor > 0.
stretches = st.one_of(st.sampled_from([2.0, 4.0, 8.0, 32.0, 1.5]), st.floats(1.01, 64.0))
factors = st.one_of(stretches, st.sampled_from([1.0, 0.5, 1e-3, 1e3]), st.floats(0.1, 1.0))
trained_lengths = st.one_of(st.sampled_from([1, 2048, 4096, 8192, 32768]), st.integers(1, 10_000))
# (beta_fast, beta_slow): the default, other published pairs, equal betas, and extremes that push
# the ramp's ends past the first or the last pair.
yarn_betas = st.sampled_from(
    [(32.0, 1.0), (16.0, 2.0), (4.0, 0.5), (2.0, 2.0), (1e4, 1e-4), (1.0, 32.0)]
)


def far_positions(dtype: torch.dtype) -> torch.Tensor:
    """FAR_POSITIONS that `dtype` can hold, as that dtype (each value exactly representable)."""
    if dtype.is_floating_point:
        top = torch.finfo(dtype).max
        values = [float(torch.tensor(float(p)).to(dtype)) for p in FAR_POSITIONS if p <= top]
    else:
        values = [p for p in FAR_POSITIONS if p <= torch.iinfo(dtype).max]
    return torch.tensor(values, dtype=torch.float64).to(dtype)


# ----------------------------------------------------------------------------------------------
# Float64 oracles


def inv_freq_oracle(head_dim: int, base: float) -> torch.Tensor:
    return torch.tensor(
        [base ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64
    )


def cos_sin_oracle(positions: torch.Tensor, inv_freq: torch.Tensor):
    """cos, sin [N, D] in float64 from the positions and frequencies exactly as given."""
    angles = [[float(p) * float(f) for f in inv_freq.tolist()] for p in positions.tolist()]
    cos = torch.tensor([[math.cos(a) for a in row] * 2 for row in angles], dtype=torch.float64)
    sin = torch.tensor([[math.sin(a) for a in row] * 2 for row in angles], dtype=torch.float64)
    return cos.reshape(len(angles), -1), sin.reshape(len(angles), -1)


def tables(positions, head_dim: int, base: float = 10000.0):
    """float32 cos, sin [N, D] for apply_rope's tests, built by the oracle (not the code tested)."""
    cos, sin = cos_sin_oracle(torch.as_tensor(positions), inv_freq_oracle(head_dim, base))
    return cos.float(), sin.float()


def rotate_pairs_oracle(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn each pair (a, b) = (x[i], x[i + D/2]) by its angle: (a c - b s, a s + b c)."""
    x, cos, sin = x.double(), cos.double(), sin.double()
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    c, s = cos[:, :half], sin[:, :half]
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


def ntk_oracle(head_dim: int, base: float, scale: float) -> torch.Tensor:
    return inv_freq_oracle(head_dim, base * scale ** (head_dim / (head_dim - 2)))


def dynamic_ntk_oracle(head_dim, base, factor, seq_len, trained) -> torch.Tensor:
    length = max(seq_len, trained)
    return ntk_oracle(head_dim, base, factor * length / trained - (factor - 1))


def yarn_oracle(head_dim, base, factor, trained, beta_fast=32.0, beta_slow=1.0):
    def pair_turning(rotations: float) -> float:
        # Pair i has wavelength 2 pi base^(2i/D); it turns `rotations` times within `trained`.
        return head_dim * math.log(trained / (2 * math.pi * rotations)) / (2 * math.log(base))

    low = max(math.floor(pair_turning(beta_fast)), 0)
    high = min(math.ceil(pair_turning(beta_slow)), head_dim - 1)
    if low == high:
        high += 0.001
    freqs = []
    for i in range(head_dim // 2):
        original = base ** (-2 * i / head_dim)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        freqs.append(original * (1 - ramp) + original / factor * ramp)
    attention_factor = 0.1 * math.log(factor) + 1 if factor > 1 else 1.0
    return torch.tensor(freqs, dtype=torch.float64), attention_factor


def alibi_slopes_oracle(n: int) -> list[float]:
    """The ALiBi paper's recursion, as published with its code."""
    if math.log2(n).is_integer():
        return [2 ** (-8 * (h + 1) / n) for h in range(n)]
    closest = 2 ** math.floor(math.log2(n))
    return alibi_slopes_oracle(closest) + alibi_slopes_oracle(2 * closest)[0::2][: n - closest]


def alibi_bias_oracle(n_heads: int, q_len: int, k_len: int) -> torch.Tensor:
    """float64 [n_heads, q_len, k_len]: -slope_h * (i + k_len - q_len - j)."""
    slopes = torch.tensor(alibi_slopes_oracle(n_heads), dtype=torch.float64)  # (H,)
    query_pos = torch.arange(q_len, dtype=torch.float64) + (k_len - q_len)  # (Nq,)
    distance = query_pos[:, None] - torch.arange(k_len, dtype=torch.float64)  # (Nq, Nk)
    return -slopes[:, None, None] * distance
