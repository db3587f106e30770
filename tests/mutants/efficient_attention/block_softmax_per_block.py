"""Bug: each allowed block gets its own softmax and the block outputs are added up.

A softmax is a normalisation over the whole row; normalising block by block is what one writes
when treating blocks as independent little attentions (and forgetting to merge them).
"""

CAUGHT_BY = [
    "test_block_sparse_worked_example",
    "test_block_sparse_matches_dense_masked_attention",
]
EDITS = [
    (
        "    p = torch.exp(scores - row_max[:, :, rows, :, None])  # (B, H, P, bs, bs)\n",
        (
            "    p = torch.exp(scores - row_max[:, :, rows, :, None])  # (B, H, P, bs, bs)\n"
            "    p = p / p.sum(dim=-1, keepdim=True).clamp_min(1e-30)  # each block alone\n"
        ),
    ),
]
