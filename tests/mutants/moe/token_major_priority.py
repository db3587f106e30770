"""Bug: capacity is filled token by token (all of token 0's choices, then token 1's, ...).

Flattening experts [T, k] row by row is the natural reshape, but then a late token's first
choice loses its place to an early token's second choice.
"""

CAUGHT_BY = ["test_plan_known_values", "test_plan_keeps_at_most_capacity_in_priority_order"]
EDITS = [
    (
        "flat = experts.T.reshape(-1)  # (k·T,) rank-major: priority order",
        "flat = experts.reshape(-1)  # (T·k,) token-major",
    ),
    (
        "token=order % T, rank=order // T,",
        "token=order // k, rank=order % k,",
    ),
]
