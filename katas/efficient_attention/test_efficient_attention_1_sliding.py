"""Level 1: sliding-window attention.

Run: `pytest katas/efficient_attention -k 1_sliding [--impl ...]`.
Order: worked examples and bad inputs first (cheap), then the cost counters, then properties.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.judge.attention import AttentionCase, scores_below_any_mask
from grading.judge.cost import count_flops, elements_written, largest_tensor
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.oracles import attention_oracle
from grading.judge.strategies import randn
from grading.judge.tolerance import assert_close
from katas.efficient_attention.cases import (
    band_mask,
    below_mask_cases,
    cases,
    extreme_tensors,
    long_band_oracle,
    strided_like_a_model,
)

# Zero queries score every key alike, so each output is the plain mean of the values it sees.
# Values 1, 2, 4, 8 make every subset's mean distinct: the output names the keys that were read.
Q0 = torch.zeros(1, 1, 4, 1)
K = torch.randn(1, 1, 4, 1, generator=torch.Generator().manual_seed(0))
V = torch.tensor([1.0, 2.0, 4.0, 8.0]).view(1, 1, 4, 1)


def column(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64).view(1, 1, -1, 1)


PRECISION_HINT = (
    "this is a precision failure, not a wrong mask: with thousands of keys a softmax whose "
    "scores, maxima or sums are kept in float16/bfloat16 drifts. Cast q, k and v to float32 "
    "first and only the output back to q's dtype."
)

# ----------------------------------------------------------------------------------------------
# Worked examples


@pytest.mark.parametrize(
    "window, expected",
    [
        (1, [1.0, 2.0, 4.0, 8.0]),
        (2, [1.0, 1.5, 3.0, 6.0]),
        (3, [1.0, 1.5, 7 / 3, 14 / 3]),
        (4, [1.0, 1.5, 7 / 3, 15 / 4]),
    ],
)
def test_sliding_window_worked_example(impl, window, expected):
    out = impl.sliding_window_attention(Q0, K, V, window)
    assert_close(
        out,
        column(*expected),
        hint=f"with window={window} query i reads keys i-{window - 1}..i: exactly `window` keys "
        "counting itself. Reading one key too many or too few is the classic off-by-one.",
    )


@pytest.mark.parametrize(
    "n_queries, expected",
    [(2, [3.0, 6.0]), (6, [0.0, 0.0, 1.0, 1.5, 3.0, 6.0])],
)
def test_sliding_window_worked_example_with_unequal_lengths(impl, n_queries, expected):
    out = impl.sliding_window_attention(torch.zeros(1, 1, n_queries, 1), K, V, 2)
    assert_close(
        out,
        column(*expected),
        hint="queries align bottom-right: the last query sits at the last key's position, query i "
        "at i + Nk - Nq. With more queries than keys the first ones see nothing: zeros, not NaN.",
    )


def test_sliding_window_sm_scale_zero_weighs_keys_alike(impl):
    q = torch.tensor([0.0, 5.0, -3.0, 9.0]).view(1, 1, 4, 1)  # large scores, unless scaled by 0
    out = impl.sliding_window_attention(q, K, V, 3, sm_scale=0.0)
    assert_close(
        out,
        column(1.0, 1.5, 7 / 3, 14 / 3),
        hint="sm_scale=0.0 multiplies every score by zero, so each output is the mean of the "
        "values in the window. `sm_scale or 1 / sqrt(D)` treats 0.0 as missing: test `is None`.",
    )


# ----------------------------------------------------------------------------------------------
# Bad input

_q, _k, _v = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)

BAD_CALLS = [
    BadCall("sliding_window_attention(q, k, v, window=0)", "window 0",
            lambda impl: impl.sliding_window_attention(_q, _k, _v, 0)),
    BadCall("sliding_window_attention(q, k, v, window=-3)", "a negative window",
            lambda impl: impl.sliding_window_attention(_q, _k, _v, -3)),
    BadCall("sliding_window_attention(q, k, v, window=2.5)", "a window that is no int",
            lambda impl: impl.sliding_window_attention(_q, _k, _v, 2.5)),
    BadCall("sliding_window_attention(q of shape [4, 8, 16], k, v, 2)", "a 3-D q",
            lambda impl: impl.sliding_window_attention(_q[0], _k, _v, 2)),
    BadCall("sliding_window_attention(q with D=16, k with D=8, v, 2)", "k's head dim differs",
            lambda impl: impl.sliding_window_attention(_q, _k[..., :8], _v, 2)),
    BadCall("sliding_window_attention(q with 4 heads, k and v with 3, 2)",
            "kv heads that do not divide the query heads",
            lambda impl: impl.sliding_window_attention(
                _q, torch.randn(1, 3, 8, 16), torch.randn(1, 3, 8, 16), 2)),
    BadCall("sliding_window_attention(q, k of length 8, v of length 5, 2)", "v shorter than k",
            lambda impl: impl.sliding_window_attention(_q, _k, _v[:, :, :5], 2)),
    BadCall("sliding_window_attention(q with batch 1, k and v with batch 2, 2)",
            "another batch size",
            lambda impl: impl.sliding_window_attention(_q, _k.expand(2, -1, -1, -1),
                                                       _v.expand(2, -1, -1, -1), 2)),
    BadCall("sliding_window_attention(q float32, k float16, v float32, 2)",
            "q, k and v of different dtypes",
            lambda impl: impl.sliding_window_attention(_q, _k.half(), _v, 2)),
    BadCall("sliding_window_attention(q, k, v of int64, 2)", "integer values",
            lambda impl: impl.sliding_window_attention(_q, _k, _v.long(), 2)),
    BadCall("sliding_window_attention(q of shape [1, 4, 0, 16], k, v, 2)", "no queries",
            lambda impl: impl.sliding_window_attention(_q[:, :, :0], _k, _v, 2)),
    BadCall("sliding_window_attention(q, k and v of length 0, 2)", "no keys",
            lambda impl: impl.sliding_window_attention(_q, _k[:, :, :0], _v[:, :, :0], 2)),
    BadCall("sliding_window_attention(q, k with D=0, v, 2)", "a head dim of 0",
            lambda impl: impl.sliding_window_attention(_q[..., :0], _k[..., :0], _v, 2)),
    BadCall("sliding_window_attention(q, k, v with batch 0, 2)", "a batch of 0",
            lambda impl: impl.sliding_window_attention(_q[:0], _k[:0], _v[:0], 2)),
    BadCall("sliding_window_attention(q, k, v with Dv=0, 2)", "values of size 0",
            lambda impl: impl.sliding_window_attention(_q, _k, _v[..., :0], 2)),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    "window 0": "window",
    "a negative window": "window",
    "a window that is no int": "window",
    "a 3-D q": "q",
    "k's head dim differs": "k",
    "kv heads that do not divide the query heads": "k|q",
    "v shorter than k": "v",
    "another batch size": "k|v",
    "q, k and v of different dtypes": "q|k|v",
    "integer values": "v",
    "no queries": "q",
    "no keys": "k|v",
    "a head dim of 0": "q|k",
    "a batch of 0": "q|k|v",
    "values of size 0": "v",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_sliding_window_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])


def test_sliding_window_leaves_its_inputs_alone(impl):
    q, k, v = torch.randn(1, 2, 9, 4), torch.randn(1, 1, 9, 4), torch.randn(1, 1, 9, 4)
    saved = [t.clone() for t in (q, k, v)]
    impl.sliding_window_attention(q, k, v, 3)
    for name, before, after in zip("qkv", saved, (q, k, v), strict=True):
        assert torch.equal(before, after), f"{name} was changed in place"


# ----------------------------------------------------------------------------------------------
# Cost, counted deterministically: FLOPs of matrix products, the largest tensor made, and the
# elements every op writes (elementwise products and sums cost no FLOPs but write elements)


@pytest.mark.parametrize("window", [1, 16])
def test_sliding_window_flops_grow_with_n_times_window(impl, figures, window):
    B, H, D = 1, 2, 16
    flops, written = {}, {}
    for N in (512, 1024):
        q, k, v = (randn((B, H, N, D), seed=s) for s in range(3))
        _, flops[N] = count_flops(impl.sliding_window_attention, q, k, v, window)
        _, written[N] = elements_written(impl.sliding_window_attention, q, k, v, window)
        _, biggest = largest_tensor(impl.sliding_window_attention, q, k, v, window)
        assert biggest.numel <= B * H * N * N // 4, (
            f"largest tensor made at N={N}, window={window}: {biggest}; the scores of every "
            f"head are {B * H * N * N} numbers. Never build the N x N scores or mask, not even "
            "for short sequences."
        )
    band = 4 * B * H * 1024 * window * D  # Q·Kᵀ and P·V over exactly `window` keys per query
    figures.record(
        "sliding-window FLOPs / exact band", flops[1024] / band, "x", N=1024, window=window
    )
    assert flops[1024] <= 2.2 * flops[512], (
        f"doubling N from 512 to 1024 at window {window} multiplied the FLOPs by "
        f"{flops[1024] / max(flops[512], 1):.2f}; work O(N · window) doubles. Scoring every "
        "query against every key and masking afterwards quadruples."
    )
    assert flops[1024] <= 8 * band, (
        f"{flops[1024]} FLOPs at N=1024, window={window}: {flops[1024] / band:.1f} x the exact "
        f"band ({band}). Score each chunk of queries against its band of keys only, with chunks "
        "of at most `window` queries (a fixed chunk of 128 queries reads 128 keys per query "
        "even when the window is 1)."
    )
    assert written[1024] <= 2.2 * written[512], (
        f"doubling N from 512 to 1024 at window {window} multiplied the elements written by all "
        f"ops by {written[1024] / max(written[512], 1):.2f}; O(N · window) work doubles. Scores "
        "for every (query, key) pair made by broadcasting and summing cost no FLOPs but still "
        "write Nq · Nk · D elements, even one query at a time."
    )


@pytest.mark.parametrize("window", [1, 8])
def test_sliding_window_memory_stays_in_the_band(impl, window):
    N = 4096
    q, k, v = (randn((1, 1, N, 8), seed=s) for s in range(3))
    _, biggest = largest_tensor(impl.sliding_window_attention, q, k, v, window)
    assert biggest.numel <= N * N // 16, (
        f"largest tensor made at N={N}, window={window}: {biggest}; an N x N score matrix or "
        f"mask has {N * N} elements. Memory must be O(Nq · window · D), here about "
        f"{N * window * 8}."
    )


# ----------------------------------------------------------------------------------------------
# Properties

windows = st.one_of(st.sampled_from([1, 2, 3]), st.integers(1, 48))


@given(case=cases(), window=windows)
@example(case=AttentionCase(B=1, H=2, Hkv=1, Nq=7, Nk=11, D=4, sm_scale=0.0), window=3)
@example(case=AttentionCase(B=2, H=3, Hkv=3, Nq=13, Nk=5, D=1, Dv=3), window=1)
@example(case=AttentionCase(H=4, Hkv=2, Nq=29, Nk=29, D=16, dtype=torch.bfloat16), window=1)
def test_sliding_window_matches_dense_band_attention(impl, case: AttentionCase, window):
    q, k, v = case.tensors()
    out = impl.sliding_window_attention(q, k, v, window, sm_scale=case.sm_scale)
    assert out.dtype == q.dtype, f"got {out.dtype} for {q.dtype} inputs; outputs have q's dtype"
    mask = band_mask(case.Nq, case.Nk, window)
    expected = attention_oracle(q, k, v, causal=True, sm_scale=case.sm_scale, mask=mask)
    assert_close(
        out,
        expected,
        hint="query i is at position p = i + Nk - Nq (bottom-right, even when Nq != Nk) and sees "
        "p - window < j <= p; head h reads kv head h // (H // Hkv); a query before every key "
        "(Nq > Nk) returns zeros, not NaN; sm_scale=0.0 is a scale, not a missing one.",
    )


@given(drawn=below_mask_cases(), window=windows)
@example(drawn=(AttentionCase(H=2, Hkv=1, Nq=9, Nk=17, D=16, dtype=torch.float16), 10), window=3)
@example(drawn=(AttentionCase(B=2, H=2, Hkv=2, Nq=11, Nk=11, D=16, seed=1), 51), window=4)
def test_sliding_window_with_every_score_below_any_mask_constant(impl, drawn, window):
    case, power = drawn
    q, k, v = scores_below_any_mask(case, power)
    out = impl.sliding_window_attention(q, k, v, window)
    mask = band_mask(case.Nq, case.Nk, window)
    assert_close(
        out,
        attention_oracle(q, k, v, causal=True, mask=mask),
        hint=f"every visible score is about -2**{2 * power - 2}, below any finite mask "
        "constant: keys outside the window get -inf (not -1e30, -1e4 or the input dtype's "
        "finfo.min), and a running max starts at -inf",
    )


@given(case=cases(), extra=st.sampled_from([0, 1, 1000]))
def test_sliding_window_at_least_as_long_as_the_keys_is_causal(impl, case: AttentionCase, extra):
    q, k, v = case.tensors()
    out = impl.sliding_window_attention(q, k, v, case.Nk + extra)
    assert_close(
        out,
        attention_oracle(q, k, v, causal=True),
        hint="a window that covers every key is plain causal attention (bottom-right aligned)",
    )


@given(case=cases(), window=windows, data=st.data())
def test_sliding_window_ignores_keys_outside_the_window(impl, case: AttentionCase, window, data):
    q, k, v = case.tensors()
    i = data.draw(st.integers(0, case.Nq - 1), label="query")
    outside = ~band_mask(case.Nq, case.Nk, window)[i]  # (Nk,) keys query i must not read
    noise = randn(k.shape, seed=case.seed + 3, dtype=k.dtype, scale=10.0)
    k2 = torch.where(outside[:, None], noise, k)
    v2 = torch.where(outside[:, None], noise[..., :1] * 10, v)
    before = impl.sliding_window_attention(q, k, v, window)[:, :, i]
    after = impl.sliding_window_attention(q, k2, v2, window)[:, :, i]
    assert_close(
        after,
        before.double(),
        hint=f"changing keys outside query {i}'s window changed its output: it reads a key it "
        "should not (one too many at the window's start, or a future key).",
    )


@given(case=cases(max_len=24), window=windows)
@example(case=AttentionCase(H=2, Hkv=1, Nq=9, Nk=12, D=4, Dv=3), window=4)
def test_sliding_window_reads_strided_inputs(impl, case: AttentionCase, window):
    q, k, v = case.tensors()
    q_view, k_view, v_view = (
        strided_like_a_model(t, pad) for t, pad in zip((q, k, v), (0, 1, 5), strict=True)
    )
    assert k_view.stride() != v_view.stride()
    out = impl.sliding_window_attention(q_view, k_view, v_view, window)
    assert_close(
        out,
        attention_oracle(q, k, v, causal=True, mask=band_mask(case.Nq, case.Nk, window)),
        hint="q, k and v here are transposed views of (B, N, heads, d + padding) storage, and k "
        "and v have different strides: index them through torch ops (reshape, not view; no "
        "as_strided with one tensor's strides for another).",
    )


@given(case=cases(max_len=48, even_d=True), window=windows)
@example(case=AttentionCase(H=2, Hkv=1, Nq=40, Nk=40, D=16, dtype=torch.float16), window=7)
def test_sliding_window_survives_scores_in_the_thousands(impl, case: AttentionCase, window):
    q, k, v = extreme_tensors(case)
    out = impl.sliding_window_attention(q, k, v, window, sm_scale=0.25)
    expected = attention_oracle(
        q, k, v, causal=True, sm_scale=0.25, mask=band_mask(case.Nq, case.Nk, window)
    )
    assert_close(
        out,
        expected,
        hint="scores here reach thousands (exact in float32): exp(score) overflows to inf and "
        "inf / inf is NaN. Subtract each row's maximum before exp().",
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sliding_window_over_thousands_of_keys_keeps_float32_precision(impl, dtype):
    case = AttentionCase(Nq=2048, Nk=2048, D=8, dtype=dtype, seed=7)
    q, k, v = case.tensors()
    out = impl.sliding_window_attention(q, k, v, 2000)
    expected = attention_oracle(q, k, v, causal=True, mask=band_mask(2048, 2048, 2000))
    assert_close(out, expected, hint=PRECISION_HINT)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(
    "Nq, Nk, window",
    [(4101, 4101, 2), (4103, 4103, 5), (1001, 4199, 3)],
)
def test_sliding_window_positions_past_2048_stay_exact(impl, dtype, Nq, Nk, window):
    # Past 2048 float16 holds only every other integer (every fourth past 4096), and bfloat16
    # only one in 32: positions kept in the inputs' dtype round onto their neighbours.
    q, k, v = AttentionCase(Nq=Nq, Nk=Nk, D=1, dtype=dtype, seed=Nk).tensors()
    out = impl.sliding_window_attention(q, k, v, window)
    assert out.dtype == dtype and out.shape == (1, 1, Nq, 1)
    assert_close(
        out,
        long_band_oracle(q, k, v, window),
        hint=f"at window {window}, with keys past position 2048: positions (of queries, keys "
        "and the padding past the last key) are integers, so form them with torch.arange in "
        "int64 and compare them as integers. In float16 or bfloat16 neighbouring positions "
        "round to one number, and the window reads a key too many or too few.",
    )


@pytest.mark.parametrize("Nq, Nk", [(13, 13), (5, 9)])
def test_sliding_window_float64_inputs_give_float64_outputs(impl, Nq, Nk):
    q, k, v = AttentionCase(H=2, Hkv=1, Nq=Nq, Nk=Nk, D=4, dtype=torch.float64).tensors()
    out = impl.sliding_window_attention(q, k, v, 3)
    assert out.dtype == torch.float64, (
        f"got {out.dtype} for float64 inputs: outputs have q's dtype, float64 included (compute "
        "in float32 or float64, then cast the output to q.dtype)"
    )
    assert_close(
        out,
        attention_oracle(q, k, v, causal=True, mask=band_mask(Nq, Nk, 3)),
        dtype=torch.float32,  # float64 inputs may be computed in float32
        hint="float64 inputs: the same sliding window, checked at float32's tolerance",
    )
