"""Level 3 of the MoE kata: one expert, dispatch and combine, the cost, the whole layer.

Every comparison is against a float64 oracle that loops over tokens one at a time
(katas/moe/cases.py). Cheap and strong tests come first, so `pytest -x` stops early.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.cost import count_flops, count_multiplies, largest_tensor
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.strategies import randn, seeds
from grading.judge.tolerance import assert_close, assert_error_within, tolerance_for
from katas.moe.cases import (
    CAPACITY_FACTORS,
    LAYER_DTYPES,
    LayerSpec,
    RoutingSpec,
    bad_input_table,
    capacity_oracle,
    crowded_layer_specs,
    dense_mixture_oracle,
    expert_oracle,
    grouped_moe_oracle,
    kept_oracle,
    layer_specs,
    moe_oracle,
    plan_oracle,
    route_oracle,
    router_logits,
    routing_specs,
    widths,
)

T, d, h, E = 4, 6, 5, 3
X, GATE_W = torch.zeros(T, d), torch.zeros(E, d)
W1, W3, W2 = torch.zeros(E, d, h), torch.zeros(E, d, h), torch.zeros(E, h, d)


def forward(m, k=1, *, capacity_factor=None, **tensors):
    """moe_forward on the small layer above, with the tensors named in `tensors` replaced."""
    args = {"x": X, "gate_w": GATE_W, "w1": W1, "w3": W3, "w2": W2, **tensors}
    if capacity_factor is None:
        return m.moe_forward(*args.values(), k)
    return m.moe_forward(*args.values(), k, capacity_factor=capacity_factor)


def _plan(m):
    return m.plan_dispatch(torch.tensor([[0], [1], [2], [0]]), E)


# (the bad call, the argument its message must name). Where two arguments disagree on a size (x
# and w1 on d, w1 and w3 on h, gate_w and w1 on E) the message may blame either of them.
BAD_INPUT = [
    (BadCall("moe_forward(..., k=0)", "k = 0", lambda m: forward(m, k=0)), "k"),
    (BadCall("moe_forward(..., k=E + 1)", "k = E + 1", lambda m: forward(m, k=E + 1)), "k"),
    (BadCall("moe_forward(x of shape [6], ...)", "1-D x", lambda m: forward(m, x=X[0])), "x"),
    (  # no tokens: the arguments are checked all the same
        BadCall(
            "moe_forward(x [0, 6], ..., capacity_factor=-1.0)",
            "capacity_factor -1, no tokens",
            lambda m: forward(m, capacity_factor=-1.0, x=X[:0]),
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "moe_forward(x [0, 6], ..., k=E + 1)",
            "k = E + 1, no tokens",
            lambda m: forward(m, k=E + 1, x=X[:0]),
        ),
        "k",
    ),
    (
        BadCall(
            "moe_forward(x, gate_w of shape [E, d + 1], ...)",
            "gate_w too wide",
            lambda m: forward(m, gate_w=torch.zeros(E, d + 1)),
        ),
        "gate_w|x",
    ),
    (
        BadCall(
            "moe_forward(x, gate_w, w1 for E - 1 experts, ...)",
            "w1 for E - 1 experts",
            lambda m: forward(m, w1=W1[1:]),
        ),
        "w1|gate_w",
    ),
    (
        BadCall(
            "moe_forward(..., w3 narrower than w1, ...)",
            "w3 narrower than w1",
            lambda m: forward(m, w3=W3[..., 1:]),
        ),
        "w3|w1",
    ),
    (
        BadCall(
            "moe_forward(..., w2 of shape [E, d, h])",
            "w2 transposed",
            lambda m: forward(m, w2=W2.transpose(1, 2)),
        ),
        "w2",
    ),
    (
        BadCall(
            "moe_forward(..., w2 of shape [E, h, d + 1])",
            "w2 too wide",
            lambda m: forward(m, w2=torch.zeros(E, h, d + 1)),
        ),
        "w2|x",
    ),
    (
        BadCall(
            "moe_forward(x float32, ..., w1 float64, ...)",
            "w1 in another dtype",
            lambda m: forward(m, w1=W1.double()),
        ),
        "w1",
    ),
    (
        BadCall(
            "moe_forward(x float32, ..., w2 bfloat16)",
            "w2 in another dtype",
            lambda m: forward(m, w2=W2.bfloat16()),
        ),
        "w2",
    ),
    (
        BadCall(
            "moe_forward(..., capacity_factor=0.0)",
            "capacity_factor 0",
            lambda m: forward(m, capacity_factor=0.0),
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "moe_forward(..., capacity_factor=-1.0)",
            "negative capacity_factor",
            lambda m: forward(m, capacity_factor=-1.0),
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "moe_forward(..., capacity_factor=nan)",
            "capacity_factor NaN",
            lambda m: forward(m, capacity_factor=math.nan),
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "moe_forward(..., capacity_factor=inf)",
            "capacity_factor inf",
            lambda m: forward(m, capacity_factor=math.inf),
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "expert_mlp(x, w1 [d, h], w3 [d, h], w2 of shape [d, h])",
            "expert w2 transposed",
            lambda m: m.expert_mlp(X, W1[0], W3[0], W2[0].T),
        ),
        "w2",
    ),
    (
        BadCall(
            "expert_mlp(x [4, 6], w1 [6, 5], w3 [6, 5], w2 of shape [5, 7])",
            "expert w2 too wide",
            lambda m: m.expert_mlp(X, W1[0], W3[0], torch.zeros(h, d + 1)),
        ),
        "w2|x",
    ),
    (
        BadCall(
            "expert_mlp(x of shape [4, 7], w1 [6, 5], ...)",
            "expert x too wide",
            lambda m: m.expert_mlp(torch.zeros(T, d + 1), W1[0], W3[0], W2[0]),
        ),
        "x|w1",
    ),
    (
        BadCall(
            "expert_mlp(x float32, w1 float16, ...)",
            "expert w1 in another dtype",
            lambda m: m.expert_mlp(X, W1[0].half(), W3[0], W2[0]),
        ),
        "w1",
    ),
    (
        BadCall(
            "dispatch(x of shape [6], plan)", "dispatch 1-D x", lambda m: m.dispatch(X[0], _plan(m))
        ),
        "x",
    ),
    (
        BadCall(
            "combine(expert_out with N + 1 rows, weights, plan, 4)",
            "combine with extra rows",
            lambda m: m.combine(torch.zeros(T + 1, d), torch.ones(T, 1), _plan(m), T),
        ),
        "expert_out",
    ),
    (
        BadCall(
            "combine(expert_out, weights for T - 1 tokens, plan, 4)",
            "combine weights for T - 1",
            lambda m: m.combine(torch.zeros(T, d), torch.ones(T - 1, 1), _plan(m), T),
        ),
        "weights",
    ),
    (
        BadCall(
            "combine(expert_out, weights for T + 1 tokens, plan, 4)",
            "combine weights for T + 1",
            lambda m: m.combine(torch.zeros(T, d), torch.ones(T + 1, 1), _plan(m), T),
        ),
        "weights",
    ),
]


@pytest.mark.parametrize(("bad", "argument"), bad_input_table(BAD_INPUT))
def test_bad_layer_input_raises_value_error(impl, bad, argument):
    assert_value_error(bad, impl, match=argument)


def assert_like_oracle(actual, oracle, *, dtype, routed=True, name="output", hint=""):
    """`actual` against `oracle(torch.float64)`, judged by `oracle(dtype)` run in the input's dtype.

    The experts run in the input's dtype, and an output element can be a sum of terms that cancel
    far below their size, so an element-wise tolerance is unfair in float16. The bar is
    FlashAttention's rule: at most twice the error of the oracle's own computation in `dtype`
    (which rounds like a correct layer does), plus the dtype's tolerance times the output's scale.
    A `routed` output carries the router's float32 weights, so float64 gets float32's tolerance.
    """
    __tracebackhide__ = True
    assert isinstance(actual, torch.Tensor), f"{name}: expected a tensor, got {type(actual)}"
    assert actual.dtype == dtype, (
        f"{name}: expected dtype {dtype} (the input's), got {actual.dtype}"
    )
    expected = oracle(torch.float64)
    floor_dtype = torch.float32 if routed and dtype == torch.float64 else dtype
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    floor = tolerance_for(floor_dtype).atol * max(scale, 1e-30)
    baseline = oracle(dtype).to(dtype)
    assert_error_within(actual, expected, baseline, floor=floor, name=name, hint=hint)


# ----------------------------------------------------------------------------------------------
# One expert, dispatch, combine


@given(spec=layer_specs(experts=[1]))
def test_expert_mlp_is_a_gated_mlp(impl, spec: LayerSpec):
    x, _, w1, w3, w2 = spec.build()
    assert_like_oracle(
        impl.expert_mlp(x, w1[0], w3[0], w2[0]),
        lambda dtype: expert_oracle(x, w1[0], w3[0], w2[0], dtype=dtype),
        dtype=spec.dtype,
        routed=False,
        hint="(silu(x @ w1) * (x @ w3)) @ w2: the SiLU gates the w1 branch, w3 is the linear one",
    )


# A step that 1 + eps loses in each dtype: 1 + eps rounds to 1 (half the spacing of the numbers
# just above 1 is 2^-8 in bfloat16, 2^-11 in float16, 2^-24 in float32).
_ROUNDED_AWAY = {torch.bfloat16: 2.0**-9, torch.float16: 2.0**-12, torch.float32: 2.0**-25}


@pytest.mark.parametrize("dtype", list(_ROUNDED_AWAY), ids=str)
def test_expert_mlp_computes_in_x_dtype(impl, dtype):
    # x @ w1 = [32, 32] (silu(32) is 32 in every dtype), x @ w3 = [1 + eps, 1], and w2 subtracts
    # the two hidden units. In x's dtype, x @ w3 rounds to [1, 1], so both hidden units are 32
    # and y is exactly 0; computed in a wider dtype, y = 32 · eps.
    eps = _ROUNDED_AWAY[dtype]
    x = torch.tensor([[1.0, 1.0]], dtype=dtype)  # [n=1, d=2]
    w1 = torch.full((2, 2), 16.0, dtype=dtype)  # [d, h=2]
    w3 = torch.tensor([[1.0, 1.0], [eps, 0.0]], dtype=dtype)
    w2 = torch.tensor([[1.0, 1.0], [-1.0, -1.0]], dtype=dtype)  # [h, d]
    y = impl.expert_mlp(x, w1, w3, w2)
    assert y.dtype == dtype, f"expert_mlp returns x's dtype {dtype}, got {y.dtype}"
    wide, largest = 32 * eps, float(y.double().abs().max())
    assert largest < wide / 2, (
        f"expected y = [[0, 0]] (x @ w3 = 1 + {eps} rounds to 1 in {dtype}, so the two hidden "
        f"units cancel), got {y.tolist()}; {wide} is what float32 or float64 intermediates "
        f"give. expert_mlp computes in x's dtype: (silu(x @ w1) * (x @ w3)) @ w2 on the tensors "
        "as given, without upcasting x or the weights"
    )


def _oracle_plan(impl, spec: RoutingSpec):
    """The dispatch plan built by the oracle, in the module's own DispatchPlan type."""
    tokens, ranks, counts = plan_oracle(spec.experts(), spec.E, spec.capacity)
    return impl.DispatchPlan(
        token=torch.tensor(tokens, dtype=torch.int64),
        rank=torch.tensor(ranks, dtype=torch.int64),
        counts=torch.tensor(counts, dtype=torch.int64),
    )


