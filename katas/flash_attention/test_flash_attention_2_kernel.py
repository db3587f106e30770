"""Level 2: `flash_attention`, one Triton kernel.

Without a GPU the kernel runs in Triton's interpreter, one program at a time, so the shapes here
stay small (N <= 40, D in {16, 32}; one query block over 4096 keys for long sequences); the
reference kernel then uses 16 x 16 tiles, so these lengths still cross several query and key
blocks. test_flash_attention_gpu.py covers D = 64 and 128, bfloat16 and long sequences on a GPU.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given

from grading.devices import float_dtypes
from grading.judge.attention import AttentionCase, scores_below_any_mask
from grading.judge.cost import count_flops
from grading.judge.errors import assert_value_error
from grading.judge.oracles import attention_oracle
from grading.judge.tolerance import assert_close
from katas.flash_attention.cases import (
    LONG_NK,
    attention_cases,
    bad_attention_inputs,
    bad_head_dims,
    below_mask_cases,
    causal_offset_sweep,
    check_attention,
    scores_far_below_zero,
    strided,
)

DTYPES = float_dtypes(triton=True)
CASES = attention_cases(max_len=40, block=16, head_dims=(16, 32), dtypes=DTYPES)
HINT = (
    "check the rescaling by exp2(m_old - m_new) of both l and acc, the masks (keys past the "
    "end, the causal offset Nk - Nq), the kv head h // (H // Hkv), the strides of each tensor, "
    "and that sm_scale=0.0 is a scale (not the default)"
)


@given(drawn=below_mask_cases(max_len=20, block=16, dtypes=DTYPES))
@example(  # every score about -1.3e30, past a running max started at -1e30
    drawn=(AttentionCase(B=1, H=2, Hkv=1, Nq=5, Nk=19, D=16, causal=True, seed=1), 51)
)
def test_flash_attention_with_every_score_below_any_mask_constant(impl, drawn):
    case, power = drawn
    q, k, v = scores_below_any_mask(case, power)
    out = impl.flash_attention(q, k, v, causal=case.causal)
    assert_close(
        out,
        attention_oracle(q, k, v, causal=case.causal),
        hint=f"every visible score is about -2**{2 * power - 2}, below any finite mask "
        "constant: start m_i at -inf (not -1e30), mask with -inf, and give a query that sees "
        "no key zeros",
    )


@given(case=CASES)
@example(  # scores in the hundreds (exp overflows without the max), GQA
    case=AttentionCase(
        B=1, H=4, Hkv=2, Nq=33, Nk=40, D=16, causal=True, dtype=torch.float16, scale=8.0, seed=0
    )
)
@example(  # causal with more queries than keys: the first 23 see no key
    case=AttentionCase(B=2, H=2, Hkv=1, Nq=40, Nk=17, D=32, causal=True, sm_scale=0.3, seed=1)
)
@example(  # partial query and key blocks at the end
    case=AttentionCase(B=1, H=3, Hkv=3, Nq=17, Nk=33, D=16, seed=2)
)
@example(  # sm_scale=0.0: equal weights, the output is the mean of the visible values
    case=AttentionCase(B=1, H=2, Hkv=1, Nq=5, Nk=21, D=16, causal=True, sm_scale=0.0, seed=3)
)
@example(  # one query, one key
    case=AttentionCase(B=1, H=1, Hkv=1, Nq=1, Nk=1, D=32, dtype=torch.float16, seed=4)
)
@example(  # a negative sm_scale: used as given, the most opposed key weighs the most
    case=AttentionCase(B=1, H=2, Hkv=1, Nq=18, Nk=21, D=16, causal=True, sm_scale=-0.3, seed=5)
)  # fmt: skip
def test_flash_attention_matches_oracle(impl, case):
    q, k, v = case.tensors()
    out = impl.flash_attention(q, k, v, **case.options)
    check_attention(out, q, k, v, **case.options, hint=HINT)


OFFSETS = causal_offset_sweep()


@pytest.mark.parametrize("offset", OFFSETS, ids=[f"Nk-Nq={n}" for n in OFFSETS])
def test_flash_attention_at_every_causal_offset(impl, offset):
    # Two query blocks of the CPU's 16 x 16 tiles; Nk - Nq takes every residue modulo 16, so the
    # end of each block's causal key range lands on every position within a key block.
    Nq = 18
    case = AttentionCase(B=1, H=1, Hkv=1, Nq=Nq, Nk=Nq + offset, D=16, causal=True, seed=offset)
    q, k, v = case.tensors()
    out = impl.flash_attention(q, k, v, causal=True)
    check_attention(
        out, q, k, v, causal=True, sm_scale=None,
        hint=f"causal with Nk - Nq = {offset} (Nq = {Nq}, Nk = {case.Nk}): the last query of "
        "query block m sees key (m + 1) * BLOCK_M - 1 + Nk - Nq, so its key range ends one past "
        "that (exclusive); a loop that stops one key early loses a key only when that key "
        "starts a new key block, for one residue of Nk - Nq modulo BLOCK_N",
    )  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_keeps_float32_sums_over_long_sequences(impl, dtype, causal):
    # Near-equal weights over thousands of keys: the running sum l grows into the thousands.
    case = AttentionCase(B=1, H=2, Hkv=1, Nq=16, Nk=LONG_NK, D=16, causal=causal, dtype=dtype)
    q, k, v = case.tensors()
    q = q * 0.1  # scores of a few tenths: every weight counts
    v = v + 3.0  # an output far from zero, so that a relative error in l shows in full
    out = impl.flash_attention(q, k, v, causal=causal)
    check_attention(
        out, q, k, v, causal=causal, sm_scale=None,
        hint=f"right at short lengths but not over {case.Nk} keys: a precision failure. A "
        f"running sum or accumulator kept in {dtype} stops growing once it is large (float16 "
        "steps by 4 above 4096); keep m, l and acc in float32 and cast only the output",
    )  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_flash_attention_survives_scores_far_below_zero(impl, dtype):
    case = AttentionCase(B=1, H=2, Hkv=2, Nq=20, Nk=37, D=16, causal=True, dtype=dtype, seed=7)
    q, k, v = scores_far_below_zero(case)
    out = impl.flash_attention(q, k, v, causal=True)
    check_attention(
        out, q, k, v, causal=True, sm_scale=None,
        hint="every score here is about -200, where exp2(score * log2(e)) is 0 in float32: "
        "subtract the running max before exp2, so the largest weight of each query is exactly 1",
    )  # fmt: skip


@given(case=attention_cases(max_len=40, block=16, head_dims=(16,), dtypes=DTYPES))
@example(case=AttentionCase(B=2, H=4, Hkv=2, Nq=19, Nk=33, D=16, causal=True, seed=0))
def test_flash_attention_reads_strided_inputs(impl, case):
    q, k, v = strided(*case.tensors())
    out = impl.flash_attention(q, k, v, **case.options)
    check_attention(
        out, q, k, v, **case.options,
        hint="q, k and v are views with their own strides (k's and v's differ, and q's head dim "
        "has stride 2): pass each tensor's own .stride() to the kernel and never assume a "
        "contiguous layout",
    )  # fmt: skip


def test_flash_attention_passes_constant_values_through(impl):
    case = AttentionCase(B=1, H=2, Hkv=1, Nq=37, Nk=23, D=16, causal=True, scale=8.0, seed=3)
    q, k, _ = case.tensors()
    value = torch.linspace(-2.0, 2.0, case.D).to(k)
    out = impl.flash_attention(q, k, value.expand_as(k).contiguous(), causal=True)
    expected = value.double().expand(out.shape).clone()
    expected[:, :, : case.Nq - case.Nk] = 0.0  # bottom-right: the first Nq - Nk queries see no key
    assert_close(
        out, expected, hint="the weights of each query must sum to 1: rescale l exactly like "
        "acc, and keep padding keys past the end out of l",
    )  # fmt: skip


def test_flash_attention_gives_zeros_where_a_query_sees_no_key(impl):
    case = AttentionCase(B=1, H=2, Hkv=2, Nq=35, Nk=3, D=16, causal=True, scale=3.0, seed=4)
    q, k, v = case.tensors()
    out = impl.flash_attention(q, k, v, causal=True)
    assert not torch.isnan(out).any(), (
        "NaN in the output: the first Nq - Nk = 32 queries see no key, so their running max "
        "stays -inf, and exp2(-inf - -inf) or 0 / 0 is NaN. Shift by 0 while the max is -inf "
        "and divide by 1 where l == 0"
    )
    assert torch.equal(out[:, :, :32], torch.zeros_like(out[:, :, :32])), (
        "queries that see no key must return exact zeros"
    )


def test_flash_attention_leaves_its_inputs_alone(impl):
    case = AttentionCase(B=1, H=2, Hkv=1, Nq=9, Nk=20, D=16, causal=True, seed=5)
    q, k, v = case.tensors()
    before = [t.clone() for t in (q, k, v)]
    impl.flash_attention(q, k, v, causal=True)
    for name, t, original in zip("qkv", (q, k, v), before, strict=True):
        assert torch.equal(t, original), f"flash_attention modified its input {name}"


def test_flash_attention_leaves_no_attention_work_to_pytorch(impl):
    case = AttentionCase(B=1, H=2, Hkv=1, Nq=33, Nk=40, D=16, causal=True, seed=9)
    q, k, v = case.tensors()
    _, flops = count_flops(impl.flash_attention, q, k, v, causal=True)
    attention = 4 * case.B * case.H * case.Nq * case.Nk * case.D
    assert flops < attention / 100, (
        f"flash_attention ran {flops} FLOPs of PyTorch matrix products (the attention itself "
        f"is {attention}): the whole attention belongs inside the kernel"
    )


BAD_CALLS = [*bad_attention_inputs("flash_attention"), *bad_head_dims("flash_attention")]


@pytest.mark.parametrize(("bad", "names"), BAD_CALLS, ids=[str(bad) for bad, _ in BAD_CALLS])
def test_flash_attention_refuses_bad_inputs(impl, bad, names):
    assert_value_error(bad, impl, match=names)
