"""Bug: f_e divides the assignments to e by T instead of T · k.

Switch Transformer's formula is for k = 1, where the two agree; with k > 1 the loss is k
times too large and no longer 1 at perfect balance.
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
    f = torch.bincount(experts.reshape(-1), minlength=E).float() / T  # BUG: / (T * k)
    P = torch.softmax(logits.float(), dim=-1).mean(0)
    return E * (f * P).sum()
