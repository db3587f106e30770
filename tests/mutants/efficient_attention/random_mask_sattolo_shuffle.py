"""Bug: random_block_mask takes each row's picks from Sattolo's shuffle, not a uniform one.

Sattolo's algorithm (swap with j < i, not j <= i) is one character away from Fisher-Yates and
only makes permutations that are a single cycle: no block stays in its place, so block 0 is never
a row's first pick. At 512 blocks the bias is invisible; at 4 blocks and one pick per row, block
0 is never chosen.
"""

CAUGHT_BY = ["test_random_block_mask_small_rows_draw_every_set_equally_often"]
EDITS = [
    (
        "    picks = torch.rand(n_blocks, n_blocks, generator=gen).argsort(dim=1)[:, :n_random]\n",
        "    rows = []\n"
        "    for _ in range(n_blocks):\n"
        "        perm = list(range(n_blocks))\n"
        "        for i in range(n_blocks - 1, 0, -1):\n"
        "            j = int(torch.randint(0, i, (1,), generator=gen))\n"
        "            perm[i], perm[j] = perm[j], perm[i]\n"
        "        rows.append(perm[:n_random])\n"
        "    picks = torch.tensor(rows, dtype=torch.long).reshape(n_blocks, n_random)\n",
    ),
]
