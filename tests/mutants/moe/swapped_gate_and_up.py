"""Bug: the SiLU gates the w3 branch instead of the w1 branch.

The two projections have the same shape and the names w1/w3 say nothing about their roles.
"""

CAUGHT_BY = ["test_expert_mlp_is_a_gated_mlp"]
EDITS = [
    (
        "return (F.silu(x @ w1) * (x @ w3)) @ w2",
        "return (F.silu(x @ w3) * (x @ w1)) @ w2",
    ),
]
