"""Bug: free queues a sequence's blocks first to last, so its beginning is evicted first.

Walking the table forwards is the natural loop. But a prefix is only found from its first
block on: evicting the first block makes every later block of the prefix unreachable while they
still take up the pool, where evicting the end keeps the rest of the prefix usable.
"""

CAUGHT_BY = ["test_eviction_takes_the_least_recently_freed_block_first"]
EDITS = [
    (
        "        for block in reversed(self.tables.pop(seq_id)):",
        "        for block in self.tables.pop(seq_id):",
    ),
]
