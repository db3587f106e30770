"""Bug: the capacity rounds down (int() or floor) instead of up.

int() is the reflex for turning a float into a count; it gives one slot too few whenever
capacity_factor · T · k / E is not whole, and 0 slots for small batches.
"""

CAUGHT_BY = ["test_expert_capacity_rounds_up"]
EDITS = [
    (
        "return math.ceil(capacity_factor * num_tokens * k / num_experts)",
        "return int(capacity_factor * num_tokens * k / num_experts)",
    ),
]
