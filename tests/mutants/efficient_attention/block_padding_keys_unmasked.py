"""Bug: the zero padding of the last, partial block takes part in the softmax as real keys.

Padding N up to a multiple of block_size is the easy way to reshape into blocks; forgetting to
mask the padded keys gives them score 0 and a share of the attention.
"""

CAUGHT_BY = [
    "test_block_sparse_worked_example",
    "test_block_sparse_with_every_block_is_dense_attention",
]
EDITS = [
    (
        "    allowed = key_pos < N  # the padding of the last block is no key\n",
        "    allowed = key_pos >= 0\n",
    ),
]