@given(spec=routing_specs(), d=widths(), dtype=st.sampled_from(LAYER_DTYPES))
def test_dispatch_gathers_each_assignment_s_token(impl, spec: RoutingSpec, d, dtype):
    plan = _oracle_plan(impl, spec)
    x = randn((spec.T, d), seed=spec.seed, dtype=dtype)
    grouped = impl.dispatch(x, plan)
    assert tuple(grouped.shape) == (len(plan.token), d), (
        f"expected one row per kept assignment, [N, d] = {(len(plan.token), d)}, "
        f"got {tuple(grouped.shape)}"
    )
    assert torch.equal(grouped, x[plan.token]), "row i of dispatch(x, plan) is x[plan.token[i]]"


@given(spec=routing_specs(), d=widths(), dtype=st.sampled_from(LAYER_DTYPES))
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
        "times weights[token, rank]; a token with none stays 0. Sum in float32 (float64 for "
        "float64 input): if only float64 fails, it is a precision problem",
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_combine_sums_in_float32(impl, dtype):
    # Each token gets three outputs of size ~100 whose weighted sum is ~1: summed in float32 it
    # is exact before one rounding to `dtype`; summed in `dtype`, each rounded product is off by
    # more than the whole result.
    T, k, d = 16, 3, 4
    gen = torch.Generator().manual_seed(0)
    weights = torch.rand(T, k, generator=gen) + 0.5  # (T, k) float32
    out = (torch.randn(k, T, d, generator=gen, dtype=torch.float64) * 100).to(dtype).double()
    target = 1 + torch.rand(T, d, generator=gen, dtype=torch.float64)  # (T, d) in [1, 2)
    w = weights.double().T[..., None]  # (k, T, 1)
    out[2] = (target - w[0] * out[0] - w[1] * out[1]) / w[2]  # the third output cancels the rest
    expert_out = out.to(dtype).reshape(k * T, d)  # (N, d) grouped by rank = expert
    plan = impl.DispatchPlan(
        token=torch.arange(T).repeat(k),
        rank=torch.arange(k).repeat_interleave(T),
        counts=torch.full((k,), T),
    )
    expected = (weights.double().T[..., None] * expert_out.double().reshape(k, T, d)).sum(0)
    y = impl.combine(expert_out, weights, plan, T)
    assert y.dtype == dtype, f"combine returns expert_out's dtype {dtype}, got {y.dtype}"
    assert_close(
        y,
        expected,
        name="weighted sums that nearly cancel",
        hint=f"a precision problem: multiply and add in float32 (expert_out.float() * weights), "
        f"not in {dtype}, and round to {dtype} once at the end",
    )


