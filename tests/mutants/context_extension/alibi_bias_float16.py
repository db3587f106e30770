"""Bug: the ALiBi distances and bias are computed in float16, then cast to float32.

Half precision feels natural for an additive mask, but float16 stops at 65504: one decoding query
over 10^5 keys gets infinite distances, and integers above 2048 are already rounded.
"""

CAUGHT_BY = ["test_alibi_bias_at_the_edges"]
EDITS = [
    (
        "return -slopes[:, None, None] * distance.to(torch.float32)",
        "return (-slopes.half()[:, None, None] * distance.half()).float()",
    ),
]
