"""Bug: random_block_mask draws one set of blocks and shifts it along for every row.

Row r reads (picks + r) % n_blocks: every row has n_random distinct blocks, every column is read
as often as any other, the picks are spread over the row, and the seed decides it all. But the
rows are not drawn separately: every row has the same pattern of gaps, one draw instead of
n_blocks independent ones.
"""

CAUGHT_BY = ["test_random_block_mask_rows_are_not_shifts_of_one_draw"]
EDITS = [
    (
        "    picks = torch.rand(n_blocks, n_blocks, generator=gen).argsort(dim=1)[:, :n_random]\n",
        "    first = torch.rand(n_blocks, generator=gen).argsort()[:n_random]\n"
        "    picks = (first + torch.arange(n_blocks)[:, None]) % n_blocks\n",
    ),
]
