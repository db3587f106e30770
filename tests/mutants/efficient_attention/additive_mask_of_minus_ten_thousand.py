"""Bug: the softmax masks by adding -10000 to the scores of hidden keys, not by -inf.

The additive mask of early Transformer code: cheap, NaN-free, and right while every visible
score is far above -10000. When every visible score lies below it (or a query sees no key at
all), the hidden keys take the weight.
"""

CAUGHT_BY = ["test_sliding_window_with_every_score_below_any_mask_constant"]
EDITS = [
    (
        '    scores = scores.masked_fill(~allowed, float("-inf"))\n'
        "    row_max = scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)",
        "    scores = scores + (~allowed) * -10000.0\n"
        "    row_max = scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)",
    ),
]
