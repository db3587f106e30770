"""Level 3 of the context-extension kata: ALiBi's slopes and bias.

Bad input and known values first, then properties and float64 oracles, long keys included.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from grading.judge.strategies import lengths
from grading.judge.tolerance import assert_close
from katas.context_extension.cases import alibi_bias_oracle, alibi_slopes_oracle

F32 = torch.float32
F64 = torch.float64
SLOPE_RULE = (
    "for a head count that is not a power of two, take the slopes of the power of two below it, "
    "then the 1st, 3rd, 5th ... slopes of twice that power"
)

BAD_CALLS = [
    BadCall("alibi_slopes(0)", "no heads", lambda m: m.alibi_slopes(0)),
    BadCall("alibi_slopes(-8)", "negative n_heads", lambda m: m.alibi_slopes(-8)),
    BadCall("alibi_slopes(8.0)", "float n_heads", lambda m: m.alibi_slopes(8.0)),
    BadCall("alibi_bias(0, 4, 4)", "bias with no heads", lambda m: m.alibi_bias(0, 4, 4)),
    BadCall("alibi_bias(4, -1, 4)", "negative q_len", lambda m: m.alibi_bias(4, -1, 4)),
    BadCall("alibi_bias(4, 4, -1)", "negative k_len", lambda m: m.alibi_bias(4, 4, -1)),
    BadCall("alibi_bias(4, 2.0, 4)", "float q_len", lambda m: m.alibi_bias(4, 2.0, 4)),
]


# What each ValueError's message must name.
NAMES = {
    "no heads": "n_heads",
    "negative n_heads": "n_heads",
    "float n_heads": "n_heads",
    "bias with no heads": "n_heads",
    "negative q_len": "q_len",
    "negative k_len": "k_len",
    "float q_len": "q_len",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_bad_alibi_arguments_raise_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])


# ----------------------------------------------------------------------------------------------
# Known values, derived by hand


def test_alibi_slopes_known_values(impl):
    got = impl.alibi_slopes(8)
    assert got.dtype == F32, f"alibi_slopes must return float32, got {got.dtype}"
    assert_close(
        got,
        torch.tensor([2.0**-h for h in range(1, 9)], dtype=F64),
        hint="8 heads: 1/2, 1/4, ..., 1/256",
    )
    # 12 heads: the 8-head slopes, then every other slope of 16 heads: 2^-0.5, 2^-1.5, ...
    twelve = [2.0**-h for h in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    assert_close(impl.alibi_slopes(12), torch.tensor(twelve, dtype=F64), hint=SLOPE_RULE)
    six = [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]
    assert_close(impl.alibi_slopes(6), torch.tensor(six, dtype=F64), hint=SLOPE_RULE)
    assert_close(impl.alibi_slopes(1), torch.tensor([2.0**-8], dtype=F64), hint=SLOPE_RULE)


@given(n_heads=st.integers(1, 24), scribble=st.sampled_from(["nan", "zero"]))
@example(n_heads=8, scribble="nan")
def test_alibi_slopes_are_the_callers_own(impl, n_heads, scribble):
    """Every call returns a new tensor, the caller's to change: changing the slopes one call gave
    changes neither a later call's slopes nor the bias built from them."""
    first = impl.alibi_slopes(n_heads)
    second = impl.alibi_slopes(n_heads)
    shared = first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr()
    assert not shared, (
        f"two calls alibi_slopes({n_heads}) returned tensors sharing one memory: every call "
        "returns a new tensor, the caller's to change, not one kept between calls"
    )
    first.fill_(float("nan") if scribble == "nan" else 0.0)  # the caller's to change
    hint = (
        "a later call gave other values after the caller changed an earlier call's slopes in "
        "place: return a new tensor on every call, not one kept between calls (a module-level "
        "dict or functools.cache)"
    )
    want = torch.tensor(alibi_slopes_oracle(n_heads), dtype=F64)
    assert_close(second, want, name="the slopes of the second call", hint=hint)
    assert_close(impl.alibi_slopes(n_heads), want, name="the slopes of a later call", hint=hint)
    assert_close(
        impl.alibi_bias(n_heads, 2, 3),
        alibi_bias_oracle(n_heads, 2, 3),
        name="alibi_bias after the caller changed some slopes",
        hint=hint,
    )


