"""Tests for the context-extension kata.

Run: `nox -s context_extension` or `pytest katas/context_extension [--impl ...]`.

Order: fixed known values first (cheap, and they catch the wrong-but-plausible variants that
still satisfy every property), the cost of apply_rope, then the properties, float64 oracles on
drawn shapes, bad input and the experiment.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.cost import count_flops, largest_tensor
from grading.devices import float_dtypes
from grading.strategies import lengths, randn, seeds
from grading.tolerance import assert_close

F32 = torch.float32

# ----------------------------------------------------------------------------------------------
# What to draw: the sizes and settings real models use, plus the awkward ones.

head_dims = st.one_of(st.sampled_from([2, 4, 8, 64, 128]), st.integers(1, 80).map(lambda h: 2 * h))
ntk_head_dims = st.one_of(st.sampled_from([4, 6, 64, 128]), st.integers(2, 80).map(lambda h: 2 * h))
bases = st.one_of(st.sampled_from([10000.0, 500000.0, 1e6, 100.0]), st.floats(1.5, 1e6))
# Stretch factors > 1 (extending the context), and any factor > 0.
stretches = st.one_of(st.sampled_from([2.0, 4.0, 8.0, 32.0, 1.5]), st.floats(1.01, 64.0))
factors = st.one_of(stretches, st.sampled_from([1.0, 0.5]), st.floats(0.1, 1.0))
trained_lengths = st.one_of(st.sampled_from([2048, 4096, 8192, 32768]), st.integers(1, 10_000))


# ----------------------------------------------------------------------------------------------
# Float64 oracles, written pair by pair with Python's math module.


def inv_freq_oracle(head_dim: int, base: float) -> torch.Tensor:
    return torch.tensor(
        [base ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64
    )


def cos_sin_oracle(positions: torch.Tensor, inv_freq: torch.Tensor):
    """cos, sin [N, D] in float64 for the given positions and (float32) frequencies."""
    angles = [[float(p) * float(f) for f in inv_freq] for p in positions.tolist()]
    cos = torch.tensor([[math.cos(a) for a in row] * 2 for row in angles], dtype=torch.float64)
    sin = torch.tensor([[math.sin(a) for a in row] * 2 for row in angles], dtype=torch.float64)
    return cos, sin


def rotate_pairs_oracle(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn each pair (a, b) = (x[i], x[i + D/2]) by its angle: (a c - b s, a s + b c)."""
    x, cos, sin = x.double(), cos.double(), sin.double()
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    c, s = cos[:, :half], sin[:, :half]
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


def ntk_oracle(head_dim: int, base: float, scale: float) -> torch.Tensor:
    return inv_freq_oracle(head_dim, base * scale ** (head_dim / (head_dim - 2)))


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


# ----------------------------------------------------------------------------------------------
# Known values, derived by hand


def test_rope_inv_freq_known_values(impl):
    # 10000 ** (-2i/8) = 10 ** (-i): one decade per pair.
    got = impl.rope_inv_freq(8, 10000.0)
    assert got.dtype == F32, f"rope_inv_freq must return float32, got {got.dtype}"
    expected = torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64)
    assert_close(
        got,
        expected,
        hint="inv_freq[i] = base ** (-2i / head_dim): the exponent is 2i, not i, and there are "
        "head_dim / 2 of them",
    )
    assert_close(impl.rope_inv_freq(4, 100.0), torch.tensor([1.0, 0.1], dtype=torch.float64))
    assert_close(impl.rope_inv_freq(8), expected, hint="the default base is 10000")


def test_rope_cos_sin_layout_known_values(impl):
    positions = torch.tensor([0.0, 1.0, 2.5])
    cos, sin = impl.rope_cos_sin(positions, torch.tensor([1.0, 0.1]))
    assert cos.dtype == F32 and sin.dtype == F32, f"tables must be float32, got {cos.dtype}"
    angles = [[0.0, 0.0], [1.0, 0.1], [2.5, 0.25]]
    expected_cos = torch.tensor(
        [[math.cos(a), math.cos(b)] * 2 for a, b in angles], dtype=torch.float64
    )
    expected_sin = torch.tensor(
        [[math.sin(a), math.sin(b)] * 2 for a, b in angles], dtype=torch.float64
    )
    hint = (
        "row n is cat([f, f]) with f = positions[n] * inv_freq: the half-split layout of "
        "Llama, not the interleaved (f0, f0, f1, f1) one; fractional positions stay fractional"
    )
    assert_close(cos, expected_cos, name="cos", hint=hint)
    assert_close(sin, expected_sin, name="sin", hint=hint)


