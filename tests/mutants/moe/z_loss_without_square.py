"""Bug: the z-loss is the mean logsumexp, not its square.

Without the square the loss is linear in a shift of the logits and no longer grows
faster for the tokens whose logits have run away.
"""

from __future__ import annotations

import torch

from reference.moe import (
    DispatchPlan,
    ExpertLoad,
    combine,
    dispatch,
    expert_capacity,
    expert_load,
    expert_mlp,
    load_balancing_loss,
    moe_forward,
    plan_dispatch,
    route,
)


def router_z_loss(logits):
    if logits.ndim != 2:
        raise ValueError(f"logits: expected [T, E], got {tuple(logits.shape)}")
    return torch.logsumexp(logits.float(), dim=-1).mean()  # BUG: .square() before .mean()
