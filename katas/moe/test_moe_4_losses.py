"""Level 4 of the MoE kata: the router's load-balancing loss and z-loss."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from grading.judge.guards import caller_changes
from grading.judge.strategies import lengths, randn, seeds
from grading.judge.tolerance import assert_close
from katas.moe.cases import (
    EXPERT_COUNTS,
    RoutingSpec,
    bad_input_table,
    load_balancing_oracle,
    routing_specs,
    z_loss_oracle,
)

T, E = 4, 3
LOGITS = torch.zeros(T, E)
EXPERTS = torch.zeros(T, 2, dtype=torch.int64)
PRECISION = (
    "a precision problem: upcast the logits to float32 first (logits.float()), and use "
    "torch.softmax / torch.logsumexp, which subtract the max so exp() cannot overflow"
)
BAD_INPUT = [
    (
        BadCall(
            "load_balancing_loss(logits [4, 3], experts of shape [4, 4])",
            "k = E + 1 implied",
            lambda m: m.load_balancing_loss(LOGITS, torch.zeros(T, E + 1, dtype=torch.int64)),
        ),
        "k|experts",
    ),
    (
        BadCall(
            "load_balancing_loss(logits [4, 3], experts for 3 tokens)",
            "experts for T - 1 tokens",
            lambda m: m.load_balancing_loss(LOGITS, EXPERTS[1:]),
        ),
        "experts",
    ),
    (
        BadCall(
            "load_balancing_loss(logits, experts holding 3)",
            "expert index = E",
            lambda m: m.load_balancing_loss(LOGITS, torch.full((T, 1), E)),
        ),
        "experts",
    ),
    (
        BadCall(
            "load_balancing_loss(logits, experts of dtype float32)",
            "float experts",
            lambda m: m.load_balancing_loss(LOGITS, EXPERTS.float()),
        ),
        "experts",
    ),
    (
        BadCall(
            "load_balancing_loss(logits of shape [3], experts)",
            "1-D logits",
            lambda m: m.load_balancing_loss(LOGITS[0], EXPERTS),
        ),
        "logits",
    ),
    (
        BadCall(
            "load_balancing_loss(logits of shape [0, 3], experts of shape [0, 1])",
            "no tokens",
            lambda m: m.load_balancing_loss(LOGITS[:0], EXPERTS[:0, :1]),
        ),
        "logits",
    ),
    (
        BadCall(
            "router_z_loss(logits of shape [3])",
            "z-loss of 1-D logits",
            lambda m: m.router_z_loss(LOGITS[0]),
        ),
        "logits",
    ),
    (
        BadCall(
            "router_z_loss(logits of shape [0, 3])",
            "z-loss of no tokens",
            lambda m: m.router_z_loss(LOGITS[:0]),
        ),
        "logits",
    ),
    (
        BadCall(
            "router_z_loss(logits of dtype int64)",
            "z-loss of integer logits",
            lambda m: m.router_z_loss(LOGITS.long()),
        ),
        "logits",
    ),
]


@pytest.mark.parametrize(("bad", "argument"), bad_input_table(BAD_INPUT))
def test_bad_loss_input_raises_value_error(impl, bad, argument):
    assert_value_error(bad, impl, match=argument)


# ----------------------------------------------------------------------------------------------
# The load-balancing loss


@given(T=lengths(33), E=st.sampled_from(EXPERT_COUNTS + [64]), data=st.data(), seed=seeds())
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


@pytest.mark.parametrize("E", [1, 2, 5, 8, 64])
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


@given(spec=routing_specs(), scale=st.sampled_from([0.5, 3.0, 100.0]))
@example(spec=RoutingSpec(T=9, E=64, k=8, seed=0), scale=100.0)
def test_load_balancing_loss_matches_oracle_and_its_gradient(impl, spec: RoutingSpec, scale):
    experts = spec.experts()
    # The oracle starts from the float32 logits the code receives, so only the code's rounding
    # is measured (at scale 100, rounding the logits themselves would move the answer).
    logits32 = randn((spec.T, spec.E), seed=spec.seed + 1, scale=scale)
    logits64 = logits32.double().requires_grad_(True)
    expected = load_balancing_oracle(logits64, experts)
    expected.backward()
    logits = logits64.detach().float().requires_grad_(True)
    loss = impl.load_balancing_loss(logits, experts)
    assert loss.shape == (), (
        f"expected a 0-dim scalar loss (shape []), got shape {list(loss.shape)}: return the "
        "reduction itself (.sum(), .mean()), not a reshape of it to [1]"
    )
    # The loss lies in [0, E] and is 1 at balance: that sets the scale for rounding (a loss of
    # 1e-60, where the router's probabilities avoid the routed experts, rounds to 0 in float32).
    assert_close(
        loss.detach().reshape(()),
        expected.detach(),
        dtype=torch.float32,
        scale=1.0,
        name="load_balancing_loss",
        hint="E · Σ_e f_e · P_e with f_e = count_e / (T·k) and P_e the mean over ALL tokens of "
        f"softmax(logits)[:, e], not only over the tokens routed to e. If only large logits "
        f"fail: {PRECISION}",
    )
    perm = torch.randperm(spec.T, generator=torch.Generator().manual_seed(spec.seed))
    assert_close(
        impl.load_balancing_loss(logits.detach()[perm], experts[perm]).reshape(()),
        expected.detach(),
        dtype=torch.float32,
        scale=1.0,
        name="loss with the tokens shuffled",
        hint="the loss is a sum over experts of averages over tokens: token order cannot matter",
    )
    caller_changes(impl.load_balancing_loss, logits)  # its .grad, by the caller's backward
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
    spec=routing_specs(crowded=True),
    dtype=st.sampled_from([torch.float16, torch.bfloat16]),
    scale=st.sampled_from([0.0, 0.5, 3.0]),
)
@example(  # all 2049 tokens to expert 0 with equal logits: E · f_0 · P_0 = 2 · 1 · 1/2 = 1
    spec=RoutingSpec(T=2049, E=2, k=1, seed=0, skew=8.0), dtype=torch.float16, scale=0.0
)
def test_load_balancing_loss_counts_past_float16_integers(impl, spec: RoutingSpec, dtype, scale):
    experts = spec.experts()
    routed = torch.bincount(experts.reshape(-1), minlength=spec.E)
    logits = randn((spec.T, spec.E), seed=spec.seed + 1, scale=scale, dtype=dtype)
    loss = impl.load_balancing_loss(logits, experts)
    assert_close(
        loss.detach().reshape(()),
        load_balancing_oracle(logits, experts),
        dtype=torch.float32,
        scale=1.0,  # the loss at balance
        name=f"load_balancing_loss of {dtype} logits, {spec.T} tokens",
        hint=f"one expert is sent {int(routed.max())} assignments: float16 holds the integers "
        "exactly only up to 2048 (bfloat16 up to 256), so f_e counted in the logits' dtype (a "
        "one-hot mask summed in float16) is off. Count in integers (torch.bincount), then divide "
        "by T·k in float32",
    )


# ----------------------------------------------------------------------------------------------
# The z-loss


@given(
    T=lengths(17),
    E=st.sampled_from(EXPERT_COUNTS + [64]),
    scale=st.sampled_from([0.0, 1.0, 20.0, 100.0, 1e4]),
    seed=seeds(),
)
@example(T=3, E=8, scale=1e4, seed=0)
def test_router_z_loss_matches_oracle(impl, T, E, scale, seed):
    logits64 = randn((T, E), seed=seed, scale=scale).double().requires_grad_(True)  # float32 values
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
        f"with all logits 0 it is log(E)² = {math.log(E) ** 2:.6g}. If only large logits fail: "
        f"{PRECISION}",
    )
    caller_changes(impl.router_z_loss, logits)  # its .grad, by the caller's backward
    loss.reshape(()).backward()
    # The gradient is 2 · lse · softmax / T. In float32, logits - max carries an error of about
    # 1e-7 x |logits|, so softmax (and the gradient) is only that exact: the check stops at 100.
    if scale <= 100:
        assert_close(logits.grad, logits64.grad, dtype=torch.float32, name="d z-loss / d logits")


# ----------------------------------------------------------------------------------------------
# Both losses in float32, whatever the logits' dtype


@pytest.mark.parametrize(
    ("dtype", "scale"),
    [(torch.float16, 300.0), (torch.bfloat16, 30.0), (torch.bfloat16, 1e4), (torch.float64, 3.0)],
    ids=lambda v: str(v),
)
def test_losses_run_in_float32_whatever_the_logits_dtype(impl, dtype, scale):
    T, E, k = 13, 8, 2
    limit = min(torch.finfo(dtype).max / 2, 1e30)
    logits = randn((T, E), seed=7, dtype=torch.float64, scale=scale).clamp(-limit, limit)
    logits = logits.to(dtype)  # the values under test, exactly as the code receives them
    experts = RoutingSpec(T, E, k, seed=7).experts()
    for name, got, expected, loss_scale in [
        ("router_z_loss", impl.router_z_loss(logits), z_loss_oracle(logits), None),
        (
            "load_balancing_loss",
            impl.load_balancing_loss(logits, experts),
            load_balancing_oracle(logits, experts),
            1.0,  # the loss at balance
        ),
    ]:
        assert got.dtype == torch.float32, (
            f"{name} of {dtype} logits must be float32, got {got.dtype}"
        )
        assert got.shape == (), (
            f"{name} must be a 0-dim scalar (shape []), got shape {list(got.shape)}: a loss is "
            "the reduction itself (.sum(), .mean()), not a reshape of it to [1]"
        )
        assert_close(
            got.detach().reshape(()),
            expected,
            dtype=torch.float32,
            scale=loss_scale,
            name=f"{name} of {dtype} logits (scale {scale:g})",
            hint=f"{PRECISION}; in float16, logsumexp(logits)² past 65504 overflows to inf",
        )
