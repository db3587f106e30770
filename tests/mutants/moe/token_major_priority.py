"""Bug: capacity is filled token by token (all of token 0's choices, then token 1's, ...).

Flattening experts [T, k] row by row is the natural reshape, but then a late token's first
choice loses its place to an early token's second choice.
"""

from __future__ import annotations

import torch

from reference.moe import (
    DispatchPlan,
    ExpertLoad,
    _check_experts,
    _check_layer,
    combine,
    dispatch,
    expert_capacity,
    expert_load,
    expert_mlp,
    load_balancing_loss,
    route,
    router_z_loss,
)


def plan_dispatch(experts, num_experts, *, capacity=None):
    _check_experts(experts, num_experts)
    T, k = experts.shape
    flat = experts.reshape(-1)  # BUG: token-major; should be experts.T.reshape(-1)
    order = torch.sort(flat, stable=True).indices
    routed = torch.bincount(flat, minlength=num_experts)
    starts = torch.cumsum(routed, dim=0) - routed
    position = torch.arange(k * T) - starts[flat[order]]
    if capacity is not None:
        order = order[position < capacity]
    return DispatchPlan(
        token=order // k, rank=order % k, counts=torch.bincount(flat[order], minlength=num_experts)
    )


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    """The reference layer, calling this file's plan_dispatch."""
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
