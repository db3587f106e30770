"""Bug: the router runs in the input's precision: logits and softmax in float16/bfloat16.

Keeping everything in the model's dtype is the default habit; the router is small but its
choices are discrete, and rounding moves both the weights and which experts win.
"""

from __future__ import annotations

import torch

from reference.moe import (
    DispatchPlan,
    ExpertLoad,
    _check_k,
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
    _check_k(k, logits.shape[1])
    probs = torch.softmax(logits, dim=-1)  # BUG: logits.float()
    top, experts = torch.topk(probs, k, dim=-1)
    top = top / top.sum(-1, keepdim=True)
    return top.float(), experts


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    _check_layer(x, gate_w, w1, w3, w2)
    T, E = x.shape[0], gate_w.shape[0]
    weights, experts = route(x @ gate_w.T, k)  # BUG: x.float() @ gate_w.float().T
    capacity = None if capacity_factor is None else expert_capacity(T, k, E, capacity_factor)
    plan = plan_dispatch(experts, E, capacity=capacity)
    grouped = dispatch(x, plan)
    out = torch.empty_like(grouped)
    start = 0
    for e, count in enumerate(plan.counts.tolist()):
        if count:
            rows = slice(start, start + count)
            out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])
            start += count
    return combine(out, weights, plan, T)
