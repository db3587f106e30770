"""Bug: k is not validated, so k = 0 routes nothing and k > E fails deep inside torch.topk.

topk seems to check its own argument, but k = 0 is legal for it and k > E raises a
RuntimeError that does not say which argument was wrong.
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
    router_z_loss,
)


def route(logits, k):
    if logits.ndim != 2:
        raise ValueError(f"logits: expected [T, E], got {tuple(logits.shape)}")
    probs = torch.softmax(logits.float(), dim=-1)  # BUG: no check that 1 <= k <= E
    top, experts = torch.topk(probs, k, dim=-1)
    return top / top.sum(-1, keepdim=True), experts


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    """The reference layer, calling this file's route."""
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
