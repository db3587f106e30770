"""Bug: block_sparse_attention masks the padding and the causal triangle with -1e30.

-1e30 is the "minus infinity" of many kernels, below every usual score; but when every visible
score lies below it, the padded keys of a partial last block and the keys causal hides win.
"""

CAUGHT_BY = ["test_block_sparse_with_every_score_below_any_mask_constant"]
EDITS = [
    (
        "        allowed = allowed & (key_pos <= query_pos)\n"
        '    scores = scores.masked_fill(~allowed, float("-inf"))',
        "        allowed = allowed & (key_pos <= query_pos)\n"
        "    scores = scores.masked_fill(~allowed, -1e30)",
    ),
]