# ----------------------------------------------------------------------------------------------
# The cost: k experts per token, not E, and no broadcasting around the FLOP counter


COST_CASES = [  # (T, d, h, E, k)
    (64, 16, 32, 8, 2),
    (37, 8, 24, 16, 1),
    (29, 12, 16, 4, 1),
    (41, 8, 16, 64, 2),
    (128, 8, 16, 64, 1),
    (64, 16, 16, 64, 8),
    (64, 64, 64, 8, 2),  # d and h large next to E: dense work is cheaper here
]
CAPACITY_RULE = (
    "C = ceil(capacity_factor · T · k / E); each expert serves its first C assignments by rank, "
    "then token index; a dropped assignment adds 0 and the token's other weights stay as they "
    "were (no renormalisation)"
)
SLACK = 1.5  # room for a different but reasonable grouping; running all E experts is E / k times


def assert_sparse_cost(impl, layer, k, *, kept, capacity_factor=None):
    """FLOPs, multiplications and the largest tensor of moe_forward, against the sparse bound."""
    __tracebackhide__ = True
    (T, d), (E, h) = layer.x.shape, layer.w1.shape[::2]
    options = {} if capacity_factor is None else {"capacity_factor": capacity_factor}
    y, flops = count_flops(impl.moe_forward, *layer, k, **options)
    _, multiplies = count_multiplies(impl.moe_forward, *layer, k, **options)
    _, record = largest_tensor(impl.moe_forward, *layer, k, **options)
    gate = T * d * E  # the router's multiplies
    per_assignment = 3 * d * h  # three matmuls (d→h, d→h, h→d)
    allowed = gate + SLACK * per_assignment * kept
    dense = gate + per_assignment * T * E
    advice = (
        f"Every expert on every token would cost {dense:,} multiplications. Group the tokens by "
        "expert and run each expert once, on its own tokens only (and never on dropped "
        "assignments)"
    )
    budget = (
        f"allowed {allowed:,.0f} = router T·d·E = {gate:,} + {SLACK} x 3·d·h = {per_assignment:,} "
        f"per kept assignment x {kept} kept"
    )
    assert flops <= 2 * allowed, f"moe_forward spent {flops:,} FLOPs; {budget} (x 2).\n{advice}"
    assert multiplies <= allowed, (
        f"moe_forward did {multiplies:,} multiplications (elementwise and broadcast products "
        f"count too); {budget}.\n{advice}: broadcasting x against every expert's weights is "
        "the dense computation in disguise"
    )
    largest = T * k * max(E, d, h)
    assert record.numel <= largest, (
        f"moe_forward made a tensor of {record}; the largest allowed is T·k·max(E, d, h) = "
        f"{largest:,} elements. {advice}"
    )
    return y


