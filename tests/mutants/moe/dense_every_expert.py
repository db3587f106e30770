"""Bug: every expert runs on every token; the unchosen ones are multiplied by a zero weight.

The numbers are right, which is why it is tempting: it is the textbook formula
Σ_e g_e(x) · expert_e(x) written directly, and it costs E / k times the work.
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
    gates = torch.zeros(T, E)  # (T, E): the weight of each kept assignment, 0 elsewhere
    gates[plan.token, experts[plan.token, plan.rank]] = weights[plan.token, plan.rank]
    y = torch.zeros(T, x.shape[1])
    for e in range(E):  # BUG: all T tokens through every expert
        y += gates[:, e, None] * expert_mlp(x, w1[e], w3[e], w2[e]).float()
    return y.to(x.dtype)
