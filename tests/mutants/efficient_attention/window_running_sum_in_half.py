"""Bug: the sliding window adds up its softmax weights one key at a time in float16/bfloat16.

A running sum is how a streaming loop over keys is written; kept in the inputs' dtype it stops
growing once it is large (float16 cannot add 0.1 to 300), so over thousands of keys every row is
normalised by a wrong total.
"""

CAUGHT_BY = [
    "test_sliding_window_over_thousands_of_keys_keeps_float32_precision",
]
EDITS = [
    (
        ("    acc = _compute_dtype(q.dtype)\n    W = min(window, Nk)"),
        ("    acc = q.dtype\n    W = min(window, Nk)"),
    ),
]
REPLACE = {
    "_softmax_or_zeros": """
def _softmax_or_zeros(scores, allowed):
    scores = scores.masked_fill(~allowed, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)
    p = torch.exp(scores - row_max)
    total = torch.zeros_like(p[..., :1])  # a running sum, in the scores' dtype
    for j in range(p.shape[-1]):
        total = total + p[..., j : j + 1]
    return p / total.clamp_min(1.0)
""",
}
