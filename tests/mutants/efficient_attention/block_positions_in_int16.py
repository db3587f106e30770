"""Bug: block-sparse attention keeps its token positions in int16 to save memory.

Positions of one block fit easily, and every short test passes; but rows * block_size + offsets
past 32767 wraps around to negative numbers: from there on the padding test `key_pos < N`
and the causal test `key_pos <= query_pos` answer wrongly.
"""

CAUGHT_BY = ["test_block_sparse_positions_past_32767_stay_exact"]
EDITS = [
    (
        "    offsets = torch.arange(bs, device=q.device)\n"
        "    query_pos = (rows[:, None] * bs + offsets)[:, :, None]  # (P, bs, 1)\n"
        "    key_pos = (cols[:, None] * bs + offsets)[:, None, :]  # (P, 1, bs)\n",
        "    offsets = torch.arange(bs, device=q.device, dtype=torch.int16)\n"
        "    query_pos = (rows.to(torch.int16)[:, None] * bs + offsets)[:, :, None]  # (P, bs, 1)\n"
        "    key_pos = (cols.to(torch.int16)[:, None] * bs + offsets)[:, None, :]  # (P, 1, bs)\n",
    ),
]
