"""Bug: combine always sums in float32, even for float64 expert outputs.

"Sum in float32" read as "always float32": float64 input then loses half its digits in the
final scatter-add and is cast back as if nothing happened.
"""

CAUGHT_BY = ["test_combine_adds_every_weighted_output_to_its_token"]
EDITS = [
    (
        "compute = torch.promote_types(expert_out.dtype, torch.float32)",
        "compute = torch.float32",
    ),
]
