"""Bug: random_block_mask draws from the global random state, not a generator seeded with seed.

`torch.rand` without `generator=` is the habit; the mask then changes from call to call and the
seed does nothing.
"""

CAUGHT_BY = [
    "test_random_block_mask_is_seeded_and_exact",
]
EDITS = [
    (
        "torch.rand(n_blocks, n_blocks, generator=gen)",
        "torch.rand(n_blocks, n_blocks)",
    ),
]