def test_apply_rope_known_values_at_position_1(impl):
    # head_dim 4, base 100: pairs (x0, x2) turn by 1 radian and (x1, x3) by 0.1 radian.
    c1, s1, c2, s2 = math.cos(1.0), math.sin(1.0), math.cos(0.1), math.sin(0.1)
    cos = torch.tensor([[c1, c2, c1, c2]])
    sin = torch.tensor([[s1, s2, s1, s2]])
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    expected = torch.tensor(
        [[-1.9841106485555495, 1.590674663968739, 2.4623779024123156, 4.17968349440576]],
        dtype=torch.float64,
    )  # (1·c1 - 3·s1, 2·c2 - 4·s2, 3·c1 + 1·s1, 4·c2 + 2·s2)
    assert_close(
        impl.apply_rope(x, cos, sin),
        expected,
        hint="x * cos + rotate_half(x) * sin with rotate_half(x) = cat(-x2, x1): dimension i "
        "pairs with i + D/2 (not i + 1), and the minus sign goes on the second half",
    )
    half = impl.apply_rope(x.half(), cos, sin)
    assert half.dtype == torch.float16, (
        f"apply_rope must return x's dtype: float16 in, {half.dtype} out. Multiplying by the "
        "float32 tables promotes to float32; cast the result back"
    )


def test_long_positions_keep_float32_accuracy(impl):
    # Positions of long contexts: a float32 angle at 10^6 is off by up to 0.03 radian.
    positions = torch.tensor([0, 1, 4095, 65_537, 131_071, 1_000_003], dtype=torch.int64)
    inv_freq = impl.rope_inv_freq(128, 500000.0)
    expected_cos, expected_sin = cos_sin_oracle(positions, inv_freq)
    hint = (
        "form the angles positions * inv_freq in float64 and round cos/sin to float32 only at "
        "the end; float16 or float32 positions or angles lose the last digits of long positions"
    )
    for kind in (torch.int64, torch.int32, torch.float64):
        cos, sin = impl.rope_cos_sin(positions.to(kind), inv_freq)
        assert_close(cos, expected_cos, name=f"cos ({kind} positions)", hint=hint)
        assert_close(sin, expected_sin, name=f"sin ({kind} positions)", hint=hint)


def test_scaled_frequencies_known_values(impl):
    f64 = torch.float64
    # head_dim 4, base 100: plain RoPE is [1, 0.1].
    assert_close(
        impl.linear_scaled_inv_freq(4, 100.0, 4.0),
        torch.tensor([0.25, 0.025], dtype=f64),
        hint="position interpolation divides every frequency by the factor",
    )
    # base' = 100 * 4 ** (4 / 2) = 1600: [1, 1/40], the slowest pair exactly 1/4 of 0.1.
    assert_close(
        impl.ntk_scaled_inv_freq(4, 100.0, 4.0),
        torch.tensor([1.0, 0.025], dtype=f64),
        hint="NTK raises the base to base * factor ** (d / (d - 2))",
    )
    # seq_len 20, L0 10, factor 2: base' = 100 * (2 * 20/10 - 1) ** 2 = 900: [1, 1/30].
    assert_close(
        impl.dynamic_ntk_inv_freq(4, 100.0, 2.0, 20, 10),
        torch.tensor([1.0, 1 / 30], dtype=f64),
        hint="dynamic NTK: base * ((factor * L / L0) - (factor - 1)) ** (d / (d - 2))",
    )
    # Shorter than L0: plain RoPE.
    assert_close(
        impl.dynamic_ntk_inv_freq(4, 100.0, 2.0, 5, 10),
        torch.tensor([1.0, 0.1], dtype=f64),
        hint="dynamic NTK uses L = max(seq_len, L0): below L0 nothing changes",
    )


