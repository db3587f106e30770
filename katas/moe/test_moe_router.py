"""The router's side of the MoE kata: bad input, route, capacity, the dispatch plan, the losses.

Cheap and strong tests come first, so `pytest -x` stops early on the usual mistakes.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.devices import float_dtypes
from grading.strategies import lengths, randn, seeds
from grading.tolerance import assert_close
from katas.moe.oracle import (
    load_balancing_oracle,
    plan_oracle,
    route_oracle,
    z_loss_oracle,
)
from katas.moe.strategies import EXPERT_COUNTS, RoutingSpec, routing_specs

# ----------------------------------------------------------------------------------------------
# Input that does not fit is refused, naming the argument at fault


def _bad_calls():
    T, d, h, E = 4, 6, 5, 3
    logits = torch.zeros(T, E)
    x, gate_w = torch.zeros(T, d), torch.zeros(E, d)
    w1, w3, w2 = torch.zeros(E, d, h), torch.zeros(E, d, h), torch.zeros(E, h, d)
    experts = torch.zeros(T, 2, dtype=torch.int64)
    return [
        # (what is wrong, the argument the message must name, the call)
        ("route with k = 0", "k", lambda m: m.route(logits, 0)),
        ("route with k = E + 1", "k", lambda m: m.route(logits, E + 1)),
        ("route with 1-D logits", "logits", lambda m: m.route(torch.zeros(E), 1)),
        ("route with 3-D logits", "logits", lambda m: m.route(torch.zeros(1, T, E), 1)),
        ("moe_forward with k = 0", "k", lambda m: m.moe_forward(x, gate_w, w1, w3, w2, 0)),
        ("moe_forward with k = E + 1", "k", lambda m: m.moe_forward(x, gate_w, w1, w3, w2, E + 1)),
        ("moe_forward with 1-D x", "x", lambda m: m.moe_forward(x[0], gate_w, w1, w3, w2, 1)),
        (
            "moe_forward with gate_w [E, d + 1]",
            "gate_w",
            lambda m: m.moe_forward(x, torch.zeros(E, d + 1), w1, w3, w2, 1),
        ),
        (
            "moe_forward with w1 for E - 1 experts",
            "w1",
            lambda m: m.moe_forward(x, gate_w, w1[1:], w3, w2, 1),
        ),
        (
            "moe_forward with w3 narrower than w1",
            "w3",
            lambda m: m.moe_forward(x, gate_w, w1, w3[..., 1:], w2, 1),
        ),
        (
            "moe_forward with w2 given as [E, d, h]",
            "w2",
            lambda m: m.moe_forward(x, gate_w, w1, w3, w2.transpose(1, 2), 1),
        ),
        (
            "expert_mlp with w2 given as [d, h]",
            "w2",
            lambda m: m.expert_mlp(x, w1[0], w3[0], w2[0].T),
        ),
        (
            "moe_forward with capacity_factor 0",
            "capacity_factor",
            lambda m: m.moe_forward(x, gate_w, w1, w3, w2, 1, capacity_factor=0.0),
        ),
        (
            "load_balancing_loss with experts for T - 1 tokens",
            "experts",
            lambda m: m.load_balancing_loss(logits, experts[1:]),
        ),
        (
            "load_balancing_loss with an expert index = E",
            "experts",
            lambda m: m.load_balancing_loss(logits, torch.full((T, 1), E)),
        ),
        (
            "plan_dispatch with an expert index = E",
            "experts",
            lambda m: m.plan_dispatch(torch.full((T, 1), E), E),
        ),
        (
            "expert_capacity with factor -1",
            "capacity_factor",
            lambda m: m.expert_capacity(T, 1, E, -1.0),
        ),
    ]


@pytest.mark.parametrize(
    ("case", "argument", "call"), [pytest.param(*c, id=c[0]) for c in _bad_calls()]
)
def test_input_that_does_not_fit_is_a_value_error(impl, case, argument, call):
    with pytest.raises(ValueError) as info:
        call(impl)
    assert argument in str(info.value), (
        f"{case}: the ValueError should name `{argument}` (and the shape it expected), "
        f"got: {info.value}"
    )


# ----------------------------------------------------------------------------------------------
# Level 1: route


@given(
    T=lengths(33),
    E=st.sampled_from(EXPERT_COUNTS + [16]),
    k_fraction=st.floats(0, 1),
    dtype=st.sampled_from(float_dtypes()),
    scale=st.sampled_from([0.1, 1.0, 8.0]),
    seed=seeds(),
)
def test_route_picks_the_top_k_with_renormalised_weights(
    impl, T, E, k_fraction, dtype, scale, seed
):
    k = 1 + round(k_fraction * (E - 1))
    note(f"T={T} E={E} k={k} dtype={dtype}")
    logits = randn((T, E), seed=seed, dtype=dtype, scale=scale)
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
    assert_close(
        weights.sum(dim=-1),
        torch.ones(T, dtype=torch.float64),
        dtype=torch.float32,
        name="weights.sum(-1)",
        hint="divide the k chosen probabilities by their sum, so each token's weights sum to 1",
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
        hint="experts[t] must be the k most probable experts of token t, most probable first",
    )
    assert_close(
        weights,
        top,
        dtype=torch.float32,
        name="weights",
        hint="softmax over all E experts in float32, take the top k, renormalise to sum 1",
    )
    assert_close(
        weights,
        torch.softmax(logits.double().gather(1, experts), dim=-1),
        dtype=torch.float32,
        name="weights vs softmax over the chosen logits",
        hint="renormalised top-k probabilities equal a softmax over the k chosen logits",
    )


# ----------------------------------------------------------------------------------------------
# Level 2: capacity and the dispatch plan


@pytest.mark.parametrize(
    ("T", "k", "E", "factor", "expected"),
    [
        (10, 2, 8, 1.0, 3),  # 2.5 rounds up
        (8, 2, 8, 1.0, 2),  # exact
        (5, 1, 4, 0.5, 1),  # 0.625 rounds up: an expert always serves at least one
        (1, 1, 64, 1.0, 1),
        (16, 2, 8, 1.25, 5),
        (33, 2, 8, 0.75, 7),  # 6.1875: k counts, T·k assignments are spread over E experts
        (7, 3, 5, 2.0, 9),  # 8.4
    ],
)
def test_expert_capacity_rounds_up(impl, T, k, E, factor, expected):
    got = impl.expert_capacity(T, k, E, factor)
    assert got == expected, (
        f"expert_capacity({T}, {k}, {E}, {factor}) = {got}, expected "
        f"ceil({factor} * {T} * {k} / {E}) = {expected}: count all T·k assignments and round up"
    )


@given(spec=routing_specs())
def test_plan_keeps_at_most_capacity_in_priority_order(impl, spec: RoutingSpec):
    experts = spec.experts()
    C = spec.capacity
    plan = impl.plan_dispatch(experts, spec.E, capacity=C)
    tokens, ranks, counts = plan_oracle(experts, spec.E, C)
    routed = torch.bincount(experts.reshape(-1), minlength=spec.E)
    note(f"experts per token:\n{experts}\nrouted per expert: {routed.tolist()}")
    got_counts = plan.counts.tolist()
    if C is not None:
        assert max(got_counts) <= C, f"an expert serves more than C = {C}: counts {got_counts}"
    expected_kept = int(routed.sum()) if C is None else int(routed.clamp(max=C).sum())
    assert sum(got_counts) == expected_kept, (
        f"kept {sum(got_counts)} assignments, expected Σ_e min(routed_e, C) = {expected_kept} "
        f"(C = {C}, routed {routed.tolist()})"
    )
    assert got_counts == counts, f"counts per expert: expected {counts}, got {got_counts}"
    kept = sorted(zip(tokens, ranks, strict=True))
    got = sorted(zip(plan.token.tolist(), plan.rank.tolist(), strict=True))
    assert got == kept, (
        f"the wrong assignments were kept (C = {C}). Priority is rank-major: every token's "
        "first choice comes before any token's second choice; within a rank the earlier token "
        "wins.\n"
        f"expected (token, rank) {kept}\ngot {got}"
    )
    assert plan.token.tolist() == tokens and plan.rank.tolist() == ranks, (
        "the kept assignments are right but out of order: group them by expert (expert 0 "
        "first) and keep priority order inside each group (by rank, then token)\n"
        f"expected tokens {tokens} ranks {ranks}\ngot tokens {plan.token.tolist()} "
        f"ranks {plan.rank.tolist()}"
    )


@given(spec=routing_specs())
def test_expert_load_reports_routed_and_kept(impl, spec: RoutingSpec):
    experts = spec.experts()
    load = impl.expert_load(experts, spec.E, capacity=spec.capacity)
    routed = torch.bincount(experts.reshape(-1), minlength=spec.E)
    kept = routed if spec.capacity is None else routed.clamp(max=spec.capacity)
    assert load.routed.tolist() == routed.tolist(), (
        f"routed: expected assignments per expert {routed.tolist()}, got {load.routed.tolist()}"
    )
    assert load.kept.tolist() == kept.tolist(), (
        f"kept: expected min(routed, C = {spec.capacity}) = {kept.tolist()}, "
        f"got {load.kept.tolist()}"
    )


# ----------------------------------------------------------------------------------------------
# Level 4: the load-balancing loss and the z-loss


@given(T=lengths(33), E=st.sampled_from(EXPERT_COUNTS), data=st.data(), seed=seeds())
def test_load_balancing_loss_is_one_under_uniform_routing(impl, T, E, data, seed):
    k = data.draw(st.integers(1, E), label="k")
    experts = RoutingSpec(T, E, k, seed).experts()
    loss = impl.load_balancing_loss(torch.zeros(T, E), experts)
    assert_close(
        loss.reshape(()),
        torch.tensor(1.0, dtype=torch.float64),
        dtype=torch.float32,
        name="loss with equal logits",
        hint="with equal logits P_e = 1/E for every e, so the loss is Σ_e f_e = 1: f_e counts "
        "all k choices of every token divided by T·k, and P_e averages the softmax over ALL tokens",
    )


@pytest.mark.parametrize("E", [1, 2, 5, 8])
def test_load_balancing_loss_is_E_when_one_expert_takes_everything(impl, E):
    T = 7
    logits = torch.zeros(T, E)
    logits[:, E - 1] = 40.0  # probability 1 in float32
    experts = torch.full((T, 1), E - 1)
    loss = impl.load_balancing_loss(logits, experts)
    assert_close(
        loss.reshape(()),
        torch.tensor(float(E), dtype=torch.float64),
        dtype=torch.float32,
        name="loss with all tokens on one expert",
        hint="f = 1 and P = 1 for that expert: E · 1 · 1 = E",
    )


@given(spec=routing_specs(), scale=st.sampled_from([0.5, 3.0]))
def test_load_balancing_loss_matches_oracle_and_its_gradient(impl, spec: RoutingSpec, scale):
    experts = spec.experts()
    logits64 = randn((spec.T, spec.E), seed=spec.seed + 1, dtype=torch.float64, scale=scale)
    logits64.requires_grad_(True)
    expected = load_balancing_oracle(logits64, experts)
    expected.backward()
    logits = logits64.detach().float().requires_grad_(True)
    loss = impl.load_balancing_loss(logits, experts)
    assert loss.numel() == 1, f"expected a scalar loss, got shape {tuple(loss.shape)}"
    assert_close(
        loss.detach().reshape(()),
        expected.detach(),
        dtype=torch.float32,
        name="load_balancing_loss",
        hint="E · Σ_e f_e · P_e with f_e = count_e / (T·k) and P_e the mean over ALL tokens of "
        "softmax(logits)[:, e], not only over the tokens routed to e",
    )
    perm = torch.randperm(spec.T, generator=torch.Generator().manual_seed(spec.seed))
    assert_close(
        impl.load_balancing_loss(logits.detach()[perm], experts[perm]).reshape(()),
        expected.detach(),
        dtype=torch.float32,
        name="loss with the tokens shuffled",
        hint="the loss is a sum over experts of averages over tokens: token order cannot matter",
    )
    loss.reshape(()).backward()
    assert logits.grad is not None, (
        "no gradient reached the logits: P_e must come from differentiable ops on the softmax"
    )
    # Each gradient element is (E / T) · p · (f_j - Σ_e f_e p_e): a difference of terms of size
    # about E · max(f) / T, which sets the scale for rounding (the difference can be exactly 0).
    f_max = float(torch.bincount(experts.reshape(-1)).max()) / experts.numel()
    assert_close(
        logits.grad,
        logits64.grad,
        dtype=torch.float32,
        scale=spec.E * f_max / spec.T,
        name="d loss / d logits",
        hint="the gradient flows through P_e only; f_e is a count",
    )


@given(
    T=lengths(17),
    E=st.sampled_from(EXPERT_COUNTS),
    scale=st.sampled_from([0.0, 1.0, 20.0]),
    seed=seeds(),
)
def test_router_z_loss_matches_oracle(impl, T, E, scale, seed):
    logits64 = randn((T, E), seed=seed, dtype=torch.float64, scale=scale).requires_grad_(True)
    expected = z_loss_oracle(logits64)
    expected.backward()
    logits = logits64.detach().float().requires_grad_(True)
    loss = impl.router_z_loss(logits)
    assert_close(
        loss.detach().reshape(()),
        expected.detach(),
        dtype=torch.float32,
        name="router_z_loss",
        hint="mean over tokens of logsumexp(logits)², computed stably (torch.logsumexp); "
        f"with all logits 0 it is log(E)² = {math.log(E) ** 2:.6g}",
    )
    loss.reshape(()).backward()
    assert_close(logits.grad, logits64.grad, dtype=torch.float32, name="d z-loss / d logits")
