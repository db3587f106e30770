"""Bug: a q of batch 1 is accepted for k and v of any batch, as if it were broadcast.

Matrix products broadcast a batch of 1, so one query seems to serve every cached sequence; the
kernel's grid comes from q, so it attends only the first sequence and returns a batch of 1
instead of refusing mismatched inputs.
"""

CAUGHT_BY = ["test_split_kv_decode_refuses_every_wrong_shape"]
EDITS = [
    (
        "if k.shape[0] != B:",
        "if B not in (1, k.shape[0]):",
    ),
]