@pytest.mark.parametrize(
    "args, expected, expected_attention",
    [
        # D 8, base 10^4: pair i(r) = log10(L0 / (2 pi r)). L0 2048: i(32) = 1.008 -> low 1,
        # i(1) = 2.513 -> high 3; ramp [0, 0, 1/2, 1] between [1, .1, .01, .001] and its quarter.
        ((8, 10000.0, 4.0, 2048), [1.0, 0.1, 0.00625, 0.00025], 0.1 * math.log(4) + 1),
        # L0 4: i(32) = -1.7 -> low 0, i(1) = -0.196 -> high 0: a zero-width ramp, high = 0.001.
        ((8, 10000.0, 4.0, 4), [1.0, 0.025, 0.0025, 0.00025], 0.1 * math.log(4) + 1),
        # factor 1/2 shrinks: ramp as in the first case, no attention correction.
        ((8, 10000.0, 0.5, 2048), [1.0, 0.1, 0.015, 0.002], 1.0),
        # beta_fast 4, beta_slow 2 at L0 2048: i(4) = 1.91 -> 1, i(2) = 2.21 -> 3.
        ((8, 10000.0, 2.0, 2048, 4.0, 2.0), [1.0, 0.1, 0.0075, 0.0005], 0.1 * math.log(2) + 1),
    ],
    ids=["L0 2048", "zero-width ramp", "factor below 1", "other betas"],
)
def test_yarn_known_values(impl, args, expected, expected_attention):
    inv_freq, attention_factor = impl.yarn_inv_freq(*args)
    assert inv_freq.dtype == F32, f"yarn inv_freq must be float32, got {inv_freq.dtype}"
    assert_close(
        inv_freq,
        torch.tensor(expected, dtype=torch.float64),
        name="yarn inv_freq",
        hint="low = floor(i(beta_fast)), high = ceil(i(beta_slow)); pairs below low keep "
        "their frequency, pairs above high are divided by the factor; a zero-width ramp "
        "gets high += 0.001",
    )
    assert math.isclose(attention_factor, expected_attention, rel_tol=1e-9), (
        f"attention_factor: expected {expected_attention:.6f}, got {attention_factor}: "
        "0.1 * ln(factor) + 1 (natural log), and exactly 1.0 when factor <= 1"
    )


