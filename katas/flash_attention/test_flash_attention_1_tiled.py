"""Level 1: `tiled_attention`, the online softmax in plain PyTorch."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.cost import largest_tensor
from grading.devices import float_dtypes
from grading.tolerance import assert_close
from katas.flash_attention.flash_attention_cases import (
    MODERATE_SCALES,
    AttentionCase,
    attention_cases,
    check_attention,
    shape_errors,
)

BLOCK = 8  # the block sizes drawn below sit around this one
CASES = attention_cases(max_len=40, block=BLOCK, head_dims=(4, 16, 32), dtypes=float_dtypes())
MODERATE_CASES = attention_cases(
    max_len=40, block=BLOCK, head_dims=(4, 16), dtypes=float_dtypes(), scales=MODERATE_SCALES
)
BLOCK_SIZES = st.sampled_from([1, BLOCK - 1, BLOCK, BLOCK + 1, 64])


@given(case=CASES, block_size=BLOCK_SIZES)
@example(  # scores in the hundreds, several key blocks, GQA, Nq != Nk, partial last block
    case=AttentionCase(1, 4, 2, 13, 29, 16, False, None, torch.float16, 8.0, 0), block_size=8
)
@example(  # causal with more queries than keys: the first 12 queries see nothing
    case=AttentionCase(2, 2, 1, 29, 17, 4, True, 0.3, torch.float32, 1.0, 1), block_size=5
)
def test_tiled_attention_matches_oracle(impl, case, block_size):
    q, k, v = case.tensors()
    out = impl.tiled_attention(q, k, v, block_size=block_size, **case.options)
    check_attention(
        out, q, k, v, **case.options,
        hint="check the rescaling by exp(m_old - m_new) of both the running sum and the "
        "accumulator, the causal offset Nk - Nq, the last partial key block, and the kv head "
        "h // (H // Hkv)",
    )  # fmt: skip


@pytest.mark.parametrize("causal", [False, True])
def test_tiled_attention_never_builds_the_score_matrix(impl, figures, causal):
    B, H, Hkv, N, D, block_size = 1, 2, 1, 96, 16, 16
    q, k, v = AttentionCase(B, H, Hkv, N, N, D, causal, None, torch.float32, 1.0, 3).tensors()
    _, biggest = largest_tensor(impl.tiled_attention, q, k, v, causal=causal, block_size=block_size)
    figures.record(
        "largest tensor / one head's score matrix", biggest.numel / (N * N), "x",
        causal=causal, N=N, block_size=block_size,
    )  # fmt: skip
    assert biggest.numel < N * N, (
        f"tiled_attention made a tensor of {biggest}, as big as a score matrix of {N} x {N}; "
        f"work through the keys {block_size} at a time and keep only (B, H, Nq, block_size) "
        "scores alive"
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


def test_tiled_attention_gives_zeros_where_a_query_sees_no_key(impl):
    case = AttentionCase(1, 2, 2, 20, 7, 16, True, None, torch.float32, 3.0, 4)
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
    q, k, v = AttentionCase(1, 4, 2, 9, 11, 16, True, None, torch.float32, 1.0, 5).tensors()
    before = [t.clone() for t in (q, k, v)]
    impl.tiled_attention(q, k, v, causal=True, sm_scale=0.5, block_size=4)
    for name, t, original in zip("qkv", (q, k, v), before, strict=True):
        assert torch.equal(t, original), f"tiled_attention modified its input {name} in place"


def test_tiled_attention_refuses_mismatched_shapes(impl):
    q, k, v = AttentionCase(2, 4, 2, 5, 6, 16, False, None, torch.float32, 1.0, 6).tensors()
    for what, args in shape_errors(q, k, v):
        with pytest.raises(ValueError):
            impl.tiled_attention(*args)
            pytest.fail(f"tiled_attention accepted {what}; raise a ValueError naming the problem")
