"""Level 1: `tiled_attention`, the online softmax in plain PyTorch."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.devices import float_dtypes
from grading.judge.attention import AttentionCase, scores_below_any_mask
from grading.judge.cost import largest_tensor
from grading.judge.errors import assert_value_error
from grading.judge.oracles import attention_oracle
from grading.judge.tolerance import assert_close
from katas.flash_attention.cases import (
    LONG_NK,
    MODERATE_SCALES,
    SM_SCALES,
    attention_cases,
    bad_attention_inputs,
    bad_call,
    below_mask_cases,
    causal_offset_sweep,
    check_attention,
    near_tied_scores,
    scores_far_below_zero,
    strided,
)

BLOCK = 8  # the block sizes drawn below sit around this one
CASES = attention_cases(max_len=40, block=BLOCK, head_dims=(4, 16, 32), dtypes=float_dtypes())
MODERATE_CASES = attention_cases(
    max_len=40, block=BLOCK, head_dims=(4, 16), dtypes=float_dtypes(), scales=MODERATE_SCALES
)
BLOCK_SIZES = st.sampled_from([1, BLOCK - 1, BLOCK, BLOCK + 1, 64])
HINT = (
    "check the rescaling by exp(m_old - m_new) of both the running sum and the accumulator, "
    "the causal offset Nk - Nq, the last partial key block, the kv head h // (H // Hkv), and "
    "that sm_scale=0.0 is a scale (not the default)"
)


@given(case=CASES, block_size=BLOCK_SIZES)
@example(  # scores in the hundreds, several key blocks, GQA, Nq != Nk, partial last block
    case=AttentionCase(B=1, H=4, Hkv=2, Nq=13, Nk=29, D=16, dtype=torch.float16, scale=8.0, seed=0),
    block_size=8,
)
@example(  # causal with more queries than keys: the first 12 queries see nothing
    case=AttentionCase(B=2, H=2, Hkv=1, Nq=29, Nk=17, D=4, causal=True, sm_scale=0.3, seed=1),
    block_size=5,
)
@example(  # sm_scale=0.0: every weight is equal, the output is the mean of the visible values
    case=AttentionCase(B=1, H=2, Hkv=1, Nq=7, Nk=19, D=16, causal=True, sm_scale=0.0, seed=2),
    block_size=8,
)
@example(  # bfloat16, one key block larger than all the keys
    case=AttentionCase(B=2, H=3, Hkv=3, Nq=9, Nk=5, D=32, dtype=torch.bfloat16, scale=3.0, seed=3),
    block_size=64,
)
@example(  # a negative sm_scale: used as given, the most opposed key weighs the most
    case=AttentionCase(B=1, H=2, Hkv=1, Nq=6, Nk=21, D=16, causal=True, sm_scale=-1.0, seed=4),
    block_size=8,
)  # fmt: skip
def test_tiled_attention_matches_oracle(impl, case, block_size):
    q, k, v = case.tensors()
    out = impl.tiled_attention(q, k, v, block_size=block_size, **case.options)
    check_attention(out, q, k, v, **case.options, hint=HINT)


@pytest.mark.parametrize("dtype", float_dtypes(), ids=str)
@pytest.mark.parametrize("block_size", [16, 64])
def test_tiled_attention_keeps_float32_sums_over_long_sequences(impl, dtype, block_size):
    # Near-equal weights over thousands of keys: the running sum l grows into the thousands.
    case = AttentionCase(B=1, H=2, Hkv=1, Nq=3, Nk=2 * LONG_NK, D=4, dtype=dtype, scale=0.5)
    q, k, v = case.tensors()
    v = v + 3.0  # an output far from zero, so that a relative error in l shows in full
    out = impl.tiled_attention(q, k, v, block_size=block_size)
    check_attention(
        out, q, k, v, causal=False, sm_scale=None,
        hint=f"right at short lengths but not over {case.Nk} keys: a precision failure. A "
        f"running sum or accumulator kept in {dtype} stops growing once it is large (float16 "
        "steps by 4 above 4096); keep m, l and acc in float32 and cast only the result",
    )  # fmt: skip


@pytest.mark.parametrize("dtype", float_dtypes(), ids=str)
def test_tiled_attention_survives_scores_far_below_zero(impl, dtype):
    case = AttentionCase(B=1, H=2, Hkv=2, Nq=9, Nk=37, D=16, causal=True, dtype=dtype, seed=7)
    q, k, v = scores_far_below_zero(case)
    out = impl.tiled_attention(q, k, v, causal=True, block_size=8)
    check_attention(
        out, q, k, v, causal=True, sm_scale=None,
        hint="every score here is about -200, where exp(score) is 0 in float32: subtract the "
        "running max before exp, so the largest weight of each query is exactly 1",
    )  # fmt: skip


@given(
    drawn=below_mask_cases(max_len=24, block=BLOCK, dtypes=float_dtypes()), block_size=BLOCK_SIZES
)
@example(  # every score about -1.3e30, past -1e30
    drawn=(AttentionCase(B=1, H=2, Hkv=1, Nq=5, Nk=19, D=16, causal=True, seed=1), 51),
    block_size=8,
)
@example(  # float16 inputs, scores about -2.6e5, past float16's finfo.min
    drawn=(AttentionCase(B=1, H=2, Hkv=2, Nq=9, Nk=9, D=16, causal=True, dtype=torch.float16), 10),
    block_size=4,
)
def test_tiled_attention_with_every_score_below_any_mask_constant(impl, drawn, block_size):
    case, power = drawn
    q, k, v = scores_below_any_mask(case, power)
    out = impl.tiled_attention(q, k, v, block_size=block_size, causal=case.causal)
    assert_close(
        out,
        attention_oracle(q, k, v, causal=case.causal),
        hint=f"every visible score is about -2**{2 * power - 2}, below any finite mask "
        "constant: mask with -inf (not -1e30, -1e4 or the input dtype's finfo.min), start the "
        "running max at -inf, and give a query that sees no key zeros",
    )


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("Nq", "Nk", "D"), [(96, 96, 16), (16, 2048, 4)], ids=["square", "long-keys"]
)
def test_tiled_attention_never_builds_the_score_matrix(impl, figures, causal, Nq, Nk, D):
    block_size = 16
    case = AttentionCase(B=1, H=2, Hkv=1, Nq=Nq, Nk=Nk, D=D, causal=causal, seed=3)
    q, k, v = case.tensors()
    _, biggest = largest_tensor(impl.tiled_attention, q, k, v, causal=causal, block_size=block_size)
    figures.record(
        "largest tensor / one head's score matrix", biggest.numel / (Nq * Nk), "x",
        causal=causal, Nq=Nq, Nk=Nk, block_size=block_size,
    )  # fmt: skip
    assert biggest.numel < Nq * Nk, (
        f"tiled_attention made a tensor of {biggest}, as big as a score matrix of {Nq} x {Nk}; "
        f"work through the keys {block_size} at a time and keep only (B, H, Nq, block_size) "
        "scores alive"
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("Nq", [1, 4])
def test_tiled_attention_keeps_scores_to_one_key_block(impl, figures, dtype, causal, Nq):
    # 16 query heads share one kv head: one query's scores over every key, for every head
    # (B·H·Nk), outweigh k and v themselves (B·Hkv·Nk·D), so a whole row of scores shows even
    # at Nq = 1, where it is the "Nq x Nk" tensor.
    B, H, Hkv, Nk, D, block_size = 1, 16, 1, 2048, 4, 16
    case = AttentionCase(B=B, H=H, Hkv=Hkv, Nq=Nq, Nk=Nk, D=D, causal=causal, dtype=dtype, seed=6)
    q, k, v = case.tensors()
    _, biggest = largest_tensor(impl.tiled_attention, q, k, v, causal=causal, block_size=block_size)
    row = B * H * Nk
    figures.record(
        "largest tensor / one query's scores for every head", biggest.numel / row, "x",
        causal=causal, Nq=Nq, Nk=Nk, H=H, Hkv=Hkv, block_size=block_size,
    )  # fmt: skip
    assert biggest.numel < row, (
        f"tiled_attention made a tensor of {biggest}, as big as one query's scores over all "
        f"{Nk} keys for all {H} heads ({row} elements). The scores of a call live one key "
        f"block at a time, (B, H, Nq, block_size={block_size}), one query included (Nq = 1 is "
        "no reason to take every key at once); and a kv head is read where it is by its "
        f"{H // Hkv} query heads (group the query heads, do not copy k or v for each one)"
    )


@given(case=MODERATE_CASES, sizes=st.tuples(BLOCK_SIZES, BLOCK_SIZES))
def test_tiled_attention_does_not_depend_on_block_size(impl, case, sizes):
    q, k, v = case.tensors()
    first, second = (impl.tiled_attention(q, k, v, block_size=n, **case.options) for n in sizes)
    assert_close(
        first, second.double(), name=f"block_size={sizes[0]} vs block_size={sizes[1]}",
        hint="blocks only change the order of the sums: a difference means some block is "
        "dropped, counted twice, or not rescaled when the running max changes",
    )  # fmt: skip


HALF_DTYPES = [dtype for dtype in float_dtypes() if dtype != torch.float32]


@given(
    case=attention_cases(
        max_len=40, block=BLOCK, head_dims=(4, 16, 32), dtypes=HALF_DTYPES,
        scales=MODERATE_SCALES, sm_scales=[s for s in SM_SCALES if s != 0.0],
    ),
    offset=st.sampled_from([-300.0, 300.0, 1000.0]),
    block_size=BLOCK_SIZES,
)  # fmt: skip
@example(  # every score about 300, a few apart: q·k about 1200, rounded by 0.5 in float16
    case=AttentionCase(B=1, H=2, Hkv=1, Nq=9, Nk=37, D=16, dtype=torch.float16, seed=5),
    offset=300.0,
    block_size=8,
)
def test_tiled_attention_with_near_tied_scores_far_from_zero(impl, case, offset, block_size):
    q, k, v = near_tied_scores(case, offset)
    out = impl.tiled_attention(q, k, v, block_size=block_size, **case.options)
    check_attention(
        out, q, k, v, **case.options,
        hint=f"every score here is about {offset:g}, the largest few within a unit or two of "
        f"each other. q @ kᵀ taken in {case.dtype} rounds such scores by 0.1 or more, which "
        "moves these near-tied weights by as much: convert q and k to float32 before the "
        "product (the scores run in float32), and subtract the running max before exp",
    )  # fmt: skip


@pytest.mark.parametrize("block_size", [7, 16])
def test_tiled_attention_at_every_causal_offset(impl, block_size):
    # The causal diagonal ends where Nk - Nq puts it: every residue modulo the block sizes.
    for offset in causal_offset_sweep():
        Nq = 19
        case = AttentionCase(
            B=1, H=2, Hkv=1, Nq=Nq, Nk=Nq + offset, D=16, causal=True, seed=offset + 20
        )  # fmt: skip
        q, k, v = case.tensors()
        out = impl.tiled_attention(q, k, v, causal=True, block_size=block_size)
        check_attention(
            out, q, k, v, causal=True, sm_scale=None,
            hint=f"causal with Nk - Nq = {offset} (Nq = {Nq}, Nk = {case.Nk}) and "
            f"block_size={block_size}: query i sees keys j <= i + Nk - Nq, no fewer and no "
            "more; a key block skipped or a range ended one key early shows only where the "
            "diagonal meets a block boundary",
        )  # fmt: skip


@given(case=CASES, block_size=BLOCK_SIZES)
def test_tiled_attention_passes_constant_values_through(impl, case, block_size):
    q, k, v = case.tensors()
    value = torch.linspace(-2.0, 2.0, case.D).to(v)  # every key carries this value vector
    v = value.expand_as(v)
    out = impl.tiled_attention(q, k, v, block_size=block_size, **case.options)
    seen_nothing = torch.zeros(case.Nq, dtype=torch.bool)
    if case.causal:  # bottom-right: the first Nq - Nk queries see no key
        seen_nothing[: max(case.Nq - case.Nk, 0)] = True
    expected = torch.where(seen_nothing[:, None], 0.0, value.cpu().double()).expand(out.shape)
    assert_close(
        out, expected, hint="the weights of each query must sum to 1: the running sum must be "
        "rescaled exactly like the accumulator, and a query that sees no key returns zeros",
    )  # fmt: skip


@given(
    case=attention_cases(
        max_len=40, block=BLOCK, head_dims=(16,), dtypes=float_dtypes(), causal=False,
        scales=MODERATE_SCALES,
    ),
    perm_seed=st.integers(0, 2**31 - 1),
)  # fmt: skip
def test_tiled_attention_ignores_the_order_of_keys(impl, case, perm_seed):
    q, k, v = case.tensors()
    perm = torch.randperm(case.Nk, generator=torch.Generator().manual_seed(perm_seed)).to(k.device)
    out = impl.tiled_attention(q, k, v, block_size=BLOCK, sm_scale=case.sm_scale)
    shuffled = impl.tiled_attention(
        q, k[:, :, perm], v[:, :, perm], block_size=BLOCK, sm_scale=case.sm_scale
    )
    assert_close(
        shuffled, out.double(), name="output with keys and values shuffled together",
        hint="without a causal mask the keys form a set; a block-dependent result means a "
        "block is dropped or weighed differently",
    )  # fmt: skip


def test_tiled_attention_reads_strided_inputs(impl):
    case = AttentionCase(B=2, H=4, Hkv=2, Nq=19, Nk=33, D=16, causal=True, seed=8)
    q, k, v = strided(*case.tensors())
    out = impl.tiled_attention(q, k, v, causal=True, block_size=8)
    check_attention(
        out, q, k, v, causal=True, sm_scale=None,
        hint="q, k and v are non-contiguous views, and k and v have different strides: use "
        "reshape (not view) and index each tensor by itself",
    )  # fmt: skip


def test_tiled_attention_gives_zeros_where_a_query_sees_no_key(impl):
    case = AttentionCase(B=1, H=2, Hkv=2, Nq=20, Nk=7, D=16, causal=True, scale=3.0, seed=4)
    q, k, v = case.tensors()
    out = impl.tiled_attention(q, k, v, causal=True, block_size=4)
    assert not torch.isnan(out).any(), (
        "NaN in the output: with bottom-right causal masking the first Nq - Nk = 13 queries see "
        "no key; their max stays -inf and exp(-inf - -inf) is NaN. Treat such rows as max 0 "
        "and return zeros for them"
    )
    assert torch.equal(out[:, :, :13], torch.zeros_like(out[:, :, :13])), (
        "queries that see no key must return exact zeros"
    )


def test_tiled_attention_leaves_its_inputs_alone(impl):
    case = AttentionCase(B=1, H=4, Hkv=2, Nq=9, Nk=11, D=16, causal=True, seed=5)
    q, k, v = case.tensors()
    before = [t.clone() for t in (q, k, v)]
    impl.tiled_attention(q, k, v, causal=True, sm_scale=0.5, block_size=4)
    for name, t, original in zip("qkv", (q, k, v), before, strict=True):
        assert torch.equal(t, original), f"tiled_attention modified its input {name} in place"


def _bad_block_sizes():
    q, k, v = AttentionCase(B=1, H=2, Hkv=1, Nq=5, Nk=6, D=16).tensors()
    return [
        (bad_call("tiled_attention", (q, k, v), why, block_size=n), "block_size")
        for why, n in [("block_size 0", 0), ("a negative block_size", -16)]
    ]


BAD_CALLS = [*bad_attention_inputs("tiled_attention"), *_bad_block_sizes()]


@pytest.mark.parametrize(("bad", "names"), BAD_CALLS, ids=[str(bad) for bad, _ in BAD_CALLS])
def test_tiled_attention_refuses_bad_inputs(impl, bad, names):
    assert_value_error(bad, impl, match=names)