@pytest.mark.parametrize(("T", "d", "h", "E", "k"), COST_CASES)
def test_expert_work_grows_with_k_not_with_E(impl, T, d, h, E, k):
    spec = LayerSpec(T, d, h, E, k, torch.float32, seed=T)
    layer = spec.build()
    y = assert_sparse_cost(impl, layer, k, kept=T * k)
    assert_like_oracle(
        y,
        lambda dtype: moe_oracle(*layer, k, dtype=dtype),
        dtype=spec.dtype,
        hint="the output is wrong (the cost was fine)",
    )


@pytest.mark.parametrize(("E", "factor"), [(8, 0.25), (64, 0.5)])
def test_dropped_assignments_cost_nothing(impl, E, factor):
    T, d, h, k = 64, 16, 32, 2
    spec = LayerSpec(T, d, h, E, k, torch.float32, seed=3, skew=1.0)
    layer = spec.build()
    _, experts = route_oracle(router_logits(layer.x, layer.gate_w), k)
    kept = int(kept_oracle(experts, E, capacity_oracle(T, k, E, factor)).sum())
    y = assert_sparse_cost(impl, layer, k, kept=kept, capacity_factor=factor)
    assert_like_oracle(
        y,
        lambda dtype: moe_oracle(*layer, k, factor, dtype=dtype),
        dtype=spec.dtype,
        hint=f"the output is wrong (the cost was fine). {CAPACITY_RULE}",
    )