def test_alibi_slopes_known_values(impl):
    got = impl.alibi_slopes(8)
    assert got.dtype == F32, f"alibi_slopes must return float32, got {got.dtype}"
    assert_close(
        got,
        torch.tensor([2.0**-h for h in range(1, 9)], dtype=torch.float64),
        hint="8 heads: 1/2, 1/4, ..., 1/256",
    )
    # 12 heads: the 8-head slopes, then every other slope of 16 heads: 2^-0.5, 2^-1.5, ...
    twelve = [2.0**-h for h in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    hint = (
        "for a head count that is not a power of two, take the slopes of the power of two "
        "below it, then the 1st, 3rd, 5th ... slopes of twice that power"
    )
    assert_close(impl.alibi_slopes(12), torch.tensor(twelve, dtype=torch.float64), hint=hint)
    six = [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]
    assert_close(impl.alibi_slopes(6), torch.tensor(six, dtype=torch.float64), hint=hint)
    assert_close(impl.alibi_slopes(1), torch.tensor([2.0**-8], dtype=torch.float64), hint=hint)


def test_alibi_bias_known_values(impl):
    # 2 heads (slopes 1/16, 1/256), 2 queries at positions 1 and 2, 3 keys at 0, 1, 2.
    s = torch.tensor([1 / 16, 1 / 256], dtype=torch.float64)[:, None, None]
    expected = s * torch.tensor([[[-1.0, 0.0, 1.0], [-2.0, -1.0, 0.0]]], dtype=torch.float64)
    got = impl.alibi_bias(2, 2, 3)
    assert got.dtype == F32, f"alibi_bias must return float32, got {got.dtype}"
    assert_close(
        got,
        expected,
        hint="bias = -slope * (p_i - j) with p_i = i + k_len - q_len: the last query is the "
        "newest key (bias 0 there), older keys get a negative bias",
    )


# ----------------------------------------------------------------------------------------------
# Cost: RoPE is elementwise work


def test_apply_rope_is_elementwise(impl):
    x = randn((2, 3, 17, 64), seed=0)
    cos64, sin64 = cos_sin_oracle(torch.arange(17), inv_freq_oracle(64, 10000.0))
    cos, sin = cos64.float(), sin64.float()
    _, flops = count_flops(impl.apply_rope, x, cos, sin)
    _, record = largest_tensor(impl.apply_rope, x, cos, sin)
    assert flops == 0, (
        f"apply_rope spent {flops} matmul FLOPs: a rotation per pair is two multiplies and an add, "
        "not a (D, D) rotation matrix"
    )
    assert record.numel <= 2 * x.numel(), (
        f"apply_rope made a tensor of {record}, more than twice x ({x.numel()} elements): "
        "work on the halves of x, elementwise"
    )


# ----------------------------------------------------------------------------------------------
# Properties


@given(
    d=head_dims,
    base=bases,
    m=st.integers(0, 500),
    n=st.integers(0, 500),
    shift=st.integers(0, 500),
    seed=seeds(),
)
def test_rope_scores_depend_only_on_distance(impl, d, base, m, n, shift, seed):
    q, k = randn((d,), seed=seed), randn((d,), seed=seed + 1)
    positions = torch.tensor([m, n, m + shift, n + shift])
    cos, sin = impl.rope_cos_sin(positions, impl.rope_inv_freq(d, base))
    rotated = impl.apply_rope(torch.stack([q, k, q, k]), cos, sin).double()  # (4, d)
    before = rotated[0] @ rotated[1]
    after = rotated[2] @ rotated[3]
    assert_close(
        after.reshape(1),
        before.reshape(1),
        dtype=F32,
        scale=float(q.norm() * k.norm()),
        name="<R_m q, R_n k>",
        hint="shifting both positions must not change the score: "
        "the tables must pair cos and sin of the same angle in both halves",
    )


@given(
    d=head_dims,
    n=lengths(33),
    batch=st.integers(1, 3),
    dtype=st.sampled_from(float_dtypes()),
    seed=seeds(),
)
def test_rope_preserves_norms(impl, d, n, batch, dtype, seed):
    x = randn((batch, n, d), seed=seed, dtype=dtype)
    positions = torch.randint(0, 10_000, (n,), generator=torch.Generator().manual_seed(seed))
    cos, sin = impl.rope_cos_sin(positions, impl.rope_inv_freq(d))
    out = impl.apply_rope(x, cos, sin)
    assert_close(
        out.double().norm(dim=-1),
        x.double().norm(dim=-1),
        dtype=dtype,
        name="norms",
        hint="a rotation keeps every vector's length: cos and sin of one angle per pair",
    )


@given(d=head_dims, n=lengths(17), dtype=st.sampled_from(float_dtypes()), seed=seeds())
def test_position_zero_is_the_identity(impl, d, n, dtype, seed):
    x = randn((n, d), seed=seed, dtype=dtype)
    cos, sin = impl.rope_cos_sin(torch.zeros(n, dtype=torch.long), impl.rope_inv_freq(d))
    out = impl.apply_rope(x, cos, sin)
    assert out.dtype == dtype, f"apply_rope must keep x's dtype {dtype}, got {out.dtype}"
    assert_close(out, x.double(), hint="at position 0 every angle is 0: cos 1, sin 0")


@given(d=head_dims, base=bases, factor=stretches, data=st.data())
def test_interpolation_is_rope_at_scaled_positions(impl, d, base, factor, data):
    # Positions up to 8 * factor: scaled down, they are the trained positions 0 .. 8.
    positions = torch.tensor(
        data.draw(st.lists(st.integers(0, int(8 * factor)), min_size=1, max_size=8))
    )
    note(f"positions {positions.tolist()}")
    stretched = impl.rope_cos_sin(positions, impl.linear_scaled_inv_freq(d, base, factor))
    squeezed = impl.rope_cos_sin(positions.double() / factor, impl.rope_inv_freq(d, base))
    hint = "linear scaling divides inv_freq by the factor, so position p turns like p / factor"
    assert_close(stretched[0], squeezed[0].double(), name="cos", hint=hint)
    assert_close(stretched[1], squeezed[1].double(), name="sin", hint=hint)


@given(d=ntk_head_dims, base=bases, factor=factors)
def test_ntk_keeps_the_fastest_pair_and_slows_the_slowest_by_the_factor(impl, d, base, factor):
    got = impl.ntk_scaled_inv_freq(d, base, factor)
    slowest = inv_freq_oracle(d, base)[-1] / factor
    assert_close(
        got[:1],
        torch.ones(1, dtype=torch.float64),
        name="fastest pair",
        hint="pair 0 has exponent 0: any base leaves it at 1",
    )
    assert_close(
        got[-1:],
        slowest.reshape(1),
        name="slowest pair",
        hint="base * factor ** (d / (d - 2)) makes the slowest pair exactly 1/factor of "
        "itself; without the d / (d - 2) exponent it falls short",
    )


@given(d=ntk_head_dims, base=bases, factor=factors, trained=trained_lengths, data=st.data())
def test_dynamic_ntk_is_plain_rope_within_the_trained_length(impl, d, base, factor, trained, data):
    seq_len = data.draw(st.integers(1, trained))
    got = impl.dynamic_ntk_inv_freq(d, base, factor, seq_len, trained)
    assert_close(
        got,
        inv_freq_oracle(d, base),
        hint="up to original_max_len dynamic NTK changes "
        "nothing: L = max(seq_len, original_max_len)",
    )


@given(d=head_dims, base=bases, factor=factors, trained=trained_lengths)
def test_yarn_lies_between_interpolated_and_original(impl, d, base, factor, trained):
    got, _ = impl.yarn_inv_freq(d, base, factor, trained)
    original = inv_freq_oracle(d, base)
    lo = torch.minimum(original, original / factor) * (1 - 1e-6)  # float32 rounding
    hi = torch.maximum(original, original / factor) * (1 + 1e-6)
    outside = ((got.double() < lo) | (got.double() > hi)).nonzero().flatten().tolist()
    assert not outside, (
        f"yarn frequencies of pairs {outside} lie outside [original / factor, original]: "
        "each one must be a blend of the two with a weight in [0, 1]"
    )


@given(d=head_dims, base=bases, trained=trained_lengths)
def test_yarn_with_factor_one_is_plain_rope(impl, d, base, trained):
    got, attention_factor = impl.yarn_inv_freq(d, base, 1.0, trained)
    assert_close(got, inv_freq_oracle(d, base), hint="factor 1: nothing to interpolate")
    assert attention_factor == 1.0, (
        f"factor 1 needs no attention correction, got {attention_factor}"
    )


@given(n_heads=st.integers(1, 100))
def test_alibi_slopes_lie_in_zero_one(impl, n_heads):
    slopes = impl.alibi_slopes(n_heads)
    assert tuple(slopes.shape) == (n_heads,), (
        f"expected {n_heads} slopes, got {tuple(slopes.shape)}"
    )
    assert bool(((slopes > 0) & (slopes < 1)).all()), (
        f"slopes must lie in (0, 1): {slopes.tolist()}"
    )
    assert len(set(slopes.tolist())) == n_heads, "every head needs its own slope"


@given(n_heads=st.integers(1, 12), q_len=lengths(20), k_len=lengths(20))
def test_alibi_bias_depends_only_on_distance(impl, n_heads, q_len, k_len):
    bias = impl.alibi_bias(n_heads, q_len, k_len)
    assert tuple(bias.shape) == (n_heads, q_len, k_len), f"wrong shape {tuple(bias.shape)}"
    assert torch.equal(bias[:, 1:, 1:], bias[:, :-1, :-1]), "the bias must depend only on p_i - j"
    newest = [(i, i + k_len - q_len) for i in range(q_len) if 0 <= i + k_len - q_len < k_len]
    assert all(float(bias[:, i, j].abs().max()) == 0 for i, j in newest), (
        "query i sits at p_i = i + k_len - q_len (bottom-right): its bias at key p_i must be 0"
    )


# ----------------------------------------------------------------------------------------------
# Float64 oracles on drawn shapes


@given(d=head_dims, base=bases)
def test_rope_inv_freq_matches_oracle(impl, d, base):
    assert_close(impl.rope_inv_freq(d, base), inv_freq_oracle(d, base))


@given(d=head_dims, base=bases, n=lengths(40), fractional=st.booleans(), seed=seeds())
def test_rope_cos_sin_matches_oracle(impl, d, base, n, fractional, seed):
    gen = torch.Generator().manual_seed(seed)
    positions = torch.randint(0, 100_000, (n,), generator=gen)
    if fractional:
        positions = positions / 3.0  # float positions, as interpolation makes them
    kept = positions.clone()
    inv_freq = impl.rope_inv_freq(d, base)
    cos, sin = impl.rope_cos_sin(positions, inv_freq)
    expected_cos, expected_sin = cos_sin_oracle(positions, inv_freq)
    assert_close(cos, expected_cos, name="cos", hint="angles in float64, cat([f, f]) layout")
    assert_close(sin, expected_sin, name="sin", hint="angles in float64, cat([f, f]) layout")
    assert torch.equal(positions, kept), "rope_cos_sin modified its positions"


@given(
    d=head_dims,
    heads=st.integers(1, 3),
    n=lengths(33),
    dtype=st.sampled_from(float_dtypes()),
    seed=seeds(),
)
def test_apply_rope_matches_oracle(impl, d, heads, n, dtype, seed):
    x = randn((2, heads, n, d), seed=seed, dtype=dtype)
    positions = torch.randint(0, 4096, (n,), generator=torch.Generator().manual_seed(seed))
    cos64, sin64 = cos_sin_oracle(positions, inv_freq_oracle(d, 10000.0))
    cos, sin = cos64.float(), sin64.float()
    kept = (x.clone(), cos.clone(), sin.clone())
    out = impl.apply_rope(x, cos, sin)
    assert out.dtype == dtype, f"apply_rope must return x's dtype {dtype}, got {out.dtype}"
    assert_close(
        out,
        rotate_pairs_oracle(x, cos, sin),
        hint="pair (x[i], x[i + D/2]) turns to "
        "(a cos - b sin, a sin + b cos); compute in float32 and cast back at the end",
    )
    assert all(torch.equal(a, b) for a, b in zip((x, cos, sin), kept, strict=True)), (
        "apply_rope modified its input"
    )


@given(d=head_dims, base=bases, factor=factors)
def test_linear_scaled_inv_freq_matches_oracle(impl, d, base, factor):
    assert_close(
        impl.linear_scaled_inv_freq(d, base, factor),
        inv_freq_oracle(d, base) / factor,
        hint="position interpolation: inv_freq / factor",
    )


@given(d=ntk_head_dims, base=bases, factor=factors)
def test_ntk_scaled_inv_freq_matches_oracle(impl, d, base, factor):
    assert_close(
        impl.ntk_scaled_inv_freq(d, base, factor),
        ntk_oracle(d, base, factor),
        hint="base' = base * factor ** (d / (d - 2))",
    )


@given(d=ntk_head_dims, base=bases, factor=factors, trained=trained_lengths, data=st.data())
def test_dynamic_ntk_inv_freq_matches_oracle(impl, d, base, factor, trained, data):
    seq_len = data.draw(st.integers(1, 8 * trained))
    length = max(seq_len, trained)
    expected = ntk_oracle(d, base, factor * length / trained - (factor - 1))
    assert_close(
        impl.dynamic_ntk_inv_freq(d, base, factor, seq_len, trained),
        expected,
        hint="base * ((factor * L / L0) - (factor - 1)) ** (d / (d - 2)), L = max(seq_len, L0)",
    )


@given(
    d=head_dims,
    base=bases,
    factor=factors,
    trained=trained_lengths,
    betas=st.sampled_from([(32.0, 1.0), (16.0, 2.0), (4.0, 0.5)]),
)
def test_yarn_inv_freq_matches_oracle(impl, d, base, factor, trained, betas):
    expected, expected_attention = yarn_oracle(d, base, factor, trained, *betas)
    got, attention_factor = impl.yarn_inv_freq(d, base, factor, trained, *betas)
    assert_close(
        got,
        expected,
        name="yarn inv_freq",
        hint="check low/high (floor, ceil, clamped "
        "to 0 .. head_dim - 1) and which end of the ramp keeps the original frequency",
    )
    assert math.isclose(attention_factor, expected_attention, rel_tol=1e-9), (
        f"attention_factor: expected {expected_attention}, got {attention_factor}"
    )


@given(n_heads=st.integers(1, 100))
def test_alibi_slopes_match_the_paper(impl, n_heads):
    expected = torch.tensor(alibi_slopes_oracle(n_heads), dtype=torch.float64)
    assert_close(
        impl.alibi_slopes(n_heads),
        expected,
        hint="the paper's rule for head counts "
        "that are not powers of two interleaves the extra slopes",
    )


@given(n_heads=st.integers(1, 12), q_len=lengths(40), k_len=lengths(40))
def test_alibi_bias_matches_oracle(impl, n_heads, q_len, k_len):
    slopes = alibi_slopes_oracle(n_heads)
    expected = torch.tensor(
        [
            [[-s * (i + k_len - q_len - j) for j in range(k_len)] for i in range(q_len)]
            for s in slopes
        ],
        dtype=torch.float64,
    )
    assert_close(
        impl.alibi_bias(n_heads, q_len, k_len),
        expected,
        hint="-slope_h * (p_i - j), p_i = i + k_len - q_len",
    )


# ----------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    "name, args",
    [
        ("rope_inv_freq", (7,)),
        ("rope_inv_freq", (0,)),
        ("rope_inv_freq", (-4,)),
        ("rope_inv_freq", (8, 1.0)),
        ("linear_scaled_inv_freq", (8, 10000.0, 0.0)),
        ("linear_scaled_inv_freq", (9, 10000.0, 2.0)),
        ("ntk_scaled_inv_freq", (8, 10000.0, -1.0)),
        ("ntk_scaled_inv_freq", (2, 10000.0, 2.0)),
        ("dynamic_ntk_inv_freq", (8, 10000.0, 0.0, 100, 50)),
        ("dynamic_ntk_inv_freq", (7, 10000.0, 2.0, 100, 50)),
        ("dynamic_ntk_inv_freq", (8, 10000.0, 2.0, 100, 0)),
        ("yarn_inv_freq", (8, 10000.0, 0.0, 2048)),
        ("yarn_inv_freq", (5, 10000.0, 2.0, 2048)),
        ("alibi_slopes", (0,)),
        ("alibi_bias", (0, 4, 4)),
        ("alibi_bias", (4, -1, 4)),
    ],
)
def test_bad_arguments_raise_value_error(impl, name, args):
    with pytest.raises(ValueError):
        getattr(impl, name)(*args)


def test_mismatched_shapes_raise_value_error(impl):
    inv_freq = torch.tensor([1.0, 0.1])
    with pytest.raises(ValueError):
        impl.rope_cos_sin(torch.zeros(2, 3), inv_freq)  # positions must be [N]
    cos, sin = torch.ones(5, 4), torch.zeros(5, 4)
    with pytest.raises(ValueError):
        impl.apply_rope(torch.zeros(2, 6, 4), cos, sin)  # N = 6 vs tables for 5 positions
    with pytest.raises(ValueError):
        impl.apply_rope(torch.zeros(2, 5, 6), cos, sin)  # D = 6 vs tables for 4
    with pytest.raises(ValueError):
        impl.apply_rope(torch.zeros(5, 4), cos, torch.zeros(4, 4))  # sin for 4 positions


# ----------------------------------------------------------------------------------------------
# Level 3: the experiment runs and shows every method


def test_experiment_prints_a_table_per_method(impl):
    from katas.context_extension.experiment import report

    text = report(impl, head_dim=8, trained=64, factor=4.0)
    for method in ("plain", "linear", "ntk", "dynamic", "yarn", "alibi"):
        assert method in text, f"the experiment's report should mention {method}:\n{text}"
