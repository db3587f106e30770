"""Bug: after capacity drops, a token's remaining weights are renormalised to sum to 1 again.

It feels like repairing the damage, but the rule is that a dropped assignment simply
contributes 0 (the token keeps less of the layer; the residual stream carries it).
"""

from __future__ import annotations

import torch

from reference.moe import (
    DispatchPlan,
    ExpertLoad,
    _check_layer,
    combine,
    dispatch,
    expert_capacity,
    expert_load,
    expert_mlp,
    load_balancing_loss,
    plan_dispatch,
    route,
    router_z_loss,
)


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    _check_layer(x, gate_w, w1, w3, w2)
    T, E = x.shape[0], gate_w.shape[0]
    weights, experts = route(x.float() @ gate_w.float().T, k)
    capacity = None if capacity_factor is None else expert_capacity(T, k, E, capacity_factor)
    plan = plan_dispatch(experts, E, capacity=capacity)
    kept = torch.zeros(T, k, dtype=torch.bool)
    kept[plan.token, plan.rank] = True
    weights = weights * kept  # BUG: the next line renormalises what is left
    weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-30)
    grouped = dispatch(x, plan)
    out = torch.empty_like(grouped)
    start = 0
    for e, count in enumerate(plan.counts.tolist()):
        if count:
            rows = slice(start, start + count)
            out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])
            start += count
    return combine(out, weights, plan, T)