# ----------------------------------------------------------------------------------------------
# The layer against the oracle


@given(spec=layer_specs())
@example(spec=LayerSpec(T=33, d=8, h=16, E=64, k=2, dtype=torch.bfloat16, seed=0))
@example(spec=LayerSpec(T=5, d=3, h=7, E=8, k=8, dtype=torch.float16, seed=1))
@example(spec=LayerSpec(T=7, d=3, h=2, E=300, k=2, dtype=torch.float32, seed=0))
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
        "x.float() @ gate_w.float().T, each expert's output scatter-ADDED to its tokens. If only "
        "float16/bfloat16 fail, look for a precision problem: the router must run in float32",
    )


@pytest.mark.parametrize(
    ("dtype", "gate_dtype"),
    [
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float32),
        (torch.float32, torch.float64),
        (torch.float64, torch.float32),
    ],
    ids=str,
)
def test_moe_forward_takes_gate_w_in_any_float_dtype(impl, dtype, gate_dtype):
    spec = LayerSpec(T=9, d=8, h=4, E=5, k=2, dtype=dtype, seed=4)
    x, gate_w, w1, w3, w2 = spec.build()
    layer = (x, gate_w.to(gate_dtype), w1, w3, w2)  # only the router in another dtype
    try:
        y = impl.moe_forward(*layer, spec.k)
    except ValueError as error:
        raise AssertionError(
            f"moe_forward(x {dtype}, gate_w {gate_dtype}, ...) raised ValueError: {error}\n"
            "only w1, w3 and w2 must be in x's dtype; gate_w may be in any float dtype, since "
            "the router casts both to float32 (x.float() @ gate_w.float().T)"
        ) from error
    assert_like_oracle(
        y,
        lambda dtype: moe_oracle(*layer, spec.k, dtype=dtype),
        dtype=dtype,
        hint="the router's logits are x.float() @ gate_w.float().T whatever gate_w's dtype",
    )


