"""Bug: random_block_mask draws each row's blocks with weights that favour the later blocks.

torch.multinomial over weights c + 1 gives n_random distinct blocks per row, seeded and
independent across rows, but not a uniform draw: with 512 blocks, block 511 is picked about
ten times as often as block 0 (the README: every set of n_random distinct blocks is equally
likely).
"""

CAUGHT_BY = ["test_random_block_mask_picks_every_block_equally_often"]
EDITS = [
    (
        "    picks = torch.rand(n_blocks, n_blocks, generator=gen).argsort(dim=1)[:, :n_random]\n",
        "    weights = torch.arange(1, n_blocks + 1, dtype=torch.float64).expand(n_blocks, -1)\n"
        "    picks = torch.multinomial(weights, n_random, generator=gen)\n",
    ),
]