def test_alibi_bias_known_values(impl):
    # 2 heads (slopes 1/16, 1/256), 2 queries at positions 1 and 2, 3 keys at 0, 1, 2.
    s = torch.tensor([1 / 16, 1 / 256], dtype=F64)[:, None, None]
    expected = s * torch.tensor([[[-1.0, 0.0, 1.0], [-2.0, -1.0, 0.0]]], dtype=F64)
    got = impl.alibi_bias(2, 2, 3)
    assert got.dtype == F32, f"alibi_bias must return float32, got {got.dtype}"
    assert_close(
        got,
        expected,
        hint="bias = -slope * (p_i - j) with p_i = i + k_len - q_len: the last query is the "
        "newest key (bias 0 there), older keys get a negative bias",
    )


@pytest.mark.parametrize(("q_len", "k_len"), [(1, 100_000), (3, 0), (0, 5), (4, 2)])
def test_alibi_bias_at_the_edges(impl, q_len, k_len):
    # One decoding query over a long cache, no keys, no queries, more queries than keys.
    got = impl.alibi_bias(2, q_len, k_len)
    assert got.dtype == F32, f"alibi_bias must return float32, got {got.dtype}"
    assert_close(
        got,
        alibi_bias_oracle(2, q_len, k_len),
        hint="-slope_h * (p_i - j) with p_i = i + k_len - q_len for any lengths >= 0, computed "
        "in float32 (distances up to 10^5 are exact there; float16 is not enough)",
    )


# Past 2**24 float32 can no longer count by one (2**24 + 1 rounds to 2**24): one query, or two,
# over a cache that long.
BEYOND_FLOAT32_COUNTING = [(1, 2**24 + 3), (1, 2**24 + 1000), (2, 2**24 + 4)]


@pytest.mark.parametrize(("q_len", "k_len"), BEYOND_FLOAT32_COUNTING, ids=str)
def test_alibi_bias_past_two_to_the_24_keys(impl, q_len, k_len):
    got = impl.alibi_bias(2, q_len, k_len)  # slopes 1/16 and 1/256
    assert tuple(got.shape) == (2, q_len, k_len), f"wrong shape {tuple(got.shape)}"
    slopes = torch.tensor([1 / 16, 1 / 256], dtype=F64)[:, None, None]
    query_pos = torch.arange(q_len, dtype=F64)[:, None] + (k_len - q_len)  # (Nq, 1), exact
    for which, keys in (("newest", range(k_len - 64, k_len)), ("oldest", range(64))):
        key_pos = torch.tensor(keys, dtype=F64)[None, :]  # (1, 64)
        assert_close(
            got[:, :, keys.start : keys.stop],
            -slopes * (query_pos - key_pos),
            name=f"the bias at the {which} 64 of {k_len} keys",
            hint="past 2**24 = 16,777,216 a float32 position is rounded to an even number, so "
            "neighbouring keys share a position and a distance of 1 comes out as 0 or 2. Count "
            "positions and distances in integers (torch.arange without a float dtype) and "
            "convert only the distances to float32",
        )


# ----------------------------------------------------------------------------------------------
# Properties


@given(n_heads=st.integers(1, 100))
@example(n_heads=1000)
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
# Float64 oracles


@given(n_heads=st.integers(1, 100))
@example(n_heads=1000)
def test_alibi_slopes_match_the_paper(impl, n_heads):
    expected = torch.tensor(alibi_slopes_oracle(n_heads), dtype=F64)
    assert_close(impl.alibi_slopes(n_heads), expected, hint=SLOPE_RULE)


@given(n_heads=st.integers(1, 12), q_len=lengths(40), k_len=lengths(40))
def test_alibi_bias_matches_oracle(impl, n_heads, q_len, k_len):
    assert_close(
        impl.alibi_bias(n_heads, q_len, k_len),
        alibi_bias_oracle(n_heads, q_len, k_len),
        hint="-slope_h * (p_i - j), p_i = i + k_len - q_len",
    )
