"""Bug: block-sparse attention only handles whole blocks: the last, partial block is dropped.

Reshaping N tokens into N // block_size blocks silently loses the remainder; its queries come
out as zeros and its keys are never read.
"""

CAUGHT_BY = [
    "test_block_sparse_worked_example",
    "test_block_sparse_matches_dense_masked_attention",
]
EDITS = [
    (
        "    rows, cols = block_mask.to(q.device).nonzero(as_tuple=True)  # (P,) each\n",
        (
            "    full = N // bs  # whole blocks only\n"
            "    rows, cols = block_mask[:full, :full].to(q.device).nonzero(as_tuple=True)\n"
        ),
    ),
]
