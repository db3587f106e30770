"""Bug: random_block_mask draws each pick uniformly and moves a repeated pick to the next block.

Each block is still picked about equally often, and every row holds n_random distinct blocks;
but sets of neighbouring blocks come out more often than the others (at 4 blocks and 2 picks,
3/16 against 1/8), so the rows are not uniform draws among the sets.
"""

CAUGHT_BY = ["test_random_block_mask_small_rows_draw_every_set_equally_often"]
EDITS = [
    (
        "    picks = torch.rand(n_blocks, n_blocks, generator=gen).argsort(dim=1)[:, :n_random]\n"
        "    return torch.zeros(n_blocks, n_blocks, dtype=torch.bool).scatter(1, picks, True)\n",
        "    mask = torch.zeros(n_blocks, n_blocks, dtype=torch.bool)\n"
        "    for row in range(n_blocks):\n"
        "        for _ in range(n_random):\n"
        "            c = int(torch.randint(0, n_blocks, (1,), generator=gen))\n"
        "            while mask[row, c]:\n"
        "                c = (c + 1) % n_blocks\n"
        "            mask[row, c] = True\n"
        "    return mask\n",
    ),
]
