"""Level 2 of the context-extension kata: stretching RoPE past the trained length.

Position interpolation, NTK, dynamic NTK and YaRN: bad input, known values, properties, then
float64 oracles on drawn head dims, bases, factors and trained lengths, edges included.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.cost import measure
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.tolerance import assert_close
from katas.context_extension.cases import (
    bases,
    dynamic_ntk_oracle,
    factors,
    head_dims,
    inv_freq_oracle,
    ntk_head_dims,
    ntk_oracle,
    stretches,
    trained_lengths,
    yarn_betas,
    yarn_oracle,
)

F32 = torch.float32
F64 = torch.float64
NAN, INF = math.nan, math.inf

# ----------------------------------------------------------------------------------------------
# Bad input


def _bad_calls() -> list[BadCall]:
    def call(name, *args, why):
        text = ", ".join(repr(a) for a in args)
        return BadCall(f"{name}({text})", why, lambda m: getattr(m, name)(*args))

    calls = []
    for name, extra in [
        ("linear_scaled_inv_freq", ()),
        ("ntk_scaled_inv_freq", ()),
        ("dynamic_ntk_inv_freq", (100, 50)),
        ("yarn_inv_freq", (2048,)),
    ]:
        calls += [
            call(name, 7, 10000.0, 2.0, *extra, why=f"{name}: odd head_dim"),
            call(name, 0, 10000.0, 2.0, *extra, why=f"{name}: head_dim 0"),
            call(name, 8, 1.0, 2.0, *extra, why=f"{name}: base 1"),
            call(name, 8, INF, 2.0, *extra, why=f"{name}: base inf"),
            call(name, 8, 10000.0, 0.0, *extra, why=f"{name}: factor 0"),
            call(name, 8, 10000.0, -1.0, *extra, why=f"{name}: negative factor"),
            call(name, 8, 10000.0, NAN, *extra, why=f"{name}: factor NaN"),
            call(name, 8, 10000.0, INF, *extra, why=f"{name}: factor inf"),
        ]
    return calls + [
        call("ntk_scaled_inv_freq", 2, 10000.0, 2.0, why="ntk: head_dim 2 (D - 2 = 0)"),
        call("dynamic_ntk_inv_freq", 2, 10000.0, 2.0, 100, 50, why="dynamic: head_dim 2"),
        call("dynamic_ntk_inv_freq", 8, 10000.0, 2.0, 0, 50, why="dynamic: seq_len 0"),
        call("dynamic_ntk_inv_freq", 8, 10000.0, 2.0, -5, 50, why="dynamic: negative seq_len"),
        call("dynamic_ntk_inv_freq", 8, 10000.0, 2.0, 100, 0, why="dynamic: original_max_len 0"),
        call("dynamic_ntk_inv_freq", 8, 10000.0, 2.0, 100, -1, why="dynamic: negative L0"),
        call("dynamic_ntk_inv_freq", 8, 10000.0, 2.0, 100.0, 50, why="dynamic: float seq_len"),
        call("yarn_inv_freq", 8, 10000.0, 2.0, 0, why="yarn: original_max_len 0"),
        call("yarn_inv_freq", 8, 10000.0, 2.0, -2048, why="yarn: negative original_max_len"),
        call("yarn_inv_freq", 8, 10000.0, 2.0, 2048.0, why="yarn: float original_max_len"),
        call("yarn_inv_freq", 8, 10000.0, 2.0, 2048, 0.0, 1.0, why="yarn: beta_fast 0"),
        call("yarn_inv_freq", 8, 10000.0, 2.0, 2048, 32.0, -1.0, why="yarn: negative beta_slow"),
        call("yarn_inv_freq", 8, 10000.0, 2.0, 2048, NAN, 1.0, why="yarn: beta_fast NaN"),
        call("yarn_inv_freq", 8, 10000.0, 2.0, 2048, 32.0, INF, why="yarn: beta_slow inf"),
    ]


# What each ValueError's message must name, by what is wrong (after "function: ").
NAMES = {
    "odd head_dim": "head_dim",
    "head_dim 0": "head_dim",
    "head_dim 2 (D - 2 = 0)": "head_dim",
    "head_dim 2": "head_dim",
    "base 1": "base",
    "base inf": "base",
    "factor 0": "factor",
    "negative factor": "factor",
    "factor NaN": "factor",
    "factor inf": "factor",
    "seq_len 0": "seq_len",
    "negative seq_len": "seq_len",
    "float seq_len": "seq_len",
    "original_max_len 0": "original_max_len",
    "negative L0": "original_max_len",
    "negative original_max_len": "original_max_len",
    "float original_max_len": "original_max_len",
    "beta_fast 0": "beta_fast",
    "negative beta_slow": "beta_slow",
    "beta_fast NaN": "beta_fast",
    "beta_slow inf": "beta_slow",
}


@pytest.mark.parametrize("bad", _bad_calls(), ids=str)
def test_bad_stretch_arguments_raise_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why.split(": ", 1)[1]])


# ----------------------------------------------------------------------------------------------
# Known values, derived by hand


def test_scaled_frequencies_known_values(impl):
    # head_dim 4, base 100: plain RoPE is [1, 0.1].
    assert_close(
        impl.linear_scaled_inv_freq(4, 100.0, 4.0),
        torch.tensor([0.25, 0.025], dtype=F64),
        hint="position interpolation divides every frequency by the factor",
    )
    # base' = 100 * 4 ** (4 / 2) = 1600: [1, 1/40], the slowest pair exactly 1/4 of 0.1.
    assert_close(
        impl.ntk_scaled_inv_freq(4, 100.0, 4.0),
        torch.tensor([1.0, 0.025], dtype=F64),
        hint="NTK raises the base to base * factor ** (d / (d - 2))",
    )
    # seq_len 20, L0 10, factor 2: base' = 100 * (2 * 20/10 - 1) ** 2 = 900: [1, 1/30].
    assert_close(
        impl.dynamic_ntk_inv_freq(4, 100.0, 2.0, 20, 10),
        torch.tensor([1.0, 1 / 30], dtype=F64),
        hint="dynamic NTK: base * ((factor * L / L0) - (factor - 1)) ** (d / (d - 2))",
    )
    # Shorter than L0: plain RoPE.
    assert_close(
        impl.dynamic_ntk_inv_freq(4, 100.0, 2.0, 5, 10),
        torch.tensor([1.0, 0.1], dtype=F64),
        hint="dynamic NTK uses L = max(seq_len, L0): below L0 nothing changes",
    )
    for name, args in [
        ("linear_scaled_inv_freq", (4, 100.0, 4.0)),
        ("ntk_scaled_inv_freq", (4, 100.0, 4.0)),
        ("dynamic_ntk_inv_freq", (4, 100.0, 2.0, 20, 10)),
    ]:
        got = getattr(impl, name)(*args)
        assert got.dtype == F32, f"{name} must return float32, got {got.dtype}"


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
        # D 4, base 100, L0 10^6: i(1) = 2 log10(10^6 / 2 pi) / 2 = 5.2 -> ceil 6, clamped to
        # D - 1 = 3 (not D/2 - 1); i(32) = 3.7 -> low 3: a zero-width ramp at 3, nothing moves.
        ((4, 100.0, 8.0, 10**6), [1.0, 0.1], 0.1 * math.log(8) + 1),
        # D 8, base 10, L0 100: i(r) = 4 log10(100 / (2 pi r)). i(32) = -1.2 -> low 0;
        # i(1) = 4.8 -> high 5: ramp [0, .2, .4, .6], so pair i keeps 1 - ramp / 2 of itself.
        (
            (8, 10.0, 2.0, 100),
            [1.0, 0.9 * 10**-0.25, 0.8 * 10**-0.5, 0.7 * 10**-0.75],
            0.1 * math.log(2) + 1,
        ),
    ],
    ids=["L0 2048", "zero-width ramp", "factor below 1", "other betas", "high clamped", "base 10"],
)
def test_yarn_known_values(impl, args, expected, expected_attention):
    inv_freq, attention_factor = impl.yarn_inv_freq(*args)
    assert inv_freq.dtype == F32, f"yarn inv_freq must be float32, got {inv_freq.dtype}"
    assert_close(
        inv_freq,
        torch.tensor(expected, dtype=F64),
        name="yarn inv_freq",
        hint="low = max(floor(i(beta_fast)), 0), high = min(ceil(i(beta_slow)), head_dim - 1); "
        "pairs below low keep their frequency, pairs above high are divided by the factor; a "
        "zero-width ramp gets high += 0.001",
    )
    assert type(attention_factor) is float, (
        f"attention_factor must be a Python float, got {type(attention_factor).__name__} "
        f"{attention_factor!r}: return float(...) of the number, not a 0-dim tensor"
    )
    assert math.isclose(attention_factor, expected_attention, rel_tol=1e-9), (
        f"attention_factor: expected {expected_attention:.6f}, got {attention_factor}: "
        "0.1 * ln(factor) + 1 (natural log), and exactly 1.0 when factor <= 1"
    )


INT_BASE_CALLS = {
    "rope_inv_freq": lambda m, base: m.rope_inv_freq(8, base),
    "linear_scaled_inv_freq": lambda m, base: m.linear_scaled_inv_freq(8, base, 2.0),
    "ntk_scaled_inv_freq": lambda m, base: m.ntk_scaled_inv_freq(8, base, 2.0),
    "dynamic_ntk_inv_freq": lambda m, base: m.dynamic_ntk_inv_freq(8, base, 2.0, 8192, 2048),
    "yarn_inv_freq": lambda m, base: m.yarn_inv_freq(8, base, 4.0, 2048)[0],
}


@pytest.mark.parametrize("name", list(INT_BASE_CALLS))
@pytest.mark.parametrize("base", [10000, 500000, 2], ids=lambda b: f"base {b}")
def test_an_int_base_is_a_number(impl, name, base):
    call = INT_BASE_CALLS[name]
    try:
        got = call(impl, base)
    except ValueError as exc:
        raise AssertionError(
            f"{name} with the int base {base} raised ValueError({exc}): any finite number > 1 "
            "is a base, an int (10000, 500000 as configs write them) as much as a float"
        ) from None
    expected = call(impl, float(base))
    assert torch.equal(got, expected), (
        f"{name} with the int base {base} gave {got.tolist()}, with {float(base)} it gave "
        f"{expected.tolist()}: an int base is the same number as its float"
    )


# ----------------------------------------------------------------------------------------------
# Properties


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
        torch.ones(1, dtype=F64),
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
        hint="up to original_max_len dynamic NTK changes nothing: L = max(seq_len, L0)",
    )


@given(d=head_dims, base=bases, factor=factors, trained=trained_lengths, betas=yarn_betas)
def test_yarn_lies_between_interpolated_and_original(impl, d, base, factor, trained, betas):
    got, _ = impl.yarn_inv_freq(d, base, factor, trained, *betas)
    original = inv_freq_oracle(d, base)
    lo = torch.minimum(original, original / factor) * (1 - 1e-6)  # float32 rounding
    hi = torch.maximum(original, original / factor) * (1 + 1e-6)
    outside = ((got.double() < lo) | (got.double() > hi)).nonzero().flatten().tolist()
    assert not outside, (
        f"yarn frequencies of pairs {outside} lie outside [original / factor, original]: "
        "each one must be a blend of the two with a weight in [0, 1]"
    )


@given(d=head_dims, base=bases, trained=trained_lengths, betas=yarn_betas)
def test_yarn_with_factor_one_is_plain_rope(impl, d, base, trained, betas):
    got, attention_factor = impl.yarn_inv_freq(d, base, 1.0, trained, *betas)
    assert_close(got, inv_freq_oracle(d, base), hint="factor 1: nothing to interpolate")
    assert attention_factor == 1.0, (
        f"factor 1 needs no attention correction, got {attention_factor}"
    )


# ----------------------------------------------------------------------------------------------
# Float64 oracles on drawn settings


@given(d=head_dims, base=bases, factor=factors)
@example(d=2, base=1.0001, factor=1e-3)
def test_linear_scaled_inv_freq_matches_oracle(impl, d, base, factor):
    assert_close(
        impl.linear_scaled_inv_freq(d, base, factor),
        inv_freq_oracle(d, base) / factor,
        hint="position interpolation: inv_freq / factor",
    )


@given(d=ntk_head_dims, base=bases, factor=factors)
@example(d=4, base=1e9, factor=1e3)
def test_ntk_scaled_inv_freq_matches_oracle(impl, d, base, factor):
    assert_close(
        impl.ntk_scaled_inv_freq(d, base, factor),
        ntk_oracle(d, base, factor),
        hint="base' = base * factor ** (d / (d - 2))",
    )


@given(d=ntk_head_dims, base=bases, factor=factors, trained=trained_lengths, data=st.data())
@example(d=128, base=500000.0, factor=8.0, trained=8192, data=None)
def test_dynamic_ntk_inv_freq_matches_oracle(impl, d, base, factor, trained, data):
    if data is None:  # the edges: exactly L0, one past it, and far past it
        seq_lens = [trained, trained + 1, 10**7]
    else:
        seq_lens = [data.draw(st.integers(1, 8 * trained), label="seq_len")]
    for seq_len in seq_lens:
        assert_close(
            impl.dynamic_ntk_inv_freq(d, base, factor, seq_len, trained),
            dynamic_ntk_oracle(d, base, factor, seq_len, trained),
            name=f"inv_freq at seq_len {seq_len}",
            hint="base * ((factor * L / L0) - (factor - 1)) ** (d / (d - 2)), L = max(seq_len, L0)",
        )


@given(d=head_dims, base=bases, factor=factors, trained=trained_lengths, betas=yarn_betas)
@example(d=128, base=500000.0, factor=32.0, trained=4096, betas=(32.0, 1.0))
@example(d=64, base=10000.0, factor=4.0, trained=1, betas=(1e4, 1e-4))
def test_yarn_inv_freq_matches_oracle(impl, d, base, factor, trained, betas):
    expected, expected_attention = yarn_oracle(d, base, factor, trained, *betas)
    got, attention_factor = impl.yarn_inv_freq(d, base, factor, trained, *betas)
    assert got.dtype == F32, f"yarn inv_freq must be float32, got {got.dtype}"
    assert_close(
        got,
        expected,
        name="yarn inv_freq",
        hint="check low/high (floor, ceil, clamped to 0 .. head_dim - 1), which end of the ramp "
        "keeps the original frequency, and that beta_fast and beta_slow are the ones passed",
    )
    assert type(attention_factor) is float, (
        f"attention_factor must be a Python float, got {type(attention_factor).__name__} "
        f"{attention_factor!r}: return float(...) of the number, not a 0-dim tensor"
    )
    assert math.isclose(attention_factor, expected_attention, rel_tol=1e-9), (
        f"attention_factor: expected {expected_attention}, got {attention_factor}"
    )


# ----------------------------------------------------------------------------------------------
# Computed when asked

# Bases no other test uses, so the first call here is a first call for every function.
FIRST_ASKED = {
    "rope_inv_freq": (4096, 12_345.678_9),
    "linear_scaled_inv_freq": (4096, 23_456.789_1, 3.5),
    "ntk_scaled_inv_freq": (4096, 34_567.891_2, 3.5),
    "dynamic_ntk_inv_freq": (4096, 45_678.912_3, 3.5, 9000, 2048),
    "yarn_inv_freq": (4096, 56_789.123_4, 3.5, 2048),
}


@pytest.mark.parametrize("name", list(FIRST_ASKED))
def test_frequencies_are_computed_when_asked(impl, name):
    """The README: answers are computed when asked, and a repeated call costs about the same. A
    frequency function asked twice with the same arguments does the same work twice."""
    fn, args = getattr(impl, name), FIRST_ASKED[name]
    _, first = measure(fn, *args)
    _, again = measure(fn, *args)
    assert again.work >= 0.9 * first.work, (
        f"{name}{args} did {first.work:,} units of work (elements read and written) the first "
        f"time but {again.work:,} when asked again with the same arguments: the answer came from "
        "a memory of the first call (functools.cache or lru_cache on the frequencies, say). "
        "Compute every answer when asked"
    )
