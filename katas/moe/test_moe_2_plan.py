"""Level 2 of the MoE kata: the capacity, the dispatch plan and the load report."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from katas.moe.cases import (
    RoutingSpec,
    bad_input_table,
    plan_oracle,
    routing_specs,
)

T, E = 4, 3
EXPERTS = torch.tensor([[0, 1], [1, 2], [0, 2], [2, 0]])  # (T, k = 2)
BAD_INPUT = [
    (  # no tokens: the arguments are checked all the same
        BadCall(
            "expert_capacity(0, 1, 3, nan)",
            "factor NaN, no tokens",
            lambda m: m.expert_capacity(0, 1, E, math.nan),
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "expert_capacity(0, 4, 3, 1.0)",
            "k = E + 1, no tokens",
            lambda m: m.expert_capacity(0, E + 1, E, 1.0),
        ),
        "k",
    ),
    (
        BadCall(
            "plan_dispatch(experts of shape [0, 4], 3)",
            "k = E + 1 implied, no tokens",
            lambda m: m.plan_dispatch(torch.zeros(0, E + 1, dtype=torch.int64), E),
        ),
        "k|experts",
    ),
    (
        BadCall(
            "plan_dispatch(experts of shape [0, 1], 3, capacity=-1)",
            "capacity -1, no tokens",
            lambda m: m.plan_dispatch(torch.zeros(0, 1, dtype=torch.int64), E, capacity=-1),
        ),
        "capacity",
    ),
    (
        BadCall(
            "expert_capacity(4, 1, 3, -1.0)",
            "factor -1",
            lambda m: m.expert_capacity(T, 1, E, -1.0),
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "expert_capacity(4, 1, 3, 0.0)", "factor 0", lambda m: m.expert_capacity(T, 1, E, 0.0)
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "expert_capacity(4, 1, 3, nan)",
            "factor NaN",
            lambda m: m.expert_capacity(T, 1, E, math.nan),
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "expert_capacity(4, 1, 3, inf)",
            "factor inf",
            lambda m: m.expert_capacity(T, 1, E, math.inf),
        ),
        "capacity_factor",
    ),
    (
        BadCall(
            "expert_capacity(4, 1, 0, 1.0)", "no experts", lambda m: m.expert_capacity(T, 1, 0, 1.0)
        ),
        "num_experts",
    ),
    (
        BadCall(
            "expert_capacity(-4, 1, 3, 1.0)",
            "negative T",
            lambda m: m.expert_capacity(-T, 1, E, 1.0),
        ),
        "num_tokens",
    ),
    (
        BadCall(
            "expert_capacity(2.5, 1, 3, 1.0)",
            "float T",
            lambda m: m.expert_capacity(2.5, 1, E, 1.0),
        ),
        "num_tokens",
    ),
    (
        BadCall(
            "expert_capacity(4, 0, 3, 1.0)",
            "capacity k = 0",
            lambda m: m.expert_capacity(T, 0, E, 1.0),
        ),
        "k",
    ),
    (
        BadCall(
            "expert_capacity(4, 4, 3, 1.0)",
            "capacity k > E",
            lambda m: m.expert_capacity(T, 4, E, 1.0),
        ),
        "k",
    ),
    (
        BadCall(
            "plan_dispatch(experts holding 3, 3)",
            "plan: index = E",
            lambda m: m.plan_dispatch(torch.full((T, 1), E), E),
        ),
        "experts",
    ),
    (
        BadCall(
            "plan_dispatch(experts holding -1, 3)",
            "plan: index -1",
            lambda m: m.plan_dispatch(torch.full((T, 1), -1), E),
        ),
        "experts",
    ),
    (
        BadCall(
            "plan_dispatch(experts of shape [4], 3)",
            "plan: 1-D experts",
            lambda m: m.plan_dispatch(EXPERTS[:, 0], E),
        ),
        "experts",
    ),
    (
        BadCall(
            "plan_dispatch(experts of dtype float32, 3)",
            "plan: float experts",
            lambda m: m.plan_dispatch(EXPERTS.float(), E),
        ),
        "experts",
    ),
    (
        BadCall(
            "plan_dispatch(experts [4, 2], 1)",
            "plan: k > num_experts",
            lambda m: m.plan_dispatch(EXPERTS.clamp(max=0), 1),
        ),
        "k",
    ),
    (
        BadCall(
            "plan_dispatch(experts, 3, capacity=-1)",
            "plan: negative capacity",
            lambda m: m.plan_dispatch(EXPERTS, E, capacity=-1),
        ),
        "capacity",
    ),
    (
        BadCall(
            "plan_dispatch(experts, 3, capacity=2.0)",
            "plan: float capacity",
            lambda m: m.plan_dispatch(EXPERTS, E, capacity=2.0),
        ),
        "capacity",
    ),
    (
        BadCall(
            "expert_load(experts holding 3, 3)",
            "load: index = E",
            lambda m: m.expert_load(torch.full((T, 1), E), E),
        ),
        "experts",
    ),
    (
        BadCall(
            "expert_load(experts, 3, capacity=-1)",
            "load: negative capacity",
            lambda m: m.expert_load(EXPERTS, E, capacity=-1),
        ),
        "capacity",
    ),
]


@pytest.mark.parametrize(("bad", "argument"), bad_input_table(BAD_INPUT))
def test_bad_plan_input_raises_value_error(impl, bad, argument):
    assert_value_error(bad, impl, match=argument)


# ----------------------------------------------------------------------------------------------
# The capacity


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
        (1000, 2, 64, 1e-9, 1),  # a tiny factor still serves one
        (4096, 8, 64, 64.0, 32768),  # a factor of E: C = T·k, nothing can be dropped
        (0, 2, 8, 1.0, 0),  # no tokens, nothing to serve
        (4, 1, 2, 2, 4),  # an int factor is a number too
        (10, 2, 8, 1, 3),
    ],
)
def test_expert_capacity_rounds_up(impl, T, k, E, factor, expected):
    got = impl.expert_capacity(T, k, E, factor)
    assert got == expected and isinstance(got, int), (
        f"expert_capacity({T}, {k}, {E}, {factor}) = {got!r}, expected the int "
        f"ceil({factor} * {T} * {k} / {E}) = {expected}: count all T·k assignments and round up"
    )


def _float_capacities(T, k, E, factor):
    """ceil of T·k·factor/E as Python floats give it, in each natural order of the operations."""
    return {
        math.ceil(factor * T * k / E),
        math.ceil(factor * (T * k) / E),
        math.ceil(factor * (T * k / E)),
    }


@pytest.mark.parametrize(
    ("T", "k", "E", "factor", "expected"),
    [
        (100, 1, 1, 1.1, 111),  # 1.1 * 100 is 110.00000000000001 in floats: just above 110
        (200, 2, 8, 1.1, 56),  # 55.00000000000001
        (10, 1, 1, 0.1, 1),  # 0.1 * 10 is exactly 1.0 in floats (the binary 0.1 is not 1/10)
        (100, 1, 1, 0.2, 20),  # 20.0
        (30, 1, 1, 1.3, 39),  # 39.0
        (25, 2, 5, 1.1, 12),  # 11.000000000000002 in this order; (T·k/E)·factor is 11.0
        (50, 1, 5, 1.1, 12),  # the same, with k = 1
    ],
)
def test_expert_capacity_is_the_float_expression(impl, T, k, E, factor, expected):
    assert expected in _float_capacities(T, k, E, factor)
    got = impl.expert_capacity(T, k, E, factor)
    assert got == expected, (
        f"expert_capacity({T}, {k}, {E}, {factor}) = {got!r}, expected {expected}: "
        f"{factor} * {T} * {k} / {E} is {factor * T * k / E!r} in Python floats, and C is "
        "math.ceil of exactly that, nothing subtracted first (an epsilon rounds a value just "
        "above an integer down) and no exact fractions (fractions.Fraction(0.1) is a bit "
        "more than 1/10, and rounds 1.0 up to 2)"
    )


@pytest.mark.parametrize("factor", [1, 1.0])
def test_expert_capacity_of_an_int_factor_is_the_float_expression_too(impl, factor):
    # 2**53 + 1 tokens: one past the integers a Python float holds, so factor * T * k / E comes
    # out as the float 2**53 for an int factor as for a float one (exact integer arithmetic for
    # int factors would give 2**53 + 1).
    T = 2**53 + 1
    expected = 2**53
    assert _float_capacities(T, 1, 1, factor) == {expected}
    got = impl.expert_capacity(T, 1, 1, factor)
    assert got == expected, (
        f"expert_capacity(2**53 + 1, 1, 1, {factor!r}) = {got!r}, expected 2**53 = {expected}: "
        f"C is math.ceil of the Python float {factor!r} * T * k / E, whose value here is "
        f"{factor * T * 1 / 1!r}, for an int capacity_factor too (2 and 2.0 give the same C)"
    )


@given(
    T=st.integers(1, 5000),
    k=st.integers(1, 8),
    E=st.sampled_from([1, 2, 3, 5, 8, 16, 64, 300]),
    n=st.integers(1, 4096),
    ulps=st.one_of(st.just(0), st.integers(0, 36).map(lambda b: 2**b)),
)
@example(T=100, k=1, E=1, n=110, ulps=2**22)
def test_expert_capacity_rounds_up_just_above_an_integer(impl, T, k, E, n, ulps):
    k = min(k, E)
    # A factor that puts T·k·factor/E at n, or a few ulps (units in the last place) above it:
    # a capacity just above an integer rounds up, however little above it is.
    factor = n * E / (T * k)
    for _ in range(min(ulps, 64)):
        factor = math.nextafter(factor, math.inf)
    if ulps > 64:
        factor += ulps * math.ulp(factor)
    accepted = _float_capacities(T, k, E, factor)
    got = impl.expert_capacity(T, k, E, factor)
    assert got in accepted, (
        f"expert_capacity({T}, {k}, {E}, {factor!r}) = {got!r}, expected "
        f"{' or '.join(map(str, sorted(accepted)))}: {factor!r} * {T} * {k} / {E} is "
        f"{factor * T * k / E!r} in Python floats and C is math.ceil of it as it is; a value "
        "the slightest bit above an integer rounds up (no epsilon subtracted first)"
    )


# ----------------------------------------------------------------------------------------------
# The dispatch plan


@pytest.mark.parametrize(
    ("capacity", "tokens", "ranks", "counts"),
    [
        # Expert 0 gets (0, r0), (2, r0), (3, r1); expert 1 (1, r0), (0, r1); expert 2 (3, r0),
        # (1, r1), (2, r1): each group by rank, then token.
        (None, [0, 2, 3, 1, 0, 3, 1, 2], [0, 0, 1, 0, 1, 0, 1, 1], [3, 2, 3]),
        (2, [0, 2, 1, 0, 3, 1], [0, 0, 0, 1, 0, 1], [2, 2, 2]),
        (1, [0, 1, 3], [0, 0, 0], [1, 1, 1]),  # first choices win over earlier second choices
        (0, [], [], [0, 0, 0]),  # capacity 0 keeps nothing (it is not "no limit")
    ],
    ids=["no capacity", "capacity 2", "capacity 1", "capacity 0"],
)
def test_plan_known_values(impl, capacity, tokens, ranks, counts):
    plan = impl.plan_dispatch(EXPERTS, E, capacity=capacity)
    got = (plan.token.tolist(), plan.rank.tolist(), plan.counts.tolist())
    assert got == (tokens, ranks, counts), (
        f"plan_dispatch(experts={EXPERTS.tolist()}, 3, capacity={capacity}):\n"
        f"expected token {tokens}, rank {ranks}, counts {counts}\n"
        f"got      token {got[0]}, rank {got[1]}, counts {got[2]}\n"
        "groups by expert (expert 0 first), each in priority order: rank, then token; each "
        "expert keeps its first `capacity` assignments, and capacity=None means no limit while "
        "capacity=0 keeps nothing"
    )
    for name in ("token", "rank", "counts"):
        dtype = getattr(plan, name).dtype
        assert dtype == torch.int64, f"plan.{name} must be int64, got {dtype}"


@given(spec=routing_specs())
@example(  # 2501 first choices for expert 0, 2501 second ones for expert 1; C past 2048
    spec=RoutingSpec(T=2501, E=3, k=2, seed=0, skew=8.0, capacity=2051)
)
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


@pytest.mark.parametrize("capacity", [None, 1, 2], ids=lambda c: f"capacity {c}")
def test_plan_with_more_experts_than_a_byte_holds(impl, capacity):
    # E = 300: expert ids 256 and up do not fit in a uint8 (they would wrap to 0, 1, ...).
    E = 300
    experts = torch.tensor([[256, 0], [299, 256], [0, 44], [256, 299], [43, 0]])  # (T = 5, k = 2)
    plan = impl.plan_dispatch(experts, E, capacity=capacity)
    tokens, ranks, counts = plan_oracle(experts, E, capacity)
    got = (plan.token.tolist(), plan.rank.tolist(), plan.counts.tolist())
    assert got == (tokens, ranks, counts), (
        f"plan_dispatch(experts={experts.tolist()}, {E}, capacity={capacity}):\n"
        f"expected token {tokens}, rank {ranks}, nonzero counts "
        f"{ {e: c for e, c in enumerate(counts) if c} }\n"
        f"got      token {got[0]}, rank {got[1]}, nonzero counts "
        f"{ {e: c for e, c in enumerate(got[2]) if c} }\n"
        "any E is allowed: keep expert ids in int64 (a uint8 or int8 copy wraps 256 to 0)"
    )


@pytest.mark.parametrize("capacity", [None, 1], ids=lambda c: f"capacity {c}")
def test_plan_where_expert_id_times_assignments_passes_int32(impl, capacity):
    # 2**16 experts and 2**15 tokens with k = 2: a sort key expert · (T·k) + j reaches 2**32,
    # so a key held in int32 wraps around and scrambles the groups.
    E_, T_, k_ = 2**16, 2**15, 2
    experts = torch.randint(0, E_, (T_, k_), generator=torch.Generator().manual_seed(5))
    tokens, ranks, counts = plan_oracle(experts, E_, capacity)
    plan = impl.plan_dispatch(experts, E_, capacity=capacity)
    for name, got, expected in [
        ("counts", plan.counts, counts),
        ("token", plan.token, tokens),
        ("rank", plan.rank, ranks),
    ]:
        if got.tolist() != expected:
            pairs = enumerate(zip(got.tolist(), expected, strict=False))
            at = next((i for i, (a, b) in pairs if a != b), None)
            raise AssertionError(
                f"plan_dispatch of {T_:,} tokens, k = {k_}, over {E_:,} experts (capacity "
                f"{capacity}): plan.{name} differs from the expected grouping (first at index "
                f"{at}, length {got.numel():,} vs {len(expected):,}). Expert ids times T·k pass "
                "2**31 here: keep sort keys and positions in int64, or sort the expert ids "
                "themselves with a stable sort"
            )


def test_expert_load_counts_past_float32_integers(impl):
    # 2**24 + 1 assignments to expert 0: float32 holds consecutive integers only up to 2**24,
    # so a count kept in float32 (a float histogram, a float mask summed) loses one.
    n = 2**24 + 1
    experts = torch.zeros(n, 1, dtype=torch.int64)  # (T = n, k = 1)
    load = impl.expert_load(experts, 2, capacity=n)
    expected = [n, 0]
    assert load.routed.tolist() == expected and load.kept.tolist() == expected, (
        f"expert_load of {n:,} assignments all to expert 0 of 2 (capacity {n:,}): expected "
        f"routed and kept {expected}, got routed {load.routed.tolist()}, kept "
        f"{load.kept.tolist()}: count in int64 (torch.bincount), not in float32, which stops "
        "at 2**24"
    )


def test_plan_keeps_capacity_past_float32_integers(impl):
    # 2**24 + 2 assignments to expert 0 with a capacity of 2**24: a place in the queue counted
    # in float32 (a cumsum of a float mask) rounds 2**24 + 1 down to 2**24, so the place of
    # assignment 2**24 reads 2**24 - 1 and it is kept, one past the capacity.
    n, C = 2**24 + 2, 2**24
    experts = torch.zeros(n, 1, dtype=torch.int64)  # (T = n, k = 1)
    plan = impl.plan_dispatch(experts, 1, capacity=C)
    last = int(plan.token[-1]) if plan.token.numel() else None
    got, expected = (plan.counts.tolist(), plan.token.numel(), last), ([C], C, C - 1)
    assert got == expected, (
        f"plan_dispatch of {n:,} assignments all to expert 0, capacity {C:,}: expected counts "
        f"{expected[0]}, {expected[1]:,} kept, the last being token {expected[2]:,}; got counts "
        f"{got[0]}, {got[1]:,} kept, the last token {got[2]}: count each assignment's place "
        "in its expert's queue in int64, not in float32, which stops at 2**24"
    )


@pytest.mark.parametrize("capacity", [None, 0, 1, 2049], ids=lambda c: f"capacity {c}")
@pytest.mark.parametrize(("E", "k"), [(1, 1), (3, 2), (8, 8)])
def test_plan_and_load_of_no_tokens_are_empty(impl, E, k, capacity):
    # A batch with no tokens is valid (README): nothing to plan, every count 0.
    experts = torch.zeros(0, k, dtype=torch.int64)  # (T = 0, k)
    call = f"(experts of shape [0, {k}], {E}, capacity={capacity})"
    try:
        plan = impl.plan_dispatch(experts, E, capacity=capacity)
        load = impl.expert_load(experts, E, capacity=capacity)
    except NotImplementedError:  # a level not written yet
        raise
    except (RuntimeError, IndexError, ValueError) as error:
        raise AssertionError(
            f"plan_dispatch or expert_load{call} raised {type(error).__name__}: {error}\n"
            "T = 0 tokens is a valid batch: an empty plan (N = 0) and counts of 0 for every "
            "expert; check the experts' index range only when there are indices to check "
            "(experts.min() of an empty tensor fails)"
        ) from error
    got = {
        "plan.token": plan.token,
        "plan.rank": plan.rank,
        "plan.counts": plan.counts,
        "load.routed": load.routed,
        "load.kept": load.kept,
    }
    expected = {"plan.token": [], "plan.rank": [], "plan.counts": [0] * E}
    expected |= {"load.routed": [0] * E, "load.kept": [0] * E}
    for name, tensor in got.items():
        assert tensor.dtype == torch.int64 and tensor.tolist() == expected[name], (
            f"{name} of plan_dispatch / expert_load{call}: expected the int64 values "
            f"{expected[name]}, got {tensor.dtype} {tensor.tolist()}: no tokens means no "
            "assignments, an empty plan and a count of 0 for each of the E experts"
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
        f"got {load.kept.tolist()} (capacity None: no limit; capacity 0: nothing kept)"
    )
