"""Bug: a full block is keyed by its own tokens alone, not by the prefix that leads to it.

Hashing "the block" looks enough, and two prompts that start alike pass any test. But a block's
keys and values depend on every earlier token: a prompt whose block holds the same tokens after
a different beginning is handed another prompt's numbers (false sharing).
"""

CAUGHT_BY = [
    "test_equal_blocks_after_a_different_prefix_are_not_shared",
    "test_prefix_workload_follows_the_rules",
]
EDITS = [
    (
        "            following = (key, tuple(tokens[i * bs : (i + 1) * bs]))",
        "            following = tuple(tokens[i * bs : (i + 1) * bs])",
    ),
    (
        "            key, tail = (key, tuple(tail[:bs])), tail[bs:]",
        "            key, tail = tuple(tail[:bs]), tail[bs:]",
    ),
]
