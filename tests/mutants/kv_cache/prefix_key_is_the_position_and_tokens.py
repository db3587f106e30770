"""Bug: a full block is keyed by its index in the sequence and its tokens, not chained to the key
of the block before it.

Adding the position fixes the obvious false sharing of keying by tokens alone (a block equal to
a later block of another prompt), and it looks like the whole story. But two prompts that differ
in block 0 and agree in block 1 give block 1 the same key: a start is handed another prompt's
block, whose keys and values were computed after a different prefix.
"""

CAUGHT_BY = [
    "test_equal_blocks_after_a_different_prefix_are_not_shared",
    "test_prefix_workload_follows_the_rules",
]
EDITS = [
    (
        "            following = (key, tuple(tokens[i * bs : (i + 1) * bs]))",
        "            following = (i, tuple(tokens[i * bs : (i + 1) * bs]))",
    ),
    (
        "            key, tail = (key, tuple(tail[:bs])), tail[bs:]",
        "            key, tail = (i, tuple(tail[:bs])), tail[bs:]",
    ),
]
