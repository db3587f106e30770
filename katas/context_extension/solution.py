"""The context-extension kata: your solution. Read katas/context_extension/README.md first.

Run the tests with `nox -s context_extension` (or `pytest katas/context_extension`).

Conventions (those of Llama and Hugging Face Transformers): D = head_dim is even, pair i is the
two dimensions (i, i + D/2), tables are laid out as cat([f, f], -1), and
rotate_half(x) = cat(-x2, x1) over the two halves of the last dimension.
"""

from __future__ import annotations

import torch

# Level 1: RoPE


def rope_inv_freq(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """Inverse frequencies of RoPE: inv_freq[i] = base ** (-2i / head_dim), i = 0 .. D/2 - 1.

    Returns a float32 tensor [D/2]. Pair 0 turns one radian per position; the last pair turns
    slowest. ValueError for an odd or non-positive head_dim, or a base <= 1.
    """
    # TODO: task 1, the frequencies
    raise NotImplementedError("not implemented yet — start with katas/context_extension/README.md")


def rope_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotation tables: angles[n, i] = positions[n] * inv_freq[i].

    positions [N] (ints or floats, e.g. p / factor), inv_freq [D/2]. Returns (cos, sin), each
    [N, D] float32, laid out as cat([angles, angles], -1). Form the angles in float64: at
    position 100 000, a float32 angle is off by thousandths of a radian. ValueError unless both
    inputs are 1-D.
    """
    # TODO: task 2, the cos/sin tables
    raise NotImplementedError("not implemented yet — start with katas/context_extension/README.md")


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate every pair of x [..., N, D] by its angle: x * cos + rotate_half(x) * sin.

    cos, sin [N, D] from rope_cos_sin; rotate_half(x) = cat(-x2, x1) with x1 = x[..., :D/2],
    x2 = x[..., D/2:]. Compute in float32 (at least) and return x's dtype. No (D, D) rotation
    matrices: this is elementwise work. ValueError when the shapes do not match.
    """
    # TODO: task 3, the rotation
    raise NotImplementedError("not implemented yet — start with katas/context_extension/README.md")


# Level 2: stretching RoPE past the trained length


def linear_scaled_inv_freq(head_dim: int, base: float, factor: float) -> torch.Tensor:
    """Position interpolation: rope_inv_freq(head_dim, base) / factor, float32 [D/2].

    Position p then turns exactly like position p / factor did. ValueError for factor <= 0.
    """
    # TODO: task 4, position interpolation
    raise NotImplementedError("not implemented yet — start with katas/context_extension/README.md")


def ntk_scaled_inv_freq(head_dim: int, base: float, factor: float) -> torch.Tensor:
    """NTK-aware scaling: RoPE with base' = base * factor ** (D / (D - 2)), float32 [D/2].

    Pair 0 keeps its frequency; the slowest pair becomes exactly 1/factor of itself.
    ValueError for head_dim < 4 (D - 2 would be 0) or factor <= 0.
    """
    # TODO: task 5, NTK
    raise NotImplementedError("not implemented yet — start with katas/context_extension/README.md")


def dynamic_ntk_inv_freq(
    head_dim: int, base: float, factor: float, seq_len: int, original_max_len: int
) -> torch.Tensor:
    """Dynamic NTK: NTK whose scale follows the current length, float32 [D/2].

    base' = base * ((factor * L / L0) - (factor - 1)) ** (D / (D - 2)), L = max(seq_len, L0),
    L0 = original_max_len. Up to L0 this is plain RoPE. ValueError for head_dim < 4,
    factor <= 0, seq_len < 1 or original_max_len < 1.
    """
    # TODO: task 6, dynamic NTK
    raise NotImplementedError("not implemented yet — start with katas/context_extension/README.md")


def yarn_inv_freq(
    head_dim: int,
    base: float,
    factor: float,
    original_max_len: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
) -> tuple[torch.Tensor, float]:
    """YaRN: (inv_freq float32 [D/2], attention_factor).

    Pair index i with r rotations within L0 = original_max_len:
        i(r) = D * ln(L0 / (2 pi r)) / (2 ln base)
    low = max(floor(i(beta_fast)), 0), high = min(ceil(i(beta_slow)), D - 1); when low == high,
    high += 0.001. ramp[i] = clamp((i - low) / (high - low), 0, 1), then
        inv_freq = original * (1 - ramp) + (original / factor) * ramp
    (fast pairs keep their frequency, slow pairs are interpolated).
    attention_factor = 0.1 * ln(factor) + 1, or 1.0 when factor <= 1.
    ValueError for bad head_dim, factor <= 0, original_max_len < 1, or betas <= 0.
    """
    # TODO: task 7, YaRN
    raise NotImplementedError("not implemented yet — start with katas/context_extension/README.md")


# Level 2: ALiBi


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes, float32 [n_heads].

    For n a power of two: 2 ** (-8h / n), h = 1 .. n (8 heads: 1/2, 1/4, ..., 1/256).
    Otherwise: the slopes for c, the largest power of two below n, then every other slope of
    2c (its 1st, 3rd, 5th, ...) until there are n. ValueError for n_heads < 1.
    """
    # TODO: task 8, ALiBi slopes
    raise NotImplementedError("not implemented yet — start with katas/context_extension/README.md")


def alibi_bias(n_heads: int, q_len: int, k_len: int) -> torch.Tensor:
    """ALiBi's additive score bias, float32 [n_heads, q_len, k_len].

    bias[h, i, j] = -slope_h * (p_i - j) with p_i = i + k_len - q_len: bottom-right aligned, the
    last query is the newest key. No causal mask inside (keys after p_i get a positive bias).
    ValueError for n_heads < 1 or a negative length.
    """
    # TODO: task 9, ALiBi bias
    raise NotImplementedError("not implemented yet — start with katas/context_extension/README.md")
