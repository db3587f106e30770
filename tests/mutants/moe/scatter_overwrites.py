"""Bug: combine writes each output into its token's row instead of adding to it.

index_copy_ or y[token] = ... look like the inverse of the gather in dispatch, but with
k > 1 a token appears k times and only one of its experts survives.
"""

CAUGHT_BY = [
    "test_combine_adds_every_weighted_output_to_its_token",
    "test_moe_forward_matches_oracle",
]
EDITS = [
    (
        "y.index_add_(0, plan.token,",
        "y.index_copy_(0, plan.token,",
    ),
]
