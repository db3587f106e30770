"""Level 1 of the MoE kata: the router picks each token's k most probable experts.

Cheap and strong tests come first, so `pytest -x` stops early on the usual mistakes.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from grading.judge.strategies import lengths, randn, seeds
from grading.judge.tolerance import assert_close
from katas.moe.cases import EXPERT_COUNTS, LAYER_DTYPES, bad_input_table, route_oracle

T, E = 4, 3
LOGITS = torch.zeros(T, E)
BAD_INPUT = [
    (BadCall("route(logits, 0)", "k = 0", lambda m: m.route(LOGITS, 0)), "k"),
    (BadCall("route(logits, -1)", "negative k", lambda m: m.route(LOGITS, -1)), "k"),
    (BadCall("route(logits [4, 3], 4)", "k = E + 1", lambda m: m.route(LOGITS, E + 1)), "k"),
    (BadCall("route(logits, 1.0)", "float k", lambda m: m.route(LOGITS, 1.0)), "k"),
    (BadCall("route(logits, True)", "bool k", lambda m: m.route(LOGITS, True)), "k"),
    (  # no tokens: the arguments are checked all the same
        BadCall(
            "route(logits [0, 3], 4)", "k = E + 1, no tokens", lambda m: m.route(LOGITS[:0], 4)
        ),
        "k",
    ),
    (
        BadCall("route(logits of shape [3], 1)", "1-D logits", lambda m: m.route(LOGITS[0], 1)),
        "logits",
    ),
    (
        BadCall(
            "route(logits of shape [1, 4, 3], 1)", "3-D logits", lambda m: m.route(LOGITS[None], 1)
        ),
        "logits",
    ),
    (
        BadCall(
            "route(logits of shape [4, 0], 1)",
            "no experts",
            lambda m: m.route(torch.zeros(T, 0), 1),
        ),
        "logits",
    ),
    (
        BadCall(
            "route(logits of dtype int64, 1)",
            "integer logits",
            lambda m: m.route(LOGITS.long(), 1),
        ),
        "logits",
    ),
]


@pytest.mark.parametrize(("bad", "argument"), bad_input_table(BAD_INPUT))
def test_bad_router_input_raises_value_error(impl, bad, argument):
    assert_value_error(bad, impl, match=argument)


def check_route(impl, logits: torch.Tensor, k: int) -> None:
    """route(logits, k) against the float64 oracle, with float32 tolerance whatever the dtype."""
    __tracebackhide__ = True
    T, E = logits.shape
    before = logits.clone()
    weights, experts = impl.route(logits, k)
    assert torch.equal(logits, before), "route must not modify the logits"
    assert weights.shape == (T, k) and experts.shape == (T, k), (
        f"expected weights and experts of shape [T, k] = {(T, k)}, "
        f"got {tuple(weights.shape)} and {tuple(experts.shape)}"
    )
    assert weights.dtype == torch.float32 and experts.dtype == torch.int64, (
        f"expected float32 weights and int64 experts, got {weights.dtype} and {experts.dtype}"
    )
    precision = (
        f" If only {logits.dtype} or large logits fail, it is a precision problem: softmax on "
        "logits.float() (never in the input's dtype), with the max subtracted (torch.softmax "
        "does it) so exp() cannot overflow"
    )
    assert_close(
        weights.sum(dim=-1),
        torch.ones(T, dtype=torch.float64),
        dtype=torch.float32,
        name="weights.sum(-1)",
        hint="divide the k chosen probabilities by their sum, so each token's weights sum to 1."
        + precision,
    )
    if k > 1:
        assert bool((experts.sort(dim=-1).values.diff(dim=-1) != 0).all()), (
            "a token got the same expert twice: take k distinct experts (torch.topk)"
        )
    probs = torch.softmax(logits.double(), dim=-1)  # (T, E)
    chosen = probs.gather(1, experts)  # (T, k) the probabilities of the experts picked
    top, _ = route_oracle(logits, k)  # ties may pick either expert, so compare probabilities
    assert_close(
        chosen,
        torch.topk(probs, k, dim=-1).values,
        dtype=torch.float32,
        name="probabilities of the chosen experts",
        hint="experts[t] must be the k most probable experts of token t, most probable first."
        + precision,
    )
    assert_close(
        weights,
        top,
        dtype=torch.float32,
        name="weights",
        hint="softmax over all E experts in float32, take the top k, renormalise to sum 1."
        + precision,
    )
    assert_close(
        weights,
        torch.softmax(logits.double().gather(1, experts), dim=-1),
        dtype=torch.float32,
        name="weights vs softmax over the chosen logits",
        hint="renormalised top-k probabilities equal a softmax over the k chosen logits",
    )


@given(
    T=lengths(33),
    E=st.sampled_from(EXPERT_COUNTS + [16, 64]),
    k_fraction=st.floats(0, 1),
    dtype=st.sampled_from(LAYER_DTYPES),
    scale=st.sampled_from([0.1, 1.0, 8.0]),
    seed=seeds(),
)
@example(T=5, E=64, k_fraction=0.0, dtype=torch.bfloat16, scale=8.0, seed=0)  # k = 1
@example(T=5, E=64, k_fraction=1.0, dtype=torch.float16, scale=8.0, seed=1)  # k = E
@example(T=1, E=1, k_fraction=0.5, dtype=torch.float32, scale=1.0, seed=2)
def test_route_picks_the_top_k_with_renormalised_weights(
    impl, T, E, k_fraction, dtype, scale, seed
):
    k = 1 + round(k_fraction * (E - 1))
    note(f"T={T} E={E} k={k} dtype={dtype}")
    check_route(impl, randn((T, E), seed=seed, dtype=dtype, scale=scale), k)


@pytest.mark.parametrize("dtype", LAYER_DTYPES, ids=str)
@pytest.mark.parametrize(("E", "k"), [(1, 1), (3, 2), (8, 1), (8, 8)])
def test_route_of_no_tokens_is_empty(impl, E, k, dtype):
    # A batch with no tokens is valid (README): [0, k] float32 weights and int64 experts.
    try:
        check_route(impl, torch.zeros(0, E, dtype=dtype), k)
    except NotImplementedError:  # a level not written yet
        raise
    except (RuntimeError, IndexError, ValueError) as error:
        raise AssertionError(
            f"route(logits of shape [0, {E}], {k}) raised {type(error).__name__}: {error}\n"
            "T = 0 tokens is a valid batch: return weights and experts of shape [0, k] (softmax, "
            "topk and sums all work on empty tensors; a check like T >= 1 or a reduction over "
            "the tokens fails)"
        ) from error


@pytest.mark.parametrize(
    ("dtype", "scale"),
    [
        (torch.float32, 1e4),  # exp(10^4) overflows float32
        (torch.float32, 1e30),
        (torch.float16, 3e4),  # near float16's largest number, 65504
        (torch.bfloat16, 1e30),  # bfloat16 holds float32's range with 8 bits of precision
        (torch.float64, 1e30),  # rounded to float32 first: the router runs in float32
    ],
    ids=lambda v: str(v),
)
@pytest.mark.parametrize("k", [1, 2, 8])
def test_route_survives_extreme_logits(impl, dtype, scale, k):
    logits = randn((9, 8), seed=k, dtype=torch.float64, scale=scale).clamp(-scale, scale)
    check_route(impl, logits.to(dtype), k)


def test_route_with_equal_logits_splits_evenly(impl):
    weights, experts = impl.route(torch.zeros(3, 8), 4)
    assert_close(
        weights,
        torch.full((3, 4), 0.25, dtype=torch.float64),
        name="weights with equal logits",
        hint="with every logit equal, the k chosen experts share the weight equally: 1 / k",
    )
    assert (experts.sort(dim=-1).values.diff(dim=-1) != 0).all(), "k distinct experts per token"
