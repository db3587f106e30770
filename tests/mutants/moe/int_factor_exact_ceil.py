"""Bug: an int capacity_factor takes an exact integer ceiling instead of the float expression.

-(-factor * T * k // E) is exact, so for 2**53 + 1 tokens at factor 1 it gives 2**53 + 1, while
the README's math.ceil(capacity_factor * T * k / E) of the Python float gives 2**53 (as factor
1.0 does): 2 and 2.0 no longer give the same C.
"""

CAUGHT_BY = ["test_expert_capacity_of_an_int_factor_is_the_float_expression_too"]
EDITS = [
    (
        "    return math.ceil(capacity_factor * num_tokens * k / num_experts)\n",
        "    if isinstance(capacity_factor, int):\n"
        "        return -(-capacity_factor * num_tokens * k // num_experts)\n"
        "    return math.ceil(capacity_factor * num_tokens * k / num_experts)\n",
    ),
]
