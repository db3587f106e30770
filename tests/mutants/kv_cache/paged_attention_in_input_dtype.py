"""Bug: paged_attention computes the scores and the softmax in q's own dtype.

In float32 nothing shows; in float16 and bfloat16 large scores are rounded before the softmax,
and the weights (hence the output) move far from the exact answer.
"""

CAUGHT_BY = ["test_paged_attention_extreme_scores"]
EDITS = [
    (
        "wide = torch.promote_types(q.dtype, torch.float32)",
        "wide = q.dtype",
    ),
]
