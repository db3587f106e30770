"""Bug: the top-k weights are not renormalised, so a token's weights sum to less than 1.

Softmax already sums to 1, which makes it easy to forget that keeping only k of the E
probabilities breaks that (Switch-style top-1 routing does use the raw probability).
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
    _check_k(k, logits.shape[-1]) if logits.ndim == 2 else None
    if logits.ndim != 2:
        raise ValueError(f"logits: expected [T, E], got {tuple(logits.shape)}")
    probs = torch.softmax(logits.float(), dim=-1)
    top, experts = torch.topk(probs, k, dim=-1)
    return top, experts  # BUG: top / top.sum(-1, keepdim=True)


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
