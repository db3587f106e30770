"""Context extension: how positions enter attention, and how to stretch a model past its training.

RoPE turns each pair of dimensions (i, i + D/2) of a query or key by the angle p * inv_freq[i],
so that the score of a query at position m and a key at position n depends only on n - m. A
model trained on L0 positions has only seen the angles of 0 .. L0 - 1; the scalings below change
the frequencies so that longer inputs stay within (or near) what the model saw:

    linear (position interpolation)   every frequency / factor
    NTK                                a larger base: the fast pairs stay, the slowest / factor
    dynamic NTK                        NTK with a factor that grows with the current length
    YaRN                               fast pairs kept, slow pairs interpolated, a ramp between

ALiBi does without rotations: each head adds -slope * distance to its scores.

The conventions are those of Llama and Hugging Face Transformers (`modeling_rope_utils`), so
these tables drop into a real model: the half-split layout cat([f, f]), and rotate_half(x) =
cat(-x2, x1). Frequencies and tables are float32; angles are formed in float64 first, because at
position 100 000 a float32 angle is already off by several thousandths of a radian.
"""

from __future__ import annotations

import math

import torch

# ----------------------------------------------------------------------------------------------
# Checks shared by every function


def _check_head_dim(head_dim: int, *, minimum: int = 2) -> None:
    if not isinstance(head_dim, int) or head_dim < minimum or head_dim % 2:
        raise ValueError(f"head_dim: expected an even int >= {minimum}, got {head_dim!r}")


def _check_base(base: float) -> None:
    if not 1 < base < math.inf:
        raise ValueError(f"base: expected a finite number > 1, got {base!r}")


def _check_positive(name: str, value: float) -> None:
    if not 0 < value < math.inf:
        raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")


def _check_length(name: str, value: int, *, minimum: int) -> None:
    if not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")


