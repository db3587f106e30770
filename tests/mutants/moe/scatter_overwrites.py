"""Bug: combine writes each output into its token's row instead of adding to it.

index_copy_ or y[token] = ... look like the inverse of the gather in dispatch, but with
k > 1 a token appears k times and only one of its experts survives.
"""

from __future__ import annotations

import torch

from reference.moe import (
    DispatchPlan,
    ExpertLoad,
    _check_layer,
    dispatch,
    expert_capacity,
    expert_load,
    expert_mlp,
    load_balancing_loss,
    plan_dispatch,
    route,
    router_z_loss,
)


def combine(expert_out, weights, plan, num_tokens):
    w = weights.float()[plan.token, plan.rank]
    y = torch.zeros(num_tokens, expert_out.shape[1], dtype=torch.float32)
    y.index_put_((plan.token,), expert_out.float() * w[:, None])  # BUG: accumulate=True
    return y.to(expert_out.dtype)


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    """The reference layer, calling this file's combine."""
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
