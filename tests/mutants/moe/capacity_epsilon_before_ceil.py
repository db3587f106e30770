"""Bug: the capacity subtracts a small epsilon before rounding up.

Written to absorb float noise (1.1 · 100 is 110.00000000000001 in floats), the epsilon also
rounds down every value just above an integer, so the capacity comes out one short of
ceil(capacity_factor · T · k / E).
"""

CAUGHT_BY = [
    "test_expert_capacity_is_the_float_expression",
    "test_expert_capacity_rounds_up_just_above_an_integer",
]
EDITS = [
    (
        "return math.ceil(capacity_factor * num_tokens * k / num_experts)",
        "return math.ceil(capacity_factor * num_tokens * k / num_experts - 1e-9)",
    ),
]
