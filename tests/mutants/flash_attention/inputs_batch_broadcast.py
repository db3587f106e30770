"""Bug: k and v with batch 1 are accepted for q of any batch size.

Matrix products broadcast a batch of 1, so one cache seems to serve every sequence; it silently
attends every sequence to the first sequence's keys instead of refusing mismatched inputs.
"""

CAUGHT_BY = ["test_tiled_attention_refuses_bad_inputs"]
EDITS = [
    (
        "if k.shape[0] != B:",
        "if k.shape[0] not in (1, B):",
    ),
]
