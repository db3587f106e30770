"""Bug: apply_rope always computes in float32, even for float64 x.

"Compute in float32" read as "always float32": x.float() then back to x's dtype throws away
float64 input's extra digits, so a float64 reference pipeline silently drops to float32.
"""

CAUGHT_BY = ["test_position_zero_is_the_identity", "test_apply_rope_matches_oracle"]
EDITS = [
    (
        "compute = torch.promote_types(x.dtype, torch.float32)",
        "compute = torch.float32",
    ),
]
