"""Bug: P_e averages the router probability only over the tokens that chose expert e.

Both factors then come from the same top-k selection, which reads naturally but gives the
wrong value and pushes the gradient only through the chosen experts.
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
    k = experts.shape[1]
    f = torch.bincount(experts.reshape(-1), minlength=E).float() / (T * k)
    probs = torch.softmax(logits.float(), dim=-1)
    chosen = torch.zeros(T, E, dtype=torch.bool)
    chosen[torch.arange(T)[:, None], experts] = True
    P = (probs * chosen).sum(0) / T  # BUG: every token's probability, chosen or not
    return E * (f * P).sum()
