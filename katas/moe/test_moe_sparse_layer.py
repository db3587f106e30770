"""The layer side of the MoE kata: one expert, dispatch and combine, the cost, the whole layer.

Every comparison is against a float64 oracle that loops over tokens one at a time
(katas/moe/oracle.py). Cheap and strong tests come first, so `pytest -x` stops early.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.cost import count_flops
from grading.devices import float_dtypes
from grading.strategies import randn, seeds
from grading.tolerance import assert_close, assert_error_within
from katas.moe.oracle import (
    capacity_oracle,
    dense_mixture_oracle,
    expert_oracle,
    kept_oracle,
    moe_oracle,
    plan_oracle,
    route_oracle,
    router_logits,
)
from katas.moe.strategies import (
    CAPACITY_FACTORS,
    LayerSpec,
    RoutingSpec,
    layer_specs,
    routing_specs,
    widths,
)


def assert_like_oracle(actual, oracle, *, dtype, name="output", hint=""):
    """`actual` against `oracle(torch.float64)`, judged by `oracle(dtype)` run in the input's dtype.

    The experts run in the input's dtype, and an output element can be a sum of terms that cancel
    far below their size, so an element-wise tolerance is unfair in float16. The bar is
    FlashAttention's rule: at most twice the error of the oracle's own computation in `dtype`
    (which rounds like a correct layer does), plus the dtype's tolerance times the output's scale.
    """
    __tracebackhide__ = True
    assert isinstance(actual, torch.Tensor), f"{name}: expected a tensor, got {type(actual)}"
    assert actual.dtype == dtype, (
        f"{name}: expected dtype {dtype} (the input's), got {actual.dtype}"
    )
    baseline = oracle(dtype).to(dtype)
    assert_error_within(actual, oracle(torch.float64), baseline, name=name, hint=hint)


# ----------------------------------------------------------------------------------------------
# Level 3: one expert, dispatch, combine


@given(spec=layer_specs(experts=[1]))
def test_expert_mlp_is_a_gated_mlp(impl, spec: LayerSpec):
    x, _, w1, w3, w2 = spec.build()
    assert_like_oracle(
        impl.expert_mlp(x, w1[0], w3[0], w2[0]),
        lambda dtype: expert_oracle(x, w1[0], w3[0], w2[0], dtype=dtype),
        dtype=spec.dtype,
        hint="(silu(x @ w1) * (x @ w3)) @ w2: the SiLU gates the w1 branch, w3 is the linear one",
    )


def _oracle_plan(impl, spec: RoutingSpec):
    """The dispatch plan built by the oracle, in the module's own DispatchPlan type."""
    tokens, ranks, counts = plan_oracle(spec.experts(), spec.E, spec.capacity)
    return impl.DispatchPlan(
        token=torch.tensor(tokens, dtype=torch.int64),
        rank=torch.tensor(ranks, dtype=torch.int64),
        counts=torch.tensor(counts, dtype=torch.int64),
    )


@given(spec=routing_specs(), d=widths(), dtype=st.sampled_from(float_dtypes()))
def test_dispatch_gathers_each_assignment_s_token(impl, spec: RoutingSpec, d, dtype):
    plan = _oracle_plan(impl, spec)
    x = randn((spec.T, d), seed=spec.seed, dtype=dtype)
    grouped = impl.dispatch(x, plan)
    assert tuple(grouped.shape) == (len(plan.token), d), (
        f"expected one row per kept assignment, [N, d] = {(len(plan.token), d)}, "
        f"got {tuple(grouped.shape)}"
    )
    assert torch.equal(grouped, x[plan.token]), "row i of dispatch(x, plan) is x[plan.token[i]]"


@given(spec=routing_specs(), d=widths(), dtype=st.sampled_from(float_dtypes()))
def test_combine_adds_every_weighted_output_to_its_token(impl, spec: RoutingSpec, d, dtype):
    plan = _oracle_plan(impl, spec)
    N = len(plan.token)
    expert_out = randn((N, d), seed=spec.seed, dtype=dtype)
    weights = torch.rand(spec.T, spec.k, generator=torch.Generator().manual_seed(spec.seed))
    expected = torch.zeros(spec.T, d, dtype=torch.float64)
    for i, (t, r) in enumerate(zip(plan.token.tolist(), plan.rank.tolist(), strict=True)):
        expected[t] += weights[t, r].double() * expert_out[i].double()
    y = impl.combine(expert_out, weights, plan, spec.T)
    assert y.dtype == dtype, f"combine returns expert_out's dtype {dtype}, got {y.dtype}"
    assert_close(
        y,
        expected,
        dtype=dtype,
        hint="scatter-ADD (index_add_): a token with k kept assignments receives k outputs, each "
        "times weights[token, rank]; a token with none stays 0",
    )


# ----------------------------------------------------------------------------------------------
# The cost: k experts per token, not E


