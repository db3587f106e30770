"""Bug: tiled_attention masks future keys with the input dtype's finfo.min instead of -inf.

`finfo(dtype).min` is a common stand-in for -inf (it avoids inf - inf), but the scores are
float32 while the inputs may be float16: -65504 is then a score like any other, and when every
visible score lies below it, the masked keys win the softmax.
"""

CAUGHT_BY = ["test_tiled_attention_with_every_score_below_any_mask_constant"]
EDITS = [
    (
        '            s = s.masked_fill(keys > last_key, float("-inf"))',
        "            s = s.masked_fill(keys > last_key, torch.finfo(q.dtype).min)",
    ),
]
