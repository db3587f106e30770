"""Bug: capacity_factor must be a Python float; an int such as 2 is refused.

The annotation says float, so the check tests isinstance(capacity_factor, float); but an int is
a finite number too, and capacity_factor=2 is as valid as 2.0.
"""

CAUGHT_BY = ["test_expert_capacity_rounds_up"]
EDITS = [
    (
        "    if not 0 < capacity_factor < math.inf:  # also refuses NaN",
        "    if not isinstance(capacity_factor, float) or not 0 < capacity_factor < math.inf:",
    ),
]