@pytest.mark.parametrize("dtype", [*_ROUNDED_AWAY, torch.float64], ids=str)
def test_moe_forward_runs_its_experts_in_x_dtype(impl, dtype):
    # The expert of test_expert_mlp_computes_in_x_dtype, inside the layer. With k = 1 the one
    # weight is p / p = 1 exactly, so y is that expert's output as x's dtype computes it: 0 where
    # x @ w3 = 1 + eps rounds to 1 in x's dtype, 32 · eps in a wider one. In float64, eps = 2^-30
    # survives (float64 keeps it, float32 rounds it away): y must be 32 · eps, not 0.
    eps = _ROUNDED_AWAY.get(dtype, 2.0**-30)
    x = torch.tensor([[1.0, 1.0]] * 3, dtype=dtype)  # [T=3, d=2]
    gate_w = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=dtype)  # logits [0, 2]: expert 1
    w1 = torch.full((2, 2, 2), 16.0, dtype=dtype)  # [E=2, d, h=2]
    w3 = torch.tensor([[[1.0, 1.0], [eps, 0.0]]] * 2, dtype=dtype)
    w2 = torch.tensor([[[1.0, 1.0], [-1.0, -1.0]]] * 2, dtype=dtype)  # [E, h, d]
    y = impl.moe_forward(x, gate_w, w1, w3, w2, 1)
    assert y.dtype == dtype, f"moe_forward returns x's dtype {dtype}, got {y.dtype}"
    wide, got = 32 * eps, y.double()
    if dtype == torch.float64:
        ok, expected = bool(((got - wide).abs() < wide / 2).all()), f"{wide} everywhere"
        why = "float64 keeps 1 + 2^-30; float32 experts (x.float(), w.float()) round it to 1"
    else:
        ok, expected = bool((got.abs() < wide / 2).all()), "0 everywhere"
        why = f"in {dtype} x @ w3 = 1 + {eps} rounds to 1, so the two hidden units cancel"
    assert ok, (
        f"expected y = {expected} ({why}), got {y.tolist()}. moe_forward runs each expert in "
        f"x's dtype, on the tensors as given: float32 (or float64) copies of {dtype} weights "
        "give a different, if more accurate, layer"
    )


def test_the_router_runs_in_float32_for_float64_input(impl):
    # Float32 rounds 2**20 + 0.03 to 2**20, so the pinned logits x.float() @ gate_w.float().T
    # are [0, 0.01] and expert 1 wins; a float64 router sees [0.03, 0.01] and picks expert 0.
    x = torch.tensor([[1.0, -1.0]], dtype=torch.float64)  # (T = 1, d = 2)
    gate_w = torch.tensor([[2.0**20 + 0.03, 2.0**20], [0.01, 0.0]], dtype=torch.float64)
    w1 = torch.tensor([[[1.0], [-1.0]]] * 2, dtype=torch.float64)  # (E = 2, d, h = 1): x0 - x1
    w2 = torch.tensor([[[1.0, 1.0]], [[-1.0, -1.0]]], dtype=torch.float64)  # expert 1 is -expert 0
    layer = (x, gate_w, w1, w1.clone(), w2)
    assert_like_oracle(
        impl.moe_forward(*layer, 1),
        lambda dtype: moe_oracle(*layer, 1, dtype=dtype),
        dtype=torch.float64,
        hint="the router runs in float32 for every dtype of x, float64 included: logits = "
        "x.float() @ gate_w.float().T (here [0, 0.01], so expert 1); float64 logits "
        "([0.03, 0.01]) pick expert 0",
    )


@given(spec=layer_specs(max_tokens=12), seed=seeds())
@example(spec=LayerSpec(T=6, d=4, h=3, E=3, k=2, dtype=torch.float32, seed=0), seed=1)
def test_moe_forward_reads_weights_updated_in_place(impl, spec: LayerSpec, seed):
    """Training updates the weights in place between calls: the same tensors, new values."""
    layer = spec.build()
    impl.moe_forward(*layer, spec.k)
    for mine, new in zip(layer, dataclasses.replace(spec, seed=seed).build(), strict=True):
        mine.copy_(new)  # x, gate_w, w1, w3 and w2 keep their identity and take new values
    y = impl.moe_forward(*layer, spec.k)
    assert_like_oracle(
        y,
        lambda dtype: moe_oracle(*layer, spec.k, dtype=dtype),
        dtype=spec.dtype,
        hint="the second call was given the same tensors as the first, updated in place (as an "
        "optimizer step does): read their values on every call; nothing derived from them "
        "(a cast, a concatenation, a routing) may be kept from an earlier call",
    )


@given(spec=layer_specs(skews=[0.0, 1.0, 3.0]), factor=st.sampled_from(CAPACITY_FACTORS))
@example(
    spec=LayerSpec(T=33, d=8, h=8, E=64, k=4, dtype=torch.float32, seed=2, skew=1.0), factor=1e-6
)
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


