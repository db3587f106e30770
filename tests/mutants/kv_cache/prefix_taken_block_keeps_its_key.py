"""Bug: a block taken from the free queue stays registered under its old key.

Eviction is forgotten: the block is overwritten with new tokens, yet match still finds it for
the old prefix, and a later start is handed keys and values of another sequence.
"""

CAUGHT_BY = [
    "test_eviction_takes_the_least_recently_freed_block_first",
    "test_prefix_workload_follows_the_rules",
]
EDITS = [
    (
        "        key = self.key_of.pop(block, None)\n"
        "        if key is not None:\n"
        "            del self.cached[key]\n",
        "",
    ),
]
