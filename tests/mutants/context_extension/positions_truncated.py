"""Bug: rope_cos_sin turns the positions into integers, truncating fractional ones.

Positions are usually token indices, so .long() looks harmless; but interpolation feeds p / factor,
and truncating it makes neighbouring tokens share one angle.
"""

CAUGHT_BY = ["test_rope_cos_sin_layout_known_values", "test_rope_cos_sin_matches_oracle"]
EDITS = [
    (
        "torch.outer(positions.to(torch.float64),",
        "torch.outer(positions.long().to(torch.float64),",
    ),
]
