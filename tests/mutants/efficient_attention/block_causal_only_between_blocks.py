"""Bug: causal=True skips blocks above the diagonal but does not mask inside the diagonal blocks.

Thinking at the level of blocks only, "causal" becomes "c <= r"; a query then still reads the
later keys of its own block.
"""

CAUGHT_BY = [
    "test_block_sparse_worked_example",
    "test_block_sparse_matches_dense_masked_attention",
]
EDITS = [
    (
        "        allowed = allowed & (key_pos <= query_pos)\n",
        "        allowed = allowed & (cols <= rows)[:, None, None]\n",
    ),
]
