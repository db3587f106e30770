"""Bug: apply_rope casts cos and sin to x's dtype and rotates in bfloat16/float16.

Hugging Face's Llama does exactly this (cos.to(x.dtype)), so it looks canonical; but each table
entry then carries a half-precision rounding error, and where a·cos and b·sin nearly cancel the
rotated value keeps little more than those errors.
"""

CAUGHT_BY = ["test_apply_rope_computes_in_float32"]
EDITS = [
    (
        "compute = torch.promote_types(x.dtype, torch.float32)",
        "compute = x.dtype",
    ),
]