COST_CASES = [  # (T, d, h, E, k)
    (64, 16, 32, 8, 2),
    (37, 8, 24, 16, 1),
    (29, 12, 16, 4, 1),
    (41, 8, 16, 64, 2),
]
CAPACITY_RULE = (
    "C = ceil(capacity_factor · T · k / E); each expert serves its first C assignments by rank, "
    "then token index; a dropped assignment adds 0 and the token's other weights stay as they "
    "were (no renormalisation)"
)
SLACK = 1.5  # room for a different but reasonable grouping; running all E experts is E / k times


def _cost_report(flops, T, d, h, E, k, kept):
    gate = 2 * T * d * E  # the router's matmul
    per_assignment = 6 * d * h  # three matmuls (d→h, d→h, h→d), 2 FLOPs per multiply-add
    allowed = gate + SLACK * per_assignment * kept
    dense = gate + per_assignment * T * E
    message = (
        f"moe_forward spent {flops:,} FLOPs; allowed {allowed:,.0f} = router 2·T·d·E = {gate:,} + "
        f"{SLACK} x 6·d·h = {per_assignment:,} per kept assignment x {kept} kept.\n"
        f"Every expert on every token would cost {dense:,}. Group the tokens by expert and run "
        f"each expert once, on its own tokens only (and never on dropped assignments)."
    )
    return allowed, message


@pytest.mark.parametrize(("T", "d", "h", "E", "k"), COST_CASES)
def test_expert_flops_grow_with_k_not_with_E(impl, T, d, h, E, k):
    spec = LayerSpec(T, d, h, E, k, torch.float32, seed=T)
    layer = spec.build()
    y, flops = count_flops(impl.moe_forward, *layer, k)
    allowed, message = _cost_report(flops, T, d, h, E, k, kept=T * k)
    assert flops <= allowed, message
    assert_like_oracle(
        y,
        lambda dtype: moe_oracle(*layer, k, dtype=dtype),
        dtype=spec.dtype,
        hint="the output is wrong (the cost was fine)",
    )


def test_dropped_assignments_cost_nothing(impl):
    T, d, h, E, k, factor = 64, 16, 32, 8, 2, 0.25
    spec = LayerSpec(T, d, h, E, k, torch.float32, seed=3, skew=1.0)
    layer = spec.build()
    y, flops = count_flops(impl.moe_forward, *layer, k, capacity_factor=factor)
    _, experts = route_oracle(router_logits(layer.x, layer.gate_w), k)
    kept = int(kept_oracle(experts, E, capacity_oracle(T, k, E, factor)).sum())
    allowed, message = _cost_report(flops, T, d, h, E, k, kept=kept)
    assert flops <= allowed, message
    assert_like_oracle(
        y,
        lambda dtype: moe_oracle(*layer, k, factor, dtype=dtype),
        dtype=spec.dtype,
        hint=f"the output is wrong (the cost was fine). {CAPACITY_RULE}",
    )


# ----------------------------------------------------------------------------------------------
# The layer against the oracle


@given(spec=layer_specs())
def test_moe_forward_matches_oracle(impl, spec: LayerSpec):
    layer = spec.build()
    before = [t.clone() for t in layer]
    y = impl.moe_forward(*layer, spec.k)
    unchanged = all(torch.equal(a, b) for a, b in zip(layer, before, strict=True))
    assert unchanged, "moe_forward modified its input"
    assert_like_oracle(
        y,
        lambda dtype: moe_oracle(*layer, spec.k, dtype=dtype),
        dtype=spec.dtype,
        hint="y_t = Σ_r weights[t, r] · expert_{experts[t, r]}(x_t), router logits "
        "x.float() @ gate_w.float().T, each expert's output scatter-ADDED to its tokens",
    )


@given(spec=layer_specs(skews=[0.0, 1.0, 3.0]), factor=st.sampled_from(CAPACITY_FACTORS))
def test_moe_forward_with_capacity_matches_oracle(impl, spec: LayerSpec, factor):
    layer = spec.build()
    _, experts = route_oracle(router_logits(layer.x, layer.gate_w), spec.k)
    note(f"routed per expert: {torch.bincount(experts.reshape(-1), minlength=spec.E).tolist()}")
    y = impl.moe_forward(*layer, spec.k, capacity_factor=factor)
    assert_like_oracle(
        y,
        lambda dtype: moe_oracle(*layer, spec.k, factor, dtype=dtype),
        dtype=spec.dtype,
        hint=CAPACITY_RULE,
    )


# ----------------------------------------------------------------------------------------------
# Properties of the layer


@given(spec=layer_specs(dtypes=[torch.float32]), seed=seeds())
def test_without_capacity_the_layer_commutes_with_shuffling_tokens(impl, spec: LayerSpec, seed):
    # float32 only: two runs of the code under test are compared, both rounded alike.
    x, gate_w, w1, w3, w2 = spec.build()
    perm = torch.randperm(spec.T, generator=torch.Generator().manual_seed(seed))
    y = impl.moe_forward(x, gate_w, w1, w3, w2, spec.k)
    assert_close(
        impl.moe_forward(x[perm], gate_w, w1, w3, w2, spec.k),
        y[perm].double(),
        name="output of shuffled tokens",
        hint="each token's output depends on that token alone when nothing is dropped",
    )


