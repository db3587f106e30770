"""Bug: with a single query (decoding), tiled_attention takes every key in one block.

One query's row of scores looks small next to k and v, so a decoding shortcut skips the loop
over key blocks; but that row is the Nq x Nk tensor at Nq = 1, and over a long cache with many
query heads it outweighs everything else the call holds.
"""

CAUGHT_BY = ["test_tiled_attention_keeps_scores_to_one_key_block"]
EDITS = [
    (
        """    for start in range(0, Nk, block_size):
""",
        """    if Nq == 1:  # one query: its scores are only one row, take every key at once
        block_size = Nk
    for start in range(0, Nk, block_size):
""",
    ),
]
