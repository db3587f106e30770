"""Bug: the capacity is computed in exact fractions of the float factor.

fractions.Fraction(0.1) is the binary value of 0.1, a little more than 1/10, so
Fraction(0.1) · 10 is just above 1 and rounds up to 2, where the float expression
0.1 * 10 is exactly 1.0 and C = 1.
"""

CAUGHT_BY = ["test_expert_capacity_is_the_float_expression"]
EDITS = [
    (
        "return math.ceil(capacity_factor * num_tokens * k / num_experts)",
        "from fractions import Fraction\n\n"
        "    return math.ceil(Fraction(capacity_factor) * num_tokens * k / num_experts)",
    ),
]