@given(spec=layer_specs())
def test_k_equal_to_E_is_the_dense_mixture(impl, spec: LayerSpec):
    spec = dataclasses.replace(spec, k=spec.E)
    layer = spec.build()
    assert_like_oracle(
        impl.moe_forward(*layer, spec.E),
        lambda dtype: dense_mixture_oracle(*layer, dtype=dtype),
        dtype=spec.dtype,
        hint="with k = E every expert is chosen and the weights are the full softmax",
    )


@given(spec=layer_specs())
def test_identical_experts_make_a_single_mlp(impl, spec: LayerSpec):
    x, gate_w, w1, w3, w2 = spec.build()
    w1, w3, w2 = (w[:1].expand_as(w).contiguous() for w in (w1, w3, w2))
    assert_like_oracle(
        impl.moe_forward(x, gate_w, w1, w3, w2, spec.k),
        lambda dtype: expert_oracle(x, w1[0], w3[0], w2[0], dtype=dtype),
        dtype=spec.dtype,
        hint="the weights of each token sum to 1, so identical experts give that expert's output",
    )


@given(spec=layer_specs())
def test_a_capacity_of_at_least_T_times_k_changes_nothing(impl, spec: LayerSpec):
    layer = spec.build()
    factor = float(spec.E)  # C = ceil(E · T · k / E) = T · k: no expert can be sent more
    assert_like_oracle(
        impl.moe_forward(*layer, spec.k, capacity_factor=factor),
        lambda dtype: moe_oracle(*layer, spec.k, dtype=dtype),
        dtype=spec.dtype,
        hint="with C >= T·k nothing is dropped: the output equals the unlimited layer",
    )


# ----------------------------------------------------------------------------------------------
# GPU: grouped dispatch against every expert on every token


def _dense_moe(x, gate_w, w1, w3, w2, k):
    """Every expert on every token, weights zero off the chosen k: right, and E / k x the work."""
    probs = torch.softmax(x.float() @ gate_w.float().T, dim=-1)  # (T, E)
    top, experts = torch.topk(probs, k, dim=-1)  # (T, k)
    gates = torch.zeros_like(probs).scatter(1, experts, top / top.sum(-1, keepdim=True))  # (T, E)
    hidden = torch.nn.functional.silu(x @ w1) * (x @ w3)  # (T, d) x (E, d, h) -> (E, T, h)
    out = hidden @ w2  # (E, T, d)
    return torch.einsum("etd,te->td", out.float(), gates).to(x.dtype)  # (T, d)


def _gpu_layer(T, d, h, E, dtype):
    gen = torch.Generator(device="cuda").manual_seed(0)

    def normal(*shape, scale=1.0):
        return (torch.randn(shape, generator=gen, device="cuda") * scale).to(dtype)

    x, gate_w = normal(T, d), normal(E, d)
    w1, w3 = normal(E, d, h, scale=d**-0.5), normal(E, d, h, scale=d**-0.5)
    return x, gate_w, w1, w3, normal(E, h, d, scale=h**-0.5)


@pytest.mark.gpu
@pytest.mark.parametrize("E", [8, 64])
def test_grouped_dispatch_beats_dense_on_gpu(impl, figures, E):
    from triton.testing import do_bench

    T, d, h, k, dtype = 16384, 1024, 1024, 2, torch.bfloat16
    layer = _gpu_layer(T, d, h, E, dtype)
    y = impl.moe_forward(*layer, k)
    dense = _dense_moe(*layer, k)
    n = 16  # check a few tokens against the float64 oracle before timing anything
    assert_error_within(
        y[:n],
        moe_oracle(layer[0][:n], *layer[1:], k),
        dense[:n],
        name="moe_forward on the GPU",
        hint="the grouped layer should be as accurate as the dense computation in the same dtype",
    )
    grouped_ms = do_bench(lambda: impl.moe_forward(*layer, k))
    dense_ms = do_bench(lambda: _dense_moe(*layer, k))
    speedup = dense_ms / grouped_ms
    figures.record(
        "speed-up of grouped dispatch over dense", speedup, "x", E=E, k=k, T=T, d=d, h=h,
        dtype="bfloat16", flop_ratio=E / k,
    )  # fmt: skip
    if E == 64:
        assert speedup > 1.0, (
            f"with E = {E}, k = {k} the grouped layer does {E // k}x less expert work than the "
            f"dense one yet is not faster (speed-up {speedup:.2f}x): look for a Python loop over "
            "tokens, a host sync per expert, or work done on dropped or unrouted tokens"
        )
