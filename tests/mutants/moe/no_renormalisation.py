"""Bug: the top-k weights are not renormalised, so a token's weights sum to less than 1.

Softmax already sums to 1, which makes it easy to forget that keeping only k of the E
probabilities breaks that (Switch-style top-1 routing does use the raw probability).
"""

CAUGHT_BY = [
    "test_route_picks_the_top_k_with_renormalised_weights",
    "test_route_with_equal_logits_splits_evenly",
]
EDITS = [
    (
        "weights = top / top.sum(dim=-1, keepdim=True)",
        "weights = top",
    ),
]
