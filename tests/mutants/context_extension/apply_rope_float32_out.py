"""Bug: apply_rope returns float32 for float16/bfloat16 input.

x * cos with float32 tables promotes to float32 silently; forgetting the cast back doubles the
memory of every query and key and breaks the next kernel that expects the model's dtype.
"""

CAUGHT_BY = ["test_apply_rope_known_values_at_position_1", "test_apply_rope_matches_oracle"]
EDITS = [
    (
        "return (xc * cos.to(compute) + rotated * sin.to(compute)).to(x.dtype)",
        "return xc * cos.to(compute) + rotated * sin.to(compute)",
    ),
]
