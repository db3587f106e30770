"""Bug: the capacity is the tokens per expert times the factor, (T · k / E) · capacity_factor.

The same number on paper, and the order many codebases write it in; but the floats round it
differently from capacity_factor · T · k / E, the README's expression: for T = 25, k = 2, E = 5
and factor 1.1 it is 11.000000000000002 one way and 11.0 the other, so C comes out one short.
"""

CAUGHT_BY = ["test_expert_capacity_is_the_float_expression"]
EDITS = [
    (
        "return math.ceil(capacity_factor * num_tokens * k / num_experts)",
        "return math.ceil(num_tokens * k / num_experts * capacity_factor)",
    ),
]
