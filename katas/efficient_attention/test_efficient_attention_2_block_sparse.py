"""Level 2: block-sparse attention.

Run: `pytest katas/efficient_attention -k 2_block_sparse [--impl ...]`.
Order: worked examples and bad inputs first (cheap), then the cost counters, then properties.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.attention import AttentionCase, causal_mask, scores_below_any_mask
from grading.judge.cost import count_flops, elements_written, largest_tensor
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.oracles import attention_oracle
from grading.judge.strategies import randn, seeds
from grading.judge.tolerance import assert_close
from katas.efficient_attention.cases import (
    below_mask_cases,
    cases,
    extreme_tensors,
    strided_like_a_model,
    token_mask,
)

# Zero queries score every key alike: each output is the mean of the values 1, 2, 4, 8 it reads.
Q0 = torch.zeros(1, 1, 4, 1)
K = torch.randn(1, 1, 4, 1, generator=torch.Generator().manual_seed(0))
V = torch.tensor([1.0, 2.0, 4.0, 8.0]).view(1, 1, 4, 1)
LOWER = torch.tensor([[True, False], [True, True]])  # block 0 reads itself; block 1 reads both


def column(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64).view(1, 1, -1, 1)


def per_row_mask(nb: int, per_row: int, seed: int) -> torch.Tensor:
    """bool (nb, nb) with `per_row` key blocks, picked at random, in every row."""
    picks = torch.rand(nb, nb, generator=torch.Generator().manual_seed(seed)).argsort(dim=1)
    return torch.zeros(nb, nb, dtype=torch.bool).scatter(1, picks[:, :per_row], True)


# ----------------------------------------------------------------------------------------------
# Worked examples


@pytest.mark.parametrize(
    "n, block_mask, causal, expected",
    [
        (4, LOWER, False, [1.5, 1.5, 3.75, 3.75]),
        (4, LOWER, True, [1.0, 1.5, 7 / 3, 15 / 4]),
        (3, torch.ones(2, 2, dtype=torch.bool), False, [7 / 3] * 3),  # last block: 1 token of 2
    ],
)
def test_block_sparse_worked_example(impl, n, block_mask, causal, expected):
    out = impl.block_sparse_attention(
        Q0[:, :, :n], K[:, :, :n], V[:, :, :n], block_mask, 2, causal=causal
    )
    assert_close(
        out,
        column(*expected),
        hint="block_mask[r, c] says query block r reads key block c (rows are queries); with "
        "causal=True the diagonal blocks are masked inside too; one softmax spans a row's blocks; "
        "the last block may be partial, and its padding is no key.",
    )


# ----------------------------------------------------------------------------------------------
# Bad input

_q, _k, _v = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)
_mask3 = torch.ones(3, 3, dtype=torch.bool)

BAD_CALLS = [
    BadCall("block_sparse_attention(q, k, v, block_mask [2, 2], 3) for N=8",
            "a block_mask of the wrong shape (ceil(8 / 3) = 3 blocks)",
            lambda impl: impl.block_sparse_attention(_q, _k, _v, _mask3[:2, :2], 3)),
    BadCall("block_sparse_attention(q, k, v, block_mask of float32, 3)", "a float block_mask",
            lambda impl: impl.block_sparse_attention(_q, _k, _v, _mask3.float(), 3)),
    BadCall("block_sparse_attention(q, k, v, block_mask of int64, 3)", "an integer block_mask",
            lambda impl: impl.block_sparse_attention(_q, _k, _v, _mask3.long(), 3)),
    BadCall("block_sparse_attention(q, k, v, [[True] * 3] * 3, 3)", "a block_mask that is a list",
            lambda impl: impl.block_sparse_attention(_q, _k, _v, [[True] * 3] * 3, 3)),
    BadCall("block_sparse_attention(q, k, v, block_mask, block_size=0)", "block_size 0",
            lambda impl: impl.block_sparse_attention(_q, _k, _v, _mask3, 0)),
    BadCall("block_sparse_attention(q, k, v, block_mask, block_size=-3)", "a negative block_size",
            lambda impl: impl.block_sparse_attention(_q, _k, _v, _mask3, -3)),
    BadCall("block_sparse_attention(q, k, v, block_mask, block_size=2.5)", "a float block_size",
            lambda impl: impl.block_sparse_attention(_q, _k, _v, _mask3, 2.5)),
    BadCall("block_sparse_attention(q, k, v, block_mask, block_size=3.0)",
            "a float block_size of integer value",
            lambda impl: impl.block_sparse_attention(_q, _k, _v, _mask3, 3.0)),
    BadCall("block_sparse_attention(q of length 8, k and v of length 6, block_mask, 3)",
            "Nk != Nq",
            lambda impl: impl.block_sparse_attention(_q, _k[:, :, :6], _v[:, :, :6], _mask3, 3)),
    BadCall("block_sparse_attention(q, k of length 8, v of length 6, block_mask, 3)",
            "v shorter than k",
            lambda impl: impl.block_sparse_attention(_q, _k, _v[:, :, :6], _mask3, 3)),
    BadCall("block_sparse_attention(q with 4 heads, k and v with 3, block_mask, 3)",
            "kv heads that do not divide the query heads",
            lambda impl: impl.block_sparse_attention(
                _q, torch.randn(1, 3, 8, 16), torch.randn(1, 3, 8, 16), _mask3, 3)),
    BadCall("block_sparse_attention(q bfloat16, k, v float32, block_mask, 3)",
            "q, k and v of different dtypes",
            lambda impl: impl.block_sparse_attention(_q.bfloat16(), _k, _v, _mask3, 3)),
    BadCall("block_sparse_attention(q, k and v of length 0, block_mask [0, 0], 3)",
            "a sequence of length 0",
            lambda impl: impl.block_sparse_attention(
                _q[:, :, :0], _k[:, :, :0], _v[:, :, :0], _mask3[:0, :0], 3)),
    BadCall("block_sparse_attention(q, k with D=0, v, block_mask, 3)", "a head dim of 0",
            lambda impl: impl.block_sparse_attention(_q[..., :0], _k[..., :0], _v, _mask3, 3)),
    BadCall("block_sparse_attention(q, k, v with batch 0, block_mask, 3)", "a batch of 0",
            lambda impl: impl.block_sparse_attention(_q[:0], _k[:0], _v[:0], _mask3, 3)),
    BadCall("block_sparse_attention(q and k with 0 heads, v, block_mask, 3)", "no heads",
            lambda impl: impl.block_sparse_attention(_q[:, :0], _k[:, :0], _v[:, :0], _mask3, 3)),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    "a block_mask of the wrong shape (ceil(8 / 3) = 3 blocks)": "block_mask",
    "a float block_mask": "block_mask",
    "an integer block_mask": "block_mask",
    "a block_mask that is a list": "block_mask",
    "block_size 0": "block_size",
    "a negative block_size": "block_size",
    "a float block_size": "block_size",
    "a float block_size of integer value": "block_size",
    "Nk != Nq": "k|v",
    "v shorter than k": "v",
    "kv heads that do not divide the query heads": "k|q",
    "q, k and v of different dtypes": "q|k|v",
    "a sequence of length 0": "q|k|v",
    "a head dim of 0": "q|k",
    "a batch of 0": "q|k|v",
    "no heads": "q|k|v",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_block_sparse_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])


def test_block_sparse_leaves_its_inputs_alone(impl):
    q, k, v = torch.randn(1, 2, 9, 4), torch.randn(1, 1, 9, 4), torch.randn(1, 1, 9, 4)
    mask = torch.tensor([[True, False, True], [False, True, False], [True, True, True]])
    saved = [t.clone() for t in (q, k, v, mask)]
    impl.block_sparse_attention(q, k, v, mask, 4, causal=True)
    for name, before, after in zip(
        ["q", "k", "v", "block_mask"], saved, (q, k, v, mask), strict=True
    ):
        assert torch.equal(before, after), f"{name} was changed in place"


# ----------------------------------------------------------------------------------------------
# Cost, counted deterministically: FLOPs of matrix products, the largest tensor made, and the
# elements every op writes (elementwise products and sums cost no FLOPs but write elements)


@pytest.mark.parametrize("bs", [1, 16, 64])
@pytest.mark.parametrize("per_row", [1, 3])
def test_block_sparse_flops_follow_the_allowed_blocks(impl, figures, per_row, bs):
    B, H, N, D = 1, 2, 256, 16
    block_mask = per_row_mask(N // bs, per_row, seed=per_row)
    q, k, v = (randn((B, H, N, D), seed=s) for s in range(3))
    _, flops = count_flops(impl.block_sparse_attention, q, k, v, block_mask, bs)
    allowed = int(block_mask.sum())
    exact = 4 * B * H * allowed * bs * bs * D  # Q·Kᵀ and P·V of each allowed block
    figures.record(
        "block-sparse FLOPs / allowed blocks' work", flops / exact, "x", per_row=per_row, bs=bs
    )
    assert flops <= 1.25 * exact, (
        f"{flops} FLOPs for {allowed} allowed blocks of {bs} x {bs} ({per_row} per row of "
        f"{N // bs}); scoring only those costs {exact}. Gather the allowed (query block, key "
        "block) pairs and score them alone, at the block_size asked for: a dense product masked "
        "afterwards costs as much as dense attention, and tiles larger than the blocks score "
        "pairs no block allows."
    )


@pytest.mark.parametrize("bs", [8, 16])
def test_block_sparse_elements_written_follow_the_allowed_blocks(impl, bs):
    written = {}
    for N in (256, 512):
        block_mask = per_row_mask(N // bs, 2, seed=N)
        q, k, v = (randn((1, 2, N, 16), seed=s) for s in range(3))
        _, written[N] = elements_written(impl.block_sparse_attention, q, k, v, block_mask, bs)
    assert written[512] <= 2.2 * written[256], (
        f"doubling N from 256 to 512 with 2 allowed blocks of {bs} per row multiplied the "
        f"elements written by all ops by {written[512] / max(written[256], 1):.2f}; the allowed "
        "blocks double, so the work must too. Scores for every (query, key) pair made by "
        "broadcasting and summing cost no FLOPs but still write N² · D elements."
    )


@pytest.mark.parametrize("bs", [8, 16])
def test_block_sparse_memory_follows_the_allowed_blocks(impl, bs):
    N = 512
    nb = N // bs
    block_mask = torch.eye(nb, dtype=torch.bool) | torch.eye(nb, dtype=torch.bool).roll(1, dims=1)
    q, k, v = (randn((1, 1, N, 16), seed=s) for s in range(3))
    _, biggest = largest_tensor(impl.block_sparse_attention, q, k, v, block_mask, bs, causal=True)
    assert biggest.numel <= N * N // 8, (
        f"largest tensor made: {biggest}; with 2 of {nb} blocks of {bs} allowed per row the "
        f"scores need {2 * nb * bs * bs} numbers, an N x N score matrix or token mask {N * N}."
    )


# ----------------------------------------------------------------------------------------------
# Properties


@st.composite
def block_cases(draw):
    block_size = draw(st.sampled_from([1, 2, 3, 4, 8]))
    case = draw(cases(max_len=34, same_length=True, block=block_size))
    nb = -(-case.Nq // block_size)
    density = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    mask_seed = draw(seeds())
    block_mask = torch.rand(nb, nb, generator=torch.Generator().manual_seed(mask_seed)) < density
    note(f"block_mask:\n{block_mask.int()}")
    return case, block_size, block_mask


@given(bc=block_cases(), causal=st.booleans())
@example(
    bc=(AttentionCase(H=2, Hkv=1, Nq=7, Nk=7, D=4, sm_scale=0.0), 3, LOWER.repeat(2, 2)[:3, :3]),
    causal=True,
)
def test_block_sparse_matches_dense_masked_attention(impl, bc, causal):
    case, bs, block_mask = bc
    q, k, v = case.tensors()
    out = impl.block_sparse_attention(
        q, k, v, block_mask, bs, causal=causal, sm_scale=case.sm_scale
    )
    assert out.dtype == q.dtype, f"got {out.dtype} for {q.dtype} inputs; outputs have q's dtype"
    mask = token_mask(block_mask, bs, case.Nq)
    expected = attention_oracle(q, k, v, causal=causal, sm_scale=case.sm_scale, mask=mask)
    assert_close(
        out,
        expected,
        hint="rows of block_mask are query blocks, columns key blocks; the last block may be "
        "partial (N % block_size keys, not block_size); causal masks inside the diagonal "
        "blocks; one softmax per query across all its blocks; a row with no block gives zeros; "
        "sm_scale=0.0 is a scale, not a missing one.",
    )


@given(
    case=cases(max_len=34, same_length=True),
    bs=st.sampled_from([1, 3, 4, 16]),
    causal=st.booleans(),
)
def test_block_sparse_with_every_block_is_dense_attention(impl, case: AttentionCase, bs, causal):
    q, k, v = case.tensors()
    nb = -(-case.Nq // bs)
    out = impl.block_sparse_attention(
        q, k, v, torch.ones(nb, nb, dtype=torch.bool), bs, causal=causal
    )
    assert_close(
        out,
        attention_oracle(q, k, v, causal=causal),
        hint="with every block allowed this is plain attention: check the last, partial block",
    )


@given(bc=block_cases(), causal=st.booleans(), data=st.data())
def test_block_sparse_ignores_blocks_not_allowed(impl, bc, causal, data):
    case, bs, block_mask = bc
    q, k, v = case.tensors()
    i = data.draw(st.integers(0, case.Nq - 1), label="query")
    outside = ~token_mask(block_mask, bs, case.Nq)[i]
    if causal:
        outside |= ~causal_mask(case.Nq, case.Nq)[i]
    noise = randn(k.shape, seed=case.seed + 3, dtype=k.dtype, scale=10.0)
    k2 = torch.where(outside[:, None], noise, k)
    v2 = torch.where(outside[:, None], noise[..., :1] * 10, v)
    before = impl.block_sparse_attention(q, k, v, block_mask, bs, causal=causal)[:, :, i]
    after = impl.block_sparse_attention(q, k2, v2, block_mask, bs, causal=causal)[:, :, i]
    assert_close(
        after,
        before.double(),
        hint=f"changing keys outside the blocks query {i} may read changed its output "
        "(a transposed mask, or causal ignored inside the diagonal block?)",
    )


@given(bc=block_cases(), causal=st.booleans())
def test_block_sparse_reads_strided_inputs(impl, bc, causal):
    case, bs, block_mask = bc
    q, k, v = case.tensors()
    views = [strided_like_a_model(t, pad) for t, pad in zip((q, k, v), (3, 0, 2), strict=True)]
    out = impl.block_sparse_attention(*views, block_mask.t().contiguous().t(), bs, causal=causal)
    expected = attention_oracle(q, k, v, causal=causal, mask=token_mask(block_mask, bs, case.Nq))
    assert_close(
        out,
        expected,
        hint="q, k and v here are transposed views of (B, N, heads, d + padding) storage, k and "
        "v with different strides, and block_mask is column-major: use reshape, not view.",
    )


@given(bc=block_cases(), causal=st.booleans())
@example(
    bc=(AttentionCase(H=2, Hkv=1, Nq=12, Nk=12, D=16), 4, torch.ones(3, 3, dtype=torch.bool)),
    causal=False,
)
def test_block_sparse_survives_scores_in_the_thousands(impl, bc, causal):
    case, bs, block_mask = bc
    q, k, v = extreme_tensors(case)
    out = impl.block_sparse_attention(q, k, v, block_mask, bs, causal=causal, sm_scale=0.25)
    mask = token_mask(block_mask, bs, case.Nq)
    expected = attention_oracle(q, k, v, causal=causal, sm_scale=0.25, mask=mask)
    assert_close(
        out,
        expected,
        hint="scores here reach thousands (exact in float32): exp(score) overflows to inf. "
        "Subtract each query's maximum over all of its blocks (not block by block without "
        "rescaling) before exp().",
    )


@given(
    drawn=below_mask_cases(max_len=20),
    bs=st.sampled_from([1, 3, 4]),
    causal=st.booleans(),
    mask_seed=seeds(),
)
@example(
    drawn=(AttentionCase(H=2, Hkv=1, Nq=7, Nk=7, D=16), 51),
    bs=3,
    causal=False,
    mask_seed=0,
)
def test_block_sparse_with_every_score_below_any_mask_constant(impl, drawn, bs, causal, mask_seed):
    case, power = drawn
    case = replace(case, Nk=case.Nq)
    q, k, v = scores_below_any_mask(case, power)
    nb = -(-case.Nq // bs)
    block_mask = torch.rand(nb, nb, generator=torch.Generator().manual_seed(mask_seed)) < 0.7
    note(f"block_mask:\n{block_mask.int()}")
    out = impl.block_sparse_attention(q, k, v, block_mask, bs, causal=causal)
    mask = token_mask(block_mask, bs, case.Nq)
    assert_close(
        out,
        attention_oracle(q, k, v, causal=causal, mask=mask),
        hint=f"every visible score is about -2**{2 * power - 2}, below any finite mask "
        "constant: the padding of a partial last block and the keys causal hides get -inf "
        "(not -1e4, -1e30 or the dtype's finfo.min), and a running max starts at -inf",
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_block_sparse_over_thousands_of_keys_keeps_float32_precision(impl, dtype):
    N, bs = 2048, 128
    q, k, v = AttentionCase(Nq=N, Nk=N, D=8, dtype=dtype, seed=11).tensors()
    block_mask = torch.ones(N // bs, N // bs, dtype=torch.bool).tril()
    out = impl.block_sparse_attention(q, k, v, block_mask, bs, causal=True)
    assert_close(
        out,
        attention_oracle(q, k, v, causal=True),
        hint="this is a precision failure, not a wrong mask: with thousands of keys per query, "
        "row maxima and sums kept in float16/bfloat16 drift. Cast q, k and v to float32 first "
        "and only the output back to q's dtype.",
    )


def test_block_sparse_float64_inputs_give_float64_outputs(impl):
    q, k, v = AttentionCase(H=2, Hkv=1, Nq=11, Nk=11, D=4, dtype=torch.float64).tensors()
    block_mask = torch.tensor([[True, False, False], [True, True, False], [False, True, True]])
    out = impl.block_sparse_attention(q, k, v, block_mask, 4, causal=True)
    assert out.dtype == torch.float64, (
        f"got {out.dtype} for float64 inputs: outputs have q's dtype, float64 included (compute "
        "in float32 or float64, then cast the output to q.dtype)"
    )
    assert_close(
        out,
        attention_oracle(q, k, v, causal=True, mask=token_mask(block_mask, 4, 11)),
        dtype=torch.float32,  # float64 inputs may be computed in float32
        hint="float64 inputs: the same block-sparse attention, checked at float32's tolerance",
    )


@pytest.mark.parametrize("causal", [False, True])
def test_block_sparse_positions_past_32767_stay_exact(impl, causal):
    # 33001 tokens in blocks of 37: block 885 holds positions 32745 .. 32781, across int16's
    # largest value 32767, and the last block, 891, holds 34 tokens and 3 of padding. Every block
    # reads itself, the block before it and block 0. D = 1 keeps it cheap.
    N, bs = 33001, 37
    nb = -(-N // bs)
    block_mask = torch.eye(nb, dtype=torch.bool) | torch.eye(nb, dtype=torch.bool).roll(-1, dims=1)
    block_mask[:, 0] = True
    block_mask[0, -1] = False  # no wrap-around: block 0 does not read the last block
    q, k, v = AttentionCase(Nq=N, Nk=N, D=1, seed=5).tensors()
    out = impl.block_sparse_attention(q, k, v, block_mask, bs, causal=causal)
    assert out.shape == (1, 1, N, 1)
    # The float64 oracle for a few query blocks, over the keys they may read.
    checked = (0, nb // 2, 884, 885, 886, nb - 2, nb - 1)
    rows = torch.cat([torch.arange(r * bs, min(r * bs + bs, N)) for r in checked])
    allowed = block_mask[rows // bs].repeat_interleave(bs, dim=1)[:, :N]  # (rows, N)
    if causal:
        allowed &= torch.arange(N)[None, :] <= rows[:, None]
    keys = allowed.any(dim=0).nonzero().flatten()
    expected = attention_oracle(q[:, :, rows], k[:, :, keys], v[:, :, keys], mask=allowed[:, keys])
    assert_close(
        out[:, :, rows],
        expected,
        name=f"the query blocks {checked} of {nb}",
        hint="past position 32767 (int16's largest) positions and indices wrap around: form "
        "token positions (rows * block_size + offsets) with torch.arange in int64, the default, "
        "and compare them as int64; the same for indices that gather or scatter blocks.",
    )