@given(spec=crowded_layer_specs(), factor=st.sampled_from([None, *CAPACITY_FACTORS]))
@example(  # all 2049 tokens to expert 0: float16 makes the count 2048
    spec=LayerSpec(T=2049, d=4, h=4, E=2, k=1, dtype=torch.float16, seed=0, skew=30.0),
    factor=None,
)
@example(
    spec=LayerSpec(T=2501, d=8, h=8, E=3, k=2, dtype=torch.bfloat16, seed=1, skew=8.0),
    factor=1.0,
)
def test_moe_forward_counts_groups_past_float16_integers(impl, spec: LayerSpec, factor):
    layer = spec.build()
    _, experts = route_oracle(router_logits(layer.x, layer.gate_w), spec.k)
    routed = torch.bincount(experts.reshape(-1), minlength=spec.E).tolist()
    note(f"routed per expert: {routed}")
    y = impl.moe_forward(*layer, spec.k, capacity_factor=factor)
    assert_like_oracle(
        y,
        lambda dtype: grouped_moe_oracle(*layer, spec.k, factor, dtype=dtype),
        dtype=spec.dtype,
        hint=f"{spec.T} tokens, {max(routed)} assignments to one expert: float16 holds the "
        "integers exactly only up to 2048 (bfloat16 up to 256), so a group size, position or "
        f"offset counted in x's {spec.dtype} (a sum or cumsum of a routing mask in that dtype) "
        "comes out wrong and rows land in the wrong expert's group or are never computed. "
        "Count in int64 (torch.bincount, plan.counts)",
    )


@given(spec=layer_specs(), factor=st.sampled_from([None, *CAPACITY_FACTORS]))
def test_the_layer_of_no_tokens_is_empty(impl, spec: LayerSpec, factor):
    # A batch with no tokens is valid (README): every step of the layer returns [0, ...] tensors.
    spec = dataclasses.replace(spec, T=0)
    x, gate_w, w1, w3, w2 = spec.build()  # x (0, d)
    empty = torch.zeros(0, dtype=torch.int64)
    plan = impl.DispatchPlan(token=empty, rank=empty, counts=torch.zeros(spec.E, dtype=torch.int64))
    weights = torch.zeros(0, spec.k)  # (0, k) float32
    calls = {
        "expert_mlp(x [0, d], ...)": lambda: impl.expert_mlp(x, w1[0], w3[0], w2[0]),
        "dispatch(x [0, d], empty plan)": lambda: impl.dispatch(x, plan),
        "combine(expert_out [0, d], weights [0, k], empty plan, 0)": lambda: impl.combine(
            x, weights, plan, 0
        ),
        f"moe_forward(x [0, d], ..., k={spec.k}, capacity_factor={factor})": lambda: (
            impl.moe_forward(x, gate_w, w1, w3, w2, spec.k, capacity_factor=factor)
        ),
    }
    for call, run in calls.items():
        try:
            y = run()
        except NotImplementedError:  # a level not written yet
            raise
        except (RuntimeError, IndexError, ValueError) as error:
            raise AssertionError(
                f"{call} raised {type(error).__name__}: {error}\nT = 0 tokens is a valid batch: "
                "return an empty [0, d] tensor in x's dtype. Every expert's group is empty, so "
                "nothing runs; joining a list of the experts' outputs (torch.cat of an empty "
                "list) or checking T >= 1 fails"
            ) from error
        assert isinstance(y, torch.Tensor) and y.shape == (0, spec.d) and y.dtype == spec.dtype, (
            f"{call}: expected an empty tensor of shape [0, d] = {(0, spec.d)} and dtype "
            f"{spec.dtype}, got {type(y).__name__} "
            f"{getattr(y, 'dtype', '')} {tuple(getattr(y, 'shape', ()))}"
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
    factor = spec.E  # an int: C = ceil(E · T · k / E) = T · k, no expert can be sent more
    assert_like_oracle(
        impl.moe_forward(*layer, spec.k, capacity_factor=factor),
        lambda dtype: moe_oracle(*layer, spec.k, dtype=dtype),
        dtype=spec.dtype,
        hint="with C >= T·k nothing is dropped: the output equals the unlimited layer",
    )
