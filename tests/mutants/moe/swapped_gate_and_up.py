"""Bug: the SiLU gates the w3 branch instead of the w1 branch.

The two projections have the same shape and the names w1/w3 say nothing about their roles.
"""

from __future__ import annotations

import torch

from reference.moe import (
    DispatchPlan,
    ExpertLoad,
    _check_expert,
    _check_layer,
    combine,
    dispatch,
    expert_capacity,
    expert_load,
    load_balancing_loss,
    plan_dispatch,
    route,
    router_z_loss,
)


def expert_mlp(x, w1, w3, w2):
    _check_expert(x, w1, w3, w2)
    return (torch.nn.functional.silu(x @ w3) * (x @ w1)) @ w2  # BUG: silu(x @ w1) * (x @ w3)


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    """The reference layer, calling this file's expert_mlp."""
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
