"""Bug: the running sum l is not rescaled when the running max grows; only acc is.

acc is the visible result, so its update gets the care; l looks like a plain counter that only
ever grows.
"""

CAUGHT_BY = [
    "test_tiled_attention_passes_constant_values_through",
    "test_tiled_attention_matches_oracle",
]
EDITS = [
    (
        "l = l * alpha + p.sum(dim=-1, keepdim=True)",
        "l = l + p.sum(dim=-1, keepdim=True)",
    ),
]
