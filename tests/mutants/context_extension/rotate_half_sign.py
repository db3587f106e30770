"""Bug: rotate_half returns cat(x2, -x1) instead of cat(-x2, x1): every pair turns backwards.

The sign is easy to misplace when writing the rotation from memory, and the result still keeps
norms and still depends only on relative positions, so only fixed known values catch it.
"""

CAUGHT_BY = ["test_apply_rope_known_values_at_position_1", "test_apply_rope_matches_oracle"]
EDITS = [
    (
        "rotated = torch.cat([-x2, x1], dim=-1)",
        "rotated = torch.cat([x2, -x1], dim=-1)",
    ),
]
