"""Bug: a full block is registered under its own tokens alone, not chained to the blocks before it.

A block's keys and values depend on every token before it (attention and RoPE positions), not
only on its own tokens: two requests whose blocks hold the same tokens after different prefixes
must not share them. The key has to name the whole prefix: (key of the previous block, tokens).
"""

CAUGHT_BY = ["test_equal_blocks_after_different_prefixes_are_not_shared"]
EDITS = [
    ("key = (keys[-1] if keys else None, tuple(", "key = (None, tuple("),  # its tokens name it
    ("key = (seq.keys[-1] if seq.keys else None, tuple(", "key = (None, tuple("),
]
