"""Level 1: the model's mixture through grouped dispatch, exact and at a k/E share of the cost."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from grading.judge.cost import count_flops
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.guards import caller_changes
from grading.judge.strategies import lengths, randn, seeds
from grading.judge.tolerance import assert_close
from grading.model import load_weights_in_place, make_model

DTYPES = [torch.float32, torch.float64]


def mixture(dtype: torch.dtype, n_experts: int, top_k: int, seed: int = 0):
    """The first block's mixture of a one-layer MoE model drawn from `seed`."""
    model = make_model(seed, dtype, n_layers=1, n_experts=n_experts, top_k=top_k)
    return model.blocks[0].mlp


@st.composite
def mixtures(draw):
    E = draw(st.sampled_from([1, 2, 3, 8]), label="n_experts")
    k = draw(st.integers(1, E), label="top_k")
    return E, k


@given(shape=mixtures(), N=lengths(48), dtype=st.sampled_from(DTYPES), seed=seeds())
def test_moe_feed_forward_equals_every_expert_on_every_token(impl, shape, N, dtype, seed):
    E, k = shape
    moe = mixture(dtype, E, k)
    x = randn((N, moe.gate.weight.shape[1]), seed=seed, dtype=dtype)
    with torch.no_grad():
        expected = mixture(torch.float64, E, k)(x.double())  # the same weights and routing
        got = impl.moe_feed_forward(moe, x)
    assert_close(
        got, expected, dtype=dtype, name=f"moe_feed_forward on {N} tokens, {E} experts, top {k}",
        hint="a token sent to the wrong expert, a weight applied to the wrong rank, or an "
        "output scattered back to the wrong token",
    )  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_moe_feed_forward_follows_weights_changed_in_place_between_calls(impl, dtype):
    """The mixture's weights may change in place between two calls (a checkpoint loaded into
    the model): each call uses the weights it finds; nothing stacked or copied from them is
    kept from one call to the next."""
    model = make_model(0, dtype, n_layers=1, n_experts=4, top_k=2)
    moe = model.blocks[0].mlp
    x = randn((9, moe.gate.weight.shape[1]), seed=5, dtype=dtype)
    with torch.no_grad():
        impl.moe_feed_forward(moe, x)
        caller_changes(impl.moe_feed_forward, moe)
        load_weights_in_place(model, seed=1)
        got = impl.moe_feed_forward(moe, x)
        expected = mixture(torch.float64, 4, 2, seed=1)(x.double())
    assert_close(
        got, expected, dtype=dtype, name="moe_feed_forward after the weights changed in place",
        hint="the weights changed in place since the last call (same tensors, new values): "
        "stack or copy the experts' weights at every call, never keep them from an earlier one",
    )  # fmt: skip


@pytest.mark.parametrize("E,k", [(8, 2), (8, 1), (4, 2)])
def test_each_expert_runs_only_on_its_tokens(impl, E, k):
    """FLOPs: the router on every token, then k experts per token, not E."""
    moe = mixture(torch.float32, E, k)
    N, dim, h = 64, moe.gate.weight.shape[1], moe.experts[0].w1.weight.shape[0]
    x = randn((N, dim), seed=1)
    with torch.no_grad():
        _, flops = count_flops(impl.moe_feed_forward, moe, x)
    ideal = 2 * N * dim * E + k * N * 3 * 2 * dim * h
    dense = 2 * N * dim * E + E * N * 3 * 2 * dim * h
    assert flops <= 1.1 * ideal, (
        f"moe_feed_forward spent {flops:,} FLOPs on {N} tokens with {E} experts, top {k}; grouped "
        f"dispatch needs {ideal:,} (the router, then {k} experts per token); running every expert "
        f"on every token costs {dense:,}. Run each expert once, on the tokens routed to it"
    )


def _call(dtype=torch.float32, shape=(5, 64)):
    return lambda impl: impl.moe_feed_forward(
        mixture(torch.float32, 8, 2), torch.zeros(shape, dtype=dtype)
    )


BAD_CALLS = [
    BadCall("moe_feed_forward(moe, x of shape [64])", "1-D x", _call(shape=(64,))),
    BadCall("moe_feed_forward(moe, x of shape [5, 32])", "x of the wrong width",
            _call(shape=(5, 32))),
    BadCall("moe_feed_forward(moe, x of shape [0, 64])", "no tokens", _call(shape=(0, 64))),
    BadCall("moe_feed_forward(float32 moe, float64 x)", "x not in the model's dtype",
            _call(dtype=torch.float64)),
]  # fmt: skip


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_moe_feed_forward_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match="x")
