"""Bug: capacity_factor is checked with `capacity_factor > 0`, so NaN and inf slip through.

NaN fails every comparison, so `if capacity_factor <= 0: raise` lets it pass, and an infinite
factor reaches math.ceil, which raises OverflowError instead of a ValueError naming it.
"""

CAUGHT_BY = ["test_bad_plan_input_raises_value_error", "test_bad_layer_input_raises_value_error"]
EDITS = [
    (
        "if not 0 < capacity_factor < math.inf:  # also refuses NaN",
        "if capacity_factor <= 0:",
    ),
]
