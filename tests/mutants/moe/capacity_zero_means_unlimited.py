"""Bug: plan_dispatch tests `if capacity:`, so capacity 0 keeps everything instead of nothing.

The `x or default` reflex: 0 is falsy, so the smallest capacity silently becomes no limit at all,
the opposite of what was asked.
"""

CAUGHT_BY = ["test_plan_known_values", "test_plan_keeps_at_most_capacity_in_priority_order"]
EDITS = [
    (
        "if capacity is not None:  # capacity 0 keeps nothing",
        "if capacity:",
    ),
]
