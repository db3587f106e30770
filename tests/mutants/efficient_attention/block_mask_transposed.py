"""Bug: block_mask is read as [key block, query block] instead of [query block, key block].

Symmetric masks (local bands, all-ones) cannot tell the two apart; causal and random ones can.
"""

CAUGHT_BY = [
    "test_block_sparse_worked_example",
    "test_block_sparse_matches_dense_masked_attention",
    "test_block_sparse_ignores_blocks_not_allowed",
]
EDITS = [
    (
        "    rows, cols = block_mask.to(q.device).nonzero(as_tuple=True)",
        "    cols, rows = block_mask.to(q.device).nonzero(as_tuple=True)",
    ),
]
