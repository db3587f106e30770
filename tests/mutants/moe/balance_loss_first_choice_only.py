"""Bug: f_e counts only each token's first choice.

Copied from top-1 routing code (experts[:, 0]); the second choices carry half the load
at k = 2 and are invisible to the loss.
"""

from __future__ import annotations

import torch

from reference.moe import (
    DispatchPlan,
    ExpertLoad,
    _check_experts,
    combine,
    dispatch,
    expert_capacity,
    expert_load,
    expert_mlp,
    moe_forward,
    plan_dispatch,
    route,
    router_z_loss,
)


def load_balancing_loss(logits, experts):
    T, E = logits.shape
    if experts.ndim != 2 or experts.shape[0] != T:
        raise ValueError(f"experts: expected [T={T}, k], got {tuple(experts.shape)}")
    _check_experts(experts, E)
    f = torch.bincount(experts[:, 0], minlength=E).float() / T  # BUG: all k choices
    P = torch.softmax(logits.float(), dim=-1).mean(0)
    return E * (f * P).sum()
