"""Bug: the k chosen experts are listed least probable first.

torch.sort is ascending by default; re-sorting the top-k (or topk(..., sorted=False)) loses
the order, and with a capacity limit the rank decides who is dropped.
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
    probs = torch.softmax(logits.float(), dim=-1)
    top, experts = torch.topk(probs, k, dim=-1)
    top, experts = top.flip(-1), experts.flip(-1)  # BUG: ascending
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
