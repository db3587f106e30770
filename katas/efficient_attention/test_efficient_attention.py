"""Tests for the efficient-attention kata: sliding window, block-sparse and linear attention.

Run: `nox -s efficient_attention` or `pytest katas/efficient_attention [--impl ...]`.
Order: worked examples and bad inputs first (cheap), then the cost counters, then properties.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.cost import count_flops, largest_tensor
from grading.oracles import attention_oracle
from grading.strategies import randn, seeds
from grading.tolerance import assert_close
from katas.efficient_attention.support import (
    Case,
    band_mask,
    cases,
    linear_attention_oracle,
    token_mask,
)

# Zero queries score every key alike, so each output is the plain mean of the values it sees.
# Values 1, 2, 4, 8 make every subset's mean distinct: the output names the keys that were read.
Q0 = torch.zeros(1, 1, 4, 1)
K = torch.randn(1, 1, 4, 1, generator=torch.Generator().manual_seed(0))
V = torch.tensor([1.0, 2.0, 4.0, 8.0]).view(1, 1, 4, 1)
CAUSAL_MEANS = [1.0, 1.5, 7 / 3, 15 / 4]  # query i sees keys 0..i


def column(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64).view(1, 1, -1, 1)


# ----------------------------------------------------------------------------------------------
# Worked examples


@pytest.mark.parametrize(
    "window, expected",
    [
        (1, [1.0, 2.0, 4.0, 8.0]),
        (2, [1.0, 1.5, 3.0, 6.0]),
        (3, [1.0, 1.5, 7 / 3, 14 / 3]),
        (4, CAUSAL_MEANS),
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


LOWER = torch.tensor([[True, False], [True, True]])  # block 0 reads itself; block 1 reads both


@pytest.mark.parametrize(
    "n, block_mask, causal, expected",
    [
        (4, LOWER, False, [1.5, 1.5, 3.75, 3.75]),
        (4, LOWER, True, CAUSAL_MEANS),
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


@pytest.mark.parametrize("causal, expected", [(False, [3.75] * 4), (True, CAUSAL_MEANS)])
def test_linear_attention_worked_example(impl, causal, expected):
    out = impl.linear_attention(Q0, Q0, V, causal=causal)
    assert_close(
        out,
        column(*expected),
        hint="phi(0) = elu(0) + 1 = 1, so every key weighs the same and o_i is a mean of the "
        "values seen: the numerator phi(q)ᵀS needs the denominator phi(q)ᵀz.",
    )


def test_linear_attention_step_worked_example(impl):
    state, outs = None, []
    for t in range(4):
        o_t, state = impl.linear_attention_step(Q0[:, :, t], Q0[:, :, t], V[:, :, t], state)
        outs.append(o_t)
    assert_close(
        torch.stack(outs, dim=2),
        column(*CAUSAL_MEANS),
        hint="each step adds phi(k_t) v_tᵀ to S and phi(k_t) to z; replacing them instead of "
        "adding forgets the past.",
    )


# ----------------------------------------------------------------------------------------------
# Bad input


def test_bad_inputs_raise_value_error(impl):
    q, k, v = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)
    k3, v3 = torch.randn(1, 3, 8, 16), torch.randn(1, 3, 8, 16)
    mask3 = torch.ones(3, 3, dtype=torch.bool)
    wrong_state = (torch.zeros(1, 4, 16, 8), torch.zeros(1, 4, 16))
    sliding, sparse = impl.sliding_window_attention, impl.block_sparse_attention
    bad_calls = {
        "window=0": lambda: sliding(q, k, v, 0),
        "a 3-D q": lambda: sliding(q[0], k, v, 2),
        "k with head dim 8 for q's 16": lambda: sliding(q, k[..., :8], v, 2),
        "3 kv heads for 4 query heads": lambda: impl.linear_attention(q, k3, v3),
        "v shorter than k": lambda: impl.linear_attention(q, k, v[:, :, :5]),
        "a 2x2 block_mask for 8 tokens in blocks of 3": lambda: sparse(q, k, v, mask3[:2, :2], 3),
        "a block_mask of floats": lambda: sparse(q, k, v, mask3.float(), 3),
        "block-sparse with Nk != Nq": lambda: sparse(q, k[:, :, :6], v[:, :, :6], mask3, 3),
        "a state of the wrong shape": lambda: impl.linear_attention_step(
            q[:, :, 0], k[:, :, 0], v[:, :, 0], wrong_state
        ),
    }
    for what, call in bad_calls.items():
        try:
            call()
        except ValueError:
            continue
        except Exception as exc:
            pytest.fail(f"{what}: raised {type(exc).__name__}: {exc}; expected a ValueError")
        pytest.fail(f"{what}: accepted; expected a ValueError naming the argument and its shape")


def test_inputs_are_not_modified(impl):
    q, k, v = torch.randn(1, 2, 9, 4), torch.randn(1, 1, 9, 4), torch.randn(1, 1, 9, 4)
    mask = torch.tensor([[True, False, True], [False, True, False], [True, True, True]])
    state = (torch.rand(1, 2, 4, 4), torch.rand(1, 2, 4) + 1)
    saved = [t.clone() for t in (q, k, v, mask, *state)]
    impl.sliding_window_attention(q, k, v, 3)
    impl.block_sparse_attention(q, k, v, mask, 4, causal=True)
    impl.linear_attention(q, k, v)
    impl.linear_attention_step(q[:, :, 0], k[:, :, 0], v[:, :, 0], state)
    for before, after in zip(saved, (q, k, v, mask, *state), strict=True):
        assert torch.equal(before, after), "an input (or the state passed in) was changed in place"


# ----------------------------------------------------------------------------------------------
# Cost, counted deterministically: FLOPs of matrix products, the largest tensor made


def test_sliding_window_flops_grow_with_n_times_window(impl, figures):
    B, H, D, window = 1, 2, 16, 16
    flops = {}
    for N in (512, 1024):
        q, k, v = (randn((B, H, N, D), seed=s) for s in range(3))
        _, flops[N] = count_flops(impl.sliding_window_attention, q, k, v, window)
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
        f"band ({band}). Score each chunk of queries against its band of keys only (chunks of "
        "at most `window` queries keep the band within twice the exact one)."
    )


def test_sliding_window_memory_stays_in_the_band(impl):
    N, window = 4096, 8
    q, k, v = (randn((1, 1, N, 8), seed=s) for s in range(3))
    _, biggest = largest_tensor(impl.sliding_window_attention, q, k, v, window)
    assert biggest.numel <= N * N // 16, (
        f"largest tensor made: {biggest}; an N x N score matrix or mask has {N * N} elements. "
        f"Memory must be O(Nq · window · D), here about {N * window * 8}."
    )


@pytest.mark.parametrize("per_row", [1, 3])
def test_block_sparse_flops_follow_the_allowed_blocks(impl, figures, per_row):
    B, H, N, D, bs = 1, 2, 256, 16, 16
    nb = N // bs
    picks = torch.rand(nb, nb, generator=torch.Generator().manual_seed(per_row)).argsort(dim=1)
    block_mask = torch.zeros(nb, nb, dtype=torch.bool).scatter(1, picks[:, :per_row], True)
    q, k, v = (randn((B, H, N, D), seed=s) for s in range(3))
    _, flops = count_flops(impl.block_sparse_attention, q, k, v, block_mask, bs)
    allowed = int(block_mask.sum())
    exact = 4 * B * H * allowed * bs * bs * D  # Q·Kᵀ and P·V of each allowed block
    figures.record("block-sparse FLOPs / allowed blocks' work", flops / exact, "x", per_row=per_row)
    assert flops <= 1.25 * exact, (
        f"{flops} FLOPs for {allowed} allowed blocks of {nb * nb} ({per_row} per row); scoring "
        f"only those costs {exact}. Gather the allowed (query block, key block) pairs and score "
        "them alone: a dense product masked afterwards costs as much as dense attention."
    )


def test_block_sparse_memory_follows_the_allowed_blocks(impl):
    N, bs = 512, 16
    nb = N // bs
    block_mask = torch.eye(nb, dtype=torch.bool) | torch.eye(nb, dtype=torch.bool).roll(1, dims=1)
    q, k, v = (randn((1, 1, N, 16), seed=s) for s in range(3))
    _, biggest = largest_tensor(impl.block_sparse_attention, q, k, v, block_mask, bs, causal=True)
    assert biggest.numel <= N * N // 8, (
        f"largest tensor made: {biggest}; with 2 of {nb} blocks allowed per row the scores need "
        f"{2 * nb * bs * bs} numbers, an N x N score matrix or token mask {N * N}."
    )


def test_linear_attention_cost_is_linear_in_n(impl, figures):
    D, flops, biggest = 8, {}, None
    for N in (1024, 2048):
        q, k, v = (randn((1, 1, N, D), seed=s) for s in range(3))
        _, flops[N] = count_flops(impl.linear_attention, q, k, v)
        _, biggest = largest_tensor(impl.linear_attention, q, k, v)
    figures.record("linear attention largest tensor / N²", biggest.numel / 2048**2, "", N=2048, D=D)
    assert biggest.numel <= 2048 * 2048 // 16, (
        f"largest tensor made at N=2048, D={D}: {biggest}. Linear attention never forms the "
        "N x N matrix phi(Q) phi(K)ᵀ: keep a running D x Dv state, or chunks of C x C."
    )
    assert flops[2048] <= 2.2 * flops[1024], (
        f"doubling N multiplied the FLOPs by {flops[2048] / max(flops[1024], 1):.2f}; "
        "O(N · D²) work doubles."
    )


# ----------------------------------------------------------------------------------------------
# Sliding window: properties

windows = st.one_of(st.sampled_from([1, 2, 3]), st.integers(1, 48))
sm_scales = st.sampled_from([None, 0.3])


@given(case=cases(), window=windows, sm_scale=sm_scales)
def test_sliding_window_matches_dense_band_attention(impl, case: Case, window, sm_scale):
    q, k, v = case.tensors()
    out = impl.sliding_window_attention(q, k, v, window, sm_scale=sm_scale)
    mask = band_mask(case.Nq, case.Nk, window)
    expected = attention_oracle(q, k, v, causal=True, sm_scale=sm_scale, mask=mask)
    assert_close(
        out,
        expected,
        hint="query i is at position p = i + Nk - Nq (bottom-right, even when Nq != Nk) and sees "
        "p - window < j <= p; head h reads kv head h // (H // Hkv); a query before every key "
        "(Nq > Nk) returns zeros, not NaN.",
    )


@given(case=cases(), extra=st.sampled_from([0, 1, 1000]))
def test_sliding_window_at_least_as_long_as_the_keys_is_causal(impl, case: Case, extra):
    q, k, v = case.tensors()
    out = impl.sliding_window_attention(q, k, v, case.Nk + extra)
    assert_close(
        out,
        attention_oracle(q, k, v, causal=True),
        hint="a window that covers every key is plain causal attention (bottom-right aligned)",
    )


@given(case=cases(), window=windows, data=st.data())
def test_sliding_window_ignores_keys_outside_the_window(impl, case: Case, window, data):
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


# ----------------------------------------------------------------------------------------------
# Block-sparse: properties


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


@given(bc=block_cases(), causal=st.booleans(), sm_scale=sm_scales)
def test_block_sparse_matches_dense_masked_attention(impl, bc, causal, sm_scale):
    case, bs, block_mask = bc
    q, k, v = case.tensors()
    out = impl.block_sparse_attention(q, k, v, block_mask, bs, causal=causal, sm_scale=sm_scale)
    mask = token_mask(block_mask, bs, case.Nq)
    expected = attention_oracle(q, k, v, causal=causal, sm_scale=sm_scale, mask=mask)
    assert_close(
        out,
        expected,
        hint="rows of block_mask are query blocks, columns key blocks; the last block may be "
        "partial (N % block_size keys, not block_size); causal masks inside the diagonal "
        "blocks; one softmax per query across all its blocks; a row with no block gives zeros.",
    )


@given(
    case=cases(max_len=34, same_length=True),
    bs=st.sampled_from([1, 3, 4, 16]),
    causal=st.booleans(),
)
def test_block_sparse_with_every_block_is_dense_attention(impl, case: Case, bs, causal):
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
        outside |= torch.arange(case.Nq) > i
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


# ----------------------------------------------------------------------------------------------
# Linear attention: properties


@given(case=cases(max_len=80), causal=st.booleans())
def test_linear_attention_matches_quadratic_form(impl, case: Case, causal):
    q, k, v = case.tensors()
    out = impl.linear_attention(q, k, v, causal=causal)
    assert_close(
        out,
        linear_attention_oracle(q, k, v, causal=causal),
        hint="o_i = phi(q_i)ᵀ S_i / phi(q_i)ᵀ z_i with phi = elu + 1; causal sums j <= i + Nk - Nq "
        "(bottom-right: keys before the first query are a prefix every query sees), otherwise "
        "all j. Chunked: the state entering a chunk holds the earlier chunks only.",
    )


@given(case=cases(max_len=24, same_length=True), data=st.data())
def test_linear_attention_steps_match_parallel_form_and_carry_on(impl, case: Case, data):
    q, k, v = case.tensors()
    t_split = data.draw(st.integers(0, case.Nq), label="steps before the state is carried on")
    state, outs = None, []
    for t in range(case.Nq):
        if t == t_split and state is not None:
            carried = tuple(s.clone() for s in state)
        o_t, state = impl.linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        outs.append(o_t)
    assert_close(
        torch.stack(outs, dim=2),
        linear_attention_oracle(q, k, v, causal=True),
        hint="the recurrent form: S += phi(k_t) v_tᵀ, z += phi(k_t), o_t = phi(q_t)ᵀS / phi(q_t)ᵀz",
    )
    assert_close(
        impl.linear_attention(q, k, v, causal=True),
        torch.stack(outs, dim=2).double(),
        hint="the parallel form and the recurrent steps must give the same outputs",
    )
    if 0 < t_split < case.Nq:  # the state after t_split steps carries the whole past on
        S, z = carried
        o_t, _ = impl.linear_attention_step(
            q[:, :, t_split], k[:, :, t_split], v[:, :, t_split], (S, z)
        )
        assert_close(
            o_t, outs[t_split].double(), hint="a carried state must resume the run exactly"
        )
    B, H, D, Dv = case.B, case.H, case.D, case.Dv
    assert tuple(state[0].shape) == (B, H, D, Dv) and tuple(state[1].shape) == (B, H, D), (
        f"after {case.Nq} steps the state is {[tuple(s.shape) for s in state]}; it must stay "
        f"S [{B}, {H}, {D}, {Dv}] and z [{B}, {H}, {D}] however many tokens went by"
    )


@given(case=cases(max_len=80, same_length=True), data=st.data())
def test_linear_attention_future_never_changes_the_past(impl, case: Case, data):
    q, k, v = case.tensors()
    t0 = data.draw(st.integers(0, case.Nq - 1), label="first changed position")
    later = (torch.arange(case.Nq) >= t0)[:, None]
    k2 = torch.where(later, randn(k.shape, seed=case.seed + 5, dtype=k.dtype, scale=3.0), k)
    v2 = torch.where(later, randn(v.shape, seed=case.seed + 6, dtype=v.dtype, scale=10.0), v)
    before = impl.linear_attention(q, k, v, causal=True)[:, :, :t0]
    after = impl.linear_attention(q, k2, v2, causal=True)[:, :, :t0]
    assert_close(
        after,
        before.double(),
        hint=f"changing keys at positions >= {t0} changed earlier outputs: the causal sums "
        "must stop at each query (a chunk's state must not include the chunk itself or later ones)",
    )
