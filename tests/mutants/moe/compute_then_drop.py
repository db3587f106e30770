"""Bug: every routed assignment goes through its expert; the dropped ones are zeroed after.

Masking after the fact gives the right numbers and is simpler to write, but the capacity
is there to bound the work an expert does, and this spends it anyway.
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
    kept_plan = plan_dispatch(experts, E, capacity=capacity)
    kept = torch.zeros(T, k, dtype=torch.bool)
    kept[kept_plan.token, kept_plan.rank] = True
    plan = plan_dispatch(experts, E)  # BUG: every routed assignment, dropped or not
    grouped = dispatch(x, plan)
    out = torch.empty_like(grouped)
    start = 0
    for e, count in enumerate(plan.counts.tolist()):
        if count:
            rows = slice(start, start + count)
            out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])
            start += count
    return combine(out, weights * kept, plan, T)
