"""Bug: expert_capacity accepts a float num_tokens.

Only the sign is checked, as for a count read off a tensor's shape; expert_capacity(2.5, ...)
then returns a capacity for two and a half tokens instead of raising a ValueError.
"""

CAUGHT_BY = ["test_bad_plan_input_raises_value_error"]
EDITS = [
    (
        "if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 0:",
        "if num_tokens < 0:",
    ),
]
