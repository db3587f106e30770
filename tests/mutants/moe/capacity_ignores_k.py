"""Bug: the capacity is ceil(capacity_factor · T / E), forgetting that each token sends k.

The formula is usually quoted from top-1 (Switch) routing, where k = 1 hides the factor.
"""

from __future__ import annotations

import math

import torch

from reference.moe import (
    DispatchPlan,
    ExpertLoad,
    _check_layer,
    combine,
    dispatch,
    expert_load,
    expert_mlp,
    load_balancing_loss,
    plan_dispatch,
    route,
    router_z_loss,
)


def expert_capacity(num_tokens, k, num_experts, capacity_factor):
    if not capacity_factor > 0:
        raise ValueError(f"capacity_factor: expected a number > 0, got {capacity_factor!r}")
    return math.ceil(capacity_factor * num_tokens / num_experts)  # BUG: T · k assignments


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    """The reference layer, calling this file's expert_capacity."""
    _check_layer(x, gate_w, w1, w3, w2)
    T, E = x.shape[0], gate_w.shape[0]
    logits = x.float() @ gate_w.float().T  # (T, E)
    weights, experts = route(logits, k)  # (T, k)
    capacity = None if capacity_factor is None else expert_capacity(T, k, E, capacity_factor)
    plan = plan_dispatch(experts, E, capacity=capacity)
    grouped = dispatch(x, plan)  # (N, d)
    out = torch.empty_like(grouped)
    start = 0
    for e, count in enumerate(plan.counts.tolist()):
        if count:
            rows = slice(start, start + count)
            out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])
            start += count
    return combine(out, weights, plan, T)
