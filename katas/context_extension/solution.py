"""The context-extension kata: your solution. Read katas/context_extension/README.md first.

Run the tests with `nox -s context_extension` (or `pytest katas/context_extension`).

Conventions (those of Llama and Hugging Face Transformers): D = head_dim is even, pair i is the
two dimensions (i, i + D/2), tables are laid out as cat([f, f], -1), and
rotate_half(x) = cat(-x2, x1) over the two halves of the last dimension. Inputs are never
modified, not even for a moment during a call. Every call returns new tensors, which the caller
may change: a later call with the same arguments gives the same values. Every ValueError the
tests expect is listed in each docstring (and in the README).

Every call is checked by the harness (README, "Rules every call follows"):
- no argument is changed in place (tensors, lists), nor written to during the call (even if put
  back);
- unchanged means bit for bit, layout and autograd state included, the models and modules you
  are given too (weights, buffers, train/eval mode), and also after the call has returned;
- the work is done with PyTorch on tensors (no NumPy, no DLPack, no bit-casts, no
  .tolist() or .item() of more than 256 float elements in a call; in rope_cos_sin integer
  positions count too);
- the work happens in the call's own thread (no threads or processes);
- results are plain torch.Tensor objects, never subclasses;
- the judge (the harness, the tests, Hypothesis's settings) is left alone, and PyTorch's global
  settings (grad mode, default dtype, ...) are as they were when a call returns;
- answers are computed when asked, never remembered from earlier calls (nor by the tensors'
  identity), and two calls never return the same tensor;
- the code behaves the same whether or not it is measured;
"""

from __future__ import annotations

import torch

# Level 1: RoPE


def rope_inv_freq(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """Inverse frequencies of RoPE: inv_freq[i] = base ** (-2i / head_dim), i = 0 .. D/2 - 1.

    Returns a float32 tensor [D/2], each value the float64 power rounded once. Pair 0 turns one
    radian per position; the last pair turns slowest. base may be an int or a float. ValueError
    for a head_dim that is not an even int >= 2, or a base that is not a finite number > 1
    (base <= 1, NaN, inf).
    """
    # TODO(level 1): base ** (-arange(0, D, 2) / D), computed in float64, returned as float32
    raise NotImplementedError("level 1: rope_inv_freq is not implemented yet")


def rope_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotation tables: angles[n, i] = positions[n] * inv_freq[i].

    positions [N] (any integer or float dtype, e.g. p / factor; up to 2**31 - 1), inv_freq [D/2]
    (float32 or float64, used as given). Returns (cos, sin), each [N, D] float32, laid out as
    cat([angles, angles], -1). Form the angles, and their cos and sin, in float64 and round to
    float32 only at the end: at position 10**6 a float32 angle is off by hundredths of a radian,
    and a float32 cos near 0 many float32 steps. ValueError unless both inputs are 1-D.
    """
    # TODO(level 1): the angles in float64, their cos and sin in the cat([f, f]) layout
    raise NotImplementedError("level 1: rope_cos_sin is not implemented yet")


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate every pair of x [..., N, D] by its angle: x * cos + rotate_half(x) * sin.

    cos, sin [N, D] float32 from rope_cos_sin; rotate_half(x) = cat(-x2, x1) with
    x1 = x[..., :D/2], x2 = x[..., D/2:]. x may have any float dtype and any strides. Compute in
    float32 (float64 for float64 x) with the tables as they are, and return x's dtype. No (D, D)
    rotation matrices, by matmul or broadcasting: this is elementwise work (at most 3
    multiplications per element of x). ValueError when x is not a float tensor [..., N, D] with
    an even D, or cos or sin is not [N, D].
    """
    # TODO(level 1): upcast, x * cos + rotate_half(x) * sin, cast back to x.dtype
    raise NotImplementedError("level 1: apply_rope is not implemented yet")


# Level 2: stretching RoPE past the trained length


def linear_scaled_inv_freq(head_dim: int, base: float, factor: float) -> torch.Tensor:
    """Position interpolation: rope_inv_freq(head_dim, base) / factor, float32 [D/2].

    Position p then turns exactly like position p / factor did. ValueError for a bad head_dim or
    base (as rope_inv_freq), or a factor that is not a finite number > 0.
    """
    # TODO(level 2): divide the frequencies by the factor
    raise NotImplementedError("level 2: linear_scaled_inv_freq is not implemented yet")


def ntk_scaled_inv_freq(head_dim: int, base: float, factor: float) -> torch.Tensor:
    """NTK-aware scaling: RoPE with base' = base * factor ** (D / (D - 2)), float32 [D/2].

    Pair 0 keeps its frequency; the slowest pair becomes exactly 1/factor of itself.
    ValueError for a head_dim that is not an even int >= 4 (D - 2 would be 0), a base that is
    not a finite number > 1, or a factor that is not a finite number > 0.
    """
    # TODO(level 2): RoPE with the larger base
    raise NotImplementedError("level 2: ntk_scaled_inv_freq is not implemented yet")


def dynamic_ntk_inv_freq(
    head_dim: int, base: float, factor: float, seq_len: int, original_max_len: int
) -> torch.Tensor:
    """Dynamic NTK: NTK whose scale follows the current length, float32 [D/2].

    base' = base * ((factor * L / L0) - (factor - 1)) ** (D / (D - 2)), L = max(seq_len, L0),
    L0 = original_max_len. Up to L0 this is plain RoPE. ValueError for a head_dim that is not an
    even int >= 4, a bad base or factor (as ntk_scaled_inv_freq), or a seq_len or
    original_max_len that is not an int >= 1.
    """
    # TODO(level 2): NTK with the scale of the current length
    raise NotImplementedError("level 2: dynamic_ntk_inv_freq is not implemented yet")


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
    attention_factor = 0.1 * ln(factor) + 1, or 1.0 when factor <= 1: a Python float.
    ValueError for a head_dim that is not an even int >= 2, a base that is not a finite number
    > 1, an original_max_len that is not an int >= 1, or a factor, beta_fast or beta_slow that
    is not a finite number > 0.
    """
    # TODO(level 2): the ramp between kept and interpolated pairs, and the attention factor
    raise NotImplementedError("level 2: yarn_inv_freq is not implemented yet")


# Level 3: ALiBi


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes, float32 [n_heads].

    For n a power of two: 2 ** (-8h / n), h = 1 .. n (8 heads: 1/2, 1/4, ..., 1/256).
    Otherwise: the slopes for c, the largest power of two below n, then every other slope of
    2c (its 1st, 3rd, 5th, ...) until there are n. ValueError for n_heads not an int >= 1.
    """
    # TODO(level 3): the geometric slopes, interleaved for head counts not a power of two
    raise NotImplementedError("level 3: alibi_slopes is not implemented yet")


def alibi_bias(n_heads: int, q_len: int, k_len: int) -> torch.Tensor:
    """ALiBi's additive score bias, float32 [n_heads, q_len, k_len].

    bias[h, i, j] = -slope_h * (p_i - j) with p_i = i + k_len - q_len: bottom-right aligned, the
    last query is the newest key. No causal mask inside (keys after p_i get a positive bias).
    Any lengths >= 0, e.g. one decoding query over 10**5 keys. Distances stay exact past 2**24
    keys, where float32 can no longer count by one: count positions in integers and convert
    only the distances. ValueError for n_heads not an int >= 1, or q_len or k_len not an
    int >= 0.
    """
    # TODO(level 3): -slope * distance, with the queries aligned bottom-right
    raise NotImplementedError("level 3: alibi_bias is not implemented yet")
