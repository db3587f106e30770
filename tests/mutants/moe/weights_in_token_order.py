"""Bug: the grouped outputs are multiplied by weights.flatten(), which is in token order.

The tokens were permuted into expert order but the weights were not: the shapes agree
(both have T · k rows), so nothing complains.
"""

CAUGHT_BY = [
    "test_combine_adds_every_weighted_output_to_its_token",
    "test_moe_forward_matches_oracle",
]
EDITS = [
    (
        "w = weights.to(compute)[plan.token, plan.rank]  # (N,)",
        "w = weights.to(compute).reshape(-1)[: plan.token.shape[0]]  # (N,)",
    ),
]
