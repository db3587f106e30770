"""Bug: append takes the block freed last (a stack) instead of the one freed first (a queue).

`list.pop()` is the free list of level 3, and it hands out the most recently freed block: the
prefix that was just released, the one most likely to be asked for again, is the first evicted.
"""

CAUGHT_BY = ["test_eviction_takes_the_least_recently_freed_block_first"]
EDITS = [
    (
        "        block, _ = self.queue.popitem(last=False)",
        "        block, _ = self.queue.popitem(last=True)",
    ),
]
