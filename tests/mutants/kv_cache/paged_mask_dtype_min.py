"""Bug: paged_attention masks future keys with the input dtype's most negative number.

`torch.finfo(q.dtype).min` looks safe, but for float16 input it is -65504, and scores computed in
float32 go far below it: then the masked keys win the softmax.
"""

CAUGHT_BY = ["test_paged_attention_with_every_score_below_any_mask_constant"]
EDITS = [
    (
        'scores = scores.masked_fill(~visible.to(q.device), float("-inf"))',
        "scores = scores.masked_fill(~visible.to(q.device), torch.finfo(q.dtype).min)",
    ),
]
