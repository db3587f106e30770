"""Level 2: `flash_attention`, one Triton kernel.

Without a GPU the kernel runs in Triton's interpreter, one program at a time, so the shapes here
stay small (N <= 40, D in {16, 32}); the reference kernel then uses 16 x 16 tiles, so these
lengths still cross several query and key blocks. test_flash_attention_gpu.py covers D = 64 and
128, bfloat16 and long sequences on a GPU.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given

from grading.devices import float_dtypes
from grading.tolerance import assert_close
from katas.flash_attention.flash_attention_cases import (
    AttentionCase,
    attention_cases,
    check_attention,
    shape_errors,
)

CASES = attention_cases(max_len=40, block=16, head_dims=(16, 32), dtypes=float_dtypes(triton=True))
HINT = (
    "check the rescaling by exp2(m_old - m_new) of both l and acc, the masks (keys past the "
    "end, the causal offset Nk - Nq), the kv head h // (H // Hkv), and the strides of each tensor"
)


@given(case=CASES)
@example(
    case=AttentionCase(1, 4, 2, 33, 40, 16, True, None, torch.float16, 8.0, 0)
)  # overflow, GQA
@example(case=AttentionCase(2, 2, 1, 40, 17, 32, True, 0.3, torch.float32, 1.0, 1))  # no key seen
@example(case=AttentionCase(1, 3, 3, 17, 33, 16, False, None, torch.float32, 1.0, 2))  # tails
def test_flash_attention_matches_oracle(impl, case):
    q, k, v = case.tensors()
    out = impl.flash_attention(q, k, v, **case.options)
    check_attention(out, q, k, v, **case.options, hint=HINT)


@given(
    case=attention_cases(max_len=40, block=16, head_dims=(16,), dtypes=float_dtypes(triton=True))
)
@example(case=AttentionCase(2, 4, 2, 19, 33, 16, True, None, torch.float32, 1.0, 0))
def test_flash_attention_reads_strided_inputs(impl, case):
    # Laid out (B, N, H, D) in memory, as a projection produces them, then viewed as (B, H, N, D).
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in case.tensors())
    out = impl.flash_attention(q, k, v, **case.options)
    check_attention(
        out, q, k, v, **case.options,
        hint="q, k and v are views with their own strides: pass each tensor's own .stride() "
        "to the kernel and never assume a contiguous layout",
    )  # fmt: skip


def test_flash_attention_passes_constant_values_through(impl):
    case = AttentionCase(1, 2, 1, 37, 23, 16, True, None, torch.float32, 8.0, 3)
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
    q, k, v = AttentionCase(1, 2, 2, 35, 3, 16, True, None, torch.float32, 3.0, 4).tensors()
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
    q, k, v = AttentionCase(1, 2, 1, 9, 20, 16, True, None, torch.float32, 1.0, 5).tensors()
    before = [t.clone() for t in (q, k, v)]
    impl.flash_attention(q, k, v, causal=True)
    for name, t, original in zip("qkv", (q, k, v), before, strict=True):
        assert torch.equal(t, original), f"flash_attention modified its input {name}"


def test_flash_attention_refuses_bad_inputs(impl):
    q, k, v = AttentionCase(2, 4, 2, 5, 6, 16, False, None, torch.float32, 1.0, 6).tensors()
    odd_head_dim = AttentionCase(1, 2, 2, 5, 6, 24, False, None, torch.float32, 1.0, 7).tensors()
    for what, args in [
        *shape_errors(q, k, v),
        ("head dim 24 (not 16, 32, 64 or 128)", odd_head_dim),
    ]:
        with pytest.raises(ValueError):
            impl.flash_attention(*args)
            pytest.fail(f"flash_attention accepted {what}; raise a ValueError before launching")