def _inv_freq64(head_dim: int, base: float) -> torch.Tensor:
    """base ** (-2i / head_dim) for i = 0 .. head_dim/2 - 1, in float64."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim  # (D/2,)
    return base**-exponents


# ----------------------------------------------------------------------------------------------
# Level 1: RoPE


def rope_inv_freq(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """Inverse frequencies of RoPE: base ** (-2i / head_dim), i = 0 .. head_dim/2 - 1; float32."""
    _check_head_dim(head_dim)
    _check_base(base)
    return _inv_freq64(head_dim, base).to(torch.float32)  # (D/2,)


def rope_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles positions[n] * inv_freq[i], laid out as cat([f, f], -1).

    positions [N] (ints or floats), inv_freq [D/2]; returns (cos, sin), each [N, D] float32.
    """
    if positions.dim() != 1:
        raise ValueError(
            f"positions: expected a 1-D tensor [N], got shape {tuple(positions.shape)}"
        )
    if inv_freq.dim() != 1:
        raise ValueError(
            f"inv_freq: expected a 1-D tensor [D/2], got shape {tuple(inv_freq.shape)}"
        )
    # float64: positions in the millions keep their angles exact to float32's last bit.
    angles = torch.outer(positions.to(torch.float64), inv_freq.to(torch.float64))  # (N, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (N, D): pair i is (i, i + D/2)
    return angles.cos().to(torch.float32), angles.sin().to(torch.float32)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [..., N, D] by the tables cos, sin [N, D]: x * cos + rotate_half(x) * sin.

    rotate_half(x) = cat(-x2, x1) where x1, x2 are the first and second halves of the last
    dimension. The math runs in float32 (or x's dtype if wider); the result has x's dtype.
    """
    if x.dim() < 2 or not x.dtype.is_floating_point:
        raise ValueError(f"x: expected a float tensor [..., N, D], got {x.dtype} {list(x.shape)}")
    N, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"x: the last dimension (head_dim) must be even, got {D}")
    for name, table in (("cos", cos), ("sin", sin)):
        if tuple(table.shape) != (N, D):
            raise ValueError(f"{name}: expected shape [N, D] = {[N, D]}, got {list(table.shape)}")
    compute = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute)  # (..., N, D)
    x1, x2 = xc.chunk(2, dim=-1)  # (..., N, D/2) each
    rotated = torch.cat([-x2, x1], dim=-1)  # (..., N, D)
    return (xc * cos.to(compute) + rotated * sin.to(compute)).to(x.dtype)


# ----------------------------------------------------------------------------------------------
# Level 2: stretching RoPE past the trained length


def linear_scaled_inv_freq(head_dim: int, base: float, factor: float) -> torch.Tensor:
    """Position interpolation: inv_freq / factor, so position p turns like position p / factor."""
    _check_head_dim(head_dim)
    _check_base(base)
    _check_positive("factor", factor)
    return (_inv_freq64(head_dim, base) / factor).to(torch.float32)  # (D/2,)


def _ntk_inv_freq(head_dim: int, base: float, scale: float) -> torch.Tensor:
    """RoPE with the base raised to base * scale ** (D / (D - 2)): the slowest pair turns
    exactly `scale` times slower, the fastest (i = 0) not at all."""
    return _inv_freq64(head_dim, base * scale ** (head_dim / (head_dim - 2))).to(torch.float32)


def ntk_scaled_inv_freq(head_dim: int, base: float, factor: float) -> torch.Tensor:
    """NTK-aware scaling: base' = base * factor ** (head_dim / (head_dim - 2)). head_dim >= 4."""
    _check_head_dim(head_dim, minimum=4)
    _check_base(base)
    _check_positive("factor", factor)
    return _ntk_inv_freq(head_dim, base, factor)  # (D/2,)


def dynamic_ntk_inv_freq(
    head_dim: int, base: float, factor: float, seq_len: int, original_max_len: int
) -> torch.Tensor:
    """Dynamic NTK: NTK with the scale (factor * L / L0) - (factor - 1), L = max(seq_len, L0).

    Up to the trained length L0 = original_max_len the scale is 1: plain RoPE. head_dim >= 4.
    """
    _check_head_dim(head_dim, minimum=4)
    _check_base(base)
    _check_positive("factor", factor)
    _check_length("seq_len", seq_len, minimum=1)
    _check_length("original_max_len", original_max_len, minimum=1)
    length = max(seq_len, original_max_len)  # never shrink below the trained frequencies
    scale = factor * length / original_max_len - (factor - 1)
    return _ntk_inv_freq(head_dim, base, scale)  # (D/2,)


def _correction_pair(rotations: float, head_dim: int, base: float, original_max_len: int) -> float:
    """The (fractional) pair index i whose wavelength 2*pi*base**(2i/D) fits `rotations` times
    into original_max_len."""
    return head_dim * math.log(original_max_len / (rotations * 2 * math.pi)) / (2 * math.log(base))


def yarn_inv_freq(
    head_dim: int,
    base: float,
    factor: float,
    original_max_len: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
) -> tuple[torch.Tensor, float]:
    """YaRN: keep the fast pairs, interpolate the slow ones, ramp linearly in between.

    Pairs that turn more than beta_fast times within original_max_len keep their frequency;
    pairs that turn fewer than beta_slow times are divided by `factor`. The ramp's ends are the
    pair indices of those two rotation counts, floored and ceiled (clamped to 0 .. head_dim - 1).
    Returns (inv_freq [D/2] float32, attention_factor), attention_factor = 0.1 ln(factor) + 1
    (1.0 when factor <= 1), the factor the attention logits' temperature is corrected by.
    """
    _check_head_dim(head_dim)
    _check_base(base)
    _check_positive("factor", factor)
    _check_length("original_max_len", original_max_len, minimum=1)
    _check_positive("beta_fast", beta_fast)
    _check_positive("beta_slow", beta_slow)
    low = max(math.floor(_correction_pair(beta_fast, head_dim, base, original_max_len)), 0)
    high = min(
        math.ceil(_correction_pair(beta_slow, head_dim, base, original_max_len)), head_dim - 1
    )
    if low == high:
        high += 0.001  # a ramp of zero width would divide by zero
    pair = torch.arange(head_dim // 2, dtype=torch.float64)  # (D/2,)
    ramp = ((pair - low) / (high - low)).clamp(0, 1)  # 0: keep the frequency, 1: interpolate
    original = _inv_freq64(head_dim, base)  # (D/2,)
    inv_freq = original * (1 - ramp) + (original / factor) * ramp
    attention_factor = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return inv_freq.to(torch.float32), attention_factor


# ----------------------------------------------------------------------------------------------
# Level 3: ALiBi


def _geometric_slopes(n: int) -> list[float]:
    """2 ** (-8h / n) for h = 1 .. n: the slopes of a power-of-two head count n."""
    return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes [n_heads], float32.

    For a power of two n: 2 ** (-8h / n), h = 1 .. n. Otherwise the slopes of the largest power
    of two c below n, followed by every other slope of 2c (the 1st, 3rd, ...) until n are filled.
    """
    _check_length("n_heads", n_heads, minimum=1)
    closest = 1 << (n_heads.bit_length() - 1)  # largest power of two <= n_heads
    slopes = _geometric_slopes(closest)
    slopes += _geometric_slopes(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)  # (H,)


def alibi_bias(n_heads: int, q_len: int, k_len: int) -> torch.Tensor:
    """ALiBi's additive bias [n_heads, q_len, k_len], float32: -slope_h * (p_i - j).

    Query i sits at position p_i = i + k_len - q_len (bottom-right aligned: the last query is the
    newest key). Keys after p_i get a positive bias; masking them is the caller's business.
    """
    _check_length("q_len", q_len, minimum=0)
    _check_length("k_len", k_len, minimum=0)
    slopes = alibi_slopes(n_heads)  # (H,)
    query_pos = torch.arange(q_len) + (k_len - q_len)  # (Nq,)
    distance = query_pos[:, None] - torch.arange(k_len)[None, :]  # (Nq, Nk)
    return -slopes[:, None, None] * distance.to(torch.float32)  # (H, Nq, Nk)
