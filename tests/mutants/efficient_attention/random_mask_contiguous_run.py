"""Bug: random_block_mask picks a random start per row and takes the n_random blocks after it.

Distinct, seeded and random-looking, but not uniform: a row never reads two far-apart blocks,
which is the point of BigBird's random connections.
"""

CAUGHT_BY = [
    "test_random_block_mask_picks_are_spread_over_the_row",
]
EDITS = [
    (
        "    picks = torch.rand(n_blocks, n_blocks, generator=gen).argsort(dim=1)[:, :n_random]\n",
        (
            "    start = torch.randint(n_blocks, (n_blocks, 1), generator=gen)\n"
            "    picks = (start + torch.arange(n_random)) % n_blocks\n"
        ),
    ),
]
