"""Bug: after capacity drops, a token's remaining weights are renormalised to sum to 1 again.

It feels like repairing the damage, but the rule is that a dropped assignment simply
contributes 0 (the token keeps less of the layer; the residual stream carries it).
"""

CAUGHT_BY = [
    "test_moe_forward_with_capacity_matches_oracle",
    "test_dropped_assignments_cost_nothing",
]
EDITS = [
    (
        "    plan = plan_dispatch(experts, E, capacity=capacity)\n",
        (
            "    plan = plan_dispatch(experts, E, capacity=capacity)\n"
            "    kept = torch.zeros_like(weights)  # (T, k): 1 where the assignment is kept\n"
            "    kept[plan.token, plan.rank] = 1.0\n"
            "    weights = weights * kept\n"
            "    weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-30)\n"
        ),
    ),
]
