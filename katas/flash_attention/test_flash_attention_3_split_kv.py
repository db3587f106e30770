"""Level 3: the log-sum-exp, merging partial results, and split-KV decoding."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.devices import default_device, float_dtypes
from grading.oracles import attention_oracle, log_sum_exp_oracle
from grading.strategies import gqa_heads, lengths, randn, seeds
from grading.tolerance import assert_close
from katas.flash_attention.flash_attention_cases import (
    INPUT_SCALES,
    AttentionCase,
    attention_cases,
    check_attention,
    input_scales,
)


def assert_lse_close(actual, expected, *, hint: str) -> None:
    """lse is float32 with -inf exactly where a query sees no key."""
    __tracebackhide__ = True
    assert actual.dtype == torch.float32, f"lse must be float32, got {actual.dtype}"
    actual = actual.detach().cpu()
    empty = torch.isneginf(expected)
    assert torch.equal(torch.isneginf(actual), empty), (
        "lse must be -inf exactly for the queries that see no key (and finite elsewhere)"
    )
    assert_close(actual[~empty], expected[~empty], dtype=torch.float32, name="lse", hint=hint)


@st.composite
def key_partitions(draw):
    """A decode-or-prefill case and cut points splitting its keys into consecutive parts."""
    H, Hkv = draw(gqa_heads(2, 2))
    Nq, Nk = draw(lengths(12)), draw(lengths(40, block=16))
    cuts = sorted(draw(st.lists(st.integers(0, Nk), min_size=0, max_size=4)))
    case = AttentionCase(
        B=1, H=H, Hkv=Hkv, Nq=Nq, Nk=Nk, D=16, causal=draw(st.booleans()), sm_scale=None,
        dtype=torch.float32, scale=draw(st.sampled_from(INPUT_SCALES)), seed=draw(seeds()),
    )  # fmt: skip
    return case, [0, *cuts, Nk]


@given(partition=key_partitions())
@example(
    partition=(AttentionCase(1, 2, 1, 12, 30, 16, True, None, torch.float32, 8.0, 1), [0, 5, 5, 30])
)
def test_combine_partials_merges_exact_parts(impl, partition):
    case, cuts = partition
    q, k, v = case.tensors(torch.device("cpu"))
    outs, lses = [], []
    for start, end in zip(cuts[:-1], cuts[1:], strict=True):  # float64 results over [start, end)
        part = torch.zeros(case.Nk, dtype=torch.bool)
        part[start:end] = True
        outs.append(attention_oracle(q, k, v, causal=case.causal, mask=part))
        lses.append(log_sum_exp_oracle(q, k, causal=case.causal, mask=part))
    out, lse = impl.combine_partials(torch.stack(outs), torch.stack(lses))
    assert_lse_close(
        lse, log_sum_exp_oracle(q, k, causal=case.causal),
        hint="the merged lse is logsumexp over the parts' lse",
    )  # fmt: skip
    assert_close(
        out, attention_oracle(q, k, v, causal=case.causal), dtype=torch.float32,
        hint="weigh part s by exp(lse_s - max lse) and divide by the sum of the weights: "
        "without the max, exp overflows (scores here reach the hundreds); parts that saw no "
        "key (lse = -inf) weigh 0",
    )  # fmt: skip


@st.composite
def decode_cases(draw):
    H, Hkv = draw(gqa_heads(2, 2))
    Nk = draw(lengths(64, block=16))
    dtype = draw(st.sampled_from(float_dtypes(triton=True)))
    case = AttentionCase(
        B=draw(st.integers(1, 2)), H=H, Hkv=Hkv, Nq=1, Nk=Nk, D=draw(st.sampled_from([16, 32])),
        causal=False, sm_scale=draw(st.sampled_from([None, 0.3])), dtype=dtype,
        scale=draw(st.sampled_from(input_scales(dtype, INPUT_SCALES))), seed=draw(seeds()),
    )  # fmt: skip
    return case, draw(st.integers(1, 6))


@given(decode=decode_cases())
@example(decode=(AttentionCase(1, 4, 2, 1, 61, 16, False, None, torch.float32, 0.5, 2), 4))
def test_split_kv_decode_matches_oracle(impl, decode):
    case, num_splits = decode
    q, k, v = case.tensors()
    out = impl.split_kv_decode(q, k, v, sm_scale=case.sm_scale, num_splits=num_splits)
    check_attention(
        out, q, k, v, causal=False, sm_scale=case.sm_scale,
        hint=f"with num_splits={num_splits}: each split must cover its own keys exactly once, "
        "and its partial result must be merged through its lse",
    )  # fmt: skip


@given(
    case=attention_cases(max_len=40, block=16, head_dims=(16, 32), dtypes=float_dtypes(triton=True))
)
@example(case=AttentionCase(1, 2, 1, 33, 20, 16, True, None, torch.float16, 8.0, 0))
def test_flash_attention_with_lse_returns_the_log_sum_exp(impl, case):
    q, k, v = case.tensors()
    out, lse = impl.flash_attention_with_lse(q, k, v, **case.options)
    assert_lse_close(
        lse, log_sum_exp_oracle(q, k, **case.options),
        hint="lse = m + ln(l), in the units of the scores: a kernel that works with exp2 must "
        "still take the natural log of l (or keep m in base 2 and convert the sum by ln 2)",
    )  # fmt: skip
    check_attention(out, q, k, v, **case.options, hint="the output must equal flash_attention's")


def test_split_kv_decode_refuses_several_queries(impl):
    q, k, v = AttentionCase(1, 2, 2, 3, 40, 16, False, None, torch.float32, 1.0, 3).tensors()
    with pytest.raises(ValueError):
        impl.split_kv_decode(q, k, v)
        pytest.fail("split_kv_decode accepted q with 3 queries; it takes q of shape (B, H, 1, D)")


def test_split_kv_decode_leaves_its_inputs_alone(impl):
    q, k, v = AttentionCase(1, 2, 1, 1, 50, 16, False, None, torch.float32, 1.0, 4).tensors()
    before = [t.clone() for t in (q, k, v)]
    impl.split_kv_decode(q, k, v, num_splits=3)
    for name, t, original in zip("qkv", (q, k, v), before, strict=True):
        assert torch.equal(t, original), f"split_kv_decode modified its input {name}"


def test_lse_is_float32_on_the_default_device(impl):
    q, k, v = (randn((1, 1, 4, 16), seed=s, device=default_device()) for s in range(3))
    _, lse = impl.flash_attention_with_lse(q.half(), k.half(), v.half())
    assert lse.shape == (1, 1, 4) and lse.dtype == torch.float32, (
        "lse must be (B, H, Nq) float32 even for float16 inputs, "
        f"got {tuple(lse.shape)} {lse.dtype}"
    )
