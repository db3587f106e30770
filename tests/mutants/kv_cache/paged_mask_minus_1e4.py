"""Bug: paged_attention masks future keys with -1e4 instead of -inf.

A "large negative number" is a common stand-in for -inf, and every usual score is far above it;
but when every visible score is below -1e4, the masked keys win the softmax.
"""

CAUGHT_BY = ["test_paged_attention_with_every_score_below_any_mask_constant"]
EDITS = [
    (
        'scores = scores.masked_fill(~visible.to(q.device), float("-inf"))',
        "scores = scores.masked_fill(~visible.to(q.device), -1e4)",
    ),
]
