"""Bug: the capacity is ceil(capacity_factor · T / E), forgetting that each token sends k.

The formula is usually quoted from top-1 (Switch) routing, where k = 1 hides the factor.
"""

CAUGHT_BY = ["test_expert_capacity_rounds_up"]
EDITS = [
    (
        "math.ceil(capacity_factor * num_tokens * k / num_experts)",
        "math.ceil(capacity_factor * num_tokens / num_experts)",
    ),
]
