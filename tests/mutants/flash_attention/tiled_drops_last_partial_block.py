"""Bug: the loop stops at the last whole key block; a partial block at the end is never read.

Loops written for lengths that are multiples of the block size pass every test with N = 64 or
128 and lose up to block_size - 1 keys otherwise.
"""

CAUGHT_BY = [
    "test_tiled_attention_matches_oracle",
    "test_tiled_attention_does_not_depend_on_block_size",
]
EDITS = [
    (
        "for start in range(0, Nk, block_size):",
        "for start in range(0, Nk - block_size + 1, block_size):  # whole blocks",
    ),
]
